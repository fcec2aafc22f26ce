"""custom_call: LAPACK kernels renamed (and proven by running them), others refused."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.conftest import narrow_quietly, refusal
from tests.runner import lower_x64, run_narrowed, run_x32


def test_unknown_custom_call_with_64bit_types_is_refused_naming_the_target():
    error = refusal("""
func.func @main(%x: tensor<3xf64>) -> tensor<3xf64> {
  %0 = stablehlo.custom_call @my_fancy_kernel(%x) : (tensor<3xf64>) -> tensor<3xf64>
  return %0 : tensor<3xf64>
}""")
    finding = next(f for f in error.findings if f.kind == "custom-call")
    assert "@my_fancy_kernel" in finding.op and "@my_fancy_kernel" in finding.message
    assert "line 3" in finding.location


def test_custom_call_without_64bit_types_is_left_alone():
    result = narrow_quietly("""
func.func @main(%x: tensor<3xf32>, %y: tensor<3xf64>) -> (tensor<3xf32>, tensor<3xf64>) {
  %0 = stablehlo.custom_call @my_fancy_kernel(%x) : (tensor<3xf32>) -> tensor<3xf32>
  return %0, %y : tensor<3xf32>, tensor<3xf64>
}""")
    assert "@my_fancy_kernel" in result.text


def test_type_generic_custom_call_narrows():
    result = narrow_quietly("""
func.func @main(%x: tensor<3xf64>) -> tensor<3xf64> {
  %0 = stablehlo.custom_call @Sharding(%x) {mhlo.sharding = "{replicated}"} : (tensor<3xf64>) -> tensor<3xf64>
  return %0 : tensor<3xf64>
}""")
    assert "@Sharding(%arg0) {mhlo.sharding = \"{replicated}\"} : (tensor<3xf32>) -> tensor<3xf32>" in result.text


def _spd(n=4):
    a = np.arange(n * n, dtype=np.float64).reshape(n, n) / 7.0 + np.eye(n)
    return a @ a.T + n * np.eye(n)


LINALG = {
    "inv": (lambda a: jnp.linalg.inv(a), (_spd(),)),
    "solve": (lambda a, b: jnp.linalg.solve(a, b), (_spd(), np.arange(4.0))),
    "eigh": (lambda a: jnp.linalg.eigh(a)[0], (_spd(),)),
    "svd": (lambda a: jnp.linalg.svd(a, compute_uv=False), (_spd(),)),
    "qr": (lambda a: jnp.linalg.qr(a)[1], (_spd(),)),
    "cholesky": (lambda a: jnp.linalg.cholesky(a), (_spd(),)),
    "complex_inv": (lambda a: jnp.linalg.inv(a), (_spd() + 1j * np.eye(4),)),
}


@pytest.mark.parametrize("name", sorted(LINALG))
def test_lapack_kernels_are_remapped_and_run_bit_identical_to_x32(name):
    fn, args = LINALG[name]
    text = lower_x64(fn, *args)
    assert "lapack_d" in text or "lapack_z" in text
    result = narrow_quietly(text)
    assert "lapack_d" not in result.text and "lapack_z" not in result.text
    renamed = [f for f in result.findings if f.kind == "custom-call-renamed"]
    assert renamed and all("test_custom_calls.py" in f.location for f in renamed)
    got = run_narrowed(result.text, args)
    want = run_x32(fn, args)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.tobytes() == w.tobytes()
