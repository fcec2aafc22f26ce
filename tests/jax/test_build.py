"""How x64guard.jit builds a signature's program when the user's Python is not a pure
function of its inputs, or cannot be traced with x64 on (issue 37 items 1 and 2).

The user's Python runs twice per new signature: the x64 trace, then the x32 one (the
cross-check). State it keeps between the two (jax arrays built while tracing, caches,
counters) must not break the call: it behaves as under jax.jit. A library that cannot be
traced with x64 on where x32 JAX traces it gets x32 JAX's program, with one finding naming
the line that raised (mode error: refused with it). The oracle is jax.jit with x64 off.
"""

from __future__ import annotations

import functools
import inspect
import logging
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import x64guard
from tests.corpus import oracle


def _x32(f, *args):
    with oracle.x64(False), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(jax.jit(f)(*args))]


def _same(got, want) -> bool:
    got = [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(got)]
    return len(got) == len(want) and all(oracle.bit_identical(g, w) for g, w in zip(got, want))


def _run(f, *args, mode=None):
    """x64guard.jit(f)(*args) with x64 on: (result, X64GuardWarnings' messages, findings)."""
    fn = x64guard.jit(f, mode=mode)
    with oracle.x64(True), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn(*args)
        findings = fn.lower(*args).findings
    return out, [str(w.message) for w in caught if issubclass(w.category, x64guard.X64GuardWarning)], findings


def _kinds(findings) -> list[str]:
    return [f"{f.kind}:{f.severity}" for f in findings if str(f.kind).startswith("trace-")]


# ---- item 1: state kept between the traces -----------------------------------------------

@jax.jit
def _kernel(mask, z, x):
    return jnp.where(mask, x, -x) * z


class _LazyTables:
    """netket's PauliStringsJax: lookup tables built on first use, which is inside the trace
    (../shared/repros/jax-t4/r01_array_built_during_trace.py)."""

    tables = None

    def apply(self, x):
        if self.tables is None:
            self.tables = (jnp.asarray(np.arange(6) % 2 == 0), jnp.asarray(np.arange(6) + 1))
        return _kernel(*self.tables, x)


def test_arrays_built_during_the_trace_run_as_under_jax_jit():
    x = np.linspace(0, 1, 6)
    want = _x32(lambda v: _LazyTables().apply(v), x)
    op = _LazyTables()
    out, warned, findings = _run(lambda v: op.apply(v), x)
    assert _same(out, want)
    assert not [m for m in warned if "trace-" in m], warned
    assert _kinds(findings) == ["trace-shared-state:info"]
    with oracle.x64(True), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = x64guard.jit(lambda v: _LazyTables().apply(v)).lower(x).compile()
        assert _same(compiled(x), want)


def test_a_lazily_built_pytree_of_arrays():
    params = {"w": np.linspace(-1, 1, 12).reshape(3, 4), "b": np.arange(4.0), "scale": np.float64(0.5)}

    class Model:
        tree = None

        def __call__(self, x):
            if self.tree is None:
                self.tree = jax.tree_util.tree_map(jnp.asarray, params)
            return jnp.tanh(x @ self.tree["w"] + self.tree["b"]) * self.tree["scale"]

    x = np.linspace(0, 1, 6).reshape(2, 3)
    want = _x32(Model(), x)
    out, warned, findings = _run(Model(), x)
    assert _same(out, want)
    assert _kinds(findings) == ["trace-shared-state:info"]


def test_a_functools_cache_of_arrays_computed_in_the_trace():
    """The cached array was computed by the x64 trace (jnp ops): the x32 trace cannot be
    compared through it. The narrowed x64 program runs with one warning saying what was
    not checked and why; mode error refuses. A later signature raises JAX's own
    UnexpectedTracerError, as jax.jit does."""
    @functools.lru_cache
    def basis(n):
        return jnp.eye(n) * 2

    f = lambda x: basis(x.shape[0]) @ x  # noqa: E731
    want = _x32(lambda x: jnp.eye(3) * 2 @ x, np.ones(3))
    fn = x64guard.jit(f)
    with oracle.x64(True), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert _same(fn(np.ones(3)), want)
        fn(np.ones(3))  # cached: nothing traced, nothing said
    shared = [str(w.message) for w in caught if "trace-shared-state" in str(w.message)]
    assert len(shared) == 1 and "kept 1 array(s)" in shared[0] and "test_build.py" in shared[0], shared
    with oracle.x64(True), pytest.raises(jax.errors.UnexpectedTracerError, match="x64guard.jit"):
        fn(np.ones(3, np.float32))
    with oracle.x64(True), pytest.raises(jax.errors.UnexpectedTracerError):
        jax.jit(f)(np.ones(3, np.float32))
    basis.cache_clear()
    with oracle.x64(True), pytest.raises(x64guard.X64GuardError, match="trace-shared-state|type-64bit"):
        x64guard.jit(f, mode="error")(np.ones(3))


