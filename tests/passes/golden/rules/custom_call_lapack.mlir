// rule: NarrowCustomCall
// A double-precision LAPACK kernel is renamed to its single-precision twin.
func.func @main(%x: tensor<3x3xf64>) -> tensor<3x3xf64> {
  %0 = stablehlo.custom_call @lapack_dpotrf_ffi(%x) {mhlo.backend_config = {uplo = 76 : ui8}, operand_layouts = [dense<[0, 1]> : tensor<2xindex>], result_layouts = [dense<[0, 1]> : tensor<2xindex>]} : (tensor<3x3xf64>) -> tensor<3x3xf64>
  return %0 : tensor<3x3xf64>
}
// ----- output
module {
  func.func @main(%arg0: tensor<3x3xf32>) -> tensor<3x3xf32> {
    %0 = stablehlo.custom_call @lapack_spotrf_ffi(%arg0) {mhlo.backend_config = {uplo = 76 : ui8}, operand_layouts = [dense<[0, 1]> : tensor<2xindex>], result_layouts = [dense<[0, 1]> : tensor<2xindex>]} : (tensor<3x3xf32>) -> tensor<3x3xf32>
    return %0 : tensor<3x3xf32>
  }
}
// ----- findings
info custom-call-renamed stablehlo.custom_call @lapack_dpotrf_ffi @2 x1
info type-narrowed func.func @1 x2
info type-narrowed stablehlo.custom_call @2 x1
