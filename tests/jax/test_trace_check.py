"""The cross-check of x64guard.jit (issue 22 items 2 and 4): the function is traced with
x64 off too and compared with the x64 trace. Equal once narrowed: the x64 program is
narrowed and run. Different (library code that decides by jax_enable_x64 or by the dtype
while tracing): mode error refuses with a `trace-differs` finding naming the first
differing equation and its line; otherwise the x32 program runs, said once per function at
INFO on the `x64guard` logger (issue 37 item 4: its answer is x32 JAX's, nothing for a
warning to say). The oracle is jax.jit with x64 off."""

from __future__ import annotations

import contextlib
import inspect
import logging
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.scipy import special

import x64guard
from tests.corpus import oracle


def _x32(f, *args):
    return jax.tree_util.tree_leaves(jax.jit(f)(*[oracle.to32(np.asarray(a)) if isinstance(a, np.ndarray) else a
                                                   for a in args]))


def _same(got, want) -> bool:
    got = jax.tree_util.tree_leaves(got)
    return len(got) == len(want) and all(oracle.bit_identical(np.asarray(g), np.asarray(w))
                                         for g, w in zip(got, want))


def _x64_flag(x):
    return x * 2 if jax.config.jax_enable_x64 else x * 3


REPROS = [
    ("x64-flag branch", _x64_flag, np.array([1.0, 2.0])),
    ("log_ndtr switch points", special.log_ndtr, np.array([7.5, 1.0, -3.0])),
    ("i0e coefficient tables", special.i0e, np.array([0.0, 1.0, 9.0])),
    ("finfo eps", lambda x: x + 100 * jnp.finfo(x.dtype).eps, np.array([1.0, 2.0])),
    # jax 0.12 lowers float32 lgamma with its own expansion, float64 to chlo.lgamma: narrowed,
    # 1 ulp away (the differential fuzzer's example); equal traces, other lowerings.
    ("lgamma lowered by dtype", lambda v: lax.lgamma(jnp.var(v)),
     np.random.default_rng(0).integers(-100, 100, (2, 3))),
]


# jax 0.12's lowering rules that read a param or the configuration, then the dtype
# (trace_check.LOWERED_BY_DTYPE_SOMETIMES): erfc(accuracy=HIGHEST) lowers to float64- or
# float32-specific code, as does erf_inv under jax_accurate_erf_inv. Narrowed, the float64
# code was 78% and 70% bit-identical to x32 JAX over these inputs.
_EDGES = np.linspace(-6.0, 6.0, 4001)
if hasattr(lax, "AccuracyMode") and "accuracy" in inspect.signature(lax.erfc).parameters:
    REPROS.append(("erfc accuracy=HIGHEST",
                   lambda x: lax.erfc(x, accuracy=lax.AccuracyMode.HIGHEST), _EDGES))
HAS_ACCURATE_ERF_INV = hasattr(jax.config, "jax_accurate_erf_inv")


@contextlib.contextmanager
def accurate_erf_inv(flag: bool):
    """jax_accurate_erf_inv set for the block (JAX has no context manager for it)."""
    before = jax.config.jax_accurate_erf_inv
    jax.config.update("jax_accurate_erf_inv", flag)
    try:
        yield
    finally:
        jax.config.update("jax_accurate_erf_inv", before)


@pytest.mark.skipif(not HAS_ACCURATE_ERF_INV, reason="this JAX has no jax_accurate_erf_inv (0.10, 0.11)")
def test_erf_inv_follows_jax_accurate_erf_inv_between_calls():
    """The flag keys jax.jit's cache (its lowering differs): x64guard.jit's programs are keyed
    by JAX's configuration too, so each call is x32 JAX's program under the flag it runs
    with. (Before: the first call's program ran again, 17% identical under the other flag.)"""
    f = lambda x: lax.erf_inv(jnp.tanh(x))  # noqa: E731
    fn = x64guard.jit(f)
    for flag in (False, True, False):
        with accurate_erf_inv(flag), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got, want = fn(_EDGES), _x32(f, _EDGES)
        assert _same(got, want), flag


@pytest.mark.parametrize("name,f,x", REPROS, ids=[r[0] for r in REPROS])
@pytest.mark.parametrize("caller_x64", [True, False], ids=["x64-on", "x64-off"])
def test_library_decisions_by_dtype_give_x32_bits(name, f, x, caller_x64):
    want = _x32(f, x)
    with oracle.x64(caller_x64), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = x64guard.jit(f)(x)
    assert _same(got, want), (name, got, want)


def test_lgamma_runs_x32_program_without_narrow_s_x32_lowering_warning():
    """Where narrow would warn `x32-lowering` (jax 0.12), x64guard.jit runs x32 JAX's
    program, so that warning (about the narrowed program) is not issued."""
    f = lambda x: lax.lgamma(x * 3.5)  # noqa: E731
    x = np.array([0.3, 2.0, 11.0])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = x64guard.jit(f)(x)
    assert not [w for w in caught if "x32-lowering" in str(w.message)]
    assert _same(got, _x32(f, x))


