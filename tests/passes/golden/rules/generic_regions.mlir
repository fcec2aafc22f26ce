// rule: ConvertOpTypes
// Region arguments (a reduction's body) narrow with the op that holds them.
func.func @main(%x: tensor<8xui64>) -> tensor<ui64> {
  %c = stablehlo.constant dense<0> : tensor<ui64>
  %0 = stablehlo.reduce(%x init: %c) applies stablehlo.add across dimensions = [0] : (tensor<8xui64>, tensor<ui64>) -> tensor<ui64>
  return %0 : tensor<ui64>
}
// ----- output
module {
  func.func @main(%arg0: tensor<8xui32>) -> tensor<ui32> {
    %c = stablehlo.constant dense<0> : tensor<ui32>
    %0 = stablehlo.reduce(%arg0 init: %c) applies stablehlo.add across dimensions = [0] : (tensor<8xui32>, tensor<ui32>) -> tensor<ui32>
    return %0 : tensor<ui32>
  }
}
// ----- findings
info type-narrowed func.func @1 x2
info type-narrowed stablehlo.constant @2 x1
info type-narrowed stablehlo.reduce @3 x3
info type-narrowed stablehlo.add @3 x1
