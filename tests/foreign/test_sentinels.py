"""Sentinels are values, whatever their signedness (issue 15, reproduction 4).

JAX's shape-polymorphic index clamp (vmap of dynamic_update_slice under jax.export) holds
INT64_MAX; spelled as a ui64 constant converted to i64 it used to be refused, and with
overflow='saturate'/'wrap' became 4294967295 : ui32, which the convert turned into -1:
every index -1. The narrowed export must compute what JAX's x32 export computes, bit for
bit, on the CPU.
"""

from __future__ import annotations

import dataclasses
import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export, lax

import x64guard
from tests.conftest import narrow_quietly
from tests.corpus.oracle import run_text, x64
from x64guard.passes.values import narrow_integers, narrow_scalar

INT64_MAX, INT32_MAX = 2**63 - 1, 2**31 - 1


@pytest.mark.parametrize("values", [np.array(INT64_MAX, np.uint64), np.array([INT64_MAX, 7, 0], np.uint64)])
@pytest.mark.parametrize("overflow", ["error", "saturate", "wrap"])
def test_int64_max_in_ui64_maps_as_int64_max_does(values, overflow):
    unsigned = narrow_integers(values, "ui64", "ui32", overflow)
    signed = narrow_integers(values.astype(np.int64), "i64", "i32", overflow)
    assert unsigned.out_of_range == signed.out_of_range == 0
    assert unsigned.values.astype(np.int64).tolist() == signed.values.astype(np.int64).tolist()
    assert INT32_MAX in np.atleast_1d(unsigned.values).tolist()
    assert int(narrow_scalar(INT64_MAX, "ui64", "ui32", overflow).values) == INT32_MAX


def test_saturation_never_turns_a_maximum_into_minus_one_through_a_convert():
    """A uint64 beyond uint32's range saturates to 2**31-1 (held by int32 and uint32 alike),
    not 2**32-1, which a later convert to a signed type reads as -1."""
    text = """
func.func @main(%x: tensor<3xi64>) -> tensor<3xi64> {
  %c = stablehlo.constant dense<[1099511627776, 18446744073709551614, 5]> : tensor<3xui64>
  %s = stablehlo.convert %c : (tensor<3xui64>) -> tensor<3xi64>
  %m = stablehlo.minimum %x, %s : tensor<3xi64>
  return %m : tensor<3xi64>
}"""
    result = narrow_quietly(text, overflow="saturate")
    assert [f.kind for f in result.findings if f.severity is x64guard.Severity.WARNING] == ["constant-out-of-range"]
    (out,) = run_text(result.text, [np.array([100, 100, 100], np.int32)])
    assert out.tolist() == [100, 100, 5]  # a saturated maximum stays a maximum (was -1, -1)


def _clamp(x, u, i):
    return jax.vmap(lambda a, b, j: lax.dynamic_update_slice(a, b, (j,)))(x, u, i)


def _export(index_dtype, enable_x64: bool) -> export.Exported:
    with x64(enable_x64), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x_shape = export.symbolic_shape("b, n", constraints=("n >= 3",))
        u_shape = export.symbolic_shape("b, 3", scope=x_shape[0].scope)
        return export.export(jax.jit(_clamp))(
            jax.ShapeDtypeStruct(x_shape, jnp.float32), jax.ShapeDtypeStruct(u_shape, jnp.float32),
            jax.ShapeDtypeStruct((x_shape[0],), index_dtype))


_JAX_CLAMP = re.compile(r"(%\w+) = stablehlo.constant dense<9223372036854775807> : tensor<i64>")


def _ui64_spelling(text: str) -> str:
    """INT64_MAX as a ui64 constant converted to i64, as the issue's modules have it."""
    match = _JAX_CLAMP.search(text)
    assert match, "JAX's clamp constant is not in the export any more"
    name = match.group(1)
    return _JAX_CLAMP.sub(
        f"{name}_u = stablehlo.constant dense<9223372036854775807> : tensor<ui64>\n"
        f"    {name} = stablehlo.convert {name}_u : (tensor<ui64>) -> tensor<i64>", text, count=1)


