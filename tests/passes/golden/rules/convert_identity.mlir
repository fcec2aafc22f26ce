// rule: RemoveIdentityConvert
// convert(i64 -> ui64) narrows to a convert(i32 -> ui32); f32 -> f64 -> f32 becomes nothing.
func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  %0 = stablehlo.convert %x : (tensor<3xf32>) -> tensor<3xf64>
  %1 = stablehlo.convert %0 : (tensor<3xf64>) -> tensor<3xf32>
  return %1 : tensor<3xf32>
}
// ----- output
module {
  func.func @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    return %arg0 : tensor<3xf32>
  }
}
// ----- findings
info type-narrowed stablehlo.convert @2 x1
