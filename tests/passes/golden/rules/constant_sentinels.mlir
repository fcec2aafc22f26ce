// rule: NarrowCleanSplat
// Splats: int64's minimum (a max-reduction's init value) becomes int32's, as in x32 JAX.
func.func @main(%x: tensor<4xi64>) -> tensor<i64> {
  %c = stablehlo.constant dense<-9223372036854775808> : tensor<i64>
  %0 = stablehlo.reduce(%x init: %c) applies stablehlo.maximum across dimensions = [0] : (tensor<4xi64>, tensor<i64>) -> tensor<i64>
  return %0 : tensor<i64>
}
// ----- output
module {
  func.func @main(%arg0: tensor<4xi32>) -> tensor<i32> {
    %c = stablehlo.constant dense<-2147483648> : tensor<i32>
    %0 = stablehlo.reduce(%arg0 init: %c) applies stablehlo.maximum across dimensions = [0] : (tensor<4xi32>, tensor<i32>) -> tensor<i32>
    return %0 : tensor<i32>
  }
}
// ----- findings
info type-narrowed func.func @1 x2
info type-narrowed stablehlo.constant @2 x1
info type-narrowed stablehlo.reduce @3 x3
info type-narrowed stablehlo.maximum @3 x1
