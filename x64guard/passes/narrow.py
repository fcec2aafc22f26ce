"""The narrowing pass: a name, options, and `apply`.

It rewrites the module it is given in place; callers who must not mutate their input
(every public entry point) hand it a clone.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from jax.extend.mlir import ir

from x64guard.findings import Finding
from x64guard.passes.idioms import IdiomPhase
from x64guard.passes.patterns import IDIOM_PATTERNS, SPECIAL_PATTERNS, ConvertOpTypes
from x64guard.passes.patterns.dtype_constants import ReplaceDtypeConstants
from x64guard.passes.rewriter import KEEP_TYPES, Rewriter, index_patterns
from x64guard.passes.tables import DEFAULT_TARGET, TARGET_PROFILES, TargetProfile


@dataclass
class PassResult:
    findings: list[Finding] = field(default_factory=list)
    # Per type change, how many values/arguments/attributes changed: {"f64->f32": 12}.
    changes: dict[str, int] = field(default_factory=dict)


class NarrowX64Pass:
    """i64/ui64/f64/complex<f64> -> i32/ui32/f32/complex<f32>, as JAX's x32 canonicalization.

    Two phases: idioms whose 32-bit meaning is not their narrowed types (JAX's random
    numbers) are first rewritten into the form x32 JAX traces (`passes/idioms.py`); then
    one walk narrows every op. `profile` (a row of `tables.TARGET_PROFILES`) says what the
    target keeps (the RNG state)."""

    name = "x64guard-narrow"

    def __init__(self, *, overflow: str = "error", dry_run: bool = False, dtype_constants: bool = True,
                 profile: TargetProfile | None = None):
        self.overflow = overflow
        self.dry_run = dry_run
        # False: finfo(float64) values are rounded like any literal (ReplaceDtypeConstants off),
        # for programs whose literals happen to equal one (docs/constants.md).
        self.dtype_constants = dtype_constants
        self.profile = profile or TARGET_PROFILES[DEFAULT_TARGET]
        self._patterns = index_patterns(
            p for p in SPECIAL_PATTERNS if dtype_constants or not isinstance(p, ReplaceDtypeConstants))
        self._idioms = IdiomPhase(IDIOM_PATTERNS)

    def apply(self, module: ir.Module) -> PassResult:
        """Narrow `module` in place (a dry run leaves it alone: the idioms are rewritten in
        a clone, which the dry walk then reads)."""
        rw = Rewriter(module.context, overflow=self.overflow, dry_run=self.dry_run, profile=self.profile)
        module = self._idioms.apply(module, rw)
        apply_generic = ConvertOpTypes(rw).apply
        kept = rw.kept_ops
        claimed = rw.claimed_ops
        patterns = self._patterns
        advance = ir.WalkResult.ADVANCE

        failure: list[BaseException] = []
        interrupt = ir.WalkResult.INTERRUPT
        skip = ir.WalkResult.SKIP

        # The hot loop: one call per op. Exceptions are kept and re-raised after the walk
        # (the bindings would wrap them in a RuntimeError).
        def visit(op: ir.Operation) -> ir.WalkResult:
            try:
                rw.op_index += 1
                if kept and op in kept:
                    return advance  # the RNG state: its types stay
                name = op.name
                rw.result_types = types = op.results.types
                if name == "func.func":
                    rw.function = ir.StringAttr(op.attributes["sym_name"]).value
                    if rw.function in rw.dropped_functions:
                        return skip  # a restored composite's decomposition: erased after the walk
                elif name == "func.call":
                    rw.record_call(op)
                special = patterns.get(name)
                if special is not None and not (claimed and op in claimed):
                    for pattern in special:
                        done = pattern.match_and_rewrite(op, rw)
                        if done is KEEP_TYPES:
                            return advance
                        if done:
                            break
                apply_generic(op, name, types)
                return advance
            except BaseException as exc:
                failure.append(exc)
                return interrupt

        with module.context, ir.Location.unknown(module.context):
            module.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
            if failure:
                raise failure[0]
            if not self.dry_run:
                rw.finish(module)
        return PassResult(findings=rw.findings(), changes=rw.changes())