def test_trace_differs_refused_in_mode_error_with_equation_and_line():
    fn = x64guard.jit(_x64_flag, mode="error")
    with pytest.raises(x64guard.X64GuardError) as info:
        fn(np.ones(2, np.float32))
    (finding,) = info.value.findings
    assert finding.kind == "trace-differs" and finding.op == "mul"
    assert "test_trace_check.py" in str(finding.location) and "_x64_flag" in str(finding.location)
    assert "2.0" in finding.message and "3.0" in finding.message


def test_trace_differs_is_said_once_per_function_at_info_not_warned(caplog):
    fn = x64guard.jit(_x64_flag)
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.INFO, logger="x64guard"):
        warnings.simplefilter("always")
        out = fn(np.ones(2))  # the calling line
        fn(np.ones(3))        # another signature of the same function: not said again
    assert not caught, [str(w.message) for w in caught]
    said = [r for r in caplog.records if r.name == "x64guard"]
    assert len(said) == 1 and said[0].levelno == logging.INFO
    assert "trace-differs" in said[0].getMessage() and f"{__file__}:" in said[0].getMessage()
    assert np.asarray(out).tolist() == [3.0, 3.0]
    assert [f.severity for f in fn.lower(np.ones(2)).findings] == ["info"]


def test_equal_traces_still_narrow():
    fn = x64guard.jit(lambda x: jnp.asarray(x, jnp.float64) * 2 + jnp.arange(2))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn(np.ones(2, np.float32))
    assert not [w for w in caught if "trace-differs" in str(w.message)]
    assert any("narrowed" in str(w.message) for w in caught)
    assert np.asarray(out).tolist() == [2.0, 3.0]


def test_library_int32_beside_widened_input_does_not_crash_the_trace():
    """issue 22 item 4: lax.cond branches of a library's own int32 beside an int32 input
    (traced at int64) failed with JAX's 'cond branches must have equal output types'."""
    f = lambda idx, x: lax.cond(x > 0, lambda: idx, lambda: jnp.zeros(3, jnp.int32))  # noqa: E731
    idx = np.arange(3, dtype=np.int32)
    want = _x32(f, idx, 1.0)
    for x64 in (True, False):
        with oracle.x64(x64), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert _same(x64guard.jit(f)(idx, 1.0), want)
            assert _same(x64guard.jit(f)(idx, np.float32(1.0)), want)


def test_lowered_findings_carry_the_difference():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lowered = x64guard.jit(_x64_flag).lower(np.ones(2))
    assert [f.kind for f in lowered.findings] == ["trace-differs"]
    assert np.asarray(lowered.compile()(np.ones(2))).tolist() == [3.0, 3.0]


# ---- library primitives: their lowering, not their equation, is the program ---------------
# lineax's linear_solve is an equinox filter_primitive: its solver runs when the primitive is
# lowered, under that trace's x64 setting. BiCGStab tests `omega == 0` under x64 and
# `omega < 1e-16` otherwise; LU's default error check (throw=True) is a host callback traced
# for 64-bit values. Equal equations, other programs: the cross-check compares what each
# equation lowers to (narrowed) with x32's lowering.

def _lineax_system(n=6):
    rng = np.random.default_rng(0)
    a = (rng.standard_normal((n, n)) + n * np.eye(n)).astype(np.float32)
    return a, rng.standard_normal(n).astype(np.float32)


def _bicgstab(a, b):
    import lineax as lx

    solution = lx.linear_solve(lx.MatrixLinearOperator(a), b, lx.BiCGStab(rtol=1e-5, atol=1e-5), throw=False)
    return solution.value, solution.stats["num_steps"]


def _lu(a, b, throw=True):
    import lineax as lx

    return lx.linear_solve(lx.MatrixLinearOperator(a), b, lx.LU(), throw=throw).value


@pytest.mark.parametrize("f,width", [(_bicgstab, np.float32), (_bicgstab, np.float64), (_lu, np.float64)],
                         ids=["bicgstab-float32", "bicgstab-float64", "lu-error-check-float64"])
def test_library_primitive_lowering_by_x64_runs_x32_program(f, width, caplog):
    # (LU's error check with float32 inputs lowers alike: its callback sees 32-bit values.)
    a, b = _lineax_system()
    want = _x32(f, a, b)
    with (oracle.x64(True), warnings.catch_warnings(record=True) as caught,
          caplog.at_level(logging.INFO, logger="x64guard")):
        warnings.simplefilter("always")
        got = x64guard.jit(f)(a.astype(width), b.astype(width))
    assert _same(got, want), (got, want)
    assert not [str(w.message) for w in caught if isinstance(w.message, x64guard.X64GuardWarning)]
    messages = [r.getMessage() for r in caplog.records if r.name == "x64guard"]
    assert len(messages) == 1, messages
    assert "library primitive linear_solve" in messages[0] and "test_trace_check.py" in messages[0]
    assert "EQX_ON_ERROR=nan" in messages[0], messages[0]


