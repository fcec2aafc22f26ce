// rule: ConvertOutOfRange
// f64 -> i64 of a known constant just outside int32's range, both sides: 2**31 and -2**31-1
// fit float32, but their int64 values do not fit int32 (the narrowed convert would saturate).
func.func @main() -> tensor<2xi64> {
  %c = stablehlo.constant dense<[2147483648.0, -2147483649.0]> : tensor<2xf64>
  %0 = stablehlo.convert %c : (tensor<2xf64>) -> tensor<2xi64>
  return %0 : tensor<2xi64>
}
// ----- output
// refused
// ----- findings
error constant-out-of-range stablehlo.convert @3 x1
info type-narrowed func.func @1 x1
info type-narrowed stablehlo.constant @2 x1
info type-narrowed stablehlo.convert @3 x1
