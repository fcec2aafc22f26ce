"""x64guard.jit: bit-identical to x32 JAX, composable, cached, thread-safe, honest about
errors, and never leaving JAX's global state changed."""

import threading
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import x64guard
from tests.corpus import oracle
from tests.corpus.programs import CASES
from tests.sample import corpus_params

NARROWABLE = [c for c in CASES if c.expect == "narrow"]
REFUSED = [c for c in CASES if c.expect != "narrow"]


@pytest.fixture(autouse=True)
def quiet_and_x64_untouched():
    before = jax.config.jax_enable_x64
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", x64guard.X64GuardWarning)
        yield
    assert jax.config.jax_enable_x64 == before


def leaves(tree):
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(tree)]


@pytest.mark.parametrize("case", corpus_params(NARROWABLE))
def test_bit_identical_to_x32_jax_on_the_corpus(case):
    args = oracle.materialize_args(case)
    oracle.lower_x64(case.fn, args)  # also clears JAX's caches between traces (see oracle)
    got = leaves(x64guard.jit(case.fn)(*args))
    want = oracle.run_oracle(case.fn, [oracle.to32(a) for a in args])
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert oracle.bit_identical(g, w), f"{case.name}: {oracle.describe_mismatch(g, w)}"


@pytest.mark.parametrize("case", REFUSED[:6], ids=lambda c: c.name)
def test_refused_programs_raise_at_trace_time(case):
    args = oracle.materialize_args(case)
    with pytest.raises(x64guard.X64GuardError):
        x64guard.jit(case.fn)(*args)


# --- decorator forms, pytrees, statics ---------------------------------------------

def physics(state, params, *, steps=3):
    x, v = state["x"], state["v"]
    for _ in range(steps):
        v = v - params["k"] * x * 0.1
        x = x + v * 0.1
    return {"x": x, "v": v}, jnp.argmax(x)


STATE = {"x": np.linspace(-1, 1, 5), "v": np.zeros(5)}
PARAMS = {"k": np.float64(2.0)}


def test_decorator_forms_pytrees_and_static_argnames():
    plain = x64guard.jit(physics, static_argnames="steps")
    decorated = x64guard.jit(mode="warn", static_argnames="steps")(physics)
    for fn in (plain, decorated):
        out, idx = fn(STATE, PARAMS, steps=4)
        assert out["x"].dtype == jnp.float32 and idx.dtype == jnp.int32
        want = oracle.run_oracle(lambda s, p: physics(s, p, steps=4),
                                 [jax.tree_util.tree_map(oracle.to32, STATE), jax.tree_util.tree_map(oracle.to32, PARAMS)])
        for g, w in zip(leaves((out, idx)), want):
            assert oracle.bit_identical(g, w)


def test_static_argnums_and_python_scalars():
    fn = x64guard.jit(lambda x, n, scale: x * n * scale, static_argnums=2)
    out = fn(np.arange(3.0), 7, 2.5)
    assert out.dtype == jnp.float32 and out.tolist() == [0.0, 17.5, 35.0]
    assert x64guard.jit(lambda x: x + 1)(3).dtype == jnp.int32


def test_out_of_range_integer_input_names_its_pytree_path():
    fn = x64guard.jit(lambda s: s["a"] + s["b"][1])
    with pytest.raises(x64guard.X64GuardError, match=r"args\[0\]\['b'\]\[1\]: value 1099511627776 does not fit"):
        fn({"a": np.int64(1), "b": [np.int64(2), np.array([1, 2**40])]})
    with pytest.raises(x64guard.X64GuardError, match=r"args\[0\]"):
        x64guard.jit(lambda n: n * 2)(2**33)
    with pytest.raises(x64guard.X64GuardError, match=r"4294967296"):
        x64guard.jit(lambda n: n * 2)(np.uint64(2**32))


def test_error_mode_points_at_the_users_line():
    def uses_f64(x):
        return jnp.cos(x) * 2.0  # this line

    with pytest.raises(x64guard.X64GuardError) as info:
        x64guard.jit(uses_f64, mode="error")(np.ones(3))
    line = uses_f64.__code__.co_firstlineno + 1
    assert any((f.location.file, f.location.line) == (__file__, line) and f.op == "stablehlo.cosine"
               for f in info.value.findings)
    assert all(f.severity == "error" for f in info.value.findings)


