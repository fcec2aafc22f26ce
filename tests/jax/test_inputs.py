"""Inputs converted on the host (x64guard/jax/inputs.py): `host_cast` rounds as numpy's
`astype` does, and its data is aligned so that XLA's CPU client uses it in place."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import x64guard
from x64guard.jax.inputs import host_cast


@pytest.fixture(autouse=True)
def quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _float64_edge_values() -> np.ndarray:
    info32 = np.finfo(np.float32)
    values = [0.0, -0.0, 1.0, 1 / 3, np.pi, 1 + 2.0**-24, 1 + 3 * 2.0**-25, float(info32.max), float(info32.max) * 2,
              float(info32.tiny) / 3, 1e-50, np.inf, -np.inf, np.nan, 2.0**-149, -(2.0**-150)]
    return np.array(values + list(np.random.default_rng(0).standard_normal(1000)), np.float64)


def _complex128_edge_values() -> np.ndarray:
    values = _float64_edge_values()
    out = np.empty(values.shape, np.complex128)
    out.real, out.imag = values, values[::-1]
    return out


@pytest.mark.parametrize("source, target", [
    (_float64_edge_values(), np.float32),
    (_complex128_edge_values(), np.complex64),
    (np.array([-2**31, -1, 0, 7, 2**31 - 1], np.int64), np.int32),
    (np.array([0, 1, 2**32 - 1], np.uint64), np.uint32),
], ids=["float64", "complex128", "int64", "uint64"])
@pytest.mark.parametrize("copies", [1, 64], ids=["small", "aligned"])
def test_host_cast_rounds_bit_for_bit_as_astype(source, target, copies):
    source = np.tile(source, copies)       # 64 copies: past the size from which host_cast aligns
    got = host_cast(source, target)
    want = source.astype(target)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("array", [
    np.zeros((0, 3)), np.float64(2.5).reshape(()), np.arange(240_000.0).reshape(400, 600)[:, ::2],
    np.asfortranarray(np.arange(120_000.0).reshape(300, 400)), np.arange(70_000.0)[::-1],
], ids=["empty", "0-d", "strided", "fortran", "reversed"])
def test_host_cast_keeps_shape_and_values_of_any_layout(array):
    got = host_cast(array, np.float32)
    assert got.shape == array.shape and got.flags.c_contiguous
    assert np.array_equal(got, array.astype(np.float32))


def test_host_cast_data_is_aligned_so_a_cpu_device_uses_it_without_a_copy():
    """Why host_cast exists: numpy aligns to 16 bytes; XLA's CPU client takes 64-byte
    aligned data in place. A first call then spends no copy (nor fresh device pages) on
    its converted inputs (`make bench` (a'))."""
    for n in (1 << 14, (1 << 14) + 1, 100_003):
        out = host_cast(np.linspace(0, 1, n), np.float32)
        assert out.ctypes.data % 64 == 0
    out = host_cast(np.linspace(0, 1, 100_003), np.float32)
    placed = jax.device_put(out, jax.devices("cpu")[0])
    assert np.shares_memory(np.asarray(placed), out)


def test_float64_inputs_converted_in_place_give_x32_jaxs_bits_and_leave_the_callers_arrays_alone():
    def f(w, x):
        return jnp.tanh(x @ w + 0.1).sum(axis=0)

    rng = np.random.default_rng(1)
    w64, x64 = rng.standard_normal((64, 64)), rng.standard_normal((8, 64))
    w_before, x_before = w64.copy(), x64.copy()
    want = np.asarray(jax.jit(f)(w64.astype(np.float32), x64.astype(np.float32)))
    with jax.enable_x64(True):
        narrowed = x64guard.jit(f)
        from_numpy = [np.asarray(narrowed(w64, x64)) for _ in range(2)]
        w_array, x_array = jnp.asarray(w64), jnp.asarray(x64)
        from_arrays = [np.asarray(narrowed(w_array, x_array)) for _ in range(2)]
    for got in from_numpy + from_arrays:
        assert got.dtype == np.float32 and got.tobytes() == want.tobytes()
    assert np.array_equal(w64, w_before) and np.array_equal(x64, x_before)


def test_donated_float64_numpy_input_converted_in_place_runs_as_jax_jit_does():
    def f(x):
        return x * 2 + 1

    x64 = np.linspace(-1, 1, 256)
    want = np.asarray(jax.jit(f)(x64.astype(np.float32)))
    with jax.enable_x64(True):
        narrowed = x64guard.jit(f, donate_argnums=0)
        results = [np.asarray(narrowed(x64)) for _ in range(3)]
    for got in results:
        assert got.tobytes() == want.tobytes()
    assert np.array_equal(x64, np.linspace(-1, 1, 256))
