"""Composites that stand for CHLO ops become those ops again.

jax.export (and anything that serializes StableHLO for forward compatibility) writes
`chlo.erf`, `chlo.top_k`, `chlo.asinh`, ... as `stablehlo.composite "chlo.erf"` whose
decomposition is the float64 algorithm. Narrowing that decomposition would compute the
float64 algorithm in float32, which is not what JAX computes with x64 off. The CHLO op
itself is type-generic: narrowed, it expands for float32 when compiled, as in x32 JAX.

Except where x32 JAX does not emit the op at float32 (tables.X32_EXPANDED_CHLO: jax 0.12's
lgamma): `WarnX32Expansion` says so, once per op and function.
"""

from __future__ import annotations

from jax.extend.mlir import ir

from x64guard.findings import Kind, Severity
from x64guard.passes.constant_io import named_attributes
from x64guard.passes.driver import OpContext, Outcome, RewritePattern
from x64guard.passes.tables import X32_EXPANDED_CHLO


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


class WarnX32Expansion(RewritePattern):
    """A float64 CHLO op that x32 JAX would not emit at float32: the running JAX lowers the
    float32 primitive with its own expansion (`PassRun.x32_expanded`). Narrowed, XLA's
    float32 expansion of the op is correct to float32 but not x32 JAX's bits. Reports only;
    in a module JAX lowered (elsewhere x32 JAX is not the reference). jax.export does not
    write these ops as composites: it expands them (api's `serialized-chlo` warning)."""

    op_names = frozenset(X32_EXPANDED_CHLO)

    def match_and_rewrite(self, op: ir.Operation, ctx: OpContext) -> Outcome:
        name = ctx.name
        if not ctx.run.jax_origin:
            return Outcome.NO_MATCH
        if all(ctx.converter.convert(ctx.type_before(v)) is None for v in op.operands):
            return Outcome.NO_MATCH
        if not ctx.run.x32_expanded(name):
            return Outcome.NO_MATCH
        primitive = X32_EXPANDED_CHLO[name]
        ctx.report(Kind.X32_LOWERING, Severity.WARNING,
                   f"narrowed to float32, this {primitive} is correct to float32 but not x32 JAX's bits: this "
                   f"JAX lowers float32 {primitive} with its own expansion, not {name}, so results may differ in "
                   "the last place. For x32 JAX's bits use x64guard.jit (it runs x32 JAX's program here) or "
                   "lower the function with x64 off", op_name=name)
        return Outcome.NO_MATCH
