// rule: ReplaceDtypeConstants
// finfo(float64).eps becomes finfo(float32).eps: the value x32 JAX computes.
func.func @main() -> tensor<f64> {
  %0 = stablehlo.constant dense<2.220446049250313E-16> : tensor<f64>
  return %0 : tensor<f64>
}
// ----- output
module {
  func.func @main() -> tensor<f32> {
    %cst = stablehlo.constant dense<1.1920929E-7> : tensor<f32>
    return %cst : tensor<f32>
  }
}
// ----- findings
info dtype-constant stablehlo.constant @2 x1
info type-narrowed func.func @1 x1
info type-narrowed stablehlo.constant @2 x1
