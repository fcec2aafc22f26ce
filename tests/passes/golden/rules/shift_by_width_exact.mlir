// rule: WarnShiftByWidth
// Exact, quiet: an arithmetic shift by 63 (the sign fill, as x32 JAX's shift by 31) and shifts by 64 or more.
func.func @main(%x: tensor<4xi64>) -> (tensor<4xi64>, tensor<4xi64>) {
  %c = stablehlo.constant dense<63> : tensor<4xi64>
  %0 = stablehlo.shift_right_arithmetic %x, %c : tensor<4xi64>
  %d = stablehlo.constant dense<[64, 70, 64, 100]> : tensor<4xi64>
  %1 = stablehlo.shift_right_logical %x, %d : tensor<4xi64>
  return %0, %1 : tensor<4xi64>, tensor<4xi64>
}
// ----- output
module {
  func.func @main(%arg0: tensor<4xi32>) -> (tensor<4xi32>, tensor<4xi32>) {
    %c = stablehlo.constant dense<31> : tensor<4xi32>
    %0 = stablehlo.shift_right_arithmetic %arg0, %c : tensor<4xi32>
    %c_0 = stablehlo.constant dense<[64, 70, 64, 100]> : tensor<4xi32>
    %1 = stablehlo.shift_right_logical %arg0, %c_0 : tensor<4xi32>
    return %0, %1 : tensor<4xi32>, tensor<4xi32>
  }
}
// ----- findings
info shift-by-width stablehlo.shift_right_arithmetic @3 x1
info type-narrowed func.func @1 x2
info type-narrowed stablehlo.constant @2 x2
info type-narrowed stablehlo.shift_right_arithmetic @3 x1
info type-narrowed stablehlo.shift_right_logical @5 x1
