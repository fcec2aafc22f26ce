"""One program, the x32 one (issue 22 item 1, issue 21 item 2): 64-bit inputs are converted
before the narrowed program, never inside it, so the direct call of `x64guard.jit(f)` and
`x64guard.jit(f).lower(...).compile()` run the same program, bit for bit, and what XLA is
given (the optimized HLO, metadata stripped, and the serialized compile options) is what
`jax.jit` with x64 off gives it.

The corpus check runs the sample of tests/sample.py (about one case in eight) in
`make test`; `python -m tests.jax.test_same_program` runs every narrowing case.
"""

from __future__ import annotations

import re
import sys
import types
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import x64guard
from x64guard.jax import inputs
from tests.jax.compiles import recording_compiles
from tests.corpus import oracle
from tests.corpus.programs import CASES
from tests.sample import in_sample

NARROWING = [c for c in CASES if c.expect == "narrow"]
_METADATA = re.compile(r",?\s*metadata=\{[^}]*\}")


def _hlo(compiled) -> str:
    """Optimized HLO text without metadata and without the stack-frame tables (source
    lines, which differ between two calling lines)."""
    return _METADATA.sub("", compiled.as_text().split("\nFileNames")[0])


def _bits(tree) -> list[bytes]:
    return [np.asarray(leaf).dtype.str.encode() + np.asarray(leaf).tobytes() for leaf in jax.tree_util.tree_leaves(tree)]


def _fresh(fn):
    """A new function object with fn's code, name and closure. JAX caches a function's
    trace, lowering and executable on the function object (weakly, with an LRU), so an
    earlier test that compiled the same case can serve jax.jit's executable from the cache
    and XLA sees one compile, not two. A fresh object makes both compiles happen here."""
    if isinstance(fn, types.FunctionType):
        copy = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
        copy.__kwdefaults__ = fn.__kwdefaults__
    else:  # jnp's own functions are jitted objects: a plain function calling one
        copy = lambda *args, **kwargs: fn(*args, **kwargs)  # noqa: E731
        copy.__name__ = fn.__name__
    copy.__qualname__, copy.__module__ = getattr(fn, "__qualname__", fn.__name__), fn.__module__
    return copy


def check_case(case) -> str:
    """'' when the case holds, else what differs."""
    args = oracle.materialize_args(case)
    args32 = [oracle.to32(a) for a in args]
    function = _fresh(case.fn)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with recording_compiles() as compiles:
            lowered = jax.jit(function).lower(*args32)
            want = lowered.compile()
            with oracle.x64(True):
                got = x64guard.jit(function).lower(*args).compile()
        if _hlo(want) != _hlo(got):
            return "the optimized HLO differs from jax.jit's x32 executable"
        # Only the two programs' compiles: tracing may compile JAX's own eager helpers the
        # first time in a process (lib_blackjax_ns_log1mexp: one more, named otherwise).
        program = re.search(r"module @([\w.$-]+)", lowered.as_text()).group(1)
        compiles = [options for name, options in compiles if name == program]
        if len(compiles) != 2 or compiles[0] != compiles[1]:
            return f"the compile options differ ({len(compiles)} compiles of {program})"
        with oracle.x64(True):
            fn = x64guard.jit(case.fn)
            lowered_out = got(*args)
            direct = fn(*args)           # float64 numpy from a caller with x64 on
            again = fn(*args)            # the steady state
            on_device = fn(*[jnp.asarray(a) for a in args])  # float64 JAX arrays
        x32_caller = fn(*args)           # x64 off: JAX's own host cast
    reference = _bits(lowered_out)
    for label, out in (("direct", direct), ("steady", again), ("device", on_device), ("x64 off", x32_caller)):
        if _bits(out) != reference:
            return f"the {label} call differs from .lower().compile()"
    return ""


@pytest.mark.filterwarnings("ignore::x64guard.X64GuardWarning")
@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in NARROWING if in_sample(c.name)])
def test_direct_call_is_lower_compile_and_jax_jit_x32(case):
    assert check_case(case) == ""


def test_issue_22_repro_conversion_outside_the_program():
    """Element 12 is 0.0 under x32 jax.jit; a conversion fused into the program gave -4.69e-7."""
    f = lambda x, c: (x * x - x * x[::-1]) * c  # noqa: E731
    x = np.random.default_rng(0).standard_normal(25)
    want = np.asarray(jax.jit(f)(x, 3.0))
    assert want[12] == 0.0
    with oracle.x64(True), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fn = x64guard.jit(f)
        outs = [fn(x, 3.0), fn(x, 3.0), fn(jnp.asarray(x), 3.0), fn(jnp.asarray(x), 3.0),
                fn.lower(x, 3.0).compile()(x, 3.0)]
    for out in outs:
        assert oracle.bit_identical(np.asarray(out), want)


