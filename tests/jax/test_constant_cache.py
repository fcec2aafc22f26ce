"""Closed-over NumPy arrays and jaxlib's conversion cache (x64guard/jax/_private.release_traces).

jaxlib converts a NumPy array a function closes over to its traced constant once, in a cache
keyed by the array alone, not by jax_enable_x64; while that conversion is alive, a trace at the
other width gets it and JAX lowers an ill-typed program. x64guard.jit traces at both widths, so
before this it crashed (ValueError: "Cannot lower jaxpr with verifier errors"), and its x64 trace
broke the user's own later x32 jax.jit of code closing over the same arrays. Each test makes its
own arrays: the cache is per array object, so nothing leaks between tests. The oracle is x32
jax.jit on a copy of the arrays (another object: a conversion of its own).
"""

from __future__ import annotations

import warnings
import weakref

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import x64guard
from tests.corpus import oracle
from x64guard.jax import _private


def _tables(seed: int):
    rng = np.random.default_rng(seed)
    return rng.integers(-2**31, 2**31, size=8), rng.normal(size=8)  # int64, float64


def _x32(fn, *args):
    """x32 JAX's answer (x64 off): numpy, or a list of numpy for several outputs."""
    with oracle.x64(False):
        out = jax.jit(fn)(*[oracle.to32(a) for a in args])
    return [np.asarray(o) for o in out] if isinstance(out, (tuple, list)) else np.asarray(out)


def _recorded(call):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = call()
    return out, [w for w in caught if issubclass(w.category, x64guard.X64GuardWarning)]


def test_jax_reuses_a_numpy_arrays_conversion_at_the_other_width():
    """The JAX behaviour the rest works around (jax 0.10.2, 0.11.2, 0.12.0.1; jaxlib's
    canonicalize_value cache). If this fails, JAX fixed it: release_traces and the x32
    retrace in build.py stay correct, and docs/limits.md should say from which release."""
    from jax._src import dtypes

    table, _ = _tables(0)
    with _private.x64_enabled():
        held = dtypes.canonicalize_value(table)
    with _private.x64_disabled():
        again = dtypes.canonicalize_value(table)
    assert held.dtype == np.int64 and again is held


def test_the_users_x32_jax_jit_after_x64guard_jit_still_lowers():
    """x64 off: x64guard.jit's x64 trace used to stay in JAX's caches, so the user's next
    jax.jit of code closing over the same arrays lowered their 64-bit conversions."""
    ints, floats = _tables(1)
    want = _x32(lambda n, x: (n * ints.copy(), x + floats.copy()), np.arange(8), np.ones(8))
    with oracle.x64(False), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        narrowed = x64guard.jit(lambda n, x: (n * ints, x + floats))(np.arange(8), np.ones(8))
        users = jax.jit(lambda n, x: (n * ints, x + floats))(np.arange(8, dtype=np.int32), np.ones(8, np.float32))
    for got in (narrowed, users):
        assert [oracle.bit_identical(np.asarray(g), w) for g, w in zip(got, want)] == [True, True]


def test_the_users_x64_jax_jit_after_x64guard_jit_keeps_float64():
    """x64 on: the cross-check's x32 trace must not leave float32 conversions behind for
    the user's float64 programs."""
    _, floats = _tables(2)
    with oracle.x64(True), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x64guard.jit(lambda x: jnp.sin(x) * floats)(np.ones(8))
        users = np.asarray(jax.jit(lambda x: x * floats)(np.ones(8)))
    assert users.dtype == np.float64 and oracle.bit_identical(users, floats)


def _by_width(table):
    """Library code that decides by jax_enable_x64 (the traces differ: x32's program runs)."""
    def fn(n):
        total = (n * table).sum()
        return total if jax.config.jax_enable_x64 else total + 1
    return fn


