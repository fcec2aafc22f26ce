"""Host callbacks under x64guard.jit: each callback sees what x32 JAX gives it (dtypes,
shapes, bits; debug.print prints the same text), declared 64-bit results reach the
program narrowed (integers range-checked), results are bit-identical to x32 JAX's, and
the narrowed module's callback custom_calls carry only 32-bit types.

Every case is a program written as an x64 user writes it: inputs float64/int64, result
dtypes declared from the inputs or as `jnp.int_` (int64 with x64 on, int32 with x64 off).
The oracle is the same program traced and run by `jax.jit` with x64 off on the inputs
cast to 32 bits.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.experimental import checkify, io_callback

import x64guard
from tests.corpus import oracle


@pytest.fixture(autouse=True)
def quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", x64guard.X64GuardWarning)
        yield


class Log(list):
    """What the callbacks saw: (tag, dtype, shape, bytes) per argument."""

    def see(self, tag: str, *arrays) -> None:
        for a in arrays:
            a = np.asarray(a)
            self.append((tag, str(a.dtype), a.shape, a.tobytes()))


@dataclass(frozen=True)
class Case:
    name: str
    make: Callable[[Log], Callable]   # log -> the program
    args: tuple                       # 64-bit inputs (numpy)
    ordered_output: bool = False      # True: prints must come in the same order

    def __repr__(self) -> str:
        return self.name


X = np.linspace(-1.5, 2.0, 5)
N = np.int64(7)
def INT_():
    """JAX's default integer type where the program is traced: int64 with x64 on, int32 off."""
    return jax.dtypes.canonicalize_dtype(np.int64)


def _debug_print_unordered(log):
    def f(x, n):
        jax.debug.print("x={x} n={n} total={t} idx={i}", x=x, n=n, t=jnp.sum(x) / 3, i=jnp.arange(3))
        return x * n
    return f


def _debug_print_ordered(log):
    def f(x, n):
        jax.debug.print("first {x}", x=x * 0.1, ordered=True)
        y = jnp.cumsum(x) + n
        jax.debug.print("second {y} {n}", y=y, n=n * 3, ordered=True)
        return y
    return f


def _debug_print_in_scan(log):
    def f(x, n):
        def body(carry, xi):
            carry = carry * 0.5 + xi
            jax.debug.print("carry {c}", c=carry, ordered=True)
            return carry, carry * n
        return lax.scan(body, jnp.asarray(0.25, x.dtype), x)
    return f


def _debug_callback(log):
    def f(x, n):
        jax.debug.callback(lambda a, b, c: log.see("dbg", a, b, c), x, n, jnp.arange(4) * n)
        return jnp.sin(x)
    return f


def _pure_callback_float_result(log):
    def host(a):
        log.see("pure", a)
        return np.sin(np.asarray(a, np.float64)) * 3  # float64 on the host, as x64 code writes it
    def f(x, n):
        y = jax.pure_callback(host, jax.ShapeDtypeStruct(x.shape, x.dtype), x)
        return y * n + x
    return f


def _pure_callback_int_result(log):
    def host(m, a):
        log.see("pure-int", m, a)
        return np.asarray(m, np.int64) * 1000 + np.arange(3)
    def f(x, n):
        k = jax.pure_callback(host, jax.ShapeDtypeStruct((3,), INT_()), n, x)
        return x[:3] * k, k
    return f


def _pure_callback_tree(log):
    def host(tree):
        log.see("tree", tree["x"], tree["n"])
        return {"y": np.cos(np.asarray(tree["x"], np.float64)), "count": np.int64(tree["n"]) + 1,
                "positive": np.asarray(tree["x"]) > 0}
    def f(x, n):
        shapes = {"y": jax.ShapeDtypeStruct(x.shape, x.dtype), "count": jax.ShapeDtypeStruct((), INT_()),
                  "positive": jax.ShapeDtypeStruct(x.shape, jnp.bool_)}
        out = jax.pure_callback(host, shapes, {"x": x, "n": n})
        return jnp.where(out["positive"], out["y"], -out["y"]) * out["count"]
    return f


def _pure_callback_in_cond_and_while(log):
    def host(a):
        log.see("loop", a)
        return np.asarray(a) * 2
    def f(x, n):
        def body(state):
            i, v = state
            v = jax.pure_callback(host, jax.ShapeDtypeStruct(v.shape, v.dtype), v)
            return i + 1, v
        _, v = lax.while_loop(lambda s: s[0] < 3, body, (jnp.zeros((), INT_()), x))
        return lax.cond(n > 3, lambda v: jax.pure_callback(host, jax.ShapeDtypeStruct(v.shape, v.dtype), v + 1),
                        lambda v: v, v)
    return f


