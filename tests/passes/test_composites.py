"""Composites standing for CHLO ops are restored, their float64 decompositions dropped."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export

import x64guard
from tests.conftest import narrow_quietly, wide_types
from tests.corpus.oracle import bit_identical, run_oracle, run_text, x64


def exported(fn, *args):
    with x64(True):
        return export.export(jax.jit(fn))(*args)


X = np.linspace(-1, 1, 7)


@pytest.mark.parametrize("name, fn", [
    ("erf", lambda x: jax.lax.erf(x)),
    ("top_k", lambda x: jax.lax.top_k(x, 3)),
    ("asinh", lambda x: jnp.arcsinh(x)),
])
def test_chlo_composites_are_restored_and_bit_identical(name, fn):
    artifact = exported(fn, X).mlir_module_serialized
    result = narrow_quietly(artifact)
    assert f"chlo.{name}" in result.text
    assert "stablehlo.composite" not in result.text and ".impl" not in result.text
    assert wide_types(result.module) == []
    restored = [f for f in result.findings if f.kind == "composite-restored"]
    assert restored and (restored[0].location.file or "").endswith("test_composites.py")
    got = run_text(result.text, [X.astype(np.float32)])
    want = run_oracle(fn, [X.astype(np.float32)])
    assert all(bit_identical(g, w) for g, w in zip(got, want))


def test_decomposition_with_float64_only_constants_is_not_a_blocker():
    # chlo.erf's float64 decomposition holds constants such as -709.78 and 1e308-scale
    # bounds; check and narrow agree that restoring the op makes them irrelevant.
    artifact = exported(lambda x: jax.lax.erf(x) * 2, X).mlir_module_serialized
    report = x64guard.check(artifact)
    assert {f.kind for f in report.findings} >= {"composite-restored"}
    assert not [f for f in report.findings if f.kind.startswith("constant")]


def test_portable_artifacts_carry_a_warning_about_expanded_chlo():
    artifact = exported(lambda x: jax.lax.lgamma(x + 2), X).mlir_module_serialized
    with pytest.warns(x64guard.X64GuardWarning) as record:
        result = x64guard.narrow(artifact)
    assert any(f.kind == "serialized-chlo" for f in result.findings)
    assert any("serialized-chlo" in str(w.message) for w in record)
