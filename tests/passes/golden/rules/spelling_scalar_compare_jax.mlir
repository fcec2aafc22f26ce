// rule: NarrowScalarCompare
// In a module JAX lowered, an f64 compare is what the user wrote (x.astype(float64) < 0.9):
// it is narrowed as any op, with its findings.
module @jit_f {
  func.func @main(%arg0: tensor<4xf32>) -> tensor<4xi1> {
    %0 = stablehlo.convert %arg0 : (tensor<4xf32>) -> tensor<4xf64>
    %cst = stablehlo.constant dense<9.000000e-01> : tensor<4xf64>
    %1 = stablehlo.compare LT, %0, %cst, FLOAT : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xi1>
    return %1 : tensor<4xi1>
  }
}
// ----- output
module @jit_f {
  func.func @main(%arg0: tensor<4xf32>) -> tensor<4xi1> {
    %cst = stablehlo.constant dense<0.899999976> : tensor<4xf32>
    %0 = stablehlo.compare LT, %arg0, %cst, FLOAT : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
    return %0 : tensor<4xi1>
  }
}
// ----- findings
info type-narrowed stablehlo.convert @3 x1
info type-narrowed stablehlo.constant @4 x1
