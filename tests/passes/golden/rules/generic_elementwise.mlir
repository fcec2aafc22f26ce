// rule: ConvertOpTypes
// Every 64-bit result, block argument and type attribute narrows, whatever the op.
func.func @main(%x: tensor<4xf64>, %n: tensor<4xi64>) -> (tensor<4xf64>, tensor<4xi64>) {
  %0 = stablehlo.sine %x : tensor<4xf64>
  %1 = stablehlo.add %n, %n : tensor<4xi64>
  return %0, %1 : tensor<4xf64>, tensor<4xi64>
}
// ----- output
module {
  func.func @main(%arg0: tensor<4xf32>, %arg1: tensor<4xi32>) -> (tensor<4xf32>, tensor<4xi32>) {
    %0 = stablehlo.sine %arg0 : tensor<4xf32>
    %1 = stablehlo.add %arg1, %arg1 : tensor<4xi32>
    return %0, %1 : tensor<4xf32>, tensor<4xi32>
  }
}
// ----- findings
info type-narrowed func.func @1 x3
info type-narrowed stablehlo.sine @2 x1
info type-narrowed stablehlo.add @3 x1