def test_traces_that_differ_run_x32_jax_with_closed_over_64bit_arrays():
    """The x32 program's trace got the x64 trace's int64 conversion: traced again once the
    x64 trace is released, it lowers, and its answer is x32 JAX's."""
    ints, _ = _tables(3)
    want = _x32(_by_width(ints.copy()), np.arange(8))
    with oracle.x64(True):
        got, caught = _recorded(lambda: x64guard.jit(_by_width(ints))(np.arange(8)))
    assert oracle.bit_identical(np.asarray(got), want)
    assert caught == []  # trace-differs is said at INFO (test_trace_check.py), not warned


def test_an_x64_trace_given_the_users_32bit_conversion_runs_x32_jax():
    """x64 off, the user's own jitted function holds the arrays' 32-bit conversions: the
    x64 trace gets them, and JAX cannot lower it. x32 JAX's program runs, with one warning
    that names JAX's error, the op and the line; mode error refuses."""
    ints, floats = _tables(4)
    with oracle.x64(False):
        users = jax.jit(lambda n, x: (n * ints, x * floats))
        users(np.ones(8, np.int32), np.ones(8, np.float32))  # its trace stays cached
        fn = lambda n, x: (jnp.cumsum(n + ints), x - floats)  # noqa: E731
        want = _x32(lambda n, x: (jnp.cumsum(n + ints.copy()), x - floats.copy()), np.arange(8), np.linspace(0, 1, 8))
        got, caught = _recorded(lambda: x64guard.jit(fn)(np.arange(8), np.linspace(0, 1, 8)))
        with pytest.raises(x64guard.X64GuardError) as refused:
            x64guard.jit(fn, mode="error")(np.arange(8), np.linspace(0, 1, 8))
    assert [oracle.bit_identical(np.asarray(g), w) for g, w in zip(got, want)] == [True, True]
    assert len(caught) == 1, [str(w.message) for w in caught]
    message = str(caught[0].message)
    assert message.endswith("[trace-not-lowered]") and "x64 trace" in message and "verifier" in message
    assert f"{__file__}:" in message  # the function's line, from JAX's error
    (finding,) = refused.value.findings
    assert finding.kind == "trace-not-lowered" and finding.op == "add"


def test_an_x32_trace_held_at_64_bits_by_the_users_program_is_refused_not_a_crash():
    """x64 on, the user's own jitted function holds the array's 64-bit conversion, and the
    traces differ: x32's program cannot be built in this process. Refused, with the reason."""
    ints, _ = _tables(5)
    with oracle.x64(True):
        users = jax.jit(lambda n: n * ints)
        users(np.arange(8))  # its trace stays cached
        with warnings.catch_warnings(), pytest.raises(x64guard.X64GuardError) as refused:
            warnings.simplefilter("ignore")
            x64guard.jit(_by_width(ints))(np.arange(8))
    (finding,) = refused.value.findings
    assert finding.kind == "trace-not-lowered" and "x32 trace" in finding.message
    assert "trace-differs" in finding.message  # why x32's program was to run


def _cached_for(fun) -> int:
    """Entries JAX's two trace caches hold for `fun` (their keys begin with a weak
    reference to the function: seen in jax 0.10.2, 0.12.0.1)."""
    from jax._src import pjit
    from jax._src.interpreters import partial_eval as pe

    return sum(1 for cache in (pe.trace_to_jaxpr, pjit._infer_params_cached) for key in cache.cache_keys()
               if isinstance(key, tuple) and key and isinstance(key[0], weakref.ref) and key[0]() is fun)


def test_a_build_forgets_its_own_traces_and_none_of_the_users():
    """After x64guard.jit builds a program, JAX's caches hold nothing for its traces; the
    user's own jax.jit of the same function keeps its entries."""
    ints, floats = _tables(6)
    fn = lambda n, x: (n * ints, x * floats)  # noqa: E731
    args = (np.arange(8, dtype=np.int32), np.ones(8, np.float32))
    with oracle.x64(False), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        jax.jit(fn)(*args)
        users = _cached_for(fn)
        guarded = x64guard.jit(fn)
        guarded(np.arange(8), np.ones(8))
    assert users > 0 and _cached_for(fn) == users
    assert _cached_for(guarded.narrowed_function._traced_fun) == 0
