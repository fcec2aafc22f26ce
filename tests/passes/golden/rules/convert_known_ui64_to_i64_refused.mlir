// rule: ConvertOutOfRange
// ui64 -> i64 of a known constant, just outside int32's range: 2**31 and 2**32-1 fit uint32,
// so the constant narrows, but converted to int64 they do not fit int32 (the narrowed
// convert would make them -2147483648 and -1). Refused at the convert, also when the
// constant reaches it broadcast.
func.func @main() -> (tensor<2xi64>, tensor<2xi64>) {
  %c = stablehlo.constant dense<[2147483648, 4294967295]> : tensor<2xui64>
  %0 = stablehlo.convert %c : (tensor<2xui64>) -> tensor<2xi64>
  %s = stablehlo.constant dense<4294967295> : tensor<ui64>
  %b = stablehlo.broadcast_in_dim %s, dims = [] : (tensor<ui64>) -> tensor<2xui64>
  %1 = stablehlo.convert %b : (tensor<2xui64>) -> tensor<2xi64>
  return %0, %1 : tensor<2xi64>, tensor<2xi64>
}
// ----- output
// refused
// ----- findings
error constant-out-of-range stablehlo.convert @3 x1
error constant-out-of-range stablehlo.convert @6 x1
info type-narrowed func.func @1 x1
info type-narrowed stablehlo.constant @2 x2
info type-narrowed stablehlo.convert @3 x2
info type-narrowed stablehlo.broadcast_in_dim @5 x1
