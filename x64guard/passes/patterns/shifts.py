"""Shifts by 32 or more on 64-bit integers, and the ops whose result counts bits.

A 64-bit shift by `a >= 32` becomes a 32-bit shift by `a`, which shifts out every bit (the
arithmetic right shift: fills with the sign). Whether x32 JAX computes the same depends on
where `a` came from, which the module does not say:

* `a >= 64` (or `a == 63` for an arithmetic right shift): every bit is out (or the sign
  fill) in x32 JAX too, whether `a` was written as a number or derived from the width
  (`iinfo(dtype).bits`, 64 -> 32). Exact: quiet, but for the arithmetic shift by 63 (the
  sign idiom `x >> (bits - 1)`): its amount becomes 31, as x32 JAX traces it (the same sign
  fill), where the constant feeds only this shift; reported as info.
* `a == 32`: a literal `x << 32` / `x >> 32` (words split or joined) shifts by 32 in x32 JAX
  too: same result, a warning (shift-by-width) because 64-bit word code then means something
  else, and because `bits // 2` would have been 16 in x32 JAX (docs/limits.md lists it).
* `33 <= a <= 63` otherwise: `x << (iinfo(x.dtype).bits - 1)` shifts by 63 here and by 31 in
  x32 JAX ([0 0 0 0] against [-2147483648 0 -2147483648 0]): the narrowed program computes
  something else whenever the amount is width-derived, and a literal amount that large on
  an integer that fits 32 bits is hardly written on purpose. Refused (error).

JAX's own word splits are not that: iota_2x32_shape's counter split (exact below 2**32
elements; normally already rewritten to 32 bits by patterns/counters.py) and
threefry_seed's `seed >> 32` (0 in x32 JAX too) are reported as info.

`count_leading_zeros` and `popcnt` of a 64-bit integer depend on the width for every input
(clz(1) is 63 at 64 bits, 31 at 32). In a module JAX lowered (`@jit_...`), x32 JAX counts on
the 32-bit value too: info. In a module of another origin the 64-bit count was meant: a
warning (`width-dependent-op`, listed in docs/limits.md).
"""

from __future__ import annotations

from jax.extend.mlir import ir

from x64guard.findings import Kind, Severity
from x64guard.passes.driver import OpContext, Outcome, RewritePattern
from x64guard.passes.matching import dense_values, producer, splat_value
from x64guard.passes.patterns.counters import counter_split, is_seed_split

_SHIFTS = frozenset({"stablehlo.shift_left", "stablehlo.shift_right_logical", "stablehlo.shift_right_arithmetic"})
_WIDE = 64
_NARROW = 32


def shift_amounts(value: ir.Value) -> list[int] | None:
    """The amounts a shift's second operand holds, if it is a constant (splat, broadcast
    or dense), else None. Unsigned reading: a negative i64 amount is a huge shift."""
    number = splat_value(value)
    if isinstance(number, int):
        return [number % (1 << _WIDE)]
    op = producer(value)
    while op is not None and op.name in ("stablehlo.broadcast_in_dim", "stablehlo.reshape"):
        value = op.operands[0]
        op = producer(value)
    values = dense_values(value)
    if values is None or values.dtype.kind not in "iu":
        return None
    return [int(v) % (1 << _WIDE) for v in values.tolist()]


def differs_in_x32(name: str, amount: int) -> bool:
    """Can a 64-bit shift by `amount`, narrowed, compute something other than x32 JAX's
    shift by the same expression (`amount` possibly derived from the width: 64 -> 32)?"""
    if amount <= _NARROW or amount >= _WIDE:
        return False
    return not (name == "stablehlo.shift_right_arithmetic" and amount == _WIDE - 1)