def test_global_x64_flag_restored_after_an_exception():
    before = jax.config.jax_enable_x64
    with pytest.raises(ZeroDivisionError):
        x64guard.jit(lambda x: x / 0 if isinstance(1 / 0, float) else x)(np.ones(2))
    assert jax.config.jax_enable_x64 == before


# --- composition -------------------------------------------------------------------

def poly(x, n):
    return jnp.sin(x) * n + 0.5 * x**2


X = np.linspace(-1, 1, 6)
X32 = X.astype(np.float32)


def test_inside_an_outer_jit():
    inner = x64guard.jit(poly)
    got = jax.jit(lambda x: inner(x, 3) * 2)(X32)
    want = jax.jit(lambda x: poly(x, 3) * 2)(X32)
    assert oracle.bit_identical(np.asarray(got), np.asarray(want))


def test_under_vmap_and_nested_vmap():
    inner = x64guard.jit(poly)
    batch = np.stack([X, 2 * X]).astype(np.float32)
    got = jax.vmap(lambda x: inner(x, 3))(batch)
    want = jax.jit(jax.vmap(lambda x: poly(x, 3)))(batch)
    assert oracle.bit_identical(np.asarray(got), np.asarray(want))
    got2 = jax.vmap(jax.vmap(lambda x: inner(x, 3)))(batch[:, None, :])
    assert oracle.bit_identical(np.asarray(got2)[:, 0], np.asarray(want))


def test_grad_through_x64guard_jit_and_jit_of_grad():
    inner = x64guard.jit(poly)
    loss = lambda x: inner(x, 3).sum()  # noqa: E731
    want = jax.jit(jax.grad(lambda x: poly(x, 3).sum()))(X32)
    assert oracle.bit_identical(np.asarray(jax.jit(jax.grad(loss))(X32)), np.asarray(want))
    outer = x64guard.jit(jax.grad(lambda x: poly(x, 3).sum()))(X)
    assert oracle.bit_identical(np.asarray(outer), np.asarray(want))
    hessian_diag = jax.vmap(jax.grad(jax.grad(lambda s: inner(s[None], 3)[0])))(X32)
    want_h = jax.vmap(jax.grad(jax.grad(lambda s: poly(s[None], 3)[0])))(X32)
    assert np.allclose(np.asarray(hessian_diag), np.asarray(want_h), rtol=1e-6)


def test_grad_with_integer_inputs_gives_float0():
    inner = x64guard.jit(poly)
    gx, gn = jax.grad(lambda x, n: inner(x, n).sum(), argnums=(0, 1), allow_int=True)(X32, np.int32(3))
    assert gn.dtype == jax.dtypes.float0 and gx.dtype == jnp.float32


# --- caching, lowering -------------------------------------------------------------

class EventCounter:
    """How many times JAX reported `event` (a duration event of jax.monitoring)."""

    def __init__(self, event: str):
        self.event, self.count = event, 0
        jax.monitoring.register_event_duration_secs_listener(self._listen)

    def _listen(self, event, duration, **kwargs):
        if event == self.event:
            self.count += 1


COMPILES = EventCounter("/jax/core/compile/backend_compile_duration")


def test_second_call_neither_retraces_nor_recompiles():
    traces = []

    @x64guard.jit
    def counted(x, n):
        traces.append(1)
        return x * n

    counted(X, 2)
    compiles, traced = COMPILES.count, len(traces)
    for _ in range(3):
        counted(X, 2)
    assert (COMPILES.count, len(traces)) == (compiles, traced)
    counted(X[:3], 2)  # a new signature: traced with x64 on, and off for the cross-check
    assert len(traces) == traced + 2


def test_lower_text_findings_compile():
    lowered = x64guard.jit(poly).lower(X, 3)
    assert "f32" in lowered.as_text() and "f64" not in lowered.as_text()
    assert lowered.findings and lowered.changes
    compiled = lowered.compile()
    assert oracle.bit_identical(np.asarray(compiled(X, 3)), np.asarray(jax.jit(poly)(X32, 3)))


