// rule: WarnX32Expansion
// A module JAX did not lower (no `module @jit_...`): x32 JAX is not its reference, no warning.
// options: x32_expanded=chlo.lgamma
func.func @main(%x: tensor<4xf64>) -> tensor<4xf64> {
  %0 = chlo.lgamma %x : tensor<4xf64> -> tensor<4xf64>
  return %0 : tensor<4xf64>
}
// ----- output
module {
  func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = chlo.lgamma %arg0 : tensor<4xf32> -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
// ----- findings
info type-narrowed func.func @1 x2
info type-narrowed chlo.lgamma @2 x1
