"""The library API: `narrow` and `check`. Adapts inputs and modes around the one pass."""

from __future__ import annotations

import contextlib
import os
import warnings
from dataclasses import dataclass, field
from functools import cached_property

from jax.extend.mlir import ir

from x64guard.io import modules
from x64guard.errors import X64GuardError, X64GuardWarning
from x64guard.findings import KIND_TABLE, Finding, Kind, Location, Report, Severity, count_places, errors, format_findings
from x64guard.modes import Mode, resolve_mode, resolve_overflow
from x64guard.passes import NarrowX64Pass
from x64guard.passes.check import check_target, neuron_findings, profile_for
from x64guard.passes.store import NARROWED, TypeReport
from x64guard.passes.tables import DEFAULT_TARGET
from x64guard.x32_lowerings import expands_at_float32

# mode='error': every 64-bit use is a refusal.
_REFUSED_USES = TypeReport(Kind.TYPE_64BIT, Severity.ERROR, "64-bit types ({changes}); mode='error' refuses them")

ModuleLike = "str | bytes | os.PathLike | ir.Module"


@dataclass
class NarrowResult:
    """What `narrow` produced. `.module` is x64guard's own module, never the input."""

    module: ir.Module
    findings: list[Finding] = field(default_factory=list)
    changes: dict[str, int] = field(default_factory=dict)
    mode: Mode = Mode.WARN
    source_format: modules.SourceFormat = modules.SourceFormat.TEXT
    verified: bool = False
    # What `narrow` warns, in order: the summary, each lossy finding, a target's leftovers.
    # `narrow_module` only lists them; a front end issues them at the user's line.
    warnings: list[str] = field(default_factory=list)

    @cached_property
    def text(self) -> str:
        return modules.to_text(self.module, verified=self.verified)

    def bytecode(self) -> bytes:
        return modules.to_bytecode(self.module)

    def portable_artifact(self, target: str | None = None) -> bytes:
        return modules.to_portable_artifact(self.module, target)

    def summary(self) -> str:
        total = sum(self.changes.values())
        if not total:
            return "x64guard: no 64-bit types"
        parts = ", ".join(f"{k} x{n}" for k, n in sorted(self.changes.items()))
        verb = "would narrow" if self.mode is Mode.ALLOW else "narrowed"
        # Places as everywhere (findings.count_places): where the pass's own findings are.
        places = count_places([f for f in self.findings if KIND_TABLE[f.kind][1] == "pass"])
        return f"x64guard: {verb} {total} types ({parts}) at {places} place{'s' if places != 1 else ''}"


def narrow(module: ModuleLike, *, mode: "Mode | str | None" = None, overflow: str = "error",
           trusted: bool = False, dtype_constants: bool = True, target: str = DEFAULT_TARGET,
           neuron_cc_flags: str | None = None) -> NarrowResult:
    """Narrow i64/ui64/f64/complex<f64> to i32/ui32/f32/complex<f32>, as JAX does when it
    traces with x64 off, or refuse with `X64GuardError` naming every reason.

    Args:
        module: MLIR text, bytecode or a portable artifact (bytes), a file, or an
            `ir.Module` (never mutated).
        mode: allow (keep 64-bit types, report what would change), warn (narrow; one
            `X64GuardWarning` summary per module plus one per lossy finding), error (refuse
            any 64-bit use). Default: $X64GUARD_MODE, else warn.
        overflow: error | saturate | wrap, for constants the 32-bit type cannot hold.
        trusted: MLIR bytecode (bytes or a file) is first read in a separate process, because
            jaxlib's reader can crash on corrupted bytecode; True skips that for bytecode you made.
        dtype_constants: float64 constants that are finfo(float64) expressions (eps, 1 - eps,
            tiny, nextafter(-1, 0), ...) become float32's, as JAX computes them with x64 off,
            each an `info` finding (docs/constants.md); False rounds them like any other value.
        target: the profile narrowed for (`x64guard.passes.tables.TARGET_PROFILES`): on x32
            (default) the RNG state of rng_bit_generator (jax.random rbg keys, torch-xla) stays
            64-bit, on x32-strict such draws are refused. On a Neuron target the narrowed module
            is then checked against neuronx-cc's documented rules: what remains is in `findings`
            with the compiler's codes (warned once, never rewritten approximately).
        neuron_cc_flags: as for `check`.

    Returns:
        A `NarrowResult`. Input x64guard cannot read raises ValueError ("x64guard: ...").
    """
    out = narrow_module(module, mode=mode, overflow=overflow, trusted=trusted, dtype_constants=dtype_constants,
                        target=target, neuron_cc_flags=neuron_cc_flags)
    for message in out.warnings:
        warnings.warn(message, X64GuardWarning, stacklevel=2)
    return out


