// rule: HypotScale
// jax 0.12's hypot (jnp.hypot, abs of complex numbers) rescales by finfo-derived powers of two:
// float64's 2**511, 2**-26, 2**-537, 2**537 become x32 JAX's 2**63, 2**-12, 2**-75, 2**75.
func.func @main(%arg0: tensor<2xf64>, %arg1: tensor<2xf64>) -> (tensor<2xf64>) {
  %0 = call @hypot(%arg0, %arg1) : (tensor<2xf64>, tensor<2xf64>) -> tensor<2xf64>
  return %0 : tensor<2xf64>
}
func.func private @hypot(%arg0: tensor<2xf64>, %arg1: tensor<2xf64>) -> tensor<2xf64> {
  %0 = stablehlo.abs %arg0 : tensor<2xf64>
  %1 = stablehlo.abs %arg1 : tensor<2xf64>
  %2 = stablehlo.maximum %0, %1 : tensor<2xf64>
  %cst = stablehlo.constant dense<6.7039039649712985E+153> : tensor<f64>
  %3 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f64>) -> tensor<2xf64>
  %4 = stablehlo.compare GE, %2, %3, FLOAT : (tensor<2xf64>, tensor<2xf64>) -> tensor<2xi1>
  %cst_0 = stablehlo.constant dense<1.4901161193847656E-8> : tensor<f64>
  %5 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f64>) -> tensor<2xf64>
  %6 = stablehlo.compare LE, %2, %5, FLOAT : (tensor<2xf64>, tensor<2xf64>) -> tensor<2xi1>
  %cst_1 = stablehlo.constant dense<2.2227587494850775E-162> : tensor<f64>
  %7 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f64>) -> tensor<2xf64>
  %cst_2 = stablehlo.constant dense<4.4989137945431964E+161> : tensor<f64>
  %8 = stablehlo.broadcast_in_dim %cst_2, dims = [] : (tensor<f64>) -> tensor<2xf64>
  %cst_3 = stablehlo.constant dense<1.000000e+00> : tensor<f64>
  %9 = stablehlo.broadcast_in_dim %cst_3, dims = [] : (tensor<f64>) -> tensor<2xf64>
  %10 = stablehlo.multiply %arg0, %7 : tensor<2xf64>
  %11 = stablehlo.multiply %arg0, %8 : tensor<2xf64>
  %12 = stablehlo.select %6, %11, %arg0 : tensor<2xi1>, tensor<2xf64>
  %13 = stablehlo.select %4, %10, %12 : tensor<2xi1>, tensor<2xf64>
  %14 = stablehlo.multiply %arg1, %7 : tensor<2xf64>
  %15 = stablehlo.multiply %arg1, %8 : tensor<2xf64>
  %16 = stablehlo.select %6, %15, %arg1 : tensor<2xi1>, tensor<2xf64>
  %17 = stablehlo.select %4, %14, %16 : tensor<2xi1>, tensor<2xf64>
  %18 = stablehlo.select %6, %7, %9 : tensor<2xi1>, tensor<2xf64>
  %19 = stablehlo.select %4, %8, %18 : tensor<2xi1>, tensor<2xf64>
  %20 = chlo.square %13 : tensor<2xf64> -> tensor<2xf64>
  %21 = chlo.square %17 : tensor<2xf64> -> tensor<2xf64>
  %22 = stablehlo.add %20, %21 : tensor<2xf64>
  %23 = stablehlo.sqrt %22 : tensor<2xf64>
  %24 = stablehlo.multiply %23, %19 : tensor<2xf64>
  %cst_4 = stablehlo.constant dense<0x7FF0000000000000> : tensor<f64>
  %25 = stablehlo.broadcast_in_dim %cst_4, dims = [] : (tensor<f64>) -> tensor<2xf64>
  %26 = stablehlo.compare EQ, %0, %25, FLOAT : (tensor<2xf64>, tensor<2xf64>) -> tensor<2xi1>
  %27 = stablehlo.compare EQ, %1, %25, FLOAT : (tensor<2xf64>, tensor<2xf64>) -> tensor<2xi1>
  %28 = stablehlo.or %26, %27 : tensor<2xi1>
  %29 = stablehlo.select %28, %25, %24 : tensor<2xi1>, tensor<2xf64>
  return %29 : tensor<2xf64>
}
// ----- output
module {
  func.func @main(%arg0: tensor<2xf32>, %arg1: tensor<2xf32>) -> tensor<2xf32> {
    %0 = call @hypot(%arg0, %arg1) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
    return %0 : tensor<2xf32>
  }
  func.func private @hypot(%arg0: tensor<2xf32>, %arg1: tensor<2xf32>) -> tensor<2xf32> {
    %0 = stablehlo.abs %arg0 : tensor<2xf32>
    %1 = stablehlo.abs %arg1 : tensor<2xf32>
    %2 = stablehlo.maximum %0, %1 : tensor<2xf32>
    %cst = stablehlo.constant dense<9.22337203E+18> : tensor<f32>
    %3 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<2xf32>
    %4 = stablehlo.compare GE, %2, %3, FLOAT : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xi1>
    %cst_0 = stablehlo.constant dense<2.44140625E-4> : tensor<f32>
    %5 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<2xf32>
    %6 = stablehlo.compare LE, %2, %5, FLOAT : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xi1>
    %cst_1 = stablehlo.constant dense<2.64697796E-23> : tensor<f32>
    %7 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f32>) -> tensor<2xf32>
    %cst_2 = stablehlo.constant dense<3.77789319E+22> : tensor<f32>
    %8 = stablehlo.broadcast_in_dim %cst_2, dims = [] : (tensor<f32>) -> tensor<2xf32>
    %cst_3 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %9 = stablehlo.broadcast_in_dim %cst_3, dims = [] : (tensor<f32>) -> tensor<2xf32>
    %10 = stablehlo.multiply %arg0, %7 : tensor<2xf32>
    %11 = stablehlo.multiply %arg0, %8 : tensor<2xf32>
    %12 = stablehlo.select %6, %11, %arg0 : tensor<2xi1>, tensor<2xf32>
    %13 = stablehlo.select %4, %10, %12 : tensor<2xi1>, tensor<2xf32>
    %14 = stablehlo.multiply %arg1, %7 : tensor<2xf32>
    %15 = stablehlo.multiply %arg1, %8 : tensor<2xf32>
    %16 = stablehlo.select %6, %15, %arg1 : tensor<2xi1>, tensor<2xf32>
    %17 = stablehlo.select %4, %14, %16 : tensor<2xi1>, tensor<2xf32>
    %18 = stablehlo.select %6, %7, %9 : tensor<2xi1>, tensor<2xf32>
    %19 = stablehlo.select %4, %8, %18 : tensor<2xi1>, tensor<2xf32>
    %20 = chlo.square %13 : tensor<2xf32> -> tensor<2xf32>
    %21 = chlo.square %17 : tensor<2xf32> -> tensor<2xf32>
    %22 = stablehlo.add %20, %21 : tensor<2xf32>
    %23 = stablehlo.sqrt %22 : tensor<2xf32>
    %24 = stablehlo.multiply %23, %19 : tensor<2xf32>
    %cst_4 = stablehlo.constant dense<0x7F800000> : tensor<f32>
    %25 = stablehlo.broadcast_in_dim %cst_4, dims = [] : (tensor<f32>) -> tensor<2xf32>
    %26 = stablehlo.compare EQ, %0, %25, FLOAT : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xi1>
    %27 = stablehlo.compare EQ, %1, %25, FLOAT : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xi1>
    %28 = stablehlo.or %26, %27 : tensor<2xi1>
    %29 = stablehlo.select %28, %25, %24 : tensor<2xi1>, tensor<2xf32>
    return %29 : tensor<2xf32>
  }
}
// ----- findings
info dtype-constant stablehlo.compare @11 x1
info type-narrowed func.func @1 x3
info type-narrowed func.call @2 x1
info type-narrowed func.func @5 x3
info type-narrowed stablehlo.abs @6 x2
info type-narrowed stablehlo.maximum @8 x1
info type-narrowed stablehlo.constant @10 x6
info type-narrowed stablehlo.broadcast_in_dim @10 x6
info type-narrowed stablehlo.multiply @21 x5
info type-narrowed stablehlo.select @23 x7
info type-narrowed chlo.square @31 x2
info type-narrowed stablehlo.add @33 x1
info type-narrowed stablehlo.sqrt @34 x1