def _pure_callback_under_vmap(log):
    def host(a):
        log.see("vmapped", a)
        return np.asarray(a) + 1
    def f(x, n):
        def per_row(r):
            return jax.pure_callback(host, jax.ShapeDtypeStruct(r.shape, r.dtype), r, vmap_method="sequential")
        return jax.vmap(per_row)(jnp.stack([x, x * n]))
    return f


def _io_callback_unordered(log):
    def host(a, m):
        log.see("io", a, m)
        return np.asarray(a)[::-1].copy()
    def f(x, n):
        return io_callback(host, jax.ShapeDtypeStruct(x.shape, x.dtype), x, n) * 2
    return f


def _io_callback_ordered(log):
    def host(tag):
        def record(a):
            log.see(tag, a)
            return np.asarray(a, np.float64) + 0.5
        return record
    def f(x, n):
        a = io_callback(host("io1"), jax.ShapeDtypeStruct(x.shape, x.dtype), x, ordered=True)
        b = io_callback(host("io2"), jax.ShapeDtypeStruct(x.shape, x.dtype), a * n, ordered=True)
        return b
    return f


def _callbacks_under_grad(log):
    def loss(x, n):
        jax.debug.print("loss input {x}", x=x)
        return jnp.sum(jnp.sin(x) * n)
    def f(x, n):
        g = jax.grad(loss)(x, n)
        jax.debug.callback(lambda a: log.see("grad", a), g)
        return g
    return f


def _equinox_error_if(log):
    import equinox as eqx

    def f(x, n):
        y = eqx.error_if(x, jnp.any(x > 100.0), "x too large")
        return jnp.exp(y) * n
    return f


def _diffrax_default_error_checks(log):
    import diffrax

    def f(x, n):
        term = diffrax.ODETerm(lambda t, y, k: -k * y + jnp.sin(t))
        sol = diffrax.diffeqsolve(term, diffrax.Tsit5(), t0=0.0, t1=2.0, dt0=0.1, y0=x, args=n * 0.1,
                                  stepsize_controller=diffrax.PIDController(rtol=1e-4, atol=1e-6))
        return sol.ys[-1], sol.stats["num_steps"]
    return f


CASES = [
    Case("debug_print_unordered", _debug_print_unordered, (X, N)),
    Case("debug_print_ordered", _debug_print_ordered, (X, N), ordered_output=True),
    Case("debug_print_in_scan", _debug_print_in_scan, (X, N), ordered_output=True),
    Case("debug_callback", _debug_callback, (X, N)),
    Case("pure_callback_float64_result", _pure_callback_float_result, (X, N)),
    Case("pure_callback_int64_result", _pure_callback_int_result, (X, N)),
    Case("pure_callback_pytree_result", _pure_callback_tree, (X, N)),
    Case("pure_callback_in_cond_and_while", _pure_callback_in_cond_and_while, (X, N)),
    Case("pure_callback_under_vmap", _pure_callback_under_vmap, (X, N)),
    Case("io_callback_unordered", _io_callback_unordered, (X, N)),
    Case("io_callback_ordered", _io_callback_ordered, (X, N), ordered_output=True),
    Case("callbacks_under_grad", _callbacks_under_grad, (X, N)),
    Case("equinox_error_if", _equinox_error_if, (X, N)),
    Case("diffrax_default_error_checks", _diffrax_default_error_checks, (X[:2], N)),
]
SLOW = {"diffrax_default_error_checks"}  # over ~5 s: a fast tier can deselect them (-m "not slow")


def params(cases):
    return [pytest.param(c, id=c.name, marks=[pytest.mark.slow] if c.name in SLOW else []) for c in cases]


def run_both(case: Case, capfd) -> tuple:
    """(x64guard outputs, log, stdout), (x32 JAX outputs, log, stdout)."""
    results = []
    for side in ("x64guard", "x32"):
        log = Log()
        fn = case.make(log)
        oracle._forget_traces()
        capfd.readouterr()
        if side == "x64guard":
            out = x64guard.jit(fn)(*case.args)
        else:
            out = oracle.run_oracle(fn, [oracle.to32(a) for a in case.args])
        leaves = [np.asarray(x) for x in jax.tree_util.tree_leaves(out)]
        jax.effects_barrier()
        results.append((leaves, list(log), capfd.readouterr().out))
    return results


@pytest.mark.parametrize("case", params(CASES))
def test_callback_sees_and_returns_what_x32_jax_does(case, capfd):
    (got, got_log, got_out), (want, want_log, want_out) = run_both(case, capfd)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert oracle.bit_identical(g, w), f"{case.name}: {oracle.describe_mismatch(g, w)}"
    assert sorted(got_log) == sorted(want_log)
    assert got_log or got_out or case.name in ("equinox_error_if", "diffrax_default_error_checks")
    assert sorted(got_out.splitlines()) == sorted(want_out.splitlines())
    if case.ordered_output:
        assert got_out.splitlines() == want_out.splitlines()


