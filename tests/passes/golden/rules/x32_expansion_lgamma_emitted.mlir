// rule: WarnX32Expansion
// The same module where the running JAX emits chlo.lgamma at float32 too (jax 0.10, 0.11):
// x32 JAX's program, no warning.
module @jit_gammaln {
  func.func public @main(%x: tensor<4xf64>) -> tensor<4xf64> {
    %0 = chlo.lgamma %x : tensor<4xf64> -> tensor<4xf64>
    return %0 : tensor<4xf64>
  }
}
// ----- output
module @jit_gammaln {
  func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = chlo.lgamma %arg0 : tensor<4xf32> -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
// ----- findings
info type-narrowed func.func @2 x2
info type-narrowed chlo.lgamma @3 x1