class WarnShiftByWidth(RewritePattern):
    op_names = _SHIFTS

    def match_and_rewrite(self, op: ir.Operation, ctx: OpContext) -> Outcome:
        if ctx.converter.convert(ctx.result_types[0]) is None:
            return Outcome.NO_MATCH
        amounts = shift_amounts(op.operands[1])
        if not amounts or max(amounts) < _NARROW:
            return Outcome.NO_MATCH
        if counter_split(op) is not None:
            ctx.report(Kind.RNG_COUNTERS, Severity.INFO,
                       "iota_2x32_shape's uint64 counter split (below 2**32 elements): narrowed, the high word is 0 "
                      "as it is in 64 bits; exact")
        elif is_seed_split(op):
            ctx.report(Kind.RNG_SEED, Severity.INFO,
                       "threefry_seed's high word (seed >> 32) becomes 0, as in x32 JAX (a negative 64-bit seed "
                       "gives the key x32 JAX gives its 32-bit value)")
        elif any(differs_in_x32(ctx.name, a) for a in amounts):
            amount = next(a for a in amounts if differs_in_x32(ctx.name, a))
            ctx.report(Kind.SHIFT_BY_WIDTH, Severity.ERROR,
                       f"shift by {amount} of a 64-bit integer: narrowed, it shifts out every bit, but x32 JAX "
                       f"shifts by {amount - _NARROW} where the amount comes from the width (e.g. "
                       "iinfo(x.dtype).bits - 1), so the result would differ. Write the amount for the 32-bit "
                       "type (jnp.iinfo(jnp.int32).bits - 1), or keep this code in 64 bits (mode='allow')")
        elif ctx.name == "stablehlo.shift_right_arithmetic" and _WIDE - 1 in amounts:
            constant = _sole_use_constant(op.operands[1])
            if amounts == [_WIDE - 1] and constant is not None:
                # x >> (bits - 1), the sign idiom: the amount written as x32 JAX writes it.
                ctx.rewriter.set_attribute(constant, "value", lambda: _splat_like(constant, _NARROW - 1))
                ctx.report(Kind.SHIFT_BY_WIDTH, Severity.INFO,
                           f"arithmetic shift by {_WIDE - 1} (iinfo(int64).bits - 1) of a 64-bit integer: the amount "
                           f"becomes {_NARROW - 1}, as x32 JAX traces it; the same sign fill")
            else:
                ctx.report(Kind.SHIFT_BY_WIDTH, Severity.INFO,
                           f"arithmetic shift by {_WIDE - 1} of a 64-bit integer: narrowed, the sign fill, as x32 "
                           f"JAX's shift by {_NARROW - 1} (iinfo(x.dtype).bits - 1); the same result, though the "
                           f"module holds {_WIDE - 1} where x32 JAX's holds {_NARROW - 1}")
        elif _NARROW in amounts:
            ctx.report(Kind.SHIFT_BY_WIDTH, Severity.WARNING,
                       f"shift by {_NARROW} of a 64-bit integer becomes a shift by the full width of "
                       "a 32-bit integer: every bit is shifted out (as JAX computes it with x64 off). If this "
                       "code splits or joins 64-bit words, keep it in 64 bits (mode='allow')")
        return Outcome.NO_MATCH


def _sole_use_constant(value: ir.Value) -> ir.Operation | None:
    """The splat `stablehlo.constant` behind `value` (through one broadcast), if this
    shift is its only user on the way; else None (changing it would change other ops)."""
    op = producer(value)
    if op is not None and op.name == "stablehlo.broadcast_in_dim":
        if len(list(op.results[0].uses)) != 1:
            return None
        value, op = op.operands[0], producer(op.operands[0])
    if op is None or op.name != "stablehlo.constant" or len(list(value.uses)) != 1:
        return None
    attr = op.attributes["value"]
    return op if isinstance(attr, ir.DenseIntElementsAttr) and attr.is_splat else None


def _splat_like(constant: ir.Operation, number: int) -> ir.Attribute:
    """A splat of `number` with the constant's current type (narrowed, in a rewriting run)."""
    shaped = ir.RankedTensorType(constant.results[0].type)
    return ir.DenseElementsAttr.get_splat(shaped, ir.IntegerAttr.get(shaped.element_type, number))


class WidthDependentCount(RewritePattern):
    """count_leading_zeros / popcnt of a 64-bit integer: the count depends on the width."""

    op_names = frozenset({"stablehlo.count_leading_zeros", "stablehlo.popcnt"})

    def match_and_rewrite(self, op: ir.Operation, ctx: OpContext) -> Outcome:
        if ctx.converter.convert(ctx.result_types[0]) is None:
            return Outcome.NO_MATCH
        what = ctx.name.removeprefix("stablehlo.")
        if ctx.run.jax_origin:
            ctx.report(Kind.WIDTH_DEPENDENT_OP, Severity.INFO,
                       f"{what} of a 64-bit integer counts 32 bits once narrowed, as x32 JAX does")
        else:
            ctx.report(Kind.WIDTH_DEPENDENT_OP, Severity.WARNING,
                       f"{what} of a 64-bit integer counts 32 bits once narrowed (clz(1) is 63 at 64 bits, 31 "
                       "at 32): the result differs from the 64-bit program's for every input. If the count "
                       "of 64 bits is meant, keep this code in 64 bits (mode='allow')")
        return Outcome.NO_MATCH
