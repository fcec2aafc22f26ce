"""Constants are data: rounded, range-checked, sentinels saturated, every form read."""

import numpy as np
import pytest

import x64guard
from tests.conftest import kinds, narrow_quietly, refusal, wide_types


def const_module(literal: str, ty: str) -> str:
    return f"""
func.func @main() -> {ty} {{
  %0 = stablehlo.constant {literal} : {ty}
  return %0 : {ty}
}}"""


def narrowed_constant_text(literal, ty, **kw):
    result = narrow_quietly(const_module(literal, ty), **kw)
    assert wide_types(result.module) == []
    return result


def constant_values(result) -> np.ndarray:
    """Run nothing: read the narrowed constant back through x64guard's own reader."""
    from x64guard.passes.constant_io import read_constant
    op = result.module.body.operations[0].regions[0].blocks[0].operations[0]
    values, splat = read_constant(op, op.results[0].type)
    return values


def test_float_constants_round_to_nearest_even():
    result = narrowed_constant_text("dense<[3.1415926535897931, 0.1, 16777217.0]>", "tensor<3xf64>")
    got = constant_values(result)
    expected = np.array([np.pi, 0.1, 16777217.0]).astype(np.float32)
    assert got.dtype == np.float32 and got.tobytes() == expected.tobytes()


def test_splat_and_scalar_constants():
    result = narrowed_constant_text("dense<2.5>", "tensor<4x4xf64>")
    assert "dense<2.500000e+00> : tensor<4x4xf32>" in result.text
    result = narrowed_constant_text("dense<7>", "tensor<ui64>")
    assert "dense<7> : tensor<ui32>" in result.text


def test_scalar_arith_constant():
    result = narrow_quietly("""
func.func @main() -> i64 {
  %0 = arith.constant 5 : i64
  return %0 : i64
}""")
    assert "arith.constant 5 : i32" in result.text


@pytest.mark.parametrize("literal, ty, expected", [
    ("dense<-9223372036854775808>", "tensor<i64>", "dense<-2147483648> : tensor<i32>"),
    ("dense<9223372036854775807>", "tensor<i64>", "dense<2147483647> : tensor<i32>"),
    ("dense<18446744073709551615>", "tensor<ui64>", "dense<4294967295> : tensor<ui32>"),
    ("dense<0xFFF0000000000000>", "tensor<f64>", "dense<0xFF800000> : tensor<f32>"),
    ("dense<1.7976931348623157E+308>", "tensor<f64>", "dense<3.40282347E+38> : tensor<f32>"),
    ("dense<-1.7976931348623157E+308>", "tensor<f64>", "dense<-3.40282347E+38> : tensor<f32>"),
])
def test_sentinels_saturate_exactly(literal, ty, expected):
    assert expected in narrowed_constant_text(literal, ty).text


@pytest.mark.parametrize("mode", ["warn", "allow"])
@pytest.mark.parametrize("literal, ty, kind", [
    ("dense<3000000000>", "tensor<i64>", "constant-out-of-range"),
    ("dense<[1, 1099511627776]>", "tensor<2xi64>", "constant-out-of-range"),
    ("dense<8589934592>", "tensor<ui64>", "constant-out-of-range"),
    ("dense<1.0e+300>", "tensor<f64>", "constant-overflow"),
    ("dense<[(1.0e+300, 0.0)]>", "tensor<1xcomplex<f64>>", "constant-overflow"),
])
def test_out_of_range_constants_are_errors_in_every_mode(literal, ty, kind, mode):
    text = const_module(literal, ty)
    if mode == "warn":
        error = refusal(text)
        finding = next(f for f in error.findings if f.kind == kind)
    else:
        result = narrow_quietly(text, mode="allow")
        finding = next(f for f in result.findings if f.kind == kind)
        assert "64" in result.text.split("stablehlo.constant")[1].split("\n")[0]  # unchanged
    assert finding.severity == "error" and finding.op == "stablehlo.constant"
    assert finding.location.line == 3
    assert "overflow='saturate'" in finding.message


@pytest.mark.parametrize("overflow, expected", [("saturate", "dense<2147483647>"), ("wrap", "dense<-1294967296>")])
def test_overflow_policy_is_applied_and_still_reported(overflow, expected):
    with pytest.warns(x64guard.X64GuardWarning) as record:
        result = x64guard.narrow(const_module("dense<3000000000>", "tensor<i64>"), overflow=overflow)
    assert any("constant-out-of-range" in str(w.message) for w in record)
    assert expected in result.text
    assert any(f.kind == "constant-out-of-range" and f.severity == "warning" for f in result.findings)


def test_complex_constants_list_and_splat_and_special_values():
    result = narrowed_constant_text(
        "dense<[(3.1415926535897931, 0.1), (0x7FF0000000000000, -2.5)]>", "tensor<2xcomplex<f64>>")
    got = constant_values(result)
    expected = np.array([np.pi + 0.1j, complex(np.inf, -2.5)]).astype(np.complex64)
    assert got.dtype == np.complex64 and got.tobytes() == expected.tobytes()
    splat = narrowed_constant_text("dense<(1.5, -2.0)>", "tensor<3xcomplex<f64>>")
    assert constant_values(splat).tolist() == 1.5 - 2j  # still a splat


def test_large_complex_constant_printed_as_hex():
    values = (np.arange(300) * (np.pi + 1j / 3)).astype(np.complex128)
    literal = 'dense<"0x' + values.tobytes().hex().upper() + '">'
    got = constant_values(narrowed_constant_text(literal, "tensor<300xcomplex<f64>>"))
    assert got.tobytes() == values.astype(np.complex64).tobytes()


def test_dense_resource_constants():
    values = np.array([np.pi, -1.0, 1e-3])
    blob = (np.uint32(8).tobytes() + values.tobytes()).hex().upper()
    text = f"""
func.func @main() -> tensor<3xf64> {{
  %0 = stablehlo.constant dense_resource<blob1> : tensor<3xf64>
  return %0 : tensor<3xf64>
}}
{{-#
  dialect_resources: {{ builtin: {{ blob1: "0x{blob}" }} }}
#-}}"""
    result = narrow_quietly(text)
    assert wide_types(result.module) == []
    assert constant_values(result).tobytes() == values.astype(np.float32).tobytes()


def test_underflow_is_a_warning():
    with pytest.warns(x64guard.X64GuardWarning) as record:
        result = x64guard.narrow(const_module("dense<[1.0e-300, 1.0]>", "tensor<2xf64>"))
    assert any("constant-underflow" in str(w.message) for w in record)
    assert "constant-underflow" in kinds(result.findings)


def test_identical_splats_share_one_narrowed_attribute():
    text = """
func.func @main(%x: tensor<3xf64>) -> tensor<3xf64> {
  %0 = stablehlo.constant dense<0.5> : tensor<3xf64>
  %1 = stablehlo.constant dense<0.5> : tensor<3xf64>
  %2 = stablehlo.add %x, %0 : tensor<3xf64>
  %3 = stablehlo.add %2, %1 : tensor<3xf64>
  return %3 : tensor<3xf64>
}"""
    result = narrow_quietly(text)
    assert result.text.count("dense<5.000000e-01> : tensor<3xf32>") == 2
