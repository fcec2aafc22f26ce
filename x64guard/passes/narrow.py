"""The narrowing pass: a name, options, and `apply`.

It rewrites the module it is given in place; callers who must not mutate their input
(every public entry point) hand it a clone.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from jax.extend.mlir import ir

from x64guard.findings import Finding
from x64guard.passes.patterns import SPECIAL_PATTERNS, ConvertOpTypes
from x64guard.passes.patterns.dtype_constants import ReplaceDtypeConstants
from x64guard.passes.rewriter import Rewriter, index_patterns


@dataclass
class PassResult:
    findings: list[Finding] = field(default_factory=list)
    # Per type change, how many values/arguments/attributes changed: {"f64->f32": 12}.
    changes: dict[str, int] = field(default_factory=dict)


class NarrowX64Pass:
    """i64/ui64/f64/complex<f64> -> i32/ui32/f32/complex<f32>, as JAX's x32 canonicalization."""

    name = "x64guard-narrow"

    def __init__(self, *, overflow: str = "error", dry_run: bool = False, dtype_constants: bool = True):
        self.overflow = overflow
        self.dry_run = dry_run
        # False: finfo(float64) values are rounded like any literal (ReplaceDtypeConstants off),
        # for programs whose literals happen to equal one (docs/constants.md).
        self.dtype_constants = dtype_constants
        self._patterns = index_patterns(
            p for p in SPECIAL_PATTERNS if dtype_constants or not isinstance(p, ReplaceDtypeConstants))

    def apply(self, module: ir.Module) -> PassResult:
        rw = Rewriter(module.context, overflow=self.overflow, dry_run=self.dry_run)
        apply_generic = ConvertOpTypes(rw).apply
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
                name = op.name
                rw.result_types = types = op.results.types
                special = patterns.get(name)
                if special is not None:
                    for pattern in special:
                        if pattern.match_and_rewrite(op, rw):
                            break
                elif name == "func.func":
                    rw.function = ir.StringAttr(op.attributes["sym_name"]).value
                    if rw.function in rw.dropped_functions:
                        return skip  # a restored composite's decomposition: erased after the walk
                elif name == "func.call":
                    rw.record_call(op)
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