def test_a_trace_counter_counts_two_runs_per_signature():
    """The user's Python runs twice per new signature (x64, then x32), never on a cached call."""
    runs = []

    def f(x):
        runs.append(jax.config.jax_enable_x64)
        return jnp.sin(x) * 2

    fn = x64guard.jit(f)
    with oracle.x64(True), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = fn(np.ones(3))
        fn(np.ones(3))
    assert _same(out, _x32(lambda x: jnp.sin(x) * 2, np.ones(3)))
    assert runs == [True, False]


# ---- item 2: the x64 trace fails where the x32 trace does not -----------------------------

def _policy_select(key, logits, done):
    """pgx's step: the action jax.random.categorical draws (int64 under x64) meets the
    environment's int32 no-op action."""
    action = jax.random.categorical(key, logits)
    return lax.select(done, jnp.int32(-1), action)  # raises under x64: int64 vs int32


def _policy_cond(key, logits, done):
    """jumanji's step: the same action returned by one lax.cond branch, an int32 by the other."""
    action = jax.random.categorical(key, logits)
    return lax.cond(done, lambda: jnp.zeros((), jnp.int32), lambda: action)  # raises under x64


def _elastic_deformation(key, image):
    """dm-pix's elastic_deformation: a noise field drawn at JAX's default float (float64
    under x64) blurred by a float32 Gaussian kernel."""
    noise = jax.random.uniform(key, image.shape) * 2 - 1
    taps = np.exp(-0.5 * np.arange(-2, 3) ** 2)
    kernel = jnp.asarray(np.outer(taps, taps) / np.outer(taps, taps).sum(), jnp.float32)
    field = lax.conv_general_dilated(noise[None, None], kernel[None, None], (1, 1), "SAME")[0, 0]  # raises under x64
    return image + 3.0 * field


def _raising_line(f) -> int:
    """The line of `f` marked 'raises under x64'."""
    lines, first = inspect.getsourcelines(f)
    return first + next(i for i, text in enumerate(lines) if "raises under x64" in text)


LOGITS = np.log(np.array([0.2, 0.3, 0.5], np.float32))
FAILING = [
    ("select", _policy_select, (jax.random.key(0), LOGITS, False)),
    ("cond", _policy_cond, (jax.random.key(0), LOGITS, False)),
    ("conv", _elastic_deformation, (jax.random.key(1), np.ones((8, 8), np.float32))),
]


@pytest.mark.parametrize("f,args", [c[1:] for c in FAILING], ids=[c[0] for c in FAILING])
def test_x64_trace_failure_runs_x32_jax_with_one_finding_at_the_line(f, args, caplog):
    line = _raising_line(f)
    with oracle.x64(True), pytest.raises(TypeError):
        jax.jit(f)(*args)  # what plain x64 JAX does
    want = _x32(f, *args)
    with caplog.at_level(logging.INFO, logger="x64guard"):
        out, warned, findings = _run(f, *args)
    assert _same(out, want)
    assert warned == []
    (finding,) = [x for x in findings if x.kind == "trace-failed"]
    assert finding.severity == "info" and f"test_build.py:{line}" in str(finding.location), finding
    said = [r.getMessage() for r in caplog.records if r.name == "x64guard"]
    assert len(said) == 1 and f"test_build.py:{line}" in said[0] and "[trace-failed]" in said[0]


@pytest.mark.parametrize("f,args", [c[1:] for c in FAILING], ids=[c[0] for c in FAILING])
def test_x64_trace_failure_is_refused_in_mode_error_with_the_line(f, args):
    line = _raising_line(f)
    with oracle.x64(True), pytest.raises(x64guard.X64GuardError) as info:
        x64guard.jit(f, mode="error")(*args)
    (finding,) = info.value.findings
    assert finding.kind == "trace-failed" and f"test_build.py:{line}" in str(finding.location)
    assert "TypeError" in str(info.value)
