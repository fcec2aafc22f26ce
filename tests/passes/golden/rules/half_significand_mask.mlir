// rule: HalfSignificandMask
// jax 0.12's split of x**2 (erf/erfc derivatives, erfcx, ndtri): float64's bits and-ed with the
// mask that keeps 26 significant bits and read back as float64 get float32's mask (12 bits).
func.func @main(%arg0: tensor<3xf64>) -> (tensor<3xf64>) {
  %0 = stablehlo.abs %arg0 : tensor<3xf64>
  %1 = stablehlo.bitcast_convert %0 : (tensor<3xf64>) -> tensor<3xui64>
  %c = stablehlo.constant dense<18446744073575333888> : tensor<ui64>
  %2 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<ui64>) -> tensor<3xui64>
  %3 = stablehlo.and %1, %2 : tensor<3xui64>
  %4 = stablehlo.bitcast_convert %3 : (tensor<3xui64>) -> tensor<3xf64>
  %5 = stablehlo.subtract %0, %4 : tensor<3xf64>
  %6 = stablehlo.multiply %4, %4 : tensor<3xf64>
  %7 = stablehlo.add %0, %4 : tensor<3xf64>
  %8 = stablehlo.multiply %5, %7 : tensor<3xf64>
  %9 = stablehlo.add %6, %8 : tensor<3xf64>
  return %9 : tensor<3xf64>
}
// ----- output
module {
  func.func @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    %0 = stablehlo.abs %arg0 : tensor<3xf32>
    %1 = stablehlo.bitcast_convert %0 : (tensor<3xf32>) -> tensor<3xui32>
    %c = stablehlo.constant dense<4294963200> : tensor<ui32>
    %2 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<ui32>) -> tensor<3xui32>
    %3 = stablehlo.and %1, %2 : tensor<3xui32>
    %4 = stablehlo.bitcast_convert %3 : (tensor<3xui32>) -> tensor<3xf32>
    %5 = stablehlo.subtract %0, %4 : tensor<3xf32>
    %6 = stablehlo.multiply %4, %4 : tensor<3xf32>
    %7 = stablehlo.add %0, %4 : tensor<3xf32>
    %8 = stablehlo.multiply %5, %7 : tensor<3xf32>
    %9 = stablehlo.add %6, %8 : tensor<3xf32>
    return %9 : tensor<3xf32>
  }
}
// ----- findings
info dtype-constant stablehlo.and @6 x1
info type-narrowed func.func @1 x2
info type-narrowed stablehlo.abs @2 x1
info type-narrowed stablehlo.bitcast_convert @3 x2
info type-narrowed stablehlo.constant @5 x1
info type-narrowed stablehlo.broadcast_in_dim @5 x1
info type-narrowed stablehlo.and @6 x1
info type-narrowed stablehlo.subtract @8 x1
info type-narrowed stablehlo.multiply @9 x2
info type-narrowed stablehlo.add @10 x2