def narrow_module(module: ModuleLike, *, mode: "Mode | str | None" = None, overflow: str = "error",
                  trusted: bool = False, dtype_constants: bool = True, target: str = DEFAULT_TARGET,
                  neuron_cc_flags: str | None = None) -> NarrowResult:
    """`narrow` without warning: what it would warn is in the result's `.warnings`, for a
    front end to issue where its user's line is (`x64guard.user_place.warn_at`). Raises as
    `narrow` does."""
    resolved = resolve_mode(mode)
    policy = resolve_overflow(overflow)
    profile = profile_for(target)
    working, source_format = modules.load(module, trusted=trusted)
    with _unreadable_as_value_error("narrow"):
        result = NarrowX64Pass(overflow=policy, record_only=resolved is not Mode.WARN, dtype_constants=dtype_constants,
                               profile=profile, types=_REFUSED_USES if resolved is Mode.ERROR else NARROWED,
                               x32_expanded=expands_at_float32).apply(working)
    out = NarrowResult(working, result.findings + _format_findings(source_format, result.changes),
                       result.changes, resolved, source_format)

    if resolved is Mode.ERROR and (out.changes or errors(out.findings)):
        uses = errors(out.findings) or _idiom_uses(out)
        raise X64GuardError(
            f"x64guard (mode=error): the module uses 64-bit types at {count_places(uses)} place(s); "
            "accelerators without 64-bit support cannot run it. Narrow it (mode='warn') or "
            f"remove the 64-bit requests:\n{format_findings(uses)}", uses)
    if resolved is Mode.WARN:
        blocking = errors(out.findings)
        if blocking:
            raise X64GuardError(
                f"x64guard cannot narrow this module without changing its result "
                f"({len(blocking)} problem(s)):\n{format_findings(blocking)}", blocking)
        _verify(working, out.findings)
        out.verified = True
        out.warnings.extend(_summary_warnings(out))
    if profile.neuron_chip is not None:
        with _unreadable_as_value_error("narrow"):
            remaining = neuron_findings(working, target, neuron_cc_flags)
        out.findings.extend(remaining)
        refused = errors(remaining)
        if resolved is Mode.ERROR and refused:
            raise X64GuardError(
                f"x64guard (mode=error): neuronx-cc would reject this module on {profile.name} "
                f"({len(refused)} finding(s)):\n{format_findings(refused)}", refused)
        if resolved is Mode.WARN:
            out.warnings.extend(_neuron_warnings(profile.name, remaining))
    return out


def _idiom_uses(out: NarrowResult) -> list[Finding]:
    """mode='error' refuses 64-bit types that only JAX's exact idioms hold (iota_2x32_shape's
    uint64 counters): the pass rewrites those ops whole and reports them as info, never as
    type-64bit. Each such finding becomes the refusal's reason, at its op and place."""
    changes = ", ".join(f"{k} x{n}" for k, n in sorted(out.changes.items()))
    uses = [Finding(Kind.TYPE_64BIT, Severity.ERROR, f.op, f.location,
                    f"64-bit types ({changes} in the module) in {f.message.partition('; ')[0]}; mode='error' "
                    "refuses them (mode='warn' computes them in 32 bits, exactly)",
                    f.count, f.positions, f.unlisted_positions)
            for f in out.findings if f.severity is Severity.INFO and f.kind is not Kind.TYPE_NARROWED]
    return uses or [Finding(Kind.TYPE_64BIT, Severity.ERROR, "builtin.module", Location.at("the module"),
                            f"64-bit types ({changes}); mode='error' refuses them")]


