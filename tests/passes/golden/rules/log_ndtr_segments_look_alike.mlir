// rule: LogNdtrSegments
// The same comparisons and clamps at -20 and 8, but no erf/erfc behind max(x, -20): not
// log_ndtr, so the constants are narrowed as written.
func.func @main(%arg0: tensor<3xf64>) -> (tensor<3xf64>) {
  %cst = stablehlo.constant dense<8.000000e+00> : tensor<f64>
  %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f64>) -> tensor<3xf64>
  %1 = stablehlo.compare GT, %arg0, %0, FLOAT : (tensor<3xf64>, tensor<3xf64>) -> tensor<3xi1>
  %cst_0 = stablehlo.constant dense<-2.000000e+01> : tensor<f64>
  %2 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f64>) -> tensor<3xf64>
  %3 = stablehlo.compare GT, %arg0, %2, FLOAT : (tensor<3xf64>, tensor<3xf64>) -> tensor<3xi1>
  %4 = stablehlo.maximum %arg0, %2 : tensor<3xf64>
  %5 = stablehlo.minimum %arg0, %2 : tensor<3xf64>
  %6 = chlo.square %5 : tensor<3xf64> -> tensor<3xf64>
  %7 = stablehlo.log %4 : tensor<3xf64>
  %8 = stablehlo.select %3, %7, %6 : tensor<3xi1>, tensor<3xf64>
  %9 = stablehlo.select %1, %arg0, %8 : tensor<3xi1>, tensor<3xf64>
  return %9 : tensor<3xf64>
}
// ----- output
module {
  func.func @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    %cst = stablehlo.constant dense<8.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<3xf32>
    %1 = stablehlo.compare GT, %arg0, %0, FLOAT : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xi1>
    %cst_0 = stablehlo.constant dense<-2.000000e+01> : tensor<f32>
    %2 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<3xf32>
    %3 = stablehlo.compare GT, %arg0, %2, FLOAT : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xi1>
    %4 = stablehlo.maximum %arg0, %2 : tensor<3xf32>
    %5 = stablehlo.minimum %arg0, %2 : tensor<3xf32>
    %6 = chlo.square %5 : tensor<3xf32> -> tensor<3xf32>
    %7 = stablehlo.log %4 : tensor<3xf32>
    %8 = stablehlo.select %3, %7, %6 : tensor<3xi1>, tensor<3xf32>
    %9 = stablehlo.select %1, %arg0, %8 : tensor<3xi1>, tensor<3xf32>
    return %9 : tensor<3xf32>
  }
}
// ----- findings
info type-narrowed func.func @1 x2
info type-narrowed stablehlo.constant @2 x2
info type-narrowed stablehlo.broadcast_in_dim @3 x2
info type-narrowed stablehlo.maximum @8 x1
info type-narrowed stablehlo.minimum @9 x1
info type-narrowed chlo.square @10 x1
info type-narrowed stablehlo.log @11 x1
info type-narrowed stablehlo.select @12 x2
