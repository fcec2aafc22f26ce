// rule: WarnX32Expansion
// A float64 chlo.lgamma in a module JAX lowered, where the running JAX lowers float32 lgamma
// with its own expansion (jax 0.12): narrowed as any op, and a warning that XLA's float32
// expansion is not x32 JAX's bits. One finding for the function's two ops.
// options: x32_expanded=chlo.lgamma
module @jit_gammaln {
  func.func public @main(%x: tensor<4xf64>) -> tensor<4xf64> {
    %0 = chlo.lgamma %x : tensor<4xf64> -> tensor<4xf64>
    %1 = chlo.lgamma %0 : tensor<4xf64> -> tensor<4xf64>
    return %1 : tensor<4xf64>
  }
}
// ----- output
module @jit_gammaln {
  func.func public @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
    %0 = chlo.lgamma %arg0 : tensor<4xf32> -> tensor<4xf32>
    %1 = chlo.lgamma %0 : tensor<4xf32> -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
}
// ----- findings
warning x32-lowering chlo.lgamma @3 x2
info type-narrowed func.func @2 x2
info type-narrowed chlo.lgamma @3 x2
