// rule: NarrowConstant
// Float constants round to nearest even; integer constants in range keep their value.
func.func @main() -> (tensor<3xf64>, tensor<2xi64>) {
  %0 = stablehlo.constant dense<[3.1415926535897931, 0.1, 16777217.0]> : tensor<3xf64>
  %1 = stablehlo.constant dense<[-2147483648, 2147483647]> : tensor<2xi64>
  return %0, %1 : tensor<3xf64>, tensor<2xi64>
}
// ----- output
module {
  func.func @main() -> (tensor<3xf32>, tensor<2xi32>) {
    %cst = stablehlo.constant dense<[3.14159274, 1.000000e-01, 0x4B800000]> : tensor<3xf32>
    %c = stablehlo.constant dense<[-2147483648, 2147483647]> : tensor<2xi32>
    return %cst, %c : tensor<3xf32>, tensor<2xi32>
  }
}
// ----- findings
info type-narrowed func.func @1 x1
info type-narrowed stablehlo.constant @2 x2
