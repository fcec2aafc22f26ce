module @IrToHlo.60 attributes {mhlo.cross_program_prefetches = [], mhlo.input_output_alias = [], mhlo.is_dynamic = false, mhlo.use_auto_spmd_partitioning = false} {
  func.func @main(%arg0: tensor<i64>) -> tensor<3x4xf64> {
    %cst = stablehlo.constant dense<1.0000000116860974E-7> : tensor<3x2x1xf64>
    %cst_0 = stablehlo.constant dense<-2.000000e+00> : tensor<3x2x1xf64>
    %cst_1 = stablehlo.constant dense<2.2204460492503131E-16> : tensor<3x2x2xf64>
    %c = stablehlo.constant dense<12> : tensor<3x2x2xui64>
    %cst_2 = stablehlo.constant dense<6.2831853071795862> : tensor<3x2x1xf64>
    %c_3 = stablehlo.constant dense<0> : tensor<1xui64>
    %c_4 = stablehlo.constant dense<2531011> : tensor<i64>
    %c_5 = stablehlo.constant dense<214013> : tensor<i64>
    %0 = stablehlo.multiply %arg0, %c_5 : tensor<i64>
    %1 = stablehlo.add %0, %c_4 : tensor<i64>
    %2 = stablehlo.convert %1 : (tensor<i64>) -> tensor<ui64>
    %3 = stablehlo.reshape %2 : (tensor<ui64>) -> tensor<1xui64>
    %4 = stablehlo.concatenate %3, %c_3, dim = 0 : (tensor<1xui64>, tensor<1xui64>) -> tensor<2xui64>
    %output_state, %output = stablehlo.rng_bit_generator %4, algorithm =  DEFAULT : (tensor<2xui64>) -> (tensor<2xui64>, tensor<3x2x2xui64>)
    %5 = stablehlo.shift_right_logical %output, %c : tensor<3x2x2xui64>
    %6 = stablehlo.convert %5 : (tensor<3x2x2xui64>) -> tensor<3x2x2xf64>
    %7 = stablehlo.multiply %6, %cst_1 : tensor<3x2x2xf64>
    %8 = stablehlo.slice %7 [0:3, 0:2, 1:2] : (tensor<3x2x2xf64>) -> tensor<3x2x1xf64>
    %9 = stablehlo.multiply %8, %cst_2 : tensor<3x2x1xf64>
    %10 = stablehlo.sine %9 : tensor<3x2x1xf64>
    %11 = stablehlo.slice %7 [0:3, 0:2, 0:1] : (tensor<3x2x2xf64>) -> tensor<3x2x1xf64>
    %12 = stablehlo.maximum %11, %cst : tensor<3x2x1xf64>
    %13 = stablehlo.log %12 : tensor<3x2x1xf64>
    %14 = stablehlo.multiply %13, %cst_0 : tensor<3x2x1xf64>
    %15 = stablehlo.sqrt %14 : tensor<3x2x1xf64>
    %16 = stablehlo.multiply %10, %15 : tensor<3x2x1xf64>
    %17 = stablehlo.cosine %9 : tensor<3x2x1xf64>
    %18 = stablehlo.multiply %17, %15 : tensor<3x2x1xf64>
    %19 = stablehlo.concatenate %16, %18, dim = 2 : (tensor<3x2x1xf64>, tensor<3x2x1xf64>) -> tensor<3x2x2xf64>
    %20 = stablehlo.reshape %19 : (tensor<3x2x2xf64>) -> tensor<3x4xf64>
    return %20 : tensor<3x4xf64>
  }
}