def _neuron_warnings(target: str, remaining: list[Finding]) -> list[str]:
    """Once per module: the neuronx-cc rejections narrowing leaves."""
    if not remaining:
        return []
    codes = ", ".join(sorted({f"{f.kind} x{sum(g.count for g in remaining if g.kind == f.kind)}"
                              for f in remaining}))
    return [f"x64guard: narrowed for {target}; neuronx-cc would still reject or warn about: {codes}\n"
            f"{format_findings(remaining)}"]


def _format_findings(source_format: modules.SourceFormat, changes: dict[str, int]) -> list[Finding]:
    """What the input's format means for the result, once per module."""
    if source_format is not modules.SourceFormat.PORTABLE_ARTIFACT or not changes.get("f64->f32"):
        return []
    return [Finding(
        Kind.SERIALIZED_CHLO, Severity.WARNING, "builtin.module", Location.at("the module"),
        "this is a StableHLO portable artifact: serializing it expanded some CHLO ops (erfc, lgamma, erf_inv, "
        "...) into float64-specific code before x64guard saw it (composites such as chlo.erf are restored). "
        "Narrowed, that code runs the float64 algorithm in float32, which can differ from JAX's x32 program in "
        "the last bits. For bit-identical results narrow the lowering (jax.jit(f).lower(...).compiler_ir()) "
        "or use x64guard.jit")]


def check(module: ModuleLike, *, target: str = DEFAULT_TARGET, trusted: bool = False,
          all_positions: bool = False, neuron_cc_flags: str | None = None) -> Report:
    """No rewrite: every 64-bit use and every blocker for `target`, as findings.
    `trusted` as for `narrow`. Findings of ops without a source location are grouped per
    op and function with their first positions (`Finding.positions`); `all_positions`
    lists every one (what `x64guard check --format json|sarif` asks for).
    On a Neuron target (`neuron-trn1`, `neuron-trn2`, `neuron-trn2-int64`) every predicted
    neuronx-cc rejection is a finding whose kind is the compiler's code (`NCC_EVRF035`);
    `neuron_cc_flags` are the compiler's flags (None: $NEURON_CC_FLAGS when it is set)."""
    working, _ = modules.load(module, trusted=trusted)
    with _unreadable_as_value_error("check"):
        return check_target(working, target, all_positions=all_positions, neuron_cc_flags=neuron_cc_flags)


@contextlib.contextmanager
def _unreadable_as_value_error(verb: str):
    """Modules that parse but cannot be walked from Python are unreadable input, not a
    crash of x64guard: types nested past Python's recursion limit, and names that are not
    UTF-8 (the bindings raise RuntimeError converting them to str)."""
    try:
        yield
    except RecursionError:
        raise ValueError(f"x64guard: the module's types nest too deeply to {verb}") from None
    except RuntimeError as exc:
        if "conversion error" not in str(exc):
            raise
        raise ValueError(f"x64guard: the module holds a name that is not valid UTF-8; cannot {verb} it "
                         f"({exc})") from None


def _verify(module: ir.Module, findings: list[Finding]) -> None:
    try:
        ok = module.operation.verify()
    except ir.MLIRError as exc:
        ok, detail = False, modules._first_diagnostic(exc)
    else:
        detail = "verifier returned false"
    if not ok:
        raise X64GuardError(
            "x64guard produced a module that does not verify; this is a bug in x64guard, please report it "
            f"with the input module: {detail}", findings)


def _summary_warnings(out: NarrowResult) -> list[str]:
    """The module's summary, then one message per lossy finding (none without changes)."""
    if not out.changes:
        return []
    lossy = [f for f in out.findings if f.severity is Severity.WARNING]
    return [out.summary() + (f"; {len(lossy)} lossy change(s) follow" if lossy else ""),
            *(f"x64guard: {finding}" for finding in lossy)]
