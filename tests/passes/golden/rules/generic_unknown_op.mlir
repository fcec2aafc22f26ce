// rule: ConvertOpTypes
// An op of a dialect x64guard does not know is narrowed generically, with a warning.
func.func @main(%x: tensor<2xf64>) -> tensor<2xf64> {
  %0 = "mydialect.scale"(%x) : (tensor<2xf64>) -> tensor<2xf64>
  return %0 : tensor<2xf64>
}
// ----- output
module {
  func.func @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {
    %0 = "mydialect.scale"(%arg0) : (tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
}
// ----- findings
warning unknown-op mydialect.scale @2 x1
info type-narrowed func.func @1 x2
info type-narrowed mydialect.scale @2 x1
