"""Shifts by 32 or more on 64-bit integers: after narrowing they shift out every bit.

That is what JAX computes for the same expression with x64 off, so the result matches
the x32 program; but code that assembles 64-bit words from 32-bit halves
(`(hi << 32) | lo`, hashes) then means something else: a warning, once per location.

JAX's own word splits are not that: iota_2x32_shape's counter split (exact below 2**32
elements; normally already rewritten to 32 bits by patterns/counters.py) and
threefry_seed's `seed >> 32` (0 in x32 JAX too) are reported as info.
"""

from __future__ import annotations

from jax.extend.mlir import ir

from x64guard.findings import Kind, Severity
from x64guard.passes.driver import OpContext, RewritePattern
from x64guard.passes.matching import splat_value
from x64guard.passes.patterns.counters import counter_split, is_seed_split

_SHIFTS = frozenset({"stablehlo.shift_left", "stablehlo.shift_right_logical", "stablehlo.shift_right_arithmetic"})


class WarnShiftByWidth(RewritePattern):
    op_names = _SHIFTS

    def match_and_rewrite(self, op: ir.Operation, ctx: OpContext) -> bool:
        if ctx.converter.convert(ctx.result_types[0]) is None:
            return False
        amount = splat_value(op.operands[1])
        if not isinstance(amount, int) or amount < 32:
            return False
        if counter_split(op) is not None:
            ctx.report(Kind.RNG_COUNTERS, Severity.INFO,
                       "iota_2x32_shape's uint64 counter split (below 2**32 elements): narrowed, the high word is 0 "
                      "as it is in 64 bits; exact")
        elif is_seed_split(op):
            ctx.report(Kind.RNG_SEED, Severity.INFO,
                       "threefry_seed's high word (seed >> 32) becomes 0, as in x32 JAX (a negative 64-bit seed "
                       "gives the key x32 JAX gives its 32-bit value)")
        else:
            ctx.report(Kind.SHIFT_BY_WIDTH, Severity.WARNING,
                       f"shift by {amount} of a 64-bit integer becomes a shift by at least the full width of "
                       "a 32-bit integer: every bit is shifted out (as JAX computes it with x64 off). If this "
                       "code splits or joins 64-bit words, keep it in 64 bits (mode='allow')")
        return False
