// rule: RespellCustomCall
// At any width: a float32 `custom_call @mhlo.erf` is respelled too, so that a target's check
// (neuronx-cc's NCC_EHCA005 for unknown custom_call targets) sees the erf torch-xla meant.
func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.custom_call @mhlo.erf(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
// ----- output
module {
  func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = chlo.erf %arg0 : tensor<4xf32> -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
// ----- findings
