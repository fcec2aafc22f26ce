// rule: WidthDependentCount
// clz/popcnt of i64 in a module not lowered by JAX: the count depends on the width, a warning.
func.func @main(%x: tensor<4xi64>) -> (tensor<4xi64>, tensor<4xi64>) {
  %0 = stablehlo.count_leading_zeros %x : tensor<4xi64>
  %1 = stablehlo.popcnt %x : tensor<4xi64>
  return %0, %1 : tensor<4xi64>, tensor<4xi64>
}
// ----- output
module {
  func.func @main(%arg0: tensor<4xi32>) -> (tensor<4xi32>, tensor<4xi32>) {
    %0 = stablehlo.count_leading_zeros %arg0 : tensor<4xi32>
    %1 = stablehlo.popcnt %arg0 : tensor<4xi32>
    return %0, %1 : tensor<4xi32>, tensor<4xi32>
  }
}
// ----- findings
warning width-dependent-op stablehlo.count_leading_zeros @2 x1
warning width-dependent-op stablehlo.popcnt @3 x1
info type-narrowed func.func @1 x2
info type-narrowed stablehlo.count_leading_zeros @2 x1
info type-narrowed stablehlo.popcnt @3 x1
