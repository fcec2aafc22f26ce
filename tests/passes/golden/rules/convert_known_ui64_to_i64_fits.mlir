// rule: ConvertOutOfRange
// ui64 -> i64 of a known constant, just inside int32's range: 0 and 2**31-1 convert to the
// same values in 32 bits; UINT64_MAX and INT64_MAX are sentinels (-1 and int32's maximum,
// as x32 JAX has them).
func.func @main() -> tensor<4xi64> {
  %c = stablehlo.constant dense<[0, 2147483647, 18446744073709551615, 9223372036854775807]> : tensor<4xui64>
  %0 = stablehlo.convert %c : (tensor<4xui64>) -> tensor<4xi64>
  return %0 : tensor<4xi64>
}
// ----- output
module {
  func.func @main() -> tensor<4xi32> {
    %c = stablehlo.constant dense<[0, 2147483647, 4294967295, 2147483647]> : tensor<4xui32>
    %0 = stablehlo.convert %c : (tensor<4xui32>) -> tensor<4xi32>
    return %0 : tensor<4xi32>
  }
}
// ----- findings
info type-narrowed func.func @1 x1
info type-narrowed stablehlo.constant @2 x1
info type-narrowed stablehlo.convert @3 x1
