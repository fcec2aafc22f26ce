"""Casts: identity converts removed, bitcast widths checked, reduce_precision formats kept."""

import numpy as np
import pytest

from tests.conftest import narrow_quietly, refusal, wide_types
from tests.corpus.oracle import run_text
from tests.passes.test_golden import REFUSED, RULES, parse_case
from x64guard.passes.patterns.casts import bitcast_is_valid
from x64guard.passes.values import narrow_values

KNOWN_CONVERTS = sorted(RULES.glob("convert_known_*.mlir"))
_WIDE_RESULT = {np.dtype(np.int64): ("i64", "i32"), np.dtype(np.uint64): ("ui64", "ui32")}


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


@pytest.mark.parametrize("path", KNOWN_CONVERTS, ids=[case.stem for case in KNOWN_CONVERTS])
def test_converts_of_known_values_compute_the_64bit_results_or_are_refused(path):
    """The golden cases of ConvertOutOfRange, compiled and run: where the pass narrows, the
    narrowed module returns the 64-bit module's results narrowed as constants are (sentinels
    to sentinels, wrapped where overflow='wrap' asks); where it refuses a convert, the module
    narrowed anyway (overflow='wrap') returns other values: the refusal is not spurious."""
    options, text, expected_output, findings = parse_case(path)
    refused = expected_output.strip() == REFUSED
    convert_refused = any(line.startswith("error") and "stablehlo.convert" in line for line in findings)
    overflow = "wrap" if refused else str(options.get("overflow", "error"))
    narrowed = run_text(narrow_quietly(text, overflow=overflow).text, [])
    for wide, got in zip(run_text(text, []), narrowed, strict=True):
        if convert_refused:  # every value of these cases is out of range: each one changes
            assert (wide.astype(object) != got.astype(object)).all(), (wide, got)
            continue
        if wide.dtype in _WIDE_RESULT:
            wide = narrow_values(wide, *_WIDE_RESULT[wide.dtype], overflow).values
        assert np.array_equal(wide, got), (wide, got)


@pytest.mark.parametrize("constant, source, result, refused", [
    ("dense<3.0e9>", "f32", "i64", True),             # an operand narrowing leaves as it is
    ("dense<4294967295>", "ui32", "i64", True),
    ("dense<-2>", "i64", "ui64", True),               # 2**64-2 in uint64
    ("dense<-1>", "i64", "ui64", False),              # UINT64_MAX: a sentinel, uint32's maximum narrowed
    ("dense<[3.0, 1.0]>", "2xbf16", "2xi64", False),  # values the bindings cannot read: not judged
    ("dense<[3, 1]>", "2xi4", "2xi64", False),
])
def test_convert_of_a_known_value_refused_only_when_its_result_does_not_fit(constant, source, result, refused):
    text = f"""
func.func @main() -> tensor<{result}> {{
  %c = stablehlo.constant {constant} : tensor<{source}>
  %0 = stablehlo.convert %c : (tensor<{source}>) -> tensor<{result}>
  return %0 : tensor<{result}>
}}"""
    if refused:
        finding = next(f for f in refusal(text).findings if f.severity == "error")
        assert (finding.kind, finding.op, finding.location.line) == ("constant-out-of-range", "stablehlo.convert", 4)
        assert "do not fit in" in finding.message and "mode='allow'" in finding.message
    else:
        assert "stablehlo.convert" in narrow_quietly(text).text
