// rule: NarrowConstant
// An integer the 32-bit type cannot hold is refused (overflow='error', the default).
func.func @main() -> tensor<2xi64> {
  %0 = stablehlo.constant dense<[1, 4294967296]> : tensor<2xi64>
  return %0 : tensor<2xi64>
}
// ----- output
// refused
// ----- findings
error constant-out-of-range stablehlo.constant @2 x1
info type-narrowed func.func @1 x1
info type-narrowed stablehlo.constant @2 x1
