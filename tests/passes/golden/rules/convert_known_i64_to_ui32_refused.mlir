// rule: ConvertOutOfRange
// i64 -> ui32 just outside int32's range, both sides: 2**31 and -2**31-1 do not fit the
// narrowed operand type, so the constant is refused (the convert's result, a uint32, fits;
// nothing more is reported at the convert).
func.func @main() -> tensor<2xui32> {
  %c = stablehlo.constant dense<[-2147483649, 2147483648]> : tensor<2xi64>
  %0 = stablehlo.convert %c : (tensor<2xi64>) -> tensor<2xui32>
  return %0 : tensor<2xui32>
}
// ----- output
// refused
// ----- findings
error constant-out-of-range stablehlo.constant @2 x1
info type-narrowed stablehlo.constant @2 x1