def test_jax_own_jit_of_the_same_function_still_runs_full_width():
    x64guard.jit(poly)(X, 3)
    with oracle.x64(True):
        out = jax.jit(poly)(X, 3)
        assert out.dtype == jnp.float64
        np.testing.assert_allclose(np.asarray(out), np.sin(X) * 3 + 0.5 * X**2)


def test_eight_threads_share_functions():
    inner = x64guard.jit(poly)
    other = x64guard.jit(lambda x: jnp.cumsum(x) * 2)
    want_poly = np.asarray(jax.jit(poly)(X32, 3))
    want_other = np.asarray(jax.jit(lambda x: jnp.cumsum(x) * 2)(X32))
    errors = []

    def work(i):
        try:
            for _ in range(5):
                assert oracle.bit_identical(np.asarray(inner(X, 3)), want_poly)
                assert oracle.bit_identical(np.asarray(other(X)), want_other)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


# --- modes and the jit cache-key plugin ---------------------------------------------

def test_allow_runs_full_width_and_warn_narrows_with_exactly_two_compilations():
    """A float64 program (x64 on globally) whose outer jit holds an x64guard call."""
    inner = x64guard.jit(lambda x: jnp.exp(x) + 1.0)
    outer = jax.jit(lambda x: inner(x) * 2)
    x = np.linspace(0, 1, 7)
    inner(x)  # compiles the narrowed inner program once, outside the count
    start = COMPILES.count
    results = []
    with oracle.x64(True):
        for m in ("allow", "warn", "warn", "allow"):
            with x64guard.mode(m):
                results.append(np.asarray(outer(x)))
    compilations = COMPILES.count - start
    assert [r.dtype for r in results] == [np.float64, np.float32, np.float32, np.float64]
    np.testing.assert_allclose(results[0], (np.exp(x) + 1) * 2, rtol=1e-15)
    assert oracle.bit_identical(results[1], np.asarray(jax.jit(lambda x: (jnp.exp(x) + 1.0) * 2)(x.astype(np.float32))))
    assert results[3].tobytes() == results[0].tobytes()
    assert compilations == 2


def test_set_mode_is_process_wide_and_explicit_mode_wins():
    fn = x64guard.jit(lambda x: x * 2.0)
    pinned = x64guard.jit(lambda x: x * 2.0, mode="warn")
    try:
        x64guard.set_mode("allow")
        assert fn(np.ones(2)).dtype == jnp.float64
        assert pinned(np.ones(2)).dtype == jnp.float32
        seen = []
        t = threading.Thread(target=lambda: seen.append(x64guard.current_mode()))
        t.start()
        t.join()
        assert seen == [x64guard.Mode.ALLOW]
    finally:
        x64guard.set_mode("warn")
    assert fn(np.ones(2)).dtype == jnp.float32


# --- lowering once -------------------------------------------------------------------

LOWERINGS = EventCounter("/jax/core/compile/jaxpr_to_mlir_module_duration")


def test_first_call_lowers_the_function_once_and_compiles_once():
    """One x64 lowering of the user's function (no jax.export round trip, no second
    lowering, no wrapper program): its narrowed module is what gets compiled, once."""
    def fresh(x, y):
        return jnp.tanh(x @ y) * 2.0

    x, y = np.ones((4, 3)), np.ones((3, 2))
    lowerings, compiles = LOWERINGS.count, COMPILES.count
    out = x64guard.jit(fresh)(x, y)
    assert out.dtype == jnp.float32
    assert (LOWERINGS.count - lowerings, COMPILES.count - compiles) == (1, 1)
    fn = x64guard.jit(fresh)  # another function object: its own cache
    fn(x, y)
    lowerings, compiles = LOWERINGS.count, COMPILES.count
    for _ in range(3):
        fn(x, y)
        fn(x.astype(np.float32), y.astype(np.float32))  # float32 inputs: traced at their own width, once
    assert (LOWERINGS.count - lowerings, COMPILES.count - compiles) == (1, 1)


