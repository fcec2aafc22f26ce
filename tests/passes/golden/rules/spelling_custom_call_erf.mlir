// rule: RespellCustomCall
// torch-xla spells HLO's erf as `custom_call @mhlo.erf` (GELU): it is chlo.erf, narrowed as any op
// (it expands for float32 when compiled), not an unknown kernel. No finding of its own.
func.func @main(%arg0: tensor<4xf64>) -> tensor<4xf64> {
  %0 = stablehlo.custom_call @mhlo.erf(%arg0) : (tensor<4xf64>) -> tensor<4xf64>
  return %0 : tensor<4xf64>
}
// ----- output
module {
  func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = chlo.erf %arg0 : tensor<4xf32> -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
// ----- findings
info type-narrowed func.func @1 x2
info type-narrowed chlo.erf @2 x1
