"""Exact identities of the x64 trace folded into their operand.

A `stablehlo.scatter` with an empty index vector (`tensor<0xi..>` indices), whose update
window covers every dimension of the operand (`update_window_dims = [0, ..., rank-1]`,
nothing inserted or batched), whose updates have the operand's shape, and whose combiner
returns the update, replaces the whole array: its result is its update operand, whatever
the operand holds. Issue 21 measured two of them in the x64 trace of a flax.nnx train step
that x32 JAX's trace does not hold; XLA then fuses the program differently. Folded, with an
info finding (`identity-folded`) at the op. The fold is exact in 32 and in 64 bits.

Converts to the same type and reshapes to the same shape are not folded: x32 JAX's own
traces hold them as well (JAX emits `convert` f32->f32 for weak-typed values), and the
narrowed module must be the module x32 JAX lowers (tests/module_equality.py).
"""

from __future__ import annotations

from jax.extend.mlir import ir
from jax.extend.mlir.dialects import stablehlo

from x64guard.findings import Kind, Severity
from x64guard.passes.driver import OpContext, Outcome, RewritePattern


def is_whole_array_scatter(op: ir.Operation) -> bool:
    """Does this scatter replace its whole operand by its updates?"""
    if len(op.operands) != 3 or len(op.results) != 1:
        return False
    operand, indices, updates = (v.type for v in op.operands)
    if not all(isinstance(t, ir.RankedTensorType) and t.has_static_shape for t in (operand, indices, updates)):
        return False
    if list(indices.shape) != [0] or list(updates.shape) != list(operand.shape) or updates != operand:
        return False
    numbers = stablehlo.ScatterDimensionNumbers(op.attributes["scatter_dimension_numbers"])
    if list(numbers.update_window_dims) != list(range(len(operand.shape))):
        return False
    if list(numbers.inserted_window_dims) or list(numbers.scattered_dims_to_operand_dims) \
            or list(numbers.input_batching_dims) or list(numbers.scatter_indices_batching_dims):
        return False
    return _returns_update(op)


def _returns_update(op: ir.Operation) -> bool:
    """The combiner is `^bb0(%old, %new): return %new`."""
    if len(op.regions) != 1 or len(op.regions[0].blocks) != 1:
        return False
    block = op.regions[0].blocks[0]
    body = list(block.operations)
    if len(block.arguments) != 2 or len(body) != 1 or body[0].name != "stablehlo.return":
        return False
    returned = body[0].operands
    return len(returned) == 1 and returned[0] == block.arguments[1]


class FoldWholeArrayScatter(RewritePattern):
    op_names = frozenset({"stablehlo.scatter"})

    def match_and_rewrite(self, op: ir.Operation, ctx: OpContext) -> Outcome:
        if not is_whole_array_scatter(op):
            return Outcome.NO_MATCH
        ctx.rewriter.forward_operand(op, 2)
        ctx.report(Kind.IDENTITY_FOLDED, Severity.INFO,
                   "a scatter with no indices whose update covers the whole array and whose combiner returns the "
                   "update is the update itself: folded (exact), as x32 JAX's trace has no scatter there")
        return Outcome.NO_MATCH  # the generic rule still narrows its types (the op is erased after the walk)
