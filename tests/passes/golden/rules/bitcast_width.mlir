// rule: NarrowBitcastConvert
// A bitcast that would no longer reinterpret the same bits is refused.
func.func @main(%x: tensor<3xf64>) -> tensor<3x2xui32> {
  %0 = stablehlo.bitcast_convert %x : (tensor<3xf64>) -> tensor<3x2xui32>
  return %0 : tensor<3x2xui32>
}
// ----- output
// refused
// ----- findings
error bitcast-width stablehlo.bitcast_convert @2 x1
info type-narrowed func.func @1 x2
