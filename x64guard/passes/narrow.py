"""The narrowing pass: a name, options, and `apply`.

A rewriting pass changes the module it is given in place (callers who must not mutate
their input, every public entry point, hand it a clone); a recording pass (`record_only`:
mode allow, `check`) leaves it as it is and reports what a rewriting pass would do.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, ClassVar, Sequence

from jax.extend.mlir import ir

from x64guard.findings import Finding, Severity
from x64guard.modes import Overflow
from x64guard.passes.driver import PassRun, RewritePattern, apply_patterns, collect
from x64guard.passes.idioms import IdiomPhase
from x64guard.passes.legality import Legality
from x64guard.passes.patterns import CONVERT_TYPES, IDIOM_PATTERNS, SPECIAL_PATTERNS
from x64guard.passes.patterns.counters import CounterSplit
from x64guard.passes.patterns.dtype_constants import ReplaceDtypeConstants
from x64guard.passes.rewriter import RecordingRewriter, Rewriter
from x64guard.passes.store import NARROWED, FindingsStore, TypeReport
from x64guard.passes.tables import DEFAULT_TARGET, TARGET_PROFILES, TargetProfile
from x64guard.passes.types import TypeConverter


@dataclass
class PassResult:
    findings: list[Finding] = field(default_factory=list)
    # Per type change, how many values/arguments/attributes changed: {"f64->f32": 12}.
    changes: dict[str, int] = field(default_factory=dict)
    # What a recording run's rewriter was asked to change (empty for a rewriting run).
    recorded: Counter = field(default_factory=Counter)


# The module names JAX gives what it lowers (jax.jit, pmap, jax.export): `module @jit_f`.
_JAX_MODULE_PREFIXES = ("jit_", "pmap_", "xla_computation_")


def lowered_by_jax(module: ir.Module) -> bool:
    """Was `module` lowered by JAX (its x32 counterpart is then x32 JAX's trace)?"""
    attributes = module.operation.attributes
    if "sym_name" not in attributes:
        return False
    return ir.StringAttr(attributes["sym_name"]).value.startswith(_JAX_MODULE_PREFIXES)


def _emits_the_op(op_name: str) -> bool:
    return False


@dataclass(frozen=True)
class NarrowX64Pass:
    """i64/ui64/f64/complex<f64> -> i32/ui32/f32/complex<f32>, as JAX's x32 canonicalization.

    Two phases: idioms whose 32-bit meaning is not their narrowed types (JAX's random
    numbers) are first rewritten into the form x32 JAX traces (`passes/idioms.py`); then
    the named rules and the generic type conversion are applied to every op, in the order
    of the module's one walk (`passes/driver.py`), and a rewriting run checks each op
    right after, proving that no 64-bit type is left (`passes/legality.py`). `profile` (a
    row of `tables.TARGET_PROFILES`) says what the target keeps (the RNG state).

    Options: `overflow` (an `Overflow`: error | saturate | wrap) for constants the 32-bit
    type cannot hold; `record_only` records instead of rewriting; `dtype_constants` False rounds finfo(float64)
    values like any literal (docs/constants.md); `rewrite_exact_idioms` False leaves JAX's
    exact 64-bit idioms (iota_2x32_shape's counters) to be reported like any 64-bit type
    (`check` on a strict profile); `extra_patterns` run before the named rules (`check`'s
    profile rules); `types` says how narrowed types are reported; `all_positions` lists
    every position of location-less groups; `errors_note` reports errors as info with that
    note (a target that accepts 64-bit types); `x32_expanded(op_name)` says whether the x32
    JAX a JAX-lowered module is compared with lowers that CHLO op's float32 counterpart with
    its own expansion (`tables.X32_EXPANDED_CHLO`; the API probes the running JAX), so that
    the narrowed op is a correct float32 result but not x32 JAX's bits (a warning).
    """

    name: ClassVar[str] = "x64guard-narrow"

    overflow: Overflow = Overflow.ERROR
    record_only: bool = False
    dtype_constants: bool = True
    profile: TargetProfile = TARGET_PROFILES[DEFAULT_TARGET]
    rewrite_exact_idioms: bool = True
    extra_patterns: Sequence[RewritePattern] = ()
    types: TypeReport = NARROWED
    all_positions: bool = False
    errors_note: str | None = None
    note_kinds: frozenset | None = None
    x32_expanded: Callable[[str], bool] = _emits_the_op
    # Derived from the options above (built once per pass, not per module).
    _idioms: IdiomPhase = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.overflow, Overflow):  # an enum, so that a misspelt policy fails here
            raise TypeError(f"x64guard: NarrowX64Pass.overflow is an Overflow, not {self.overflow!r} "
                            "(x64guard.modes.resolve_overflow reads a string)")
        object.__setattr__(self, "extra_patterns", tuple(self.extra_patterns))
        object.__setattr__(self, "_idioms", IdiomPhase([p for p in IDIOM_PATTERNS
                                                       if self.rewrite_exact_idioms or not isinstance(p, CounterSplit)]))

    @property
    def patterns(self) -> tuple[RewritePattern, ...]:
        """The rules of the narrowing phase, in order."""
        return (
            *self.extra_patterns,
            *(p for p in SPECIAL_PATTERNS if self.dtype_constants or not isinstance(p, ReplaceDtypeConstants)),
            CONVERT_TYPES,
        )

    def apply(self, module: ir.Module) -> PassResult:
        """Narrow `module` in place, or record what narrowing it would do."""
        converter = TypeConverter(module.context)
        store = FindingsStore(converter)
        rewriter = RecordingRewriter() if self.record_only else Rewriter()
        run = PassRun(module.context, converter, store, rewriter, self.profile, self.overflow,
                      jax_origin=lowered_by_jax(module), dtype_constants=self.dtype_constants,
                      x32_expanded=self.x32_expanded)
        walked = collect(module)
        # Calls as they are before any rule runs (an idiom rule may bypass one): an op
        # without a location in a called function is placed at its first call site.
        for callee, location, caller in walked.calls():
            store.record_call(callee, location, caller)
        module, walked = self._idioms.apply(module, run, walked)
        with module.context, ir.Location.unknown(module.context):
            legality = Legality(run) if rewriter.mutates else None
            apply_patterns(walked, run, self.patterns, legality.check_op if legality else None)
            created = rewriter.finish(module)
            findings = store.findings(self.types, all_positions=self.all_positions, errors_note=self.errors_note,
                                    note_kinds=self.note_kinds)
            if legality is not None and not any(f.severity is Severity.ERROR for f in findings):
                legality.check_ops(created)
                legality.raise_first()
        return PassResult(findings=findings, changes=store.changes(),
                          recorded=getattr(rewriter, "recorded", Counter()))
