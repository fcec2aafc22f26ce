// rule: WidthDependentCount
// clz of i64 in a module JAX lowered: x32 JAX counts 32 bits too, info.
module @jit_clz {
  func.func public @main(%x: tensor<4xi64>) -> tensor<4xi64> {
    %0 = stablehlo.count_leading_zeros %x : tensor<4xi64>
    return %0 : tensor<4xi64>
  }
}
// ----- output
module @jit_clz {
  func.func public @main(%arg0: tensor<4xi32>) -> tensor<4xi32> {
    %0 = stablehlo.count_leading_zeros %arg0 : tensor<4xi32>
    return %0 : tensor<4xi32>
  }
}
// ----- findings
info width-dependent-op stablehlo.count_leading_zeros @3 x1
info type-narrowed func.func @2 x2
info type-narrowed stablehlo.count_leading_zeros @3 x1
