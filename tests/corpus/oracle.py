"""Differential oracle for the x64guard corpus.

For one corpus case:

1. trace and lower ``case.fn`` with x64 ON on the case's 64-bit inputs -> x64 StableHLO text;
2. narrow that text with ``x64guard.narrow``; the first check: the narrowed module must equal
   the module ``jax.jit`` lowers with x64 OFF on the 32-bit inputs, after normalising SSA
   names and locations only (tests/module_equality.py), or the case must be one of the named
   exceptions of tests/corpus/module_exceptions.py (with the finding that names it, if any);
3. compile the narrowed text directly with the CPU backend and run it on the inputs cast to
   their 32-bit counterparts (float64->float32, int64->int32, uint64->uint32,
   complex128->complex64; other dtypes unchanged);
4. trace and run the same ``case.fn`` with x64 OFF on the same 32-bit inputs (JAX's own x32
   canonicalization) and require identical dtypes, shapes and bytes.

Refusal cases instead require ``x64guard.X64GuardError`` with a finding of the expected kind.

Global JAX state (``jax_enable_x64``, ``jax_explicit_x64_dtypes``) is only ever changed inside
``try``/``finally`` blocks that restore the previous values.
"""

from __future__ import annotations

import contextlib
import re
import warnings
import zlib
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

import jax
import jax.extend.backend  # noqa: F401  (makes jax.extend.backend available)
from jax._src import compiler as _compiler
from jax._src.lib import xla_client as _xc

from . import programs

# --------------------------------------------------------------------------------------
# dtype plumbing

NARROW_DTYPE: dict[np.dtype, np.dtype] = {
    np.dtype(np.float64): np.dtype(np.float32),
    np.dtype(np.int64): np.dtype(np.int32),
    np.dtype(np.uint64): np.dtype(np.uint32),
    np.dtype(np.complex128): np.dtype(np.complex64),
}

# A 64-bit element type as it appears in a value type: `tensor<4xf64>`, `tensor<i64>`,
# `tensor<2x3xcomplex<f64>>`, or a bare scalar type after `:` / `(` / `,` / `->`.
_WIDE_TYPE_RE = re.compile(r"(?<=[<x\s(,:])(?:ui64|si64|i64|f64|complex<f64>)(?=[>\s,)])")
# Text that mentions i64 as structure, not as the type of a value: dimension lists,
# attribute dense arrays (`padding = dense<...> : tensor<1x2xi64>`), integer attributes
# (`{index = 0 : ui64}`), string literals and locations.
_STRUCTURAL_RE = [
    re.compile(r'"(?:[^"\\\n]|\\.)*"'),
    re.compile(r"array<i64(?::[^>]*)?>"),
    re.compile(r"=\s*dense<[^>]*>\s*:\s*tensor<[^>]*>"),
    re.compile(r"=\s*-?\d+\s*:\s*u?i64"),
]


def to32(a: Any) -> np.ndarray:
    """The 32-bit counterpart of one input (exactly JAX's canonicalization of its dtype)."""
    a = np.asarray(a)
    target = NARROW_DTYPE.get(a.dtype)
    return a.astype(target) if target is not None else a


def has_64bit_type(text: str) -> bool:
    """Does some value in the module have a 64-bit element type?

    Structural i64 (dimension lists, attribute arrays, locations) does not count: it is in
    the x32 lowering too, so a case whose only i64 is structural tests nothing.
    """
    body = "\n".join(line for line in text.splitlines() if not line.startswith("#loc"))
    for pattern in _STRUCTURAL_RE:
        body = pattern.sub(" ", body)
    return bool(_WIDE_TYPE_RE.search(body))


# The RNG state of rng_bit_generator (u64[2] / u64[3] by definition) is the one 64-bit value
# the x32 target keeps: JAX's own x32 programs hold it for every rbg/unsafe_rbg draw, in the
# generator and in the bitcasts between it and the uint32[4] key.
_RNG_STATE_TYPE = re.compile(r"tensor<[23]xui64>")
_RNG_STATE_OPS = ("stablehlo.rng_bit_generator", "stablehlo.bitcast_convert")


def is_rng_state_line(line: str) -> bool:
    """A line whose only 64-bit types are the RNG state, in an op that holds it."""
    return any(op in line for op in _RNG_STATE_OPS) and not has_64bit_type(_RNG_STATE_TYPE.sub(" ", line))


