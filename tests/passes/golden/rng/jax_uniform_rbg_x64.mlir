module @jit__lambda attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4xui32>) -> (tensor<4xf64> {jax.result_info = "result"}) {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f64>
    %cst_0 = stablehlo.constant dense<1.000000e+00> : tensor<f64>
    %0 = call @_uniform(%arg0, %cst, %cst_0) : (tensor<4xui32>, tensor<f64>, tensor<f64>) -> tensor<4xf64>
    return %0 : tensor<4xf64>
  }
  func.func private @_uniform(%arg0: tensor<4xui32>, %arg1: tensor<f64>, %arg2: tensor<f64>) -> tensor<4xf64> {
    %0 = stablehlo.convert %arg1 : tensor<f64>
    %1 = stablehlo.convert %arg2 : tensor<f64>
    %2 = stablehlo.broadcast_in_dim %0, dims = [] : (tensor<f64>) -> tensor<1xf64>
    %3 = stablehlo.broadcast_in_dim %1, dims = [] : (tensor<f64>) -> tensor<1xf64>
    %4 = stablehlo.reshape %arg0 : (tensor<4xui32>) -> tensor<2x2xui32>
    %5 = stablehlo.bitcast_convert %4 : (tensor<2x2xui32>) -> tensor<2xui64>
    %output_state, %output = stablehlo.rng_bit_generator %5, algorithm = DEFAULT : (tensor<2xui64>) -> (tensor<2xui64>, tensor<4xui64>)
    %6 = stablehlo.bitcast_convert %output_state : (tensor<2xui64>) -> tensor<2x2xui32>
    %7 = stablehlo.reshape %6 : (tensor<2x2xui32>) -> tensor<4xui32>
    %c = stablehlo.constant dense<12> : tensor<ui64>
    %8 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<ui64>) -> tensor<4xui64>
    %9 = stablehlo.shift_right_logical %output, %8 : tensor<4xui64>
    %c_0 = stablehlo.constant dense<4607182418800017408> : tensor<ui64>
    %10 = stablehlo.broadcast_in_dim %c_0, dims = [] : (tensor<ui64>) -> tensor<4xui64>
    %11 = stablehlo.or %9, %10 : tensor<4xui64>
    %12 = stablehlo.bitcast_convert %11 : (tensor<4xui64>) -> tensor<4xf64>
    %cst = stablehlo.constant dense<1.000000e+00> : tensor<f64>
    %13 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f64>) -> tensor<4xf64>
    %14 = stablehlo.subtract %12, %13 : tensor<4xf64>
    %15 = stablehlo.subtract %3, %2 : tensor<1xf64>
    %16 = stablehlo.broadcast_in_dim %15, dims = [0] : (tensor<1xf64>) -> tensor<4xf64>
    %17 = stablehlo.multiply %14, %16 : tensor<4xf64>
    %18 = stablehlo.broadcast_in_dim %2, dims = [0] : (tensor<1xf64>) -> tensor<4xf64>
    %19 = stablehlo.add %17, %18 : tensor<4xf64>
    %20 = stablehlo.broadcast_in_dim %2, dims = [0] : (tensor<1xf64>) -> tensor<4xf64>
    %21 = stablehlo.maximum %20, %19 : tensor<4xf64>
    return %21 : tensor<4xf64>
  }
}
