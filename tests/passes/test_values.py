"""The pure value rules: rounding, sentinels, ranges, overflow policies."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from x64guard.passes.values import exact_scalar, narrow_floats, narrow_integers, narrow_scalar, narrow_values


def test_floats_round_to_nearest_even_like_numpy():
    values = np.array([np.pi, 0.1, 1 / 3, 1e-3, -2.5, 16777217.0])
    out = narrow_floats(values, "error")
    assert out.values.dtype == np.float32
    assert out.values.tobytes() == values.astype(np.float32).tobytes()
    assert np.float32(np.pi) == np.float32(3.1415927)  # round to nearest, not toward zero
    assert out.out_of_range == 0


def test_float64_max_is_a_sentinel():
    out = narrow_floats(np.array([np.finfo(np.float64).max, -np.finfo(np.float64).max]), "error")
    assert out.sentinels == 2 and out.out_of_range == 0
    assert list(out.values) == [np.finfo(np.float32).max, -np.finfo(np.float32).max]


def test_finite_floats_beyond_f32_are_out_of_range_and_policies_apply():
    values = np.array([1e300, -1e39, np.inf, np.nan])
    assert narrow_floats(values, "error").out_of_range == 2
    saturated = narrow_floats(values, "saturate").values
    assert saturated[0] == np.finfo(np.float32).max and saturated[1] == -np.finfo(np.float32).max
    assert np.isinf(saturated[2]) and np.isnan(saturated[3])
    wrapped = narrow_floats(values, "wrap").values
    assert np.isposinf(wrapped[0]) and np.isneginf(wrapped[1])


def test_underflow_is_counted():
    assert narrow_floats(np.array([1e-300, 0.0, 1.0]), "error").underflow == 1


def test_integer_sentinels_saturate_exactly():
    values = np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).max, 7], dtype=np.int64)
    out = narrow_integers(values, "i64", "i32", "error")
    assert out.sentinels == 2 and out.out_of_range == 0
    assert list(out.values) == [np.iinfo(np.int32).min, np.iinfo(np.int32).max, 7]
    u = narrow_integers(np.array([2**64 - 1, 5], dtype=np.uint64), "ui64", "ui32", "error")
    assert list(u.values) == [2**32 - 1, 5] and u.values.dtype == np.uint32


def test_out_of_range_integers_and_policies():
    values = np.array([3_000_000_000, 2**40, -(2**31) - 1, 1], dtype=np.int64)
    out = narrow_integers(values, "i64", "i32", "error")
    assert out.out_of_range == 3 and out.examples[:2] == [3_000_000_000, 2**40]
    assert list(narrow_integers(values, "i64", "i32", "saturate").values) == [2**31 - 1, 2**31 - 1, -(2**31), 1]
    assert list(narrow_integers(values, "i64", "i32", "wrap").values) == [-1294967296, 0, 2**31 - 1, 1]
    assert narrow_integers(np.array([2**33], np.uint64), "ui64", "ui32", "error").out_of_range == 1


def test_complex_parts_narrow_independently():
    values = np.array([np.pi + 1j * 0.1, 1e300 + 1j])
    out = narrow_values(values, "complex<f64>", "complex<f32>", "error")
    assert out.values.dtype == np.complex64
    assert out.values[0].real == np.float32(np.pi) and out.values[0].imag == np.float32(0.1)
    assert out.out_of_range == 1


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.floats(allow_nan=False, width=64), st.integers(-(2**63), 2**63 - 1)))
def test_scalar_fast_paths_agree_with_the_array_rule(value):
    if isinstance(value, float):
        wide, narrow = "f64", "f32"
    else:
        wide, narrow = "i64", "i32"
    array_rule = narrow_values(np.array(value, dtype=np.float64 if wide == "f64" else np.int64), wide, narrow, "error")
    scalar_rule = narrow_scalar(value, wide, narrow, "error")
    assert scalar_rule.values.tobytes() == array_rule.values.tobytes()
    assert (scalar_rule.out_of_range, scalar_rule.sentinels) == (array_rule.out_of_range, array_rule.sentinels)
    exact = exact_scalar(value, narrow)
    if exact is not None:  # the hot path only answers when nothing needs reporting
        assert array_rule.out_of_range == 0 and array_rule.sentinels == 0 and array_rule.underflow == 0
        assert array_rule.to_one == 0
        assert np.array(exact, dtype=array_rule.values.dtype).tobytes() == array_rule.values.tobytes()


# --- dtype-derived constants and boundary collapses ---------------------------------------------

def test_collapses_onto_one_and_zero_are_counted_with_examples():
    out = narrow_floats(np.array([1 - 1e-12, -(1 + 1e-9), 1.0, -1.0, 1e-300, 0.0, 0.5]), "error")
    assert (out.to_one, out.underflow) == (2, 1)
    assert out.to_one_examples == [1 - 1e-12, -(1 + 1e-9)] and out.underflow_examples == [1e-300]


def test_collapses_are_counted_across_chunks_with_few_examples():
    from x64guard.passes.values import _count_collapses, NarrowedValues
    values = np.full(10, 1 - 1e-12)
    out = NarrowedValues(values=values.astype(np.float32))
    _count_collapses(values, out.values, out, chunk=3)
    assert out.to_one == 10 and len(out.to_one_examples) == 3


def test_substitute_dtype_constants():
    from x64guard.passes.values import substitute_dtype_constants
    f64, f32 = np.finfo(np.float64), np.finfo(np.float32)
    values = np.array([[f64.eps, 2.0, 1 - f64.eps], [-f64.tiny, 0.0, 7 * f64.eps]])
    before = values.copy()
    out, hits = substitute_dtype_constants(values, chunk=4)  # a chunk boundary inside the array
    assert values.tobytes() == before.tobytes()  # never modified
    assert out.astype(np.float32).tolist() == [[f32.eps, 2.0, 1 - f32.eps], [-f32.tiny, 0.0, 7 * f32.eps]]
    assert sorted(row.named("T") for row in hits) == ["-finfo(T).tiny", "1 - finfo(T).eps", "7 * finfo(T).eps",
                                                       "finfo(T).eps"]
    plain = np.array([1.0, -1.0, 0.5, 1e-13])
    same, none = substitute_dtype_constants(plain)
    assert same is plain and not none


def test_substitute_dtype_constants_in_complex_parts():
    from x64guard.passes.values import substitute_dtype_constants
    eps = np.finfo(np.float64).eps
    values = np.array([complex(eps, -0.0), complex(np.inf, -eps), complex(np.nan, 2.0)])
    out, hits = substitute_dtype_constants(values, chunk=2)
    assert out.real[0] == np.finfo(np.float32).eps and np.signbit(out.imag[0])
    assert np.isposinf(out.real[1]) and out.imag[1] == -np.finfo(np.float32).eps
    assert np.isnan(out.real[2]) and out.imag[2] == 2.0
    assert sum(hits.values()) == 2


@settings(max_examples=300, deadline=None)
@given(st.floats(allow_nan=True, allow_infinity=True, width=64))
def test_array_and_scalar_lookups_agree(value):
    from x64guard.passes.tables import dtype_constant
    from x64guard.passes.values import substitute_dtype_constants
    row = dtype_constant(value)
    out, hits = substitute_dtype_constants(np.array([value]))
    if row is None:
        assert not hits
    else:
        assert list(hits) == [row] and out[0] == row.narrow
