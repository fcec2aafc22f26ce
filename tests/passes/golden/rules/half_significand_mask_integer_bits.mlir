// rule: HalfSignificandMask
// A uint64 that is not the bits of a float64 (an argument) and-ed with the same value:
// nothing says it is a float's significand, so the mask is refused as out of range.
func.func @main(%arg0: tensor<3xui64>) -> (tensor<3xf64>) {
  %c = stablehlo.constant dense<18446744073575333888> : tensor<ui64>
  %0 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<ui64>) -> tensor<3xui64>
  %1 = stablehlo.and %arg0, %0 : tensor<3xui64>
  %2 = stablehlo.bitcast_convert %1 : (tensor<3xui64>) -> tensor<3xf64>
  return %2 : tensor<3xf64>
}
// ----- output
// refused
// ----- findings
error constant-out-of-range stablehlo.constant @2 x1
info type-narrowed func.func @1 x2
info type-narrowed stablehlo.constant @2 x1
info type-narrowed stablehlo.broadcast_in_dim @3 x1
info type-narrowed stablehlo.and @4 x1
info type-narrowed stablehlo.bitcast_convert @5 x1