def test_device_inputs_convert_without_an_xla_compile_per_shape():
    """Float64 JAX arrays of a caller with x64 on: one compile per signature (the program),
    none for converting the inputs."""
    fn = x64guard.jit(lambda x: jnp.sin(x) * 2)
    with oracle.x64(True), warnings.catch_warnings(), recording_compiles() as compiles:
        warnings.simplefilter("ignore")
        for n in (3, 5, 7):
            fn(jnp.ones(n))
    assert [name for name, _ in compiles if "x64guard" in name or "lambda" in name] == ["jit__lambda"] * 3, compiles


def test_float64_arrays_of_an_x64_caller_run_from_the_wide_fast_path(monkeypatch):
    """Float64 JAX arrays (x64 on) are converted before the program and run as float64
    numpy data is: one specialization, traced at 64 bits, whose later calls JAX's C++
    dispatch serves (not JAX's Python call path on every call). A weakly typed float64
    array keeps its own trace."""
    f = lambda x, y: jnp.sin(x) * y + 1  # noqa: E731
    x, y = np.linspace(-3.0, 3.0, 17), np.linspace(0.0, 1.0, 17)
    want = np.asarray(jax.jit(f)(oracle.to32(x), oracle.to32(y)))
    fn = x64guard.jit(f)
    built = []
    specialize = fn.narrowed_function._specialize
    monkeypatch.setattr(fn.narrowed_function, "_specialize",
                        lambda *a, **k: (built.append(a[3] if len(a) > 3 else k.get("wide_leaves")), specialize(*a, **k))[1])
    with oracle.x64(True), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        xs, ys = jnp.asarray(x), jnp.asarray(y)
        outs = [fn(xs, ys) for _ in range(4)]
        weak = fn(jnp.asarray(2.0), ys)  # a weakly typed float64 scalar array
    for out in outs:
        assert oracle.bit_identical(np.asarray(out), want)
    # Each new signature is specialized twice: built before its arrays convert (so the
    # conversion overlaps the compile), then found by the wide dispatcher's cache miss.
    # The three later calls of the first signature specialize nothing.
    assert built == [(0, 1), (0, 1), (1,), (1,)], built
    assert len(fn.narrowed_function._cache) == 2  # the wide program, then the weak call's own
    assert np.asarray(weak).dtype == np.float32


def test_accelerator_inputs_convert_on_their_device(monkeypatch):
    """Float64 JAX arrays on an accelerator are converted there, by a small XLA program of
    their own (compiled once per shape, cached by JAX), not through the host (a round trip
    on every call). No accelerator here: the CPU plays one, and the bits stay x32 JAX's."""
    monkeypatch.setattr(inputs, "on_accelerator", lambda devices: True)
    f = lambda x: jnp.sin(x) * 2 + 1  # noqa: E731
    x = np.linspace(-3.0, 3.0, 17)
    want = np.asarray(jax.jit(f)(oracle.to32(x)))
    fn = x64guard.jit(f)
    with oracle.x64(True), warnings.catch_warnings(), recording_compiles() as compiles:
        warnings.simplefilter("ignore")
        on_device = jnp.asarray(x)
        outs = [fn(on_device), fn(on_device)]
    for out in outs:
        assert oracle.bit_identical(np.asarray(out), want)
    assert [name for name, _ in compiles if "convert" in name] == ["jit_convert_element_type"], compiles



def test_accelerator_inputs_convert_together(monkeypatch):
    """Several float64 arrays on one accelerator: one small program converts them all (one
    dispatch per call, not one per array), each rounded exactly as alone: x32 JAX's bits."""
    monkeypatch.setattr(inputs, "on_accelerator", lambda devices: True)

    def f(params, x):
        w, b = params
        return jnp.tanh(x @ w + b).sum(), w * 2

    rng = np.random.default_rng(0)
    args = ((rng.standard_normal((5, 3)), rng.standard_normal(3)), rng.standard_normal((4, 5)))
    want = jax.jit(f)(*jax.tree.map(oracle.to32, args))
    fn = x64guard.jit(f)
    with oracle.x64(True), warnings.catch_warnings(), recording_compiles() as compiles:
        warnings.simplefilter("ignore")
        on_device = jax.tree.map(jnp.asarray, args)
        outs = [fn(*on_device), fn(*on_device)]
    for out in outs:
        for got, expected in zip(jax.tree.leaves(out), jax.tree.leaves(want)):
            assert oracle.bit_identical(np.asarray(got), np.asarray(expected))
    assert [name for name, _ in compiles if "convert" in name] == ["jit_convert_inputs"], compiles

def _main(argv: list[str]) -> int:
    failed = 0
    for case in NARROWING:
        problem = check_case(case)
        if problem:
            failed += 1
            print(f"{case.name}: {problem}")
    print(f"{len(NARROWING) - failed} of {len(NARROWING)} cases hold")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
