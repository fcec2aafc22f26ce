"""StableHLO's test `check` dialect: the expected value is data of the checked operand's type.

Modules written the way stablehlo/testdata is (inputs and expected outputs as constants,
`check.expect_almost_eq_const %x {value = dense<...>}`) come from outside JAX. jaxlib does
not register the dialect, so the ops would otherwise be unknown; they compare values of any
type, so narrowing the operand narrows the expected value with it, as a constant's.
"""

from __future__ import annotations

from jax.extend.mlir import ir

from x64guard.passes.driver import OpContext, Outcome, RewritePattern
from x64guard.passes.ir_queries import read_attribute
from x64guard.passes.patterns.constants import NarrowCleanSplat, NarrowConstant
from x64guard.passes.patterns.dtype_constants import ReplaceDtypeConstants
from x64guard.passes.tables import CHECK_DIALECT_OPS

# The constant rules, in the order the pass runs them on a `stablehlo.constant`: an expected
# value and the constant it is compared with narrow alike (4.94e-324, float64's smallest
# subnormal, becomes float32's in both, not 1.4e-45 in one and 0.0 in the other).
_CONSTANT_RULES = (NarrowCleanSplat(), ReplaceDtypeConstants(), NarrowConstant())


class NarrowCheckExpectation(RewritePattern):
    op_names = frozenset(name for name, attribute in CHECK_DIALECT_OPS.items() if attribute)

    def match_and_rewrite(self, op: ir.Operation, ctx: OpContext) -> Outcome:
        if len(op.operands) != 1 or "value" not in op.attributes:
            return Outcome.NO_MATCH
        checked = ctx.type_before(op.operands[0])
        if ctx.converter.convert(checked) is None or not _holds_type(op, checked):
            return Outcome.NO_MATCH
        # The expected value narrows exactly as a constant of the checked type would: the
        # constant rule reads the op's `value` with that type as its result type.
        as_constant = ctx.with_result_types([checked])
        for rule in _CONSTANT_RULES:
            if isinstance(rule, ReplaceDtypeConstants) and not ctx.run.dtype_constants:
                continue
            if rule.match_and_rewrite(op, as_constant) is not Outcome.NO_MATCH:
                break
        return Outcome.REWROTE


def _holds_type(op: ir.Operation, expected: ir.Type) -> bool:
    """The `value` attribute is of the checked operand's type (read from its printed form:
    complex dense attributes cannot be read through the bindings)."""
    attr = read_attribute(op, "value")
    if attr is None:
        return f"> : {expected}" in op.get_asm(print_generic_op_form=True, large_elements_limit=1)
    return isinstance(attr, ir.DenseElementsAttr) and attr.type == expected
