// rule: RemoveIdentityConvert
// A scalar's 64->32-bit convert stays as a convert to the same type (x32 JAX's trace holds one for a weak-typed scalar), named identity-convert (info): the module does not record whether the scalar was weak.
func.func @main(%i: tensor<i64>, %x: tensor<4xi32>) -> tensor<4xi32> {
  %0 = stablehlo.convert %i : (tensor<i64>) -> tensor<i32>
  %1 = stablehlo.broadcast_in_dim %0, dims = [] : (tensor<i32>) -> tensor<4xi32>
  %2 = stablehlo.add %x, %1 : tensor<4xi32>
  return %2 : tensor<4xi32>
}
// ----- output
module {
  func.func @main(%arg0: tensor<i32>, %arg1: tensor<4xi32>) -> tensor<4xi32> {
    %0 = stablehlo.convert %arg0 : tensor<i32>
    %1 = stablehlo.broadcast_in_dim %0, dims = [] : (tensor<i32>) -> tensor<4xi32>
    %2 = stablehlo.add %arg1, %1 : tensor<4xi32>
    return %2 : tensor<4xi32>
  }
}
// ----- findings
info identity-convert stablehlo.convert @2 x1
info type-narrowed func.func @1 x2
