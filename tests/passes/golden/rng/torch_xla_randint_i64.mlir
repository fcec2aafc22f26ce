module @IrToHlo.31 attributes {mhlo.cross_program_prefetches = [], mhlo.input_output_alias = [], mhlo.is_dynamic = false, mhlo.use_auto_spmd_partitioning = false} {
  func.func @main(%arg0: tensor<i64>, %arg1: tensor<i64>, %arg2: tensor<i64>) -> tensor<2x3xi64> {
    %c = stablehlo.constant dense<1> : tensor<2x3xui64>
    %c_0 = stablehlo.constant dense<0> : tensor<1xui64>
    %c_1 = stablehlo.constant dense<2531011> : tensor<i64>
    %c_2 = stablehlo.constant dense<214013> : tensor<i64>
    %0 = stablehlo.multiply %arg0, %c_2 : tensor<i64>
    %1 = stablehlo.add %0, %c_1 : tensor<i64>
    %2 = stablehlo.convert %1 : (tensor<i64>) -> tensor<ui64>
    %3 = stablehlo.reshape %2 : (tensor<ui64>) -> tensor<1xui64>
    %4 = stablehlo.concatenate %3, %c_0, dim = 0 : (tensor<1xui64>, tensor<1xui64>) -> tensor<2xui64>
    %output_state, %output = stablehlo.rng_bit_generator %4, algorithm =  DEFAULT : (tensor<2xui64>) -> (tensor<2xui64>, tensor<2x3xui64>)
    %5 = stablehlo.broadcast_in_dim %arg2, dims = [] : (tensor<i64>) -> tensor<2x3xi64>
    %6 = stablehlo.bitcast_convert %arg1 : (tensor<i64>) -> tensor<ui64>
    %7 = stablehlo.bitcast_convert %arg2 : (tensor<i64>) -> tensor<ui64>
    %8 = stablehlo.subtract %6, %7 : tensor<ui64>
    %9 = stablehlo.broadcast_in_dim %8, dims = [] : (tensor<ui64>) -> tensor<2x3xui64>
    %10 = stablehlo.remainder %output, %9 : tensor<2x3xui64>
    %11 = stablehlo.shift_right_logical %10, %c : tensor<2x3xui64>
    %12 = stablehlo.bitcast_convert %11 : (tensor<2x3xui64>) -> tensor<2x3xi64>
    %13 = stablehlo.add %5, %12 : tensor<2x3xi64>
    %14 = stablehlo.subtract %10, %11 : tensor<2x3xui64>
    %15 = stablehlo.bitcast_convert %14 : (tensor<2x3xui64>) -> tensor<2x3xi64>
    %16 = stablehlo.add %13, %15 : tensor<2x3xi64>
    return %16 : tensor<2x3xi64>
  }
}
