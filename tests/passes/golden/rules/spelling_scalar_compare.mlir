// rule: NarrowScalarCompare
// torch-xla compares a float32 tensor with a Python float in float64 (dropout's mask); eager
// PyTorch compares in float32: the compare becomes that one, and no 64-bit type is left.
func.func @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> (tensor<4xi1>, tensor<4xi1>, tensor<4xf64>) {
  %0 = stablehlo.convert %arg0 : (tensor<4xf32>) -> tensor<4xf64>
  %cst = stablehlo.constant dense<9.000000e-01> : tensor<4xf64>
  %1 = stablehlo.compare LT, %0, %cst, FLOAT : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xi1>
  %2 = stablehlo.convert %arg1 : (tensor<4xf32>) -> tensor<4xf64>
  %3 = stablehlo.compare GE, %2, %cst, FLOAT : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xi1>
  return %1, %3, %2 : tensor<4xi1>, tensor<4xi1>, tensor<4xf64>
}
// ----- output
module {
  func.func @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> (tensor<4xi1>, tensor<4xi1>, tensor<4xf32>) {
    %cst = stablehlo.constant dense<0.899999976> : tensor<4xf32>
    %0 = stablehlo.compare LT, %arg0, %cst, FLOAT : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
    %cst_0 = stablehlo.constant dense<0.899999976> : tensor<4xf32>
    %1 = stablehlo.compare GE, %arg1, %cst_0, FLOAT : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
    return %0, %1, %arg1 : tensor<4xi1>, tensor<4xi1>, tensor<4xf32>
  }
}
// ----- findings
info type-narrowed func.func @1 x1
info type-narrowed stablehlo.convert @5 x1
