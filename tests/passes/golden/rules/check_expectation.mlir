// rule: NarrowCheckExpectation
// StableHLO's test `check` ops: the expected value narrows with the checked operand.
func.func @main(%x: tensor<2xf64>) {
  "check.expect_almost_eq_const"(%x) {value = dense<[1.0, 0.1]> : tensor<2xf64>} : (tensor<2xf64>) -> ()
  return
}
// ----- output
module {
  func.func @main(%arg0: tensor<2xf32>) {
    "check.expect_almost_eq_const"(%arg0) {value = dense<[1.000000e+00, 1.000000e-01]> : tensor<2xf32>} : (tensor<2xf32>) -> ()
    return
  }
}
// ----- findings
info type-narrowed func.func @1 x2
