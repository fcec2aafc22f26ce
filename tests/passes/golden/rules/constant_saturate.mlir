// rule: NarrowConstant
// options: overflow=saturate
// With overflow='saturate' it clips to the 32-bit range, with a warning.
func.func @main() -> tensor<2xi64> {
  %0 = stablehlo.constant dense<[1, 4294967296]> : tensor<2xi64>
  return %0 : tensor<2xi64>
}
// ----- output
module {
  func.func @main() -> tensor<2xi32> {
    %c = stablehlo.constant dense<[1, 2147483647]> : tensor<2xi32>
    return %c : tensor<2xi32>
  }
}
// ----- findings
warning constant-out-of-range stablehlo.constant @2 x1
info type-narrowed func.func @1 x1
info type-narrowed stablehlo.constant @2 x1
