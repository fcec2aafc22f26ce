// rule: LogNdtrSegments
// jax.scipy.special.log_ndtr at float64 switches at -20 and 8; x32 JAX traces -10 and 5 (jax 0.10.2's lowering).
func.func @main(%arg0: tensor<3xf64>) -> (tensor<3xf64>) {
  %cst = stablehlo.constant dense<8.000000e+00> : tensor<f64>
  %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f64>) -> tensor<3xf64>
  %1 = stablehlo.compare GT, %arg0, %0, FLOAT : (tensor<3xf64>, tensor<3xf64>) -> tensor<3xi1>
  %2 = stablehlo.negate %arg0 : tensor<3xf64>
  %cst_0 = stablehlo.constant dense<-2.000000e+01> : tensor<f64>
  %3 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f64>) -> tensor<3xf64>
  %4 = stablehlo.maximum %arg0, %3 : tensor<3xf64>
  %5 = call @_where(%1, %2, %4) : (tensor<3xi1>, tensor<3xf64>, tensor<3xf64>) -> tensor<3xf64>
  %cst_1 = stablehlo.constant dense<0.70710678118654757> : tensor<f64>
  %6 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f64>) -> tensor<3xf64>
  %7 = stablehlo.multiply %5, %6 : tensor<3xf64>
  %8 = stablehlo.abs %7 : tensor<3xf64>
  %cst_2 = stablehlo.constant dense<0.70710678118654757> : tensor<f64>
  %9 = stablehlo.broadcast_in_dim %cst_2, dims = [] : (tensor<f64>) -> tensor<3xf64>
  %10 = stablehlo.compare LT, %8, %9, FLOAT : (tensor<3xf64>, tensor<3xf64>) -> tensor<3xi1>
  %11 = chlo.erf %7 : tensor<3xf64> -> tensor<3xf64>
  %cst_3 = stablehlo.constant dense<1.000000e+00> : tensor<f64>
  %12 = stablehlo.broadcast_in_dim %cst_3, dims = [] : (tensor<f64>) -> tensor<3xf64>
  %13 = stablehlo.add %12, %11 : tensor<3xf64>
  %cst_4 = stablehlo.constant dense<0.000000e+00> : tensor<f64>
  %14 = stablehlo.broadcast_in_dim %cst_4, dims = [] : (tensor<f64>) -> tensor<3xf64>
  %15 = stablehlo.compare GT, %7, %14, FLOAT : (tensor<3xf64>, tensor<3xf64>) -> tensor<3xi1>
  %16 = chlo.erfc %8 : tensor<3xf64> -> tensor<3xf64>
  %cst_5 = stablehlo.constant dense<2.000000e+00> : tensor<f64>
  %17 = stablehlo.broadcast_in_dim %cst_5, dims = [] : (tensor<f64>) -> tensor<3xf64>
  %18 = stablehlo.subtract %17, %16 : tensor<3xf64>
  %19 = chlo.erfc %8 : tensor<3xf64> -> tensor<3xf64>
  %20 = stablehlo.select %15, %18, %19 : tensor<3xi1>, tensor<3xf64>
  %21 = stablehlo.select %10, %13, %20 : tensor<3xi1>, tensor<3xf64>
  %cst_6 = stablehlo.constant dense<5.000000e-01> : tensor<f64>
  %22 = stablehlo.broadcast_in_dim %cst_6, dims = [] : (tensor<f64>) -> tensor<3xf64>
  %23 = stablehlo.multiply %22, %21 : tensor<3xf64>
  %24 = stablehlo.negate %23 : tensor<3xf64>
  %cst_7 = stablehlo.constant dense<-2.000000e+01> : tensor<f64>
  %25 = stablehlo.broadcast_in_dim %cst_7, dims = [] : (tensor<f64>) -> tensor<3xf64>
  %26 = stablehlo.compare GT, %arg0, %25, FLOAT : (tensor<3xf64>, tensor<3xf64>) -> tensor<3xi1>
  %27 = stablehlo.log %23 : tensor<3xf64>
  %cst_8 = stablehlo.constant dense<-2.000000e+01> : tensor<f64>
  %28 = stablehlo.broadcast_in_dim %cst_8, dims = [] : (tensor<f64>) -> tensor<3xf64>
  %29 = stablehlo.minimum %arg0, %28 : tensor<3xf64>
  %30 = chlo.square %29 : tensor<3xf64> -> tensor<3xf64>
  %cst_9 = stablehlo.constant dense<-5.000000e-01> : tensor<f64>
  %31 = stablehlo.broadcast_in_dim %cst_9, dims = [] : (tensor<f64>) -> tensor<3xf64>
  %32 = stablehlo.multiply %31, %30 : tensor<3xf64>
  %33 = stablehlo.negate %29 : tensor<3xf64>
  %34 = stablehlo.log %33 : tensor<3xf64>
  %35 = stablehlo.subtract %32, %34 : tensor<3xf64>
  %cst_10 = stablehlo.constant dense<0.91893853320467266> : tensor<f64>
  %36 = stablehlo.broadcast_in_dim %cst_10, dims = [] : (tensor<f64>) -> tensor<3xf64>
  %37 = stablehlo.subtract %35, %36 : tensor<3xf64>
  %38 = chlo.square %29 : tensor<3xf64> -> tensor<3xf64>
  %cst_11 = stablehlo.constant dense<0.000000e+00> : tensor<f64>
  %39 = stablehlo.broadcast_in_dim %cst_11, dims = [] : (tensor<f64>) -> tensor<3xf64>
  %cst_12 = stablehlo.constant dense<0.000000e+00> : tensor<f64>
  %40 = stablehlo.broadcast_in_dim %cst_12, dims = [] : (tensor<f64>) -> tensor<3xf64>
  %cst_13 = stablehlo.constant dense<1.000000e+00> : tensor<f64>
  %41 = stablehlo.broadcast_in_dim %cst_13, dims = [] : (tensor<f64>) -> tensor<3xf64>
  %42 = stablehlo.divide %41, %38 : tensor<3xf64>
  %43 = stablehlo.add %40, %42 : tensor<3xf64>
  %44 = stablehlo.multiply %38, %38 : tensor<3xf64>
  %cst_14 = stablehlo.constant dense<3.000000e+00> : tensor<f64>
  %45 = stablehlo.broadcast_in_dim %cst_14, dims = [] : (tensor<f64>) -> tensor<3xf64>
  %46 = stablehlo.divide %45, %44 : tensor<3xf64>
  %47 = stablehlo.add %39, %46 : tensor<3xf64>
  %48 = stablehlo.multiply %44, %38 : tensor<3xf64>
  %cst_15 = stablehlo.constant dense<1.500000e+01> : tensor<f64>
  %49 = stablehlo.broadcast_in_dim %cst_15, dims = [] : (tensor<f64>) -> tensor<3xf64>
  %50 = stablehlo.divide %49, %48 : tensor<3xf64>
  %51 = stablehlo.add %43, %50 : tensor<3xf64>
  %cst_16 = stablehlo.constant dense<1.000000e+00> : tensor<f64>
  %52 = stablehlo.broadcast_in_dim %cst_16, dims = [] : (tensor<f64>) -> tensor<3xf64>
  %53 = stablehlo.add %52, %47 : tensor<3xf64>
  %54 = stablehlo.subtract %53, %51 : tensor<3xf64>
  %55 = stablehlo.log %54 : tensor<3xf64>
  %56 = stablehlo.add %37, %55 : tensor<3xf64>
  %57 = call @_where(%26, %27, %56) : (tensor<3xi1>, tensor<3xf64>, tensor<3xf64>) -> tensor<3xf64>
  %58 = call @_where(%1, %24, %57) : (tensor<3xi1>, tensor<3xf64>, tensor<3xf64>) -> tensor<3xf64>
  return %58 : tensor<3xf64>
}
func.func private @_where(%arg0: tensor<3xi1>, %arg1: tensor<3xf64>, %arg2: tensor<3xf64>) -> tensor<3xf64> {
  %0 = stablehlo.select %arg0, %arg1, %arg2 : tensor<3xi1>, tensor<3xf64>
  return %0 : tensor<3xf64>
}
// ----- output
module {
  func.func @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {
    %cst = stablehlo.constant dense<5.000000e+00> : tensor<f32>
    %0 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<3xf32>
    %1 = stablehlo.compare GT, %arg0, %0, FLOAT : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xi1>
    %2 = stablehlo.negate %arg0 : tensor<3xf32>
    %cst_0 = stablehlo.constant dense<-1.000000e+01> : tensor<f32>
    %3 = stablehlo.broadcast_in_dim %cst_0, dims = [] : (tensor<f32>) -> tensor<3xf32>
    %4 = stablehlo.maximum %arg0, %3 : tensor<3xf32>
    %5 = call @_where(%1, %2, %4) : (tensor<3xi1>, tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    %cst_1 = stablehlo.constant dense<0.707106769> : tensor<f32>
    %6 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f32>) -> tensor<3xf32>
    %7 = stablehlo.multiply %5, %6 : tensor<3xf32>
    %8 = stablehlo.abs %7 : tensor<3xf32>
    %cst_2 = stablehlo.constant dense<0.707106769> : tensor<f32>
    %9 = stablehlo.broadcast_in_dim %cst_2, dims = [] : (tensor<f32>) -> tensor<3xf32>
    %10 = stablehlo.compare LT, %8, %9, FLOAT : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xi1>
    %11 = chlo.erf %7 : tensor<3xf32> -> tensor<3xf32>
    %cst_3 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %12 = stablehlo.broadcast_in_dim %cst_3, dims = [] : (tensor<f32>) -> tensor<3xf32>
    %13 = stablehlo.add %12, %11 : tensor<3xf32>
    %cst_4 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %14 = stablehlo.broadcast_in_dim %cst_4, dims = [] : (tensor<f32>) -> tensor<3xf32>
    %15 = stablehlo.compare GT, %7, %14, FLOAT : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xi1>
    %16 = chlo.erfc %8 : tensor<3xf32> -> tensor<3xf32>
    %cst_5 = stablehlo.constant dense<2.000000e+00> : tensor<f32>
    %17 = stablehlo.broadcast_in_dim %cst_5, dims = [] : (tensor<f32>) -> tensor<3xf32>
    %18 = stablehlo.subtract %17, %16 : tensor<3xf32>
    %19 = chlo.erfc %8 : tensor<3xf32> -> tensor<3xf32>
    %20 = stablehlo.select %15, %18, %19 : tensor<3xi1>, tensor<3xf32>
    %21 = stablehlo.select %10, %13, %20 : tensor<3xi1>, tensor<3xf32>
    %cst_6 = stablehlo.constant dense<5.000000e-01> : tensor<f32>
    %22 = stablehlo.broadcast_in_dim %cst_6, dims = [] : (tensor<f32>) -> tensor<3xf32>
    %23 = stablehlo.multiply %22, %21 : tensor<3xf32>
    %24 = stablehlo.negate %23 : tensor<3xf32>
    %cst_7 = stablehlo.constant dense<-1.000000e+01> : tensor<f32>
    %25 = stablehlo.broadcast_in_dim %cst_7, dims = [] : (tensor<f32>) -> tensor<3xf32>
    %26 = stablehlo.compare GT, %arg0, %25, FLOAT : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xi1>
    %27 = stablehlo.log %23 : tensor<3xf32>
    %cst_8 = stablehlo.constant dense<-1.000000e+01> : tensor<f32>
    %28 = stablehlo.broadcast_in_dim %cst_8, dims = [] : (tensor<f32>) -> tensor<3xf32>
    %29 = stablehlo.minimum %arg0, %28 : tensor<3xf32>
    %30 = chlo.square %29 : tensor<3xf32> -> tensor<3xf32>
    %cst_9 = stablehlo.constant dense<-5.000000e-01> : tensor<f32>
    %31 = stablehlo.broadcast_in_dim %cst_9, dims = [] : (tensor<f32>) -> tensor<3xf32>
    %32 = stablehlo.multiply %31, %30 : tensor<3xf32>
    %33 = stablehlo.negate %29 : tensor<3xf32>
    %34 = stablehlo.log %33 : tensor<3xf32>
    %35 = stablehlo.subtract %32, %34 : tensor<3xf32>
    %cst_10 = stablehlo.constant dense<0.918938517> : tensor<f32>
    %36 = stablehlo.broadcast_in_dim %cst_10, dims = [] : (tensor<f32>) -> tensor<3xf32>
    %37 = stablehlo.subtract %35, %36 : tensor<3xf32>
    %38 = chlo.square %29 : tensor<3xf32> -> tensor<3xf32>
    %cst_11 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %39 = stablehlo.broadcast_in_dim %cst_11, dims = [] : (tensor<f32>) -> tensor<3xf32>
    %cst_12 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %40 = stablehlo.broadcast_in_dim %cst_12, dims = [] : (tensor<f32>) -> tensor<3xf32>
    %cst_13 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %41 = stablehlo.broadcast_in_dim %cst_13, dims = [] : (tensor<f32>) -> tensor<3xf32>
    %42 = stablehlo.divide %41, %38 : tensor<3xf32>
    %43 = stablehlo.add %40, %42 : tensor<3xf32>
    %44 = stablehlo.multiply %38, %38 : tensor<3xf32>
    %cst_14 = stablehlo.constant dense<3.000000e+00> : tensor<f32>
    %45 = stablehlo.broadcast_in_dim %cst_14, dims = [] : (tensor<f32>) -> tensor<3xf32>
    %46 = stablehlo.divide %45, %44 : tensor<3xf32>
    %47 = stablehlo.add %39, %46 : tensor<3xf32>
    %48 = stablehlo.multiply %44, %38 : tensor<3xf32>
    %cst_15 = stablehlo.constant dense<1.500000e+01> : tensor<f32>
    %49 = stablehlo.broadcast_in_dim %cst_15, dims = [] : (tensor<f32>) -> tensor<3xf32>
    %50 = stablehlo.divide %49, %48 : tensor<3xf32>
    %51 = stablehlo.add %43, %50 : tensor<3xf32>
    %cst_16 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %52 = stablehlo.broadcast_in_dim %cst_16, dims = [] : (tensor<f32>) -> tensor<3xf32>
    %53 = stablehlo.add %52, %47 : tensor<3xf32>
    %54 = stablehlo.subtract %53, %51 : tensor<3xf32>
    %55 = stablehlo.log %54 : tensor<3xf32>
    %56 = stablehlo.add %37, %55 : tensor<3xf32>
    %57 = call @_where(%26, %27, %56) : (tensor<3xi1>, tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    %58 = call @_where(%1, %24, %57) : (tensor<3xi1>, tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    return %58 : tensor<3xf32>
  }
  func.func private @_where(%arg0: tensor<3xi1>, %arg1: tensor<3xf32>, %arg2: tensor<3xf32>) -> tensor<3xf32> {
    %0 = stablehlo.select %arg0, %arg1, %arg2 : tensor<3xi1>, tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}
// ----- findings
info dtype-constant stablehlo.compare @4 x1
info type-narrowed func.func @1 x2
info type-narrowed stablehlo.constant @3 x18
info type-narrowed stablehlo.broadcast_in_dim @3 x18
info type-narrowed stablehlo.negate @5 x3
info type-narrowed stablehlo.maximum @8 x1
info type-narrowed func.call @9 x3
info type-narrowed stablehlo.multiply @12 x5
info type-narrowed stablehlo.abs @13 x1
info type-narrowed chlo.erf @17 x1
info type-narrowed stablehlo.add @20 x6
info type-narrowed chlo.erfc @24 x2
info type-narrowed stablehlo.subtract @27 x4
info type-narrowed stablehlo.select @29 x2
info type-narrowed stablehlo.log @38 x3
info type-narrowed stablehlo.minimum @41 x1
info type-narrowed chlo.square @42 x2
info type-narrowed stablehlo.divide @59 x3
info type-narrowed func.func @81 x3
info type-narrowed stablehlo.select @82 x1
