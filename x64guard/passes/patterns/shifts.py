"""Shifts by 32 or more on 64-bit integers: after narrowing they shift out every bit.

That is what JAX computes for the same expression with x64 off, so the result matches
the x32 program; but code that assembles 64-bit words from 32-bit halves
(`(hi << 32) | lo`, uint64 random bits, hashes) then means something else. A warning,
once per location.
"""

from __future__ import annotations

from jax.extend.mlir import ir

from x64guard.findings import Severity
from x64guard.passes.rewriter import RewritePattern, Rewriter

_SHIFTS = frozenset({"stablehlo.shift_left", "stablehlo.shift_right_logical", "stablehlo.shift_right_arithmetic"})


class WarnShiftByWidth(RewritePattern):
    op_names = _SHIFTS

    def match_and_rewrite(self, op: ir.Operation, rw: Rewriter) -> bool:
        if rw.converter.convert(rw.result_types[0]) is None:
            return False
        amount = _constant_amount(op.operands[1])
        if amount is not None and amount >= 32:
            rw.report("shift-by-width", Severity.WARNING, op,
                      f"shift by {amount} of a 64-bit integer becomes a shift by at least the full width of "
                      "a 32-bit integer: every bit is shifted out (as JAX computes it with x64 off). If this "
                      "code splits or joins 64-bit words, keep it in 64 bits (mode='allow')")
        return False


def _constant_amount(value: ir.Value) -> int | None:
    """The shift amount if it is a splat constant, possibly broadcast."""
    owner = value.owner
    for _ in range(2):
        if isinstance(owner, ir.Block):
            return None
        op = owner.operation
        if op.name == "stablehlo.broadcast_in_dim":
            owner = op.operands[0].owner
            continue
        if op.name != "stablehlo.constant":
            return None
        try:
            attr = op.attributes["value"]
        except TypeError:
            return None
        if isinstance(attr, ir.DenseIntElementsAttr) and attr.is_splat:
            return int(attr.get_splat_value().value)
        return None
    return None
