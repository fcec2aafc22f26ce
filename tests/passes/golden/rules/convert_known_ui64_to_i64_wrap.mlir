// rule: ConvertOutOfRange
// options: overflow=wrap
// With overflow='wrap' the convert narrows, and says what it computes instead.
func.func @main() -> tensor<i64> {
  %c = stablehlo.constant dense<4294967295> : tensor<ui64>
  %0 = stablehlo.convert %c : (tensor<ui64>) -> tensor<i64>
  return %0 : tensor<i64>
}
// ----- output
module {
  func.func @main() -> tensor<i32> {
    %c = stablehlo.constant dense<4294967295> : tensor<ui32>
    %0 = stablehlo.convert %c : (tensor<ui32>) -> tensor<i32>
    return %0 : tensor<i32>
  }
}
// ----- findings
warning constant-out-of-range stablehlo.convert @3 x1
info type-narrowed func.func @1 x1
info type-narrowed stablehlo.constant @2 x1
info type-narrowed stablehlo.convert @3 x1
