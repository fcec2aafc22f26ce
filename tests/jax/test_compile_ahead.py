"""x64guard.jit's first direct call compiles the narrowed module in a worker thread while
the calling thread runs the x32 cross-check (x64guard/jax/program.py `CompileAhead`: XLA compiles
without the GIL, so the check costs no wall time). The worker carries the caller's own JAX
settings; the compile is used only when the narrowed program is the one that runs."""

from __future__ import annotations

import threading
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax._src import config

import x64guard
from tests.corpus import oracle
from x64guard.jax import _private_lowering


def test_thread_config_overrides_carry_the_callers_settings():
    with jax.numpy_rank_promotion("raise"):
        overrides = _private_lowering.thread_config_overrides()
    seen = {}

    def worker():
        seen["before"] = config.numpy_rank_promotion.value
        with _private_lowering.config_overrides(overrides):
            seen["inside"] = config.numpy_rank_promotion.value
        seen["after"] = config.numpy_rank_promotion.value

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert seen == {"before": "allow", "inside": "raise", "after": "allow"}


@pytest.fixture
def compiles(monkeypatch) -> list:
    """(thread name, the rank-promotion setting it saw) of every narrowed-module compile."""
    seen = []
    real = _private_lowering.compile_with_avals

    def spy(*args, **kwargs):
        seen.append((threading.current_thread().name, config.numpy_rank_promotion.value))
        return real(*args, **kwargs)

    monkeypatch.setattr(_private_lowering, "compile_with_avals", spy)
    return seen


def test_first_call_compiles_in_a_worker_with_the_callers_settings(compiles):
    f = lambda x: jnp.sin(x) * 2 + 1  # noqa: E731
    x = np.linspace(0.0, 1.0, 8)
    fn = x64guard.jit(f)
    with warnings.catch_warnings(), jax.numpy_rank_promotion("warn"):
        warnings.simplefilter("ignore", x64guard.X64GuardWarning)
        got = fn(x)
        again = fn(x)
    assert compiles == [("x64guard-compile", "warn")]  # once, ahead; the second call reuses it
    want = jax.jit(f)(oracle.to32(x))
    assert oracle.bit_identical(np.asarray(got), np.asarray(want))
    assert oracle.bit_identical(np.asarray(again), np.asarray(want))


def test_lower_compiles_in_the_callers_thread(compiles):
    fn = x64guard.jit(lambda x: x * 2.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", x64guard.X64GuardWarning)
        fn.lower(np.ones(4)).compile()
    assert compiles == [(threading.current_thread().name, "allow")]


def test_compile_ahead_dropped_when_the_x32_program_runs(compiles):
    """Traces that differ: x32 JAX's program runs, compiled in the caller's thread; the
    narrowed module compiled ahead is not used."""
    f = lambda x: x * 2 if jax.config.jax_enable_x64 else x * 3  # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = x64guard.jit(f)(np.ones(2))
    assert np.asarray(out).tolist() == [3.0, 3.0]
    assert [name for name, _ in compiles] == ["x64guard-compile", threading.current_thread().name]


def test_narrowing_refusal_still_raised_after_the_check():
    """mode='error' refuses the 64-bit use; the refusal raised by the narrowing started
    ahead of the cross-check reaches the caller as before."""
    fn = x64guard.jit(lambda x: x + 1, mode="error")
    with pytest.raises(x64guard.X64GuardError):
        fn(np.ones(2))


def test_float64_arrays_convert_while_the_program_compiles(compiles, monkeypatch):
    """A caller with x64 on passes float64 JAX arrays (host memory): the program is built
    and its compile started before the arrays are converted, so the conversion overlaps
    XLA's compile; the build is the one that later calls of the signature use (the
    function's Python runs twice, once per trace, not four times)."""
    from x64guard.jax import function

    events, runs = [], []
    real_convert = function.convert_leaves_outside

    def convert_spy(flat, indices, dtypes):
        events.append(("convert", len(compiles)))
        return real_convert(flat, indices, dtypes)

    monkeypatch.setattr(function, "convert_leaves_outside", convert_spy)

    def f(w, x):
        runs.append(1)
        return jnp.tanh(x @ w).sum(axis=0)

    fn = x64guard.jit(f)
    with jax.enable_x64(True):
        w, x = jnp.linspace(0.0, 1.0, 12).reshape(3, 4), jnp.linspace(-1.0, 1.0, 6).reshape(2, 3)
        assert w.dtype == jnp.float64
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", x64guard.X64GuardWarning)
            got, again = fn(w, x), fn(w, x)
    assert events[0] == ("convert", 1)  # the compile had started when the first conversion ran
    assert [name for name, _ in compiles] == ["x64guard-compile"]
    assert len(runs) == 2
    want = jax.jit(f)(oracle.to32(np.asarray(w)), oracle.to32(np.asarray(x)))
    assert oracle.bit_identical(np.asarray(got), np.asarray(want))
    assert oracle.bit_identical(np.asarray(again), np.asarray(want))
