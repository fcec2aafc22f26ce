// rule: WarnShiftByWidth
// x << (iinfo(int64).bits - 1): a shift by 63 narrowed shifts out every bit, x32 JAX shifts by 31: refused.
func.func @main(%x: tensor<4xi64>) -> tensor<4xi64> {
  %c = stablehlo.constant dense<63> : tensor<i64>
  %b = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i64>) -> tensor<4xi64>
  %0 = stablehlo.shift_left %x, %b : tensor<4xi64>
  return %0 : tensor<4xi64>
}
// ----- output
// refused
// ----- findings
error shift-by-width stablehlo.shift_left @4 x1
info type-narrowed func.func @1 x2
info type-narrowed stablehlo.constant @2 x1
info type-narrowed stablehlo.broadcast_in_dim @3 x1
info type-narrowed stablehlo.shift_left @4 x1