def _wide_lines(text: str) -> list[str]:
    out = []
    for line in text.splitlines():
        if line.startswith("#loc"):
            continue
        if has_64bit_type(line):
            out.append(re.sub(r"\s+loc\(.*$", "", line.strip())[:200])
    return out


def materialize_args(case: "programs.Case") -> tuple[np.ndarray, ...]:
    """The case's 64-bit inputs, generated deterministically from the case name."""
    programs.seed(zlib.crc32(case.name.encode()))
    args = case.args() if callable(case.args) else case.args
    return tuple(np.asarray(a) for a in args)


# --------------------------------------------------------------------------------------
# global JAX state, always restored


def _experimental_x64_context(enabled: bool):
    """`jax.experimental.enable_x64()` / `disable_x64()` if this jax still has them, else None."""
    import jax.experimental as jexp

    factory = getattr(jexp, "enable_x64" if enabled else "disable_x64", None)
    return factory() if callable(factory) else None


@contextlib.contextmanager
def x64(enabled: bool):
    """Run the body with x64 set to `enabled`; restore the previous state after.

    Uses `jax.experimental.enable_x64()` / `disable_x64()` when they exist (they are gone in
    jax 0.10), otherwise `jax.config.update("jax_enable_x64", ...)` with a restore.
    With x64 off, JAX canonicalizes explicit 64-bit dtypes (`x.astype(jnp.float64)`) to 32
    bits only in the default 'warn' mode of jax_explicit_x64_dtypes ('allow' keeps them,
    'error' raises); the oracle needs that canonicalization, so 'warn' is pinned too.
    """
    old_x64 = bool(jax.config.jax_enable_x64)
    old_explicit = _get_explicit_x64_dtypes()
    with contextlib.ExitStack() as stack:
        cm = _experimental_x64_context(enabled)
        if cm is not None:
            stack.enter_context(cm)
        else:
            jax.config.update("jax_enable_x64", bool(enabled))
        try:
            if not enabled and old_explicit is not None:
                _set_explicit_x64_dtypes("warn")
            yield
        finally:
            if cm is None:
                jax.config.update("jax_enable_x64", old_x64)
            if old_explicit is not None:
                _set_explicit_x64_dtypes(old_explicit)


def _get_explicit_x64_dtypes():
    """The current jax_explicit_x64_dtypes value as stored (an enum member), or None."""
    try:
        return jax.config.jax_explicit_x64_dtypes
    except AttributeError:
        return None


def _set_explicit_x64_dtypes(value) -> None:
    jax.config.update("jax_explicit_x64_dtypes", value)


# --------------------------------------------------------------------------------------
# the three programs


def _forget_traces() -> None:
    """Drop JAX's tracing caches before tracing with the other x64 setting.

    Fresh `jax.jit` objects are not enough in jax 0.10.2: a numpy array closed over by the
    function (e.g. a module-level `np.arange(4, dtype=np.int64)`) keeps the dtype of the first
    trace that saw it, so after an x64 trace the x32 trace of `n + B` fails to verify
    ("op requires the same element type for all operands and results"), and vice versa.
    `jax.clear_caches()` (its `util.clear_all_caches` part) fixes that; compiled
    executables for our fresh jit objects are never reused anyway.
    """
    jax.clear_caches()


def lower_x64(fn: Callable, args: Sequence[np.ndarray]) -> str:
    """x64 StableHLO text of `fn` on the 64-bit inputs (a fresh jit object every time).

    keep_unused=True so that the module's parameters are exactly the inputs, in order.
    """
    _forget_traces()
    with x64(True), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lowered = jax.jit(fn, keep_unused=True).lower(*args)
        return lowered.as_text(debug_info=True)


def run_oracle(fn: Callable, args32: Sequence[np.ndarray]) -> list[np.ndarray]:
    """JAX's own x32 program: the same fn traced and run with x64 off on the 32-bit inputs."""
    _forget_traces()
    with x64(False), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = jax.jit(fn)(*args32)
        leaves = jax.tree_util.tree_leaves(out)
        return [np.asarray(jax.device_get(leaf)) for leaf in leaves]


_CPU = None


def _cpu():
    global _CPU
    if _CPU is None:
        backend = jax.extend.backend.get_backend("cpu")
        device = backend.devices()[0]
        _CPU = (backend, device, _xc.DeviceList((device,)))
    return _CPU


