"""custom_call: a kernel name may encode its element type. LAPACK kernels are renamed to
their single-precision twins; type-generic targets are narrowed as any op; any other
target with 64-bit operands or results is refused, naming the target."""

from __future__ import annotations

from jax.extend.mlir import ir

from x64guard.findings import Severity
from x64guard.passes.rewriter import RewritePattern, Rewriter
from x64guard.passes.tables import TYPE_GENERIC_CUSTOM_CALLS, narrowed_custom_call_target


def custom_call_target(op: ir.Operation) -> str:
    return ir.StringAttr(op.attributes["call_target_name"]).value


class NarrowCustomCall(RewritePattern):
    op_names = frozenset({"stablehlo.custom_call"})

    def match_and_rewrite(self, op: ir.Operation, rw: Rewriter) -> bool:
        types = [v.type for v in op.operands] + list(rw.result_types)
        if all(rw.converter.convert(t) is None for t in types):
            return False
        target = custom_call_target(op)
        if target in TYPE_GENERIC_CUSTOM_CALLS:
            return True
        renamed = narrowed_custom_call_target(target)
        if renamed is None:
            rw.report("custom-call", Severity.ERROR, op,
                      f"custom_call @{target} has 64-bit operands or results and x64guard does not know a "
                      "32-bit version of it; keep this module in 64 bits (mode='allow'), or add the target "
                      "to x64guard's custom_call table if it is type-generic", op_name=f"stablehlo.custom_call @{target}")
            return True
        rw.report("custom-call-renamed", Severity.INFO, op, f"@{target} -> @{renamed}",
                  op_name=f"stablehlo.custom_call @{target}")
        if not rw.dry_run:
            op.attributes["call_target_name"] = ir.StringAttr.get(renamed)
        return True
