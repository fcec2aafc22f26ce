module @IrToHlo.91 attributes {mhlo.cross_program_prefetches = [], mhlo.input_output_alias = [], mhlo.is_dynamic = false, mhlo.use_auto_spmd_partitioning = false} {
  func.func @main(%arg0: tensor<i64>) -> tensor<3xf32> {
    %cst = stablehlo.constant dense<1.1920929E-7> : tensor<3xf32>
    %c = stablehlo.constant dense<9> : tensor<3xui32>
    %cst_0 = stablehlo.constant dense<1.000000e-07> : tensor<2x1xf32>
    %cst_1 = stablehlo.constant dense<-2.000000e+00> : tensor<2x1xf32>
    %cst_2 = stablehlo.constant dense<1.1920929E-7> : tensor<2x2xf32>
    %c_3 = stablehlo.constant dense<9> : tensor<2x2xui32>
    %cst_4 = stablehlo.constant dense<6.28318548> : tensor<2x1xf32>
    %c_5 = stablehlo.constant dense<0> : tensor<1xui64>
    %c_6 = stablehlo.constant dense<2531011> : tensor<i64>
    %c_7 = stablehlo.constant dense<214013> : tensor<i64>
    %0 = stablehlo.multiply %arg0, %c_7 : tensor<i64>
    %1 = stablehlo.add %0, %c_6 : tensor<i64>
    %2 = stablehlo.multiply %1, %c_7 : tensor<i64>
    %3 = stablehlo.add %2, %c_6 : tensor<i64>
    %4 = stablehlo.convert %3 : (tensor<i64>) -> tensor<ui64>
    %5 = stablehlo.reshape %4 : (tensor<ui64>) -> tensor<1xui64>
    %6 = stablehlo.concatenate %5, %c_5, dim = 0 : (tensor<1xui64>, tensor<1xui64>) -> tensor<2xui64>
    %output_state, %output = stablehlo.rng_bit_generator %6, algorithm =  DEFAULT : (tensor<2xui64>) -> (tensor<2xui64>, tensor<3xui32>)
    %7 = stablehlo.convert %1 : (tensor<i64>) -> tensor<ui64>
    %8 = stablehlo.reshape %7 : (tensor<ui64>) -> tensor<1xui64>
    %9 = stablehlo.concatenate %8, %c_5, dim = 0 : (tensor<1xui64>, tensor<1xui64>) -> tensor<2xui64>
    %output_state_8, %output_9 = stablehlo.rng_bit_generator %9, algorithm =  DEFAULT : (tensor<2xui64>) -> (tensor<2xui64>, tensor<2x2xui32>)
    %10 = stablehlo.shift_right_logical %output_9, %c_3 : tensor<2x2xui32>
    %11 = stablehlo.convert %10 : (tensor<2x2xui32>) -> tensor<2x2xf32>
    %12 = stablehlo.multiply %11, %cst_2 : tensor<2x2xf32>
    %13 = stablehlo.slice %12 [0:2, 1:2] : (tensor<2x2xf32>) -> tensor<2x1xf32>
    %14 = stablehlo.multiply %13, %cst_4 : tensor<2x1xf32>
    %15 = stablehlo.sine %14 : tensor<2x1xf32>
    %16 = stablehlo.slice %12 [0:2, 0:1] : (tensor<2x2xf32>) -> tensor<2x1xf32>
    %17 = stablehlo.maximum %16, %cst_0 : tensor<2x1xf32>
    %18 = stablehlo.log %17 : tensor<2x1xf32>
    %19 = stablehlo.multiply %18, %cst_1 : tensor<2x1xf32>
    %20 = stablehlo.sqrt %19 : tensor<2x1xf32>
    %21 = stablehlo.multiply %15, %20 : tensor<2x1xf32>
    %22 = stablehlo.cosine %14 : tensor<2x1xf32>
    %23 = stablehlo.multiply %22, %20 : tensor<2x1xf32>
    %24 = stablehlo.concatenate %21, %23, dim = 1 : (tensor<2x1xf32>, tensor<2x1xf32>) -> tensor<2x2xf32>
    %25 = stablehlo.reshape %24 : (tensor<2x2xf32>) -> tensor<4xf32>
    %26 = stablehlo.slice %25 [0:3] : (tensor<4xf32>) -> tensor<3xf32>
    %27 = stablehlo.shift_right_logical %output, %c : tensor<3xui32>
    %28 = stablehlo.convert %27 : (tensor<3xui32>) -> tensor<3xf32>
    %29 = stablehlo.multiply %28, %cst : tensor<3xf32>
    %30 = stablehlo.add %26, %29 : tensor<3xf32>
    return %30 : tensor<3xf32>
  }
}