def run_text(text: str, args32: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Compile StableHLO text directly on the CPU backend and run it on the 32-bit inputs."""
    backend, device, device_list = _cpu()
    options = _compiler.get_compile_options(num_replicas=1, num_partitions=1, backend=backend)
    executable = backend.compile_and_load(text, device_list, options)
    with x64(False):
        inputs = [jax.device_put(a, device) for a in args32]
    outputs = executable.execute(inputs)
    return [np.asarray(o) for o in outputs]


# --------------------------------------------------------------------------------------
# comparison


def bit_identical(got: np.ndarray, want: np.ndarray) -> bool:
    if got.dtype != want.dtype or got.shape != want.shape:
        return False
    g = np.ascontiguousarray(got)
    w = np.ascontiguousarray(want)
    if g.dtype == np.bool_:
        return bool(np.array_equal(g, w))
    return bool(np.array_equal(g.view(np.uint8), w.view(np.uint8)))


def describe_mismatch(got: np.ndarray, want: np.ndarray) -> str:
    if got.dtype != want.dtype:
        return f"dtype {got.dtype} != oracle {want.dtype}"
    if got.shape != want.shape:
        return f"shape {got.shape} != oracle {want.shape}"
    g = np.ascontiguousarray(got).reshape(-1)
    w = np.ascontiguousarray(want).reshape(-1)
    if g.dtype == np.bool_:
        diff = np.nonzero(g != w)[0]
    else:
        item = g.dtype.itemsize
        gb = g.view(np.uint8).reshape(-1, item)
        wb = w.view(np.uint8).reshape(-1, item)
        diff = np.nonzero((gb != wb).any(axis=1))[0]
    first = diff[:4]
    pairs = ", ".join(f"[{i}] {g[i]!r} vs {w[i]!r}" for i in first)
    extra = "" if g.dtype.kind not in "fc" else (
        f"; max abs diff {np.nanmax(np.abs(g.astype(np.complex128) - w.astype(np.complex128))):.3g}")
    return f"{len(diff)}/{g.size} elements differ: {pairs}{extra}"


# --------------------------------------------------------------------------------------
# the check


@dataclass
class Outcome:
    case: "programs.Case"
    x64_text: str
    narrowed_text: str | None = None
    result: Any = None
    module_equality: Any = None  # tests.module_equality.Comparison


def lower_x32(fn: Callable, args32: Sequence[np.ndarray], keep_unused: bool = True) -> str:
    """x32 JAX's module: the same fn lowered with x64 off on the 32-bit inputs (not compiled)."""
    _forget_traces()
    with x64(False), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return jax.jit(fn, keep_unused=keep_unused).lower(*args32).as_text()


def check_module_equality(case: "programs.Case", result, args32: Sequence[np.ndarray],
                          args: Sequence[np.ndarray] = ()):
    """The first check: the narrowed module is x32 JAX's module, or a named exception."""
    from tests import module_equality
    from tests.corpus.module_exceptions import MODULE_EXCEPTIONS

    from tests.corpus import lowering_probes

    comparison = module_equality.compare(result.module, lower_x32(case.fn, args32))
    exception = MODULE_EXCEPTIONS.get(case.name)
    if lowering_probes.differs(case):
        return comparison  # the running JAX lowers this program by dtype: another program, by design

    def fail(message: str) -> None:
        def raise_it(m):
            raise AssertionError(m)
        module_equality.fail_or_report(message, raise_it)

    kinds = {str(f.kind) for f in result.findings}
    named_converts = comparison.identity_converts_only and "identity-convert" in kinds
    if comparison.equal or named_converts:
        if exception is not None:
            fail(f"{case.name}: listed in tests/corpus/module_exceptions.py ({exception.why}) but its narrowed "
                 "module now equals x32 JAX's" + ("" if comparison.equal else ", but for converts to the same type "
                                                  "its identity-convert finding names") + ": remove the entry")
        return comparison
    if exception is None:
        fail(f"{case.name}: the narrowed module is not the module jax.jit lowers with x64 off (types, attributes, "
             "op order and functions must match; SSA names and locations aside)"
             + (", only by converts to the same type, but narrowing reported no identity-convert finding"
                if comparison.identity_converts_only else "") + ":\n" + comparison.describe(24))
        return comparison
    if exception.kind is not None and exception.named_by == "x64guard.jit":
        front_end = _front_end_kinds(case.fn, args)
        if exception.kind not in front_end:
            fail(f"{case.name}: its module differs from x32 JAX's for a reason x64guard.jit's finding "
                 f"{exception.kind!r} names, but x64guard.jit reported none (kinds: {sorted(front_end)})")
    elif exception.kind is not None:
        if exception.kind not in kinds:
            fail(f"{case.name}: its module differs from x32 JAX's for a reason the finding {exception.kind!r} "
                 f"names, but narrowing reported none (kinds: {sorted(kinds)})")
    return comparison


def _front_end_kinds(fn: Callable, args: Sequence[np.ndarray]) -> set[str]:
    """The finding kinds of x64guard.jit's program for `fn` on the 64-bit inputs (lowered
    only, x64 on as the program was written)."""
    import x64guard

    _forget_traces()
    with x64(True), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {str(f.kind) for f in x64guard.jit(fn).lower(*args).findings}


def _expected_kinds(expect) -> set[str]:
    if isinstance(expect, str):
        return set(expect.split("|"))
    return set(expect)


def _narrow(narrow: Callable, text: str):
    """Call narrow in 'warn' mode with its warnings silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return narrow(text, mode="warn")


def check_case(case: "programs.Case", narrow: Callable, error_type: type | None = None) -> Outcome:
    """Run one corpus case through the differential oracle; raise AssertionError on failure.

    `narrow` is `x64guard.narrow` (or a stand-in with its signature); `error_type` is
    `x64guard.X64GuardError` and is needed for refusal cases.
    """
    from tests.corpus import lowering_probes  # imports this module

    args = materialize_args(case)
    text = lower_x64(case.fn, args)
    assert has_64bit_type(text), (
        f"{case.name}: the x64 lowering contains no 64-bit type, so the case tests nothing:\n"
        + text[:2000])
    outcome = Outcome(case, text)

    if case.expect != "narrow":
        kinds = _expected_kinds(case.expect)
        assert error_type is not None, "refusal cases need the error type"
        try:
            result = _narrow(narrow, text)
        except error_type as err:
            findings = list(getattr(err, "findings", []))
            matching = [f for f in findings if f.kind in kinds]
            assert matching, (
                f"{case.name}: refused, but with none of the expected kinds {sorted(kinds)}; "
                f"findings: {[(f.kind, f.op) for f in findings]}")
            if case.op is not None:
                # A finding's op may carry detail after the name ("stablehlo.custom_call @t").
                assert any(f.op == case.op or f.op.startswith(case.op + " ")
                           for f in matching), (
                    f"{case.name}: expected a {sorted(kinds)} finding on {case.op}, got "
                    f"{[(f.kind, f.op) for f in matching]}")
            return outcome
        raise AssertionError(
            f"{case.name}: expected X64GuardError with kind {sorted(kinds)}, but narrow "
            f"succeeded (changes={getattr(result, 'changes', None)})")

    try:
        result = _narrow(narrow, text)
    except Exception as err:
        if error_type is not None and isinstance(err, error_type):
            findings = [(f.kind, f.op) for f in getattr(err, "findings", [])]
            raise AssertionError(
                f"{case.name}: expected to narrow, but x64guard refused: {findings}\n{err}"
            ) from err
        raise
    narrowed = result.text if hasattr(result, "text") else str(result)
    outcome.narrowed_text = narrowed
    outcome.result = result
    wide = [line for line in _wide_lines(narrowed) if not is_rng_state_line(line)]
    assert not wide, (
        f"{case.name}: the narrowed module still has 64-bit value types (besides the RNG state): "
        + "; ".join(wide[:3]))

    args32 = [to32(a) for a in args]
    if "lgamma" in lowering_probes.differs(case) and "chlo.lgamma" in narrowed and hasattr(result, "findings"):
        # The user is told: narrowed, chlo.lgamma is not x32 JAX's expansion on this JAX.
        assert any(f.kind == "x32-lowering" for f in result.findings), (
            f"{case.name}: chlo.lgamma narrowed where this JAX expands float32 lgamma itself, without an "
            f"x32-lowering warning: {[(f.kind, f.op) for f in result.findings]}")
    if hasattr(result, "module"):
        outcome.module_equality = check_module_equality(case, result, args32, args)
    try:
        got = run_text(narrowed, args32)
    except Exception as err:  # compile or execution failure of the narrowed module
        raise AssertionError(
            f"{case.name}: narrowed module failed to compile/run: {type(err).__name__}: "
            f"{str(err)[:1500]}") from err
    want = run_oracle(case.fn, args32)

    assert len(got) == len(want), (
        f"{case.name}: narrowed module returns {len(got)} outputs, oracle {len(want)}")
    problems = []
    differs = lowering_probes.differs(case)
    for i, (g, w) in enumerate(zip(got, want)):
        if differs and g.dtype == w.dtype and g.shape == w.shape and np.issubdtype(g.dtype, np.floating):
            # Another program than x32's (lowering_probes): correct to float32, not x32's bits.
            if not np.allclose(g, w, rtol=1e-5, atol=1e-6, equal_nan=True):
                problems.append(f"output {i} (lowered by dtype: {differs}): {describe_mismatch(g, w)}")
        elif not bit_identical(g, w):
            problems.append(f"output {i}: {describe_mismatch(g, w)}")
    assert not problems, f"{case.name}: not bit-identical to JAX's x32 program:\n  " + \
        "\n  ".join(problems)
    return outcome


# --------------------------------------------------------------------------------------
# command line: run a whole list and summarise (handy for triage)


def _run_cases(cases, first: int, verbose: bool) -> int:
    import time
    import traceback

    import x64guard

    failures = 0
    for index in range(first, len(cases)):
        case = cases[index]
        print(f"START {index} {case.name}", flush=True)
        t = time.perf_counter()
        try:
            check_case(case, x64guard.narrow, x64guard.X64GuardError)
            status = "ok"
        except Exception as err:  # noqa: BLE001
            failures += 1
            msg = str(err).strip().splitlines() or [type(err).__name__]
            status = "FAIL " + " | ".join(m.strip() for m in msg[:3])[:400]
            if verbose:
                traceback.print_exc()
        print(f"{time.perf_counter() - t:6.2f}s {case.name}: {status}", flush=True)
    return failures


def _main(argv: Sequence[str] | None = None) -> int:
    """`python -m tests.corpus.oracle [-k SUBSTR] [--list NAME] [--crash-safe]` from the repo root.

    --crash-safe runs the cases in a child process and restarts it after the case that
    crashed it (a segfault in the pass would otherwise end the whole run).
    """
    import argparse
    import os
    import subprocess
    import sys
    import time

    parser = argparse.ArgumentParser(description="run the x64guard differential corpus")
    parser.add_argument("-k", default="", help="substring filter on case names")
    parser.add_argument("--list", default="CASES", help="programs attribute to run")
    parser.add_argument("--first", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--crash-safe", action="store_true")
    parser.add_argument("-v", action="store_true", help="print tracebacks")
    ns = parser.parse_args(argv)

    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if repo not in sys.path:
        sys.path.insert(0, repo)
    cases = [c for c in getattr(programs, ns.list) if ns.k in c.name]
    t0 = time.perf_counter()
    if not ns.crash_safe:
        failures = _run_cases(cases, ns.first, ns.v)
        print(f"{len(cases) - failures}/{len(cases)} passed in {time.perf_counter() - t0:.1f}s")
        return 1 if failures else 0

    first, failures = 0, 0
    while first < len(cases):
        cmd = [sys.executable, "-m", "tests.corpus.oracle", "-k", ns.k, "--list", ns.list,
               "--first", str(first)] + (["-v"] if ns.v else [])
        proc = subprocess.Popen(cmd, cwd=repo, stdout=subprocess.PIPE, text=True)
        current = None
        for line in proc.stdout:
            if line.startswith("START "):
                current = int(line.split()[1])
                continue
            if " FAIL " in line or ": FAIL" in line:
                failures += 1
            if "passed in" not in line:
                print(line, end="", flush=True)
        rc = proc.wait()
        if rc >= 0 or current is None:
            break
        failures += 1
        print(f"  CRASH  {cases[current].name}: FAIL process died with signal {-rc}", flush=True)
        first = current + 1
    print(f"{len(cases) - failures}/{len(cases)} passed in {time.perf_counter() - t0:.1f}s")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(_main())
