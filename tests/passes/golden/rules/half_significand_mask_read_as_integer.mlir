// rule: HalfSignificandMask
// The same mask on float64 bits, but the result is used as an integer: its meaning is the
// float64 layout, so it is not the split, and the mask (out of uint32's range) is refused.
func.func @main(%arg0: tensor<3xf64>) -> (tensor<3xf64>, tensor<3xui64>) {
  %0 = stablehlo.bitcast_convert %arg0 : (tensor<3xf64>) -> tensor<3xui64>
  %c = stablehlo.constant dense<18446744073575333888> : tensor<ui64>
  %1 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<ui64>) -> tensor<3xui64>
  %2 = stablehlo.and %0, %1 : tensor<3xui64>
  %3 = stablehlo.bitcast_convert %2 : (tensor<3xui64>) -> tensor<3xf64>
  return %3, %2 : tensor<3xf64>, tensor<3xui64>
}
// ----- output
// refused
// ----- findings
error constant-out-of-range stablehlo.constant @3 x1
info type-narrowed func.func @1 x2
info type-narrowed stablehlo.bitcast_convert @2 x2
info type-narrowed stablehlo.constant @3 x1
info type-narrowed stablehlo.broadcast_in_dim @4 x1
info type-narrowed stablehlo.and @5 x1