_NARROW = {np.dtype(np.int64): np.dtype(np.int32), np.dtype(np.uint64): np.dtype(np.uint32)}


def _narrowed_export(exported: export.Exported, text: str, overflow: str) -> export.Exported:
    """The x64 export with its module narrowed and its avals made 32-bit."""
    result = narrow_quietly(text, overflow=overflow)
    assert not [f for f in result.findings if f.severity is not x64guard.Severity.INFO], result.findings
    avals = tuple(a.update(dtype=_NARROW.get(a.dtype, a.dtype)) for a in exported.in_avals)
    return dataclasses.replace(exported, mlir_module_serialized=result.portable_artifact(), in_avals=avals)


INPUTS = [  # (batch, n): indices below 0, inside, at the clamp, far beyond it
    (4, 6, [0, 2, 5, 1 << 30]),
    (1, 3, [7]),
    (3, 9, [-4, 6, 2**31 - 1]),
]


# The overflow policy only matters for the ui64 spelling (JAX's own i64 one is a sentinel).
COMBINATIONS = [(spelling, index_dtype, overflow) for index_dtype in ("int64", "uint64")
                for spelling, overflow in [("as-jax-writes-it", "error"), ("ui64-constant", "error"),
                                           ("ui64-constant", "saturate"), ("ui64-constant", "wrap")]]


@pytest.mark.parametrize("spelling, index_dtype, overflow", COMBINATIONS)
def test_shape_polymorphic_vmap_dynamic_update_slice_runs_as_x32_jax(spelling, index_dtype, overflow):
    wide = np.dtype(index_dtype)
    exported = _export(wide, True)
    text = exported.mlir_module()
    if spelling == "ui64-constant":
        text = _ui64_spelling(text)
        assert "dense<9223372036854775807> : tensor<ui64>" in text
    narrowed = _narrowed_export(exported, text, overflow)
    reference = _export(_NARROW[wide], False)  # JAX's own x32 export of the same function
    for batch, n, indices in INPUTS:
        if _NARROW[wide].kind == "u":
            indices = [i for i in indices if i >= 0]
            batch = len(indices)
        x = np.arange(batch * n, dtype=np.float32).reshape(batch, n)
        u = -np.arange(1, 3 * batch + 1, dtype=np.float32).reshape(batch, 3)
        i = np.array(indices[:batch] + [0] * (batch - len(indices)), _NARROW[wide])
        with x64(False):
            got = np.asarray(jax.jit(narrowed.call)(x, u, i))
            want = np.asarray(jax.jit(reference.call)(x, u, i))
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), (batch, n, indices, got, want)
        assert (got < 0).any()  # the updates landed


REPRODUCTION = """
func.func @main(%x: tensor<3xi64>) -> tensor<3xi64> {
  %c = stablehlo.constant dense<9223372036854775807> : tensor<ui64>
  %0 = stablehlo.convert %c : (tensor<ui64>) -> tensor<i64>
  %1 = stablehlo.broadcast_in_dim %0, dims = [] : (tensor<i64>) -> tensor<3xi64>
  %2 = stablehlo.minimum %x, %1 : tensor<3xi64>
  return %2 : tensor<3xi64>
}"""


@pytest.mark.parametrize("overflow", ["error", "saturate", "wrap"])
def test_int64_max_spelled_ui64_reproduction_from_the_issue(overflow):
    """Issue 15, reproduction 4: refused by default; with saturate/wrap `4294967295 : ui32`,
    which the convert turned into -1, so every index became -1 with only a warning."""
    result = narrow_quietly(REPRODUCTION, overflow=overflow)
    assert [f.kind for f in result.findings if f.severity is not x64guard.Severity.INFO] == []
    assert "dense<2147483647> : tensor<ui32>" in result.text and "4294967295" not in result.text
    (out,) = run_text(result.text, [np.array([5, -7, 2**31 - 1], np.int32)])
    assert out.tolist() == [5, -7, 2**31 - 1]