def test_int64_arrays_are_range_checked_on_every_call_of_a_signature():
    """JAX's C++ dispatch runs cached signatures without Python; signatures holding 64-bit
    integers never get that fast path, so every call is checked, never wrapped."""
    fn = x64guard.jit(lambda n, x: n * 2 + x)
    with oracle.x64(True):
        small, big = jnp.arange(3, dtype=jnp.int64), jnp.array([1, 2, 2**40], dtype=jnp.int64)
    for _ in range(3):
        assert np.asarray(fn(small, np.int32(1))).tolist() == [1, 3, 5]
        with pytest.raises(x64guard.X64GuardError, match=r"args\[0\]: value 1099511627776 does not fit in int32"):
            fn(big, np.int32(1))
    numpy_small, numpy_big = np.arange(3, dtype=np.int64), np.array([1, 2, 2**40], dtype=np.int64)
    for _ in range(3):
        assert np.asarray(fn(numpy_small, np.int32(1))).tolist() == [1, 3, 5]
        with pytest.raises(x64guard.X64GuardError, match="1099511627776"):
            fn(numpy_big, np.int32(1))


def test_float64_and_float32_numpy_data_are_different_signatures():
    """JAX's C++ dispatch keys float64 and float32 numpy data alike with x64 off; x64guard
    traces them at different widths (float64 as given, float32 at its own width)."""
    fn = x64guard.jit(lambda x: x + x.dtype.itemsize)
    one64, one32 = np.ones(2), np.ones(2, np.float32)
    for _ in range(2):
        # traced as float64 (9.0), which the cross-check sees differ from x32 JAX's trace:
        # x32 JAX's program runs (issue 22)
        assert np.asarray(fn(one64)).tolist() == [5.0, 5.0]
        assert np.asarray(fn(one32)).tolist() == [5.0, 5.0]  # traced as float32, as x32 JAX traces it
    assert [f.kind for f in fn.lower(one64).findings] == ["trace-differs"]
    assert [f.kind for f in fn.lower(one32).findings] == []


def test_float64_arrays_of_a_caller_with_x64_on_lower_once_and_match_x32_jax():
    """A user with x64 on hands x64guard.jit float64 arrays: the narrowed program takes
    them converted before the program (no second lowering, one compile)."""
    def fresh(x, w, n):
        return jnp.tanh(x @ w) * n

    x, w = np.linspace(-1, 1, 12).reshape(4, 3), np.full((3, 2), 0.5)
    want = np.asarray(jax.jit(fresh)(x.astype(np.float32), w.astype(np.float32), np.int32(3)))
    fn = x64guard.jit(fresh)
    with oracle.x64(True):
        args = (jnp.asarray(x), jnp.asarray(w), 3)
        assert args[0].dtype == jnp.float64
        lowerings, compiles = LOWERINGS.count, COMPILES.count
        outs = [np.asarray(fn(*args)) for _ in range(3)]
        assert (LOWERINGS.count - lowerings, COMPILES.count - compiles) == (1, 1)
    assert all(oracle.bit_identical(o, want) for o in outs)


def test_donated_inputs_are_donated():
    fn = x64guard.jit(lambda state, x: state * 2.0 + x, donate_argnums=0)
    state = jnp.ones(1024, jnp.float32)
    out = fn(state, jnp.ones(1024, jnp.float32))
    assert state.is_deleted() and out.dtype == jnp.float32
    again = fn(out, jnp.ones(1024, jnp.float32))  # the steady state donates too
    assert out.is_deleted() and float(again[0]) == 7.0


def test_programs_are_keyed_by_jax_s_configuration_as_jax_jit_s_are():
    """A configuration that keys jax.jit's cache (here rank promotion, which decides at
    trace time) gives x64guard.jit another program too, not the one built before it."""
    fn = x64guard.jit(lambda a, b: a + b)
    a, b = np.ones(3), np.ones((2, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", x64guard.X64GuardWarning)
        assert np.asarray(fn(a, b)).shape == (2, 3)
        with jax.numpy_rank_promotion("raise"):
            with pytest.raises(ValueError, match="jax_numpy_rank_promotion"):
                fn(a, b)
            with pytest.raises(ValueError, match="jax_numpy_rank_promotion"):
                jax.jit(lambda a, b: a + b)(a, b)
        assert np.asarray(fn(a, b)).shape == (2, 3)
