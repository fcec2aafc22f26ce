// rule: RbgWideDraw
// A 64-bit draw from rng_bit_generator becomes a 32-bit draw from the same (kept 64-bit) state, as x32 JAX draws.
func.func @main(%state: tensor<2xui64>) -> tensor<4xf64> {
  %s, %bits = stablehlo.rng_bit_generator %state, algorithm = DEFAULT : (tensor<2xui64>) -> (tensor<2xui64>, tensor<4xui64>)
  %c = stablehlo.constant dense<12> : tensor<4xui64>
  %0 = stablehlo.shift_right_logical %bits, %c : tensor<4xui64>
  %1 = stablehlo.bitcast_convert %0 : (tensor<4xui64>) -> tensor<4xf64>
  return %1 : tensor<4xf64>
}
// ----- output
module {
  func.func @main(%arg0: tensor<2xui64>) -> tensor<4xf32> {
    %output_state, %output = stablehlo.rng_bit_generator %arg0, algorithm = DEFAULT : (tensor<2xui64>) -> (tensor<2xui64>, tensor<4xui32>)
    %c = stablehlo.constant dense<12> : tensor<4xui32>
    %0 = stablehlo.shift_right_logical %output, %c : tensor<4xui32>
    %1 = stablehlo.bitcast_convert %0 : (tensor<4xui32>) -> tensor<4xf32>
    return %1 : tensor<4xf32>
  }
}
// ----- findings
info rng-draw stablehlo.rng_bit_generator @2 x1
info rng-state stablehlo.rng_bit_generator @2 x1
info type-narrowed func.func @1 x1
info type-narrowed stablehlo.convert @2 x1
info type-narrowed stablehlo.constant @3 x1
info type-narrowed stablehlo.shift_right_logical @4 x1
info type-narrowed stablehlo.bitcast_convert @5 x1
