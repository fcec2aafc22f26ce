// rule: FoldWholeArrayScatter
// A scatter with no indices, a window over the whole array and a combiner returning the update is the update: folded.
func.func @main(%x: tensor<4xf64>, %y: tensor<4xf64>) -> tensor<4xf64> {
  %c = stablehlo.constant dense<0> : tensor<i32>
  %i = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i32>) -> tensor<0xi32>
  %0 = "stablehlo.scatter"(%x, %i, %y) <{indices_are_sorted = true, scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [0]>, unique_indices = true}> ({
  ^bb0(%a: tensor<f64>, %b: tensor<f64>):
    stablehlo.return %b : tensor<f64>
  }) : (tensor<4xf64>, tensor<0xi32>, tensor<4xf64>) -> tensor<4xf64>
  return %0 : tensor<4xf64>
}
// ----- output
module {
  func.func @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> tensor<4xf32> {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %0 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<i32>) -> tensor<0xi32>
    return %arg1 : tensor<4xf32>
  }
}
// ----- findings
info identity-folded stablehlo.scatter @4 x1
info type-narrowed func.func @1 x3
info type-narrowed stablehlo.scatter @4 x3
