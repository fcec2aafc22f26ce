// rule: RemoveIdentityConvert
// A convert that is already an identity (f64 -> f64: JAX emits it for weak-typed values) stays, as x32 JAX's f32 -> f32.
func.func @main(%x: tensor<3xf64>) -> tensor<3xf64> {
  %0 = stablehlo.convert %x : tensor<3xf64>
  return %0 : tensor<3xf64>
}
// ----- output
module {
  func.func @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    %0 = stablehlo.convert %arg0 : tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}
// ----- findings
info type-narrowed func.func @1 x2
info type-narrowed stablehlo.convert @2 x1
