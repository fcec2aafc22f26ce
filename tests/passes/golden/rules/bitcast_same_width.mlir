// rule: NarrowBitcastConvert
// A bitcast between 64-bit types stays a bitcast between their 32-bit counterparts.
func.func @main(%x: tensor<3xf64>) -> tensor<3xi64> {
  %0 = stablehlo.bitcast_convert %x : (tensor<3xf64>) -> tensor<3xi64>
  return %0 : tensor<3xi64>
}
// ----- output
module {
  func.func @main(%arg0: tensor<3xf32>) -> tensor<3xi32> {
    %0 = stablehlo.bitcast_convert %arg0 : (tensor<3xf32>) -> tensor<3xi32>
    return %0 : tensor<3xi32>
  }
}
// ----- findings
info type-narrowed func.func @1 x2
info type-narrowed stablehlo.bitcast_convert @2 x1
