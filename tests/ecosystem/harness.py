"""Run one real-ecosystem program both ways and say what x64guard did with it.

For a program p (tests/ecosystem/programs):

1. `fn, args = p.build()` with x64 off (models, data and keys as a user's x32 script has them);
2. the reference: `jax.jit(fn)(*args)` with x64 off (JAX's own 32-bit program);
3. the candidate: `x64guard.jit(fn)(*args)` with x64 on for this thread only
   (`jax.enable_x64(True)`, restored on exit: the global flag never changes);
4. every output leaf compared bit for bit, dtypes and shapes included (tests/corpus/oracle.py's
   `bit_identical`); typed PRNG keys are compared by their key data and their impl; and the
   same x64guard.jit function's `.lower(*args).compile()(*args)` must give the direct call's
   bits (one program, inputs converted before it).

Outcomes: `identical`; `refused` (X64GuardError: acceptable only when the program carries a
`Refusal` naming one of the refusal's finding kinds and x32 JAX indeed does not give the
64-bit program's answer); `wrong` (outputs differ); `crash` (any other exception from the
candidate, or the child process died); `error` (the program itself or the reference failed:
a broken program, not an x64guard verdict).

Every record that is not acceptable gets a root-cause class (`diagnose`, CAUSES) from the
refusal's findings or the exception; a wrong answer is probed: the program's x64 lowering
with its float64 `finfo` constants (eps, tiny, 1 - eps, ...) replaced by float32's, and
lowered with its inputs at their own width, each narrowed with `x64guard.narrow` and run;
the probe that gives x32 JAX's bits names the cause.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import sys
import time
import traceback
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

OUTCOMES = ("identical", "refused", "wrong", "crash", "error")
# Root causes of records that are not ok: what the other items fix (rng-bits: item 2,
# callback: item 3, typed-key: item 4, finfo-constant: item 1, input-width: item 6), or other.
# rng-seed: jax.random.key(seed) inside the function, refused for threefry_seed's int64 mask.
CAUSES = ("rng-bits", "rng-seed", "callback", "typed-key", "finfo-constant", "input-width",
          "finfo-constant+input-width", "other")


@dataclass
class Record:
    name: str
    library: str
    outcome: str  # one of OUTCOMES
    ok: bool  # identical, or refused with the program's justification
    cause: str = ""  # for records that are not ok: one of CAUSES
    detail: str = ""
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)  # X64GuardWarnings: "file:line: first line"
    findings: list[str] = field(default_factory=list)  # "kind@op" of a refusal
    has_64bit: bool | None = None  # does the program's x64 lowering hold 64-bit value types?
    # Module equality (tests/module_equality.py), the first check of a program x64guard
    # narrows: "equal", "equal-counters" (x32's own uint64 counters rewritten alike),
    # "explained: <kinds>" (differs where info findings say the result is the same),
    # "differs" (module_diff holds the first lines), "" (not narrowed), or "error: ...".
    module_equality: str = ""
    module_diff: str = ""

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_dict(cls, data: dict) -> "Record":
        return cls(**data)


# ----------------------------------------------------------------------------- x64 on/off

def x64(enabled: bool):
    """jax_enable_x64 for this thread only, restored on exit (JAX's scoped config)."""
    import jax

    return jax.enable_x64(bool(enabled))


# ----------------------------------------------------------------------------- outputs

def _host_leaves(tree) -> tuple[Any, list[tuple[str, np.ndarray, str]]]:
    """(treedef, [(path, numpy value, dtype name)]) of an output pytree; typed PRNG keys
    become their key data, their dtype name (`key<fry>`) kept for the comparison."""
    import jax

    with_paths, treedef = jax.tree_util.tree_flatten_with_path(tree)
    leaves = []
    for path, leaf in with_paths:
        dtype = getattr(leaf, "dtype", None)
        if dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
            value = np.asarray(jax.random.key_data(leaf))
        else:
            value = np.asarray(jax.device_get(leaf))
        leaves.append((jax.tree_util.keystr(path) or "out", value, str(dtype if dtype is not None else value.dtype)))
    return treedef, leaves


def compare(got_tree, want_tree) -> str:
    """'' when `got_tree` is bit-identical to `want_tree` (structure, dtypes, shapes,
    bytes), else what differs first."""
    from tests.corpus.oracle import bit_identical, describe_mismatch

    got_def, got = _host_leaves(got_tree)
    want_def, want = _host_leaves(want_tree)
    if got_def != want_def:
        return f"output structure {got_def} != reference {want_def}"
    problems = []
    for (path, g, g_dtype), (_, w, w_dtype) in zip(got, want):
        if g_dtype != w_dtype:
            problems.append(f"{path}: dtype {g_dtype} != reference {w_dtype}")
        elif not bit_identical(g, w):
            problems.append(f"{path}: {describe_mismatch(g, w)}")
    if not problems:
        return ""
    more = f" (+{len(problems) - 1} more leaves differ)" if len(problems) > 1 else ""
    return problems[0] + more


# ----------------------------------------------------------------------------- diagnosis

def _finfo_derived(dtype) -> dict[str, float]:
    """Values library code derives from `jnp.finfo(dtype)`, computed in `dtype`'s own
    arithmetic, by name."""
    f = np.finfo(dtype)
    one, eps, tiny, big = dtype(1), f.eps, f.tiny, f.max
    with np.errstate(all="ignore"):
        named = {
            "eps": eps, "epsneg": f.epsneg, "tiny": tiny, "smallest_subnormal": f.smallest_subnormal, "max": big,
            "1-eps": one - eps, "1-epsneg": one - f.epsneg, "1+eps": one + eps,
            "sqrt(eps)": np.sqrt(eps), "cbrt(eps)": np.cbrt(eps), "sqrt(tiny)": np.sqrt(tiny),
            "sqrt(max)": np.sqrt(big),
            "log(tiny)": np.log(tiny), "log(max)": np.log(big), "log(eps)": np.log(eps),
        }
        for k in (*range(2, 11), 16, 20, 32, 50, 64, 100, 128, 1000):
            named[f"{k}*eps"] = dtype(k) * eps
            named[f"{k}*tiny"] = dtype(k) * tiny
    return {name: float(value) for name, value in named.items()}


# name -> (float64's value, float32's value): what x32 JAX traces in place of each.
FINFO_COUNTERPARTS = {name: (v64, _finfo_derived(np.float32)[name])
                      for name, v64 in _finfo_derived(np.float64).items()}
_F64_CONSTANT = re.compile(r"(stablehlo\.constant dense<)([^>]*)(> : tensor<(?:[0-9x?]*x)?f64>)")
_TOKEN = re.compile(r"[^\[\],\s]+")


def _float_token(token: str) -> float | None:
    try:
        if token.startswith("0x"):
            return float(np.array(int(token, 16), dtype=np.uint64).view(np.float64))
        return float(token)
    except (ValueError, OverflowError):
        return None


def _finfo_name(c: float) -> str | None:
    """The FINFO_COUNTERPARTS name of a float64 constant (sign included), if it is one:
    equal to a name's value, or within one float64 ulp of it (the same expression computed
    in another order) unless float32 holds the constant exactly (1.0 is not `1+eps`)."""
    if not math.isfinite(c) or c == 0:
        return None
    with np.errstate(over="ignore", under="ignore"):
        exact32 = float(np.float32(c)) == c
    for name, (v64, _) in FINFO_COUNTERPARTS.items():
        if abs(c) == v64 or (not exact32 and v64 < 1e300
                             and abs(abs(c) - v64) <= float(np.spacing(np.float64(v64)))):
            return ("-" if c < 0 else "") + name
    return None


def finfo_constants(x64_text: str) -> list[str]:
    """Names of the float64 constants of an x64 lowering that are float64 finfo values
    (x32 JAX traces float32's), and of those narrowing collapses (a nonzero value that
    becomes 0 or subnormal or infinite, a value that becomes exactly +-1)."""
    found: list[str] = []
    tiny32 = float(np.finfo(np.float32).tiny)
    for _, body, _ in _F64_CONSTANT.findall(x64_text):
        for token in _TOKEN.findall(body):
            c = _float_token(token)
            if c is None or not math.isfinite(c):
                continue
            name = _finfo_name(c)
            if name is None and float(np.float64(c)) != float(np.float32(c)):
                with np.errstate(over="ignore", under="ignore"):
                    narrowed = float(np.float32(c))
                if narrowed == 0 or abs(narrowed) < tiny32 or not math.isfinite(narrowed) or abs(narrowed) == 1.0:
                    name = f"{c!r}->{narrowed!r}"
            if name is not None and name not in found:
                found.append(name)
    return found


def replace_finfo_constants(x64_text: str) -> str:
    """The x64 text with every float64 finfo constant replaced by float32's counterpart
    (still spelled as an f64 literal: narrowing then keeps it exactly)."""
    def constant(match: re.Match) -> str:
        def token(t: re.Match) -> str:
            c = _float_token(t.group(0))
            name = _finfo_name(c) if c is not None else None
            if name is None:
                return t.group(0)
            value = FINFO_COUNTERPARTS[name.lstrip("-")][1]
            return repr(-value if name.startswith("-") else value)
        return match.group(1) + _TOKEN.sub(token, match.group(2)) + match.group(3)
    return _F64_CONSTANT.sub(constant, x64_text)


# (cause, pattern) for exceptions that are not x64guard's, first match wins.
_CRASH_CAUSES = (
    ("callback", re.compile(r"serialization of host_callbacks|host_callback|io_callback|pure_callback")),
    ("typed-key", re.compile(r"key<\w+>|Cannot interpret 'key|PRNGKeyArray|prng_key")),
)
_RNG_KINDS = frozenset({"rng-bits", "rng-state"})
# jax.random.key/PRNGKey of an integer seed (threefry_seed) masks the 64-bit seed with this
# int64 constant under x64; x64guard refuses it as constant-out-of-range.
_SEED_MASK = "(4294967295)"


def _flat_inputs32(args) -> list[np.ndarray]:
    """The module's inputs in order: leaves as x32 JAX sees them (typed keys as key data)."""
    import jax

    from tests.corpus.oracle import to32

    flat = []
    for leaf in jax.tree_util.tree_leaves(args):
        dtype = getattr(leaf, "dtype", None)
        if dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
            leaf = jax.random.key_data(leaf)
        flat.append(to32(np.asarray(leaf)))
    return flat


def probe(fn, args, reference, *, widen: bool, finfo32: bool) -> str:
    """Would x64guard give x32 JAX's bits if (widen=False) float32/int32 inputs were traced
    at their own width and/or (finfo32=True) float64 finfo constants were float32's?
    Narrows the program's x64 lowering so changed with x64guard.narrow and runs it:
    'identical', 'differs', or 'n/a: why'."""
    import jax

    import x64guard
    from tests.corpus.oracle import bit_identical, run_text

    try:
        jax.clear_caches()
        with x64(True), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            specs = jax.tree_util.tree_map(_spec64, args) if widen else args
            text = jax.jit(fn, keep_unused=True).lower(*specs).as_text()
            if finfo32:
                text = replace_finfo_constants(text)
            narrowed = x64guard.narrow(text, mode="warn").text
        got = run_text(narrowed, _flat_inputs32(args))
    except Exception as exc:  # noqa: BLE001
        return f"n/a: {type(exc).__name__}: {_first_line(exc, 80)}"
    _, want = _host_leaves(reference)
    same = len(got) == len(want) and all(bit_identical(g, w) for g, (_, w, _) in zip(got, want))
    return "identical" if same else "differs"


# For a wrong answer: the probes, all run; the first (in this order) that gives x32 JAX's bits
# names the cause (the fix it stands for: issue 11 item 1, item 6, both).
_PROBES = (("finfo-constant", dict(widen=True, finfo32=True)),
           ("input-width", dict(widen=False, finfo32=False)),
           ("finfo-constant+input-width", dict(widen=False, finfo32=True)))


def diagnose(record: Record, x64_text: str | None, fn=None, args=None, reference=None) -> str:
    """The root-cause class of a record that is not ok (see CAUSES); probes add their
    results to the record's detail."""
    if record.outcome == "refused":
        kinds = {f.split("@", 1)[0] for f in record.findings}
        if kinds & _RNG_KINDS:
            return "rng-bits"
        if "constant-out-of-range" in kinds and _SEED_MASK in record.detail:
            return "rng-seed"
        return "other"
    if record.outcome == "crash":
        if record.detail.startswith("input widening"):
            return "input-width"
        for cause, pattern in _CRASH_CAUSES:
            if pattern.search(record.detail):
                return cause
        return "other"
    if record.outcome == "wrong" and fn is not None:
        constants = finfo_constants(x64_text) if x64_text else []
        if constants:
            record.detail += "; float64 finfo constants: " + ", ".join(constants[:6])
        results = {cause: probe(fn, args, reference, **options) for cause, options in _PROBES}
        record.detail += "; probes: " + ", ".join(f"{cause}={result}" for cause, result in results.items())
        return next((cause for cause, result in results.items() if result == "identical"), "other")
    return "other"


# ----------------------------------------------------------------------------- one program

def _warning_line(w) -> str:
    """'file:line: first line' of a warning, cut at 200 characters, its `[kind]` kept."""
    kind = re.search(r"\[[a-z0-9-]+\]\s*$", str(w.message))
    line = _first_line(w.message, 200)
    if kind is not None and not line.endswith(kind.group(0).strip()):
        line = f"{line} ... {kind.group(0).strip()}"
    return f"{os.path.basename(w.filename)}:{w.lineno}: {line}"


def _first_line(text: str, limit: int = 300) -> str:
    line = next((ln.strip() for ln in str(text).splitlines() if ln.strip()), "")
    return line[:limit]


def _spec64(leaf):
    """How x64guard.jit (as on main: x64guard/jax/inputs.py WIDEN_FOR_TRACE) traces an input:
    float32/int32/complex64 widened to 64 bits, uint32 and typed keys unchanged."""
    import jax

    widen = {np.dtype(np.float32): np.float64, np.dtype(np.int32): np.int64, np.dtype(np.complex64): np.complex128}
    dtype = getattr(leaf, "dtype", None)
    if dtype is None or jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
        return leaf
    return jax.ShapeDtypeStruct(np.shape(leaf), widen.get(np.dtype(dtype), dtype))


def x64_lowering(fn, args, widen: bool = True) -> str:
    """The program's x64 StableHLO text (plain jax.jit, x64 on; inputs widened the way
    x64guard.jit traces them unless `widen` is false), for the diagnosis and the
    has-64-bit check."""
    import jax

    jax.clear_caches()
    with x64(True), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        specs = jax.tree_util.tree_map(_spec64, args) if widen else args
        return jax.jit(fn).lower(*specs).as_text()


def _x32_disagrees(fn, args, reference, reference_error: str) -> tuple[bool, str]:
    """(does x32 JAX's answer differ from the 64-bit program's (to 1e-3), how): the check
    behind a declared refusal. The 64-bit program is plain jax.jit with x64 on."""
    import jax

    if reference_error:
        return True, f"x32 JAX fails: {reference_error}"
    jax.clear_caches()
    try:
        with x64(True), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            full = jax.block_until_ready(jax.jit(fn)(*args))
    except Exception as exc:  # noqa: BLE001
        return False, f"the 64-bit program itself fails: {type(exc).__name__}: {_first_line(exc, 120)}"
    _, want = _host_leaves(full)
    _, got = _host_leaves(reference)
    for (path, g, _), (_, w, _) in zip(got, want):
        if g.shape != w.shape or not np.allclose(g.astype(np.float64), w.astype(np.float64), rtol=1e-3, atol=1e-6,
                                                 equal_nan=True):
            return True, f"x32 JAX gives {path} = {g.ravel()[:4]}, the 64-bit program {w.ravel()[:4]}"
    return False, "x32 JAX gives the 64-bit program's answer"


def module_equality(fn, args) -> tuple[str, str]:
    """(verdict, first lines of the difference): x64guard.jit's narrowed module against
    jax.jit's lowering with x64 off, normalised (tests/module_equality.py). Lowers only."""
    import jax

    import x64guard
    from tests import module_equality as me

    try:
        jax.clear_caches()
        with x64(False), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            x32_text = jax.jit(fn).lower(*args).as_text()
        jax.clear_caches()
        with x64(True), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lowered = x64guard.jit(fn).lower(*args)
            narrowed, findings = lowered.as_text(), lowered.findings
        jax.clear_caches()
        comparison = me.compare(narrowed, x32_text)
    except Exception as exc:  # noqa: BLE001
        return f"error: {type(exc).__name__}: {_first_line(exc, 200)}", ""
    if comparison.equal:
        return ("equal-counters" if comparison.reference_rewritten else "equal"), ""
    kinds = sorted({str(f.kind) for f in findings if str(f.kind) != "type-narrowed"})
    how = "identity-converts" if comparison.identity_converts_only else "differs"
    return f"{how}; findings: {', '.join(kinds) or 'none'}", comparison.describe(16)


def _float64_inputs(args):
    """`args` with float32 and complex64 array leaves as float64 / complex128 numpy arrays."""
    import jax

    wide = {np.dtype(np.float32): np.float64, np.dtype(np.complex64): np.complex128}

    def widen(leaf):
        dtype = getattr(leaf, "dtype", None)
        try:
            target = wide.get(np.dtype(dtype)) if dtype is not None else None
        except TypeError:  # typed PRNG keys
            target = None
        return np.asarray(leaf).astype(target) if target is not None else leaf

    return jax.tree_util.tree_map(widen, args)


def _direct_call_differs(jitted, args, direct) -> str:
    """'' when `jitted.lower(*args).compile()(*args)` gives the direct call's bits (one
    program, inputs converted before it: issue 22 item 1), else what differs."""
    import jax

    with x64(True), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        again = jax.block_until_ready(jitted.lower(*args).compile()(*args))
    difference = compare(again, direct)
    return f"the direct call differs from .lower().compile(): {difference}" if difference else ""


def run_program(program) -> Record:
    """The record of one program (never raises for the program's own failures)."""
    import jax

    import x64guard
    from tests.corpus.oracle import has_64bit_type

    started = time.perf_counter()
    record = Record(program.name, program.library, outcome="error", ok=False)

    def finish() -> Record:
        record.seconds = round(time.perf_counter() - started, 2)
        return record

    # 1. the program and its inputs, as an x32 script has them
    try:
        with x64(False), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fn, args = program.build()
    except Exception as exc:  # noqa: BLE001
        record.detail = f"build failed: {type(exc).__name__}: {_first_line(exc)}"
        record.cause = "other"
        return finish()

    # 2. the reference: JAX's x32 program
    jax.clear_caches()
    reference, reference_error = None, ""
    try:
        with x64(False), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            reference = jax.block_until_ready(jax.jit(fn)(*args))
    except Exception as exc:  # noqa: BLE001
        reference_error = f"{type(exc).__name__}: {_first_line(exc)}"
        if program.refusal is None:  # a program x32 JAX cannot run is a broken program
            record.detail, record.cause = f"reference (jax.jit, x64 off) failed: {reference_error}", "other"
            return finish()

    # 3. the candidate: x64guard.jit with x64 on for this thread (on the same inputs, or
    # with X64GUARD_ECOSYSTEM_INPUTS=float64 their float32/complex64 leaves as float64 /
    # complex128 numpy data, as code written for x64 hands them over)
    jax.clear_caches()
    candidate = None
    candidate_args = _float64_inputs(args) if os.environ.get("X64GUARD_ECOSYSTEM_INPUTS") == "float64" else args
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", x64guard.X64GuardWarning)
        try:
            with x64(True):
                jitted = x64guard.jit(fn)
                candidate = jax.block_until_ready(jitted(*candidate_args))
        except x64guard.X64GuardError as exc:
            record.outcome = "refused"
            errors = [f for f in exc.findings if str(f.severity) == "error"] or list(exc.findings)
            record.findings = [f"{f.kind}@{f.op}" for f in errors]
            record.detail = _first_line(str(errors[0]) if errors else exc)
        except Exception as exc:  # noqa: BLE001
            record.outcome = "crash"
            record.detail = f"{type(exc).__name__}: {_first_line(exc)}"
    record.warnings = [_warning_line(w) for w in caught if issubclass(w.category, x64guard.X64GuardWarning)]

    # 4. the verdict: first the modules, then the bits
    if candidate is not None:
        record.module_equality, record.module_diff = module_equality(fn, args)
    if candidate is not None:
        if reference_error:  # a program declared refusable that x64guard ran: nothing to compare with
            record.outcome, record.cause = "error", "other"
            record.detail = f"narrowed, but the reference (jax.jit, x64 off) failed: {reference_error}"
            return finish()
        difference = compare(candidate, reference) or _direct_call_differs(jitted, candidate_args, candidate)
        record.outcome = "wrong" if difference else "identical"
        record.detail = difference
        record.ok = not difference
    elif record.outcome == "refused" and program.refusal is not None:
        kinds_match = any(f.split("@", 1)[0] in program.refusal.kinds for f in record.findings)
        if not kinds_match:
            record.detail = (f"refused with {record.findings}, the program's refusal expects one of "
                             f"{list(program.refusal.kinds)}: " + record.detail)
        else:
            record.ok, how = _x32_disagrees(fn, args, reference, reference_error)
            record.detail = (f"justified: {program.refusal.why} ({how})" if record.ok else
                             f"refused, but the declared refusal is not justified ({how}): {record.detail}")

    # 5. the program's x64 lowering: does it test anything; what made it fail
    x64_text = None
    try:
        x64_text = x64_lowering(fn, args)
    except Exception as exc:  # noqa: BLE001
        try:
            x64_text = x64_lowering(fn, args, widen=False)
            if record.outcome == "crash":
                record.detail = ("input widening: traces with x64 on at its inputs' own widths, not with "
                                 "float32/int32 inputs widened to 64 bits (x64guard/jax/inputs.py, then _spec64): " + record.detail)
        except Exception as exc2:  # noqa: BLE001
            record.detail += f" [x64 lowering failed: {type(exc2).__name__}: {_first_line(exc2, 120)}]"
        del exc
    if x64_text is not None:
        record.has_64bit = has_64bit_type(x64_text)
    if not record.ok:
        record.cause = diagnose(record, x64_text, fn, args, reference)
    jax.clear_caches()
    return finish()


# ----------------------------------------------------------------------------- the child

DEFAULT_REGISTRY = "tests.ecosystem.programs:all_programs"


def load_registry(spec: str = DEFAULT_REGISTRY) -> dict:
    """{name: program} from 'module:attribute' (a list of programs, or a function
    returning one)."""
    import importlib

    module, _, attribute = spec.partition(":")
    found = getattr(importlib.import_module(module), attribute)
    return {p.name: p for p in (found() if callable(found) else found)}


def child(out_path: str, names: list[str], registry: str = DEFAULT_REGISTRY) -> None:
    """Run the named programs in order, appending `START name` and one JSON record per
    program to `out_path` (not stdout: programs may print)."""
    programs = load_registry(registry)
    with open(out_path, "a", encoding="utf-8") as out:
        for name in names:
            out.write(f"START {name}\n")
            out.flush()
            try:
                record = run_program(programs[name])
            except Exception:  # noqa: BLE001  (a harness bug: say so, keep going)
                record = Record(name, programs[name].library, "error", False, "other",
                                "harness: " + traceback.format_exc(limit=3).replace("\n", " | ")[-600:])
            out.write(record.to_json() + "\n")
            out.flush()
        out.write("DONE\n")


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "child":
        child(sys.argv[3], sys.argv[4:], registry=sys.argv[2])
    else:
        raise SystemExit("usage: python -m tests.ecosystem.harness child REGISTRY OUT_PATH NAME...  "
                         "(the table: python -m tests.ecosystem.run --table)")
