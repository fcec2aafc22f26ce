"""The differential property for one generated program (see grammar.py).

For a `Program` p, traced with x64 on:

* either `x64guard.narrow` returns a module that verifies, holds no 64-bit element type,
  and -- compiled on the CPU and run on the inputs cast to 32 bits -- gives outputs
  bit-identical (values, dtypes, shapes) to p traced and run by JAX with x64 off;
* or it raises `X64GuardError` whose findings explain why (each has a kind, op, location
  and message). A refusal is only accepted for programs with a hazard (a constant the 32-bit
  type cannot hold, a width-changing bitcast): any other refusal is a failure.

Mismatches are classified before they count (`classify_mismatch`): when JAX's own x64
and x32 jaxprs of p differ (after renaming 64-bit dtypes to their 32-bit counterparts and
the 64-bit sentinels to the 32-bit ones) JAX traced a different program for 32 bits -- a
dtype-dependent algorithm, a documented limit of x64guard (README "Limits"); and a Python
literal equal to a 64-bit sentinel is mapped to the 32-bit sentinel by design. Such
examples are recorded in `DTYPE_DEPENDENT_SEEN`, not failed. Identical jaxprs (up to
sentinels) and different bits is an x64guard bug. (The jaxpr cannot show differences
inside a primitive's lowering rule, such as `random_seed`'s; those show up as failures.)
One such difference is documented: where the running JAX lowers float32 `lgamma` with its
own expansion but float64 to `chlo.lgamma` (jax 0.12), narrowing keeps the CHLO op; the
mismatch is accepted (verdict "x32-lowering") only if `narrow` warned `x32-lowering`, this
module's own probe of JAX agrees, and the values are within float32 rounding.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field

import numpy as np

import jax

import x64guard
from tests.corpus.oracle import (bit_identical, describe_mismatch, has_64bit_type, lower_x64, run_oracle,
                                 run_text, x64)
from tests.reliability.grammar import Program

# Kinds a refusal of a hazard program may carry.
REFUSAL_KINDS = {"constant-out-of-range", "constant-overflow", "bitcast-width"}

# Examples that mismatched because JAX traces a different program with x64 off.
DTYPE_DEPENDENT_SEEN: list[tuple[Program, str]] = []


@dataclass
class Verdict:
    # "identical" | "refused" | "x32-fails" | "xla-fails" | "jax-cannot-lower" | "dtype-dependent"
    # | "sentinel-literal" | "x32-lowering"
    outcome: str
    detail: str = ""
    findings: list = field(default_factory=list)


class PropertyFailure(AssertionError):
    pass


def _fail(program: Program, message: str) -> PropertyFailure:
    return PropertyFailure(f"{message}\n\nprogram:\n{program.source()}\n\nas data (paste into "
                           f"tests/reliability/test_fuzz_regressions.py):\n{program!r}")


_TYPE_RENAMES = [("float64", "float32"), ("int64", "int32"), ("uint64", "uint32"), ("complex128", "complex64"),
                 ("f64", "f32"), ("i64", "i32"), ("u64", "u32"), ("c128", "c64")]
_SENTINEL_RENAMES = [(str(2**63 - 1), str(2**31 - 1)), (str(-(2**63)), str(-(2**31))), (str(2**64 - 1), str(2**32 - 1)),
                     ("1.7976931348623157e+308", "3.4028234663852886e+38")]


def jaxpr_text(program: Program, wide: bool) -> str:
    fn = program.fn()
    args = program.args() if wide else program.args32()
    with x64(wide), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        jax.clear_caches()
        # The printer wraps lines by length, and lengths differ with the dtypes' names.
        return re.sub(r"\s+", " ", str(jax.make_jaxpr(fn)(*args))).replace(" let ", " let\n").replace(" in ", "\n in ")


def _normalise(text: str) -> str:
    for wide, narrow in _TYPE_RENAMES + _SENTINEL_RENAMES:
        text = re.sub(rf"(?<![\w.]){re.escape(wide)}(?![\w])", narrow, text)
    return text


def _first_difference(a: str, b: str) -> str:
    for x, y in zip(a.splitlines(), b.splitlines()):
        if x != y:
            return f"x64: {x.strip()}\n    x32: {y.strip()}"
    return "the jaxprs differ in length"


_SENTINEL_LITERAL = re.compile("|".join(re.escape(w) for w, _ in _SENTINEL_RENAMES))


def classify_mismatch(program: Program) -> tuple[str, str]:
    """Why narrowed bits may differ from x32 JAX's, judged from JAX's own jaxprs:

    * ("dtype-dependent", diff): JAX traced a different program for x32 (other constants,
      algorithm, promotion), even with 64-bit types and sentinels renamed: documented limit;
    * ("sentinel-literal", line): the same program, holding a literal equal to a 64-bit
      sentinel (1.7976931348623157e+308, 2**63 - 1, ...): x64guard maps it to the 32-bit
      sentinel by design (README), x32 JAX rounds the Python literal (to inf): documented;
    * ("same-program", diff): the same program, so a mismatch is an x64guard bug; diff is
      empty, or the sentinel-only difference (iinfo/finfo of the dtype, which x64guard must
      map exactly).
    """
    wide_raw, narrow = jaxpr_text(program, True), jaxpr_text(program, False)
    wide = wide_raw
    for w, n in _TYPE_RENAMES:
        wide = re.sub(rf"(?<![\w.]){re.escape(w)}(?![\w])", n, wide)
    if wide == narrow:
        match = _SENTINEL_LITERAL.search(wide_raw)
        if match:
            line = next(ln for ln in wide_raw.splitlines() if match.group(0) in ln)
            return "sentinel-literal", line.strip()
        return "same-program", ""
    sentinels = _normalise(wide_raw)
    if sentinels == narrow:
        return "same-program", _first_difference(wide, narrow)
    # A sentinel-valued Python literal that x32 JAX rounded to inf (complex literals print
    # after the conversion): x64guard maps it to float32's max by design.
    as_inf = wide.replace("-1.7976931348623157e+308", "-inf").replace("1.7976931348623157e+308", "inf")
    if as_inf == narrow:
        return "sentinel-literal", _first_difference(wide, narrow)
    return "dtype-dependent", _first_difference(sentinels, narrow)


def jaxprs_differ(program: Program) -> str | None:
    """None if JAX traces the same program for x64 and x32 (64-bit types and sentinels
    renamed), else the first differing line of each."""
    kind, detail = classify_mismatch(program)
    return detail if kind == "dtype-dependent" else None


def x32_expands_lgamma() -> bool:
    """The running JAX lowers float32 lgamma without `chlo.lgamma` (x64guard's own probe is
    what is tested, so this one is written apart)."""
    with x64(False):
        return "chlo.lgamma" not in jax.jit(jax.lax.lgamma).lower(np.float32(1.5)).as_text()


def _x32_lowering(result, got, want) -> "Verdict | None":
    """The documented jax 0.12 lgamma difference (module docstring), or None."""
    warned = [f for f in result.findings if f.kind == "x32-lowering"]
    if not warned or "chlo.lgamma" not in result.text or not x32_expands_lgamma():
        return None
    close = all(g.shape == w.shape and g.dtype == w.dtype
                and (bit_identical(g, w) or np.allclose(g, w, rtol=1e-5, atol=1e-6, equal_nan=True))
                for g, w in zip(got, want))
    return Verdict("x32-lowering", warned[0].message, list(result.findings)) if close and len(got) == len(want) else None


def check_program(program: Program) -> Verdict:
    """Raise PropertyFailure if x64guard breaks the property on `program`."""
    fn = program.fn()
    args = program.args()
    try:
        text = lower_x64(fn, args)
    except Exception as exc:  # the generator checks tracing (eval_shape), not lowering
        try:
            with x64(False), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                jax.clear_caches()
                jax.jit(fn).lower(*program.args32())
        except Exception as x32_exc:  # JAX cannot lower it at all (e.g. an FFT of length 0)
            return Verdict("jax-cannot-lower", f"{type(x32_exc).__name__}: {str(x32_exc).splitlines()[0][:200]}")
        raise _fail(program, f"the program lowers with x64 off but not with x64 on: {type(exc).__name__}: "
                    f"{str(exc)[:800]}") from exc

    hazards = program.hazards
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = x64guard.narrow(text, mode="warn")
    except x64guard.X64GuardError as err:
        findings = list(err.findings)
        if not findings:
            raise _fail(program, f"X64GuardError without findings: {err}") from err
        for f in findings:
            if not (f.kind and f.op and str(f.location) and f.message):
                raise _fail(program, f"a finding does not say what, where and why: {f!r}") from err
        errors = [f for f in findings if f.severity is x64guard.Severity.ERROR]
        if not errors:
            raise _fail(program, f"refused without an error finding: {[str(f) for f in findings]}") from err
        if not hazards:
            raise _fail(program, "x64guard refused a program without a hazard (no out-of-range constant, no "
                        "width-changing bitcast):\n" + "\n".join(str(f) for f in errors)) from err
        unexpected = [f for f in errors if f.kind not in REFUSAL_KINDS]
        if unexpected:
            raise _fail(program, f"refused with unexpected finding kinds for hazards {hazards}:\n"
                        + "\n".join(str(f) for f in unexpected)) from err
        return Verdict("refused", "; ".join(f.kind for f in errors), findings)
    except Exception as exc:
        raise _fail(program, f"x64guard.narrow raised {type(exc).__name__} (not X64GuardError): {exc}") from exc

    narrowed = result.text
    if not result.module.operation.verify():
        raise _fail(program, "the narrowed module does not verify")
    if has_64bit_type(narrowed):
        raise _fail(program, "the narrowed module still holds 64-bit element types")

    args32 = program.args32()
    try:
        got = run_text(narrowed, args32)
    except Exception as exc:
        try:
            run_oracle(fn, args32)
        except Exception as x32_exc:  # XLA cannot compile JAX's own x32 program either
            return Verdict("xla-fails", f"{type(x32_exc).__name__}: {str(x32_exc).splitlines()[0][:300]}")
        raise _fail(program, f"the narrowed module does not compile/run (x32 JAX runs the program): "
                    f"{type(exc).__name__}: {str(exc)[:800]}") from exc
    try:
        want = run_oracle(fn, args32)
    except Exception as exc:
        if hazards:
            return Verdict("x32-fails", f"{type(exc).__name__}: {exc}")
        raise _fail(program, f"JAX with x64 off cannot run the program: {type(exc).__name__}: {exc}") from exc

    problems = []
    if len(got) != len(want):
        problems.append(f"{len(got)} outputs, x32 JAX {len(want)}")
    for i, (g, w) in enumerate(zip(got, want)):
        if not bit_identical(g, w):
            problems.append(f"output {i}: {describe_mismatch(g, w)}")
    if not problems:
        return Verdict("identical")
    lowering = _x32_lowering(result, got, want)
    if lowering is not None:
        return lowering
    # Classify each mismatching output on the slice of the program it depends on, so that
    # a dtype-dependent op elsewhere in the program cannot excuse it.
    kinds = []
    for i, (g, w) in enumerate(zip(got, want)):
        if bit_identical(g, w):
            continue
        part = program.slice([program.outputs[i]])
        kind, detail = classify_mismatch(part)
        if kind == "same-program":
            raise _fail(part, f"output {i} of the program below (sliced from a larger example) is not "
                        "bit-identical to x32 JAX although JAX traces the same program for x64 and x32:\n  "
                        + describe_mismatch(g, w)
                        + (f"\n(jaxprs differ only by 64-bit sentinels, which x64guard must map:\n    {detail})"
                           if detail else "") + (f"\nhazards: {hazards}" if hazards else ""))
        kinds.append((kind, detail))
    if kinds:
        kind = "dtype-dependent" if any(k == "dtype-dependent" for k, _ in kinds) else kinds[0][0]
        detail = "; ".join(d for _, d in kinds)
        DTYPE_DEPENDENT_SEEN.append((program, f"{kind}: {detail}"))
        return Verdict(kind, detail)
    raise _fail(program, "narrowed result is not bit-identical to x32 JAX although JAX traces the same "
                "program for x64 and x32:\n  " + "\n  ".join(problems)
                + (f"\n(jaxprs differ only by 64-bit sentinels, which x64guard must map:\n    {detail})"
                   if detail else "") + (f"\nhazards: {hazards}" if hazards else ""))
