// rule: WarnX32Expansion
// A float32 chlo.lgamma is not narrowed: nothing to say.
// options: x32_expanded=chlo.lgamma
module @jit_gammaln {
  func.func public @main(%x: tensor<4xf32>, %y: tensor<4xi64>) -> (tensor<4xf32>, tensor<4xi64>) {
    %0 = chlo.lgamma %x : tensor<4xf32> -> tensor<4xf32>
    return %0, %y : tensor<4xf32>, tensor<4xi64>
  }
}
// ----- output
module @jit_gammaln {
  func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xi32>) -> (tensor<4xf32>, tensor<4xi32>) {
    %0 = chlo.lgamma %arg0 : tensor<4xf32> -> tensor<4xf32>
    return %0, %arg1 : tensor<4xf32>, tensor<4xi32>
  }
}
// ----- findings
info type-narrowed func.func @2 x2
