// rule: ConvertOutOfRange
// f64 -> i64 of a known constant just inside int32's range, both sides (truncated toward
// zero), NaN (0) and +-inf (saturated to the int64 sentinels, int32's bounds narrowed).
// 2147483647.0 rounds to 2**31 in float32, which the narrowed convert saturates to 2**31-1.
func.func @main() -> tensor<7xi64> {
  %c = stablehlo.constant dense<[2147483647.0, 2147483647.9, -2147483648.0, -2147483648.9, 0x7FF8000000000000, 0x7FF0000000000000, 0xFFF0000000000000]> : tensor<7xf64>
  %0 = stablehlo.convert %c : (tensor<7xf64>) -> tensor<7xi64>
  return %0 : tensor<7xi64>
}
// ----- output
module {
  func.func @main() -> tensor<7xi32> {
    %cst = stablehlo.constant dense<[2.14748365E+9, 2.14748365E+9, -2.14748365E+9, -2.14748365E+9, 0x7FC00000, 0x7F800000, 0xFF800000]> : tensor<7xf32>
    %0 = stablehlo.convert %cst : (tensor<7xf32>) -> tensor<7xi32>
    return %0 : tensor<7xi32>
  }
}
// ----- findings
info type-narrowed func.func @1 x1
info type-narrowed stablehlo.constant @2 x1
info type-narrowed stablehlo.convert @3 x1
