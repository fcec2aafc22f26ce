// rule: ConvertOpTypes
// reduce_precision to float64's format stays e11m52 on f32 (the identity), as x32 JAX traces it.
func.func @main(%x: tensor<2xf64>) -> tensor<2xf64> {
  %0 = stablehlo.reduce_precision %x, format = e11m52 : tensor<2xf64>
  return %0 : tensor<2xf64>
}
// ----- output
module {
  func.func @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    %0 = stablehlo.reduce_precision %arg0, format = e11m52 : tensor<2xf32>
    return %0 : tensor<2xf32>
  }
}
// ----- findings
info type-narrowed func.func @1 x2
info type-narrowed stablehlo.reduce_precision @2 x1
