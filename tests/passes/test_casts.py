"""Casts: identity converts removed, bitcast widths checked, reduce_precision formats kept."""

import pytest

from tests.conftest import narrow_quietly, refusal, wide_types
from x64guard.passes.patterns.casts import bitcast_is_valid


def test_convert_that_becomes_identity_is_removed():
    result = narrow_quietly("""
func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  %0 = stablehlo.convert %x : (tensor<3xf32>) -> tensor<3xf64>
  %1 = stablehlo.multiply %0, %0 : tensor<3xf64>
  %2 = stablehlo.convert %1 : (tensor<3xf64>) -> tensor<3xf32>
  return %2 : tensor<3xf32>
}""")
    assert "stablehlo.convert" not in result.text
    assert "stablehlo.multiply %arg0, %arg0 : tensor<3xf32>" in result.text
    assert result.module.operation.verify()


def test_real_converts_stay():
    result = narrow_quietly("""
func.func @main(%x: tensor<3xi64>) -> tensor<3xf64> {
  %0 = stablehlo.convert %x : (tensor<3xi64>) -> tensor<3xf64>
  return %0 : tensor<3xf64>
}""")
    assert "stablehlo.convert %arg0 : (tensor<3xi32>) -> tensor<3xf32>" in result.text


def test_same_width_bitcast_narrows():
    result = narrow_quietly("""
func.func @main(%x: tensor<3xf64>) -> tensor<3xi64> {
  %0 = stablehlo.bitcast_convert %x : (tensor<3xf64>) -> tensor<3xi64>
  return %0 : tensor<3xi64>
}""")
    assert "(tensor<3xf32>) -> tensor<3xi32>" in result.text


@pytest.mark.parametrize("signature", [
    "(tensor<3xf64>) -> tensor<3x2xui32>",
    "(tensor<3x2xui32>) -> tensor<3xf64>",
    "(tensor<3xi64>) -> tensor<3x4xf16>",
])
def test_width_changing_bitcast_is_refused_with_location(signature):
    operand, result = signature.split(" -> ")
    operand = operand.strip("()")
    error = refusal(f"""
func.func @main(%x: {operand}) -> {result} {{
  %0 = stablehlo.bitcast_convert %x : {signature}
  return %0 : {result}
}}""")
    finding = next(f for f in error.findings if f.kind == "bitcast-width")
    assert finding.op == "stablehlo.bitcast_convert" and finding.location.line == 3
    assert "mode='allow'" in finding.message


def test_bitcast_validity_rule():
    from jax.extend.mlir import ir
    from x64guard.io.modules import make_context
    with make_context():
        t = ir.Type.parse
        assert bitcast_is_valid(t("tensor<3xf32>"), t("tensor<3xi32>"))
        assert bitcast_is_valid(t("tensor<3xf64>"), t("tensor<3x2xui32>"))
        assert not bitcast_is_valid(t("tensor<3xf32>"), t("tensor<3x2xui32>"))
        assert bitcast_is_valid(t("tensor<3x2xui32>"), t("tensor<3xf64>"))


def test_reduce_precision_keeps_its_format_as_x32_jax_does():
    result = narrow_quietly("""
func.func @main(%x: tensor<3xf64>) -> tensor<3xf64> {
  %0 = stablehlo.reduce_precision %x, format = e11m52 : tensor<3xf64>
  %1 = stablehlo.reduce_precision %0, format = e5m10 : tensor<3xf64>
  return %1 : tensor<3xf64>
}""")
    assert "format = e11m52 : tensor<3xf32>" in result.text
    assert "format = e5m10 : tensor<3xf32>" in result.text
    assert wide_types(result.module) == []


def test_chained_identity_converts_are_all_removed():
    """Regression: erasing the first of two identity converts left the second holding a
    dangling value (a segfault), found by the differential corpus."""
    result = narrow_quietly("""
func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  %0 = stablehlo.convert %x : (tensor<3xf32>) -> tensor<3xf64>
  %1 = stablehlo.convert %0 : (tensor<3xf64>) -> tensor<3xf32>
  %2 = stablehlo.convert %1 : (tensor<3xf32>) -> tensor<3xf64>
  %3 = stablehlo.convert %2 : (tensor<3xf64>) -> tensor<3xf32>
  return %3 : tensor<3xf32>
}""")
    assert "stablehlo.convert" not in result.text
    assert "return %arg0 : tensor<3xf32>" in result.text