def test_library_primitive_that_lowers_alike_is_narrowed():
    # throw=False: no callback, and LU does not decide by x64: the x64 program is narrowed.
    a, b = _lineax_system()
    f = lambda a, b: _lu(a, b, throw=False)  # noqa: E731
    want = _x32(f, a, b)
    with oracle.x64(True), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lowered = x64guard.jit(f).lower(a.astype(np.float64), b.astype(np.float64))
        got = x64guard.jit(f)(a.astype(np.float64), b.astype(np.float64))
    assert _same(got, want)
    assert not [x for x in lowered.findings if x.kind == "trace-differs"]
    assert lowered.changes  # narrowed, not x32's program


# ---- a literal that equals a finfo(float64) expression --------------------------------------
# TFP's owens_t has a Chebyshev coefficient that rounds, in float64, to exactly
# -(1 - finfo(float64).eps). The pass's value table reads it as that expression and would
# give float32's -(1 - eps); x32 JAX holds the literal's rounding, -1.0. The traces are equal,
# so x32's trace proves it a literal: x32's program runs.

_LITERAL = np.array([-0.99999999999999977])  # == -(1 - finfo(float64).eps)


@pytest.mark.parametrize("width", [np.float32, np.float64])
def test_literal_equal_to_finfo_expression_gives_x32_bits(width, caplog):
    assert _LITERAL[0] == -(1 - np.finfo(np.float64).eps)
    f = lambda x: x * _LITERAL[0]  # noqa: E731
    x = np.array([3.0, 3.0, 0.5], np.float32)
    want = _x32(f, x)
    with (oracle.x64(True), warnings.catch_warnings(record=True) as caught,
          caplog.at_level(logging.INFO, logger="x64guard")):
        warnings.simplefilter("always")
        got = x64guard.jit(f)(x.astype(width))
    assert _same(got, want), (got, want)
    assert not [str(w.message) for w in caught if isinstance(w.message, x64guard.X64GuardWarning)]
    messages = [r.getMessage() for r in caplog.records if r.name == "x64guard"]
    assert len(messages) == 1 and "[dtype-constant]" in messages[0] and "plain rounding" in messages[0], messages


def _kinds(lowered) -> set[str]:
    return {str(f.kind) for f in lowered.findings}


def test_identity_convert_named_for_converted_callback_operands():
    """x64guard.jit converts a host callback's int64 operand to int32 before the callback,
    where x32 JAX passes its int32 as it is: once narrowed, a convert to the same type. The
    difference from x32 JAX's module is named (identity-convert, info)."""
    def f(i, x):
        jax.debug.callback(lambda v: None, i)
        return x * 2

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lowered = x64guard.jit(f).lower(np.int64(3), np.ones(2))
    named = [f for f in lowered.findings if f.kind == "identity-convert"]
    assert named and all(str(f.severity) == "info" for f in named)
    assert any("callback" in f.message for f in named)  # x64guard.jit's (the pass names the kept convert too)


def test_no_identity_convert_finding_where_the_traces_convert_alike():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lowered = x64guard.jit(lambda x: jnp.sin(x) * 2).lower(np.ones(3))
    assert "identity-convert" not in _kinds(lowered)


def test_identity_convert_named_for_a_computed_weak_scalar():
    """`x - jnp.log(2.0)` (distrax's Normal: `log(scale)` of a Python float): the log is a
    weak-typed scalar, converted to float32 where it meets x. x32 JAX's module keeps that
    convert (weak float32 made strong); the narrowed one folds it (the pass cannot tell a
    computed scalar's weak type from the module). The cross-check names the difference,
    which the modules show, and the bits agree."""
    f = lambda x: x - jnp.log(2.0)  # noqa: E731
    x = np.asarray([1.0, 2.5, -3.0], np.float32)
    with oracle.x64(True), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lowered = x64guard.jit(f).lower(x)
        got = x64guard.jit(f)(x)
    with oracle.x64(False):
        x32_module = jax.jit(f).lower(x).as_text()
    named = [f for f in lowered.findings if f.kind == "identity-convert"]
    assert len(named) == 1 and "weak-typed float scalar" in named[0].message and str(named[0].severity) == "info"
    assert x32_module.count("stablehlo.convert") == lowered.as_text().count("stablehlo.convert") + 1
    assert _same(got, _x32(f, x))


def test_identity_convert_named_for_a_dot_of_two_widths():
    """float32 @ float64: the x64 lowering converts the float64 operand to float64 (a
    convert to the same type once narrowed), x32 JAX's float32 @ float32 has none. The
    traces are equal; the cross-check sees the two operand widths and names it."""
    a, b = np.ones((3, 4), np.float32), np.ones((4, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lowered = x64guard.jit(lambda a, b: a @ b).lower(a, b)
    named = [f for f in lowered.findings if f.kind == "identity-convert"]
    assert len(named) == 1 and "dot_general" in named[0].message and str(named[0].severity) == "info"
