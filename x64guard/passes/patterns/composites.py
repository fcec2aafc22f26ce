"""Composites that stand for CHLO ops become those ops again.

jax.export (and anything that serializes StableHLO for forward compatibility) writes
`chlo.erf`, `chlo.top_k`, `chlo.asinh`, ... as `stablehlo.composite "chlo.erf"` whose
decomposition is the float64 algorithm. Narrowing that decomposition would compute the
float64 algorithm in float32, which is not what JAX computes with x64 off. The CHLO op
itself is type-generic: narrowed, it expands for float32 when compiled, as in x32 JAX.
"""

from __future__ import annotations

from jax.extend.mlir import ir

from x64guard.findings import Severity
from x64guard.passes.constant_io import named_attributes
from x64guard.passes.rewriter import RewritePattern, Rewriter


class RestoreChloComposite(RewritePattern):
    op_names = frozenset({"stablehlo.composite"})

    def match_and_rewrite(self, op: ir.Operation, rw: Rewriter) -> bool:
        name = ir.StringAttr(op.attributes["name"]).value
        if not name.startswith("chlo.") or not rw.context.is_registered_operation(name):
            return False
        types = [rw.type_before(v) for v in op.operands] + list(rw.result_types)
        if all(rw.converter.convert(t) is None for t in types):
            return False
        attributes: dict | None = {}
        if "composite_attributes" in op.attributes:
            attributes = named_attributes(ir.DictAttr(op.attributes["composite_attributes"]))
            if attributes is None:  # no CHLO op has such attributes: leave the composite as it is
                return False
        decomposition = ir.FlatSymbolRefAttr(op.attributes["decomposition"]).value
        rw.dropped_functions.add(decomposition)
        rw.report("composite-restored", Severity.INFO, op,
                  f"{name} restored from its composite: its float64 decomposition @{decomposition} is dropped "
                  "and the op expands for float32 when compiled, as in JAX with x64 off")
        if rw.dry_run:
            return True
        result_types = [rw.converter.convert(t) or t for t in rw.result_types]
        with ir.InsertionPoint(op), op.location:
            replacement = ir.Operation.create(name, results=result_types, operands=list(op.operands),
                                              attributes=attributes)
        rw.replace_op(op, replacement)
        return True
