// rule: NarrowCustomCall
// A custom_call x64guard cannot know the 32-bit version of is refused.
func.func @main(%x: tensor<2xf64>) -> tensor<2xf64> {
  %0 = stablehlo.custom_call @my_kernel(%x) : (tensor<2xf64>) -> tensor<2xf64>
  return %0 : tensor<2xf64>
}
// ----- output
// refused
// ----- findings
error custom-call stablehlo.custom_call @my_kernel @2 x1
info type-narrowed func.func @1 x2
info type-narrowed stablehlo.custom_call @2 x1
