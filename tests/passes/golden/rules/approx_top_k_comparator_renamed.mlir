// rule: NarrowCustomCall
// ApproxTopK's comparator, which JAX names after the element type, takes x32 JAX's name (the module is JAX's: @jit_..., so the comparator JAX leaves public is internal).
module @jit_f {
  func.func @top_k_gt_f64_comparator(%arg0: tensor<f64>, %arg1: tensor<f64>, %arg2: tensor<i32>, %arg3: tensor<i32>) -> tensor<i1> {
    %0 = stablehlo.compare  GT, %arg0, %arg1,  TOTALORDER : (tensor<f64>, tensor<f64>) -> tensor<i1>
    return %0 : tensor<i1>
  }
  func.func public @main(%arg0: tensor<10xf64>) -> (tensor<3xf64>, tensor<3xi32>) {
    %0 = stablehlo.iota dim = 0 : tensor<10xi32>
    %cst = stablehlo.constant dense<0xFFF0000000000000> : tensor<f64>
    %c = stablehlo.constant dense<-1> : tensor<i32>
    %1:2 = stablehlo.custom_call @ApproxTopK(%arg0, %0, %cst, %c) {called_computations = [@top_k_gt_f64_comparator], mhlo.backend_config = {aggregate_to_topk = true, is_fallback = true, recall_target = 0.949999988 : f32, reduction_dim = 0 : i64, reduction_input_size_override = -1 : i64, top_k = 3 : i64}} : (tensor<10xf64>, tensor<10xi32>, tensor<f64>, tensor<i32>) -> (tensor<3xf64>, tensor<3xi32>)
    return %1#0, %1#1 : tensor<3xf64>, tensor<3xi32>
  }
}
// ----- output
module @jit_f {
  func.func @top_k_gt_f32_comparator(%arg0: tensor<f32>, %arg1: tensor<f32>, %arg2: tensor<i32>, %arg3: tensor<i32>) -> tensor<i1> {
    %0 = stablehlo.compare GT, %arg0, %arg1, TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>
    return %0 : tensor<i1>
  }
  func.func public @main(%arg0: tensor<10xf32>) -> (tensor<3xf32>, tensor<3xi32>) {
    %0 = stablehlo.iota dim = 0 : tensor<10xi32>
    %cst = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %c = stablehlo.constant dense<-1> : tensor<i32>
    %1:2 = stablehlo.custom_call @ApproxTopK(%arg0, %0, %cst, %c) {called_computations = [@top_k_gt_f32_comparator], mhlo.backend_config = {aggregate_to_topk = true, is_fallback = true, recall_target = 0.949999988 : f32, reduction_dim = 0 : i64, reduction_input_size_override = -1 : i64, top_k = 3 : i64}} : (tensor<10xf32>, tensor<10xi32>, tensor<f32>, tensor<i32>) -> (tensor<3xf32>, tensor<3xi32>)
    return %1#0, %1#1 : tensor<3xf32>, tensor<3xi32>
  }
}
// ----- findings
info custom-call-renamed stablehlo.custom_call @ApproxTopK @10 x1
info type-narrowed func.func @2 x3
info type-narrowed func.func @6 x2
info type-narrowed stablehlo.constant @8 x1
info type-narrowed stablehlo.custom_call @10 x1
