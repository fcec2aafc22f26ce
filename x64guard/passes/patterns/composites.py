"""Composites that stand for CHLO ops become those ops again.

jax.export (and anything that serializes StableHLO for forward compatibility) writes
`chlo.erf`, `chlo.top_k`, `chlo.asinh`, ... as `stablehlo.composite "chlo.erf"` whose
decomposition is the float64 algorithm. Narrowing that decomposition would compute the
float64 algorithm in float32, which is not what JAX computes with x64 off. The CHLO op
itself is type-generic: narrowed, it expands for float32 when compiled, as in x32 JAX.
"""

from __future__ import annotations

from jax.extend.mlir import ir

from x64guard.findings import Kind, Severity
from x64guard.passes.constant_io import named_attributes
from x64guard.passes.driver import OpContext, Outcome, RewritePattern


class RestoreChloComposite(RewritePattern):
    op_names = frozenset({"stablehlo.composite"})

    def match_and_rewrite(self, op: ir.Operation, ctx: OpContext) -> Outcome:
        name = ir.StringAttr(op.attributes["name"]).value
        if not name.startswith("chlo.") or not ctx.run.context.is_registered_operation(name):
            return Outcome.NO_MATCH
        types = [ctx.type_before(v) for v in op.operands] + list(ctx.result_types)
        if all(ctx.converter.convert(t) is None for t in types):
            return Outcome.NO_MATCH
        attributes: dict | None = {}
        if "composite_attributes" in op.attributes:
            attributes = named_attributes(ir.DictAttr(op.attributes["composite_attributes"]))
            if attributes is None:  # no CHLO op has such attributes: leave the composite as it is
                return Outcome.NO_MATCH
        decomposition = ir.FlatSymbolRefAttr(op.attributes["decomposition"]).value
        ctx.drop_function(decomposition)
        ctx.report(Kind.COMPOSITE_RESTORED, Severity.INFO,
                   f"{name} restored from its composite: its float64 decomposition @{decomposition} is dropped "
                   "and the op expands for float32 when compiled, as in JAX with x64 off")
        ctx.rewriter.replace_op(op, name, [ctx.narrowed(t) for t in ctx.result_types], list(op.operands),
                                attributes)
        return Outcome.REWROTE
