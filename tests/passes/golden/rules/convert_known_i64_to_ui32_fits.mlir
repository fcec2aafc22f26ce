// rule: ConvertOutOfRange
// i64 -> ui32 of a known constant at int32's bounds, both sides, and -1: the result type is
// not narrowed, and the narrowed convert (i32 -> ui32) wraps each value to the same uint32
// as the 64-bit one (-1 -> 4294967295, -2147483648 -> 2147483648).
func.func @main() -> tensor<4xui32> {
  %c = stablehlo.constant dense<[-2147483648, -1, 0, 2147483647]> : tensor<4xi64>
  %0 = stablehlo.convert %c : (tensor<4xi64>) -> tensor<4xui32>
  return %0 : tensor<4xui32>
}
// ----- output
module {
  func.func @main() -> tensor<4xui32> {
    %c = stablehlo.constant dense<[-2147483648, -1, 0, 2147483647]> : tensor<4xi32>
    %0 = stablehlo.convert %c : (tensor<4xi32>) -> tensor<4xui32>
    return %0 : tensor<4xui32>
  }
}
// ----- findings
info type-narrowed stablehlo.constant @2 x1
