"""StableHLO's test `check` dialect: the expected value is data of the checked operand's type.

Modules written the way stablehlo/testdata is (inputs and expected outputs as constants,
`check.expect_almost_eq_const %x {value = dense<...>}`) come from outside JAX. jaxlib does
not register the dialect, so the ops would otherwise be unknown; they compare values of any
type, so narrowing the operand narrows the expected value with it, as a constant's.
"""

from __future__ import annotations

from jax.extend.mlir import ir

from x64guard.passes.driver import OpContext, RewritePattern
from x64guard.passes.patterns.constants import NarrowConstant
from x64guard.passes.tables import CHECK_DIALECT_OPS

_NARROW_CONSTANT = NarrowConstant()


class NarrowCheckExpectation(RewritePattern):
    op_names = frozenset(name for name, attribute in CHECK_DIALECT_OPS.items() if attribute)

    def match_and_rewrite(self, op: ir.Operation, ctx: OpContext) -> bool:
        if len(op.operands) != 1 or "value" not in op.attributes:
            return False
        checked = ctx.type_before(op.operands[0])
        if ctx.converter.convert(checked) is None or not _holds_type(op, checked):
            return False
        # The expected value narrows exactly as a constant of the checked type would: the
        # constant rule reads the op's `value` with that type as its result type.
        _NARROW_CONSTANT.match_and_rewrite(op, ctx.with_result_types([checked]))
        return True


def _holds_type(op: ir.Operation, expected: ir.Type) -> bool:
    """The `value` attribute is of the checked operand's type (read from its printed form:
    complex dense attributes cannot be read through the bindings)."""
    try:
        attr = op.attributes["value"]
    except TypeError:
        return f"> : {expected}" in op.get_asm(print_generic_op_form=True, large_elements_limit=1)
    return isinstance(attr, ir.DenseElementsAttr) and attr.type == expected
