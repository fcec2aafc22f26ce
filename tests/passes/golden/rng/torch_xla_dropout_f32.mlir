module @IrToHlo.44 attributes {mhlo.cross_program_prefetches = [], mhlo.input_output_alias = [], mhlo.is_dynamic = false, mhlo.use_auto_spmd_partitioning = false} {
  func.func @main(%arg0: tensor<f32>, %arg1: tensor<i64>) -> tensor<2x5xf32> {
    %cst = stablehlo.constant dense<1.1920929E-7> : tensor<2x5xf32>
    %c = stablehlo.constant dense<9> : tensor<2x5xui32>
    %c_0 = stablehlo.constant dense<0> : tensor<1xui64>
    %c_1 = stablehlo.constant dense<2531011> : tensor<i64>
    %c_2 = stablehlo.constant dense<214013> : tensor<i64>
    %0 = stablehlo.multiply %arg1, %c_2 : tensor<i64>
    %1 = stablehlo.add %0, %c_1 : tensor<i64>
    %2 = stablehlo.convert %1 : (tensor<i64>) -> tensor<ui64>
    %3 = stablehlo.reshape %2 : (tensor<ui64>) -> tensor<1xui64>
    %4 = stablehlo.concatenate %3, %c_0, dim = 0 : (tensor<1xui64>, tensor<1xui64>) -> tensor<2xui64>
    %output_state, %output = stablehlo.rng_bit_generator %4, algorithm =  DEFAULT : (tensor<2xui64>) -> (tensor<2xui64>, tensor<2x5xui32>)
    %5 = stablehlo.shift_right_logical %output, %c : tensor<2x5xui32>
    %6 = stablehlo.convert %5 : (tensor<2x5xui32>) -> tensor<2x5xf32>
    %7 = stablehlo.multiply %6, %cst : tensor<2x5xf32>
    %8 = stablehlo.broadcast_in_dim %arg0, dims = [] : (tensor<f32>) -> tensor<2x5xf32>
    %9 = stablehlo.compare  LT, %7, %8 : (tensor<2x5xf32>, tensor<2x5xf32>) -> tensor<2x5xi1>
    %10 = stablehlo.convert %9 : (tensor<2x5xi1>) -> tensor<2x5xf32>
    %11 = stablehlo.divide %10, %8 : tensor<2x5xf32>
    return %11 : tensor<2x5xf32>
  }
}
