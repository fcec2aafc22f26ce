// rule: NarrowCheckExpectation
// The expected value goes through the constant rules as the constant it is compared with: float64's smallest subnormal becomes float32's in both.
func.func @main() {
  %c = stablehlo.constant dense<4.940000e-324> : tensor<f64>
  "check.expect_almost_eq_const"(%c) {value = dense<4.940000e-324> : tensor<f64>} : (tensor<f64>) -> ()
  return
}
// ----- output
module {
  func.func @main() {
    %cst = stablehlo.constant dense<1.401300e-45> : tensor<f32>
    "check.expect_almost_eq_const"(%cst) {value = dense<1.401300e-45> : tensor<f32>} : (tensor<f32>) -> ()
    return
  }
}
// ----- findings
info dtype-constant stablehlo.constant @2 x1
info dtype-constant check.expect_almost_eq_const @3 x1
info type-narrowed stablehlo.constant @2 x1