@pytest.mark.parametrize("case", params(CASES))
def test_callback_custom_calls_carry_only_32_bit_types(case):
    text = x64guard.jit(case.make(Log())).lower(*case.args).as_text()
    calls = [line for line in text.splitlines() if "python_cpu_callback" in line and "custom_call" in line]
    if case.name not in ("equinox_error_if", "diffrax_default_error_checks"):
        assert calls, "the case holds a host callback"
    for line in calls:
        signature = line.split(" : ")[-1]
        assert not re.search(r"\b(?:u?i64|f64|complex<f64>)\b", re.sub(r"\s+loc\(.*$", "", signature)), line


def test_printed_text_is_x32_jax_text(capfd):
    def f(x):
        jax.debug.print("{x} {s:.10f} {i}", x=x / 3, s=jnp.sum(x) / 7, i=jnp.arange(2))
        return x

    oracle._forget_traces()
    x64guard.jit(f)(np.array([1.0, 2.0]))
    jax.effects_barrier()
    got = capfd.readouterr().out
    oracle.run_oracle(f, [np.array([1.0, 2.0], np.float32)])
    jax.effects_barrier()
    want = capfd.readouterr().out
    assert got == want
    assert "0.4285714286" not in got and "0.33333334" in got  # float32's values, not float64's


def test_int64_callback_result_out_of_range_raises_naming_the_callback():
    def counts(n):
        return np.int64(n) * 2**33

    fn = x64guard.jit(lambda n: jax.pure_callback(counts, jax.ShapeDtypeStruct((), INT_()), n) + 1)
    with pytest.raises(x64guard.X64GuardError, match=r"callback .*counts returned 17179869184 .*does not fit in "
                                                     r"int32.*never wraps") as info:
        jax.block_until_ready(fn(2))
    assert info.value.findings[0].kind == "callback-result-out-of-range"
    assert np.asarray(fn(0)) == 1  # in range: fine


def test_equinox_error_if_raises_as_under_x32_jax():
    import equinox as eqx

    f = lambda x: eqx.error_if(x, jnp.any(x < 0), "negative input") * 2  # noqa: E731
    messages = []
    for run in (lambda: x64guard.jit(f)(np.array([1.0, -2.0])),
                lambda: jax.jit(f)(np.array([1.0, -2.0], np.float32))):
        with pytest.raises(jax.errors.JaxRuntimeError, match="negative input"):
            jax.block_until_ready(run())
        messages.append("negative input")
    assert len(messages) == 2


def test_checkify_composes_inside():
    def f(x, i):
        checkify.check(jnp.all(x > 0), "x must be positive, got {}", x[0])
        return jnp.log(x)[i]

    checked = checkify.checkify(f, errors=checkify.user_checks | checkify.index_checks)
    for x, i in ((np.array([1.0, 2.0]), 1), (np.array([-1.0, 2.0]), 1), (np.array([1.0, 2.0]), 5)):
        oracle._forget_traces()
        err, out = x64guard.jit(checked)(x, i)
        oracle._forget_traces()
        err32, out32 = jax.jit(checked)(x.astype(np.float32), i)
        assert err.get() == err32.get()
        assert oracle.bit_identical(np.asarray(out), np.asarray(out32))


def test_callbacks_inside_an_outer_jit_and_vmap(capfd):
    seen = Log()

    def inner(x):
        jax.debug.print("inner {x}", x=x, ordered=True)
        return jax.pure_callback(lambda a: (seen.see("p", a), np.asarray(a) * 2)[1],
                                 jax.ShapeDtypeStruct(x.shape, x.dtype), x, vmap_method="sequential")

    narrowed = x64guard.jit(inner)
    x = np.linspace(0, 1, 3, dtype=np.float32)
    out = jax.jit(lambda x: narrowed(x) + narrowed(x * 2))(x)
    jax.effects_barrier()
    assert capfd.readouterr().out.splitlines() == ["inner [0.  0.5 1. ]", "inner [0. 1. 2.]"]
    assert oracle.bit_identical(np.asarray(out), (x * 2 + x * 4).astype(np.float32))
    seen.clear()
    batched = jax.vmap(lambda r: x64guard.jit(lambda v: jax.pure_callback(
        lambda a: (seen.see("v", a), np.asarray(a) + 1)[1], jax.ShapeDtypeStruct(v.shape, v.dtype), v,
        vmap_method="sequential"))(r))(np.stack([x, x]))
    assert np.asarray(batched).dtype == np.float32 and len(seen) == 2 and {s[1] for s in seen} == {"float32"}
