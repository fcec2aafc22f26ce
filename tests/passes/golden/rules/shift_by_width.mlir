// rule: WarnShiftByWidth
// A shift of a 64-bit integer by 32 shifts out every bit once narrowed: a warning.
func.func @main(%x: tensor<4xi64>) -> tensor<4xi64> {
  %c = stablehlo.constant dense<32> : tensor<4xi64>
  %0 = stablehlo.shift_left %x, %c : tensor<4xi64>
  return %0 : tensor<4xi64>
}
// ----- output
module {
  func.func @main(%arg0: tensor<4xi32>) -> tensor<4xi32> {
    %c = stablehlo.constant dense<32> : tensor<4xi32>
    %0 = stablehlo.shift_left %arg0, %c : tensor<4xi32>
    return %0 : tensor<4xi32>
  }
}
// ----- findings
warning shift-by-width stablehlo.shift_left @3 x1
info type-narrowed func.func @1 x2
info type-narrowed stablehlo.constant @2 x1
info type-narrowed stablehlo.shift_left @3 x1
