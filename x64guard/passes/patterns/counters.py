"""JAX's exact 64-bit idioms around its PRNG: quiet where narrowing changes nothing.

* `iota_2x32_shape` (jax/_src/random/prng.py) lowers a uint64 counter and splits it into
  `convert(c >> 32)` and `convert(c)` uint32 words, in x64 AND in x32 programs. For fewer
  than 2**32 elements the high word is 0 and the low word is the counter: `CounterSplit`
  computes the counters in 32 bits (rule of the idiom phase), exactly.
* `threefry_seed` splits a 64-bit seed into `seed >> 32` and `seed & 0xFFFFFFFF`:
  `LowWordMask` makes the mask what x32 JAX traces (-1 in int32: the convert to 32 bits
  that follows keeps the same bits), and `is_seed_split` lets the shift-by-width rule
  report the high word as the info it is (x32 JAX computes 0 there too).
"""

from __future__ import annotations

from jax.extend.mlir import ir
from jax.extend.mlir.dialects import stablehlo

from x64guard.findings import Kind, Severity
from x64guard.passes.driver import OpContext, Outcome
from x64guard.passes.idioms import IdiomPattern
from x64guard.passes.matching import element_spelling, producer, shape_of, splat, splat_value, tensor_type, users
from x64guard.passes.tables import COUNTER_LIMIT, LOW_WORD_MASK, RNG_IDIOMS

_WIDE_INTEGERS = ("ui64", "i64", "si64")
_NARROW_INTEGERS = ("ui32", "i32", "si32")
_COUNTER_OPS = ("stablehlo.iota", "stablehlo.constant", "stablehlo.broadcast_in_dim", "stablehlo.multiply",
                "stablehlo.add")


def counter_bound(value: ir.Value, depth: int = 0) -> int | None:
    """An upper bound of a uint64 counter built from iotas and constants by broadcasts,
    products and sums (what iota_2x32_shape lowers to), or None for anything else."""
    op = producer(value)
    if op is None or depth > 16 or element_spelling(value.type) != "ui64" or op.name not in _COUNTER_OPS:
        return None
    if op.name == "stablehlo.iota":
        shape = shape_of(value.type)
        if shape is None:
            return None
        return shape[ir.IntegerAttr(op.attributes["iota_dimension"]).value] - 1
    if op.name == "stablehlo.constant":
        number = splat_value(value)
        return number if isinstance(number, int) else None
    bounds = [counter_bound(v, depth + 1) for v in op.operands]
    if any(b is None for b in bounds):
        return None
    if op.name == "stablehlo.broadcast_in_dim":
        return bounds[0]
    if op.name == "stablehlo.multiply":
        return bounds[0] * bounds[1]
    return bounds[0] + bounds[1]


def counter_split(shift: ir.Operation) -> tuple[ir.Value, int] | None:
    """(counter, bound) if `shift` is iota_2x32_shape's `convert(c >> 32)` high word of a
    counter below 2**32, else None."""
    if shift.name != "stablehlo.shift_right_logical" or element_spelling(shift.results[0].type) != "ui64":
        return None
    if splat_value(shift.operands[1]) != RNG_IDIOMS["word_shift"][0]:
        return None
    if not all(u.name == "stablehlo.convert" and element_spelling(u.results[0].type) == "ui32"
               for u in users(shift.results[0])):
        return None
    counter = shift.operands[0]
    bound = counter_bound(counter)
    if bound is None or bound >= COUNTER_LIMIT:
        return None
    return counter, bound


class CounterSplit(IdiomPattern):
    """iota_2x32_shape's uint64 counters, when they stay below 2**32: the high words
    become 0 and the low words the same counters computed in uint32. Exact (no counter
    has a high bit), and it leaves no 64-bit type behind (JAX's x32 programs included)."""

    op_names = frozenset({"stablehlo.shift_right_logical"})
    result_elements = frozenset({"ui64"})

    def match_and_rewrite(self, op: ir.Operation, ctx: OpContext) -> Outcome:
        found = counter_split(op)
        if found is None:
            return Outcome.NO_MATCH
        counter, bound = found
        built: dict[ir.Value, ir.Value] = {}
        rewriter = ctx.rewriter
        with rewriter.insert_before(op):
            zeros = splat(op.results[0].type, "ui32", 0)
            low = _in_uint32(counter, built)
        for high in users(op.results[0]):
            self.replace_root(ctx, high, zeros)
        for user in users(counter):
            if user.name == "stablehlo.convert" and element_spelling(user.results[0].type) == "ui32":
                self.replace_root(ctx, user, low)
        ctx.idioms.maybe_dead.append(op)
        ctx.report(Kind.RNG_COUNTERS, Severity.INFO,
                   f"iota_2x32_shape's uint64 counters (up to {bound}, below 2**32) computed in 32 bits: "
                   "high words 0, low words the counters; exact")
        return Outcome.REWROTE


def _in_uint32(value: ir.Value, built: dict[ir.Value, ir.Value]) -> ir.Value:
    """The counter expression `value` rebuilt on uint32 (its bound is below 2**32, so every
    intermediate value fits)."""
    if value in built:
        return built[value]
    op = producer(value)
    narrow_type = tensor_type(value.type, "ui32")
    if op.name == "stablehlo.iota":
        out = stablehlo.iota(narrow_type, ir.IntegerAttr(op.attributes["iota_dimension"]).value)
    elif op.name == "stablehlo.constant":
        out = splat(value.type, "ui32", splat_value(value))
    elif op.name == "stablehlo.broadcast_in_dim":
        dims = list(ir.DenseI64ArrayAttr(op.attributes["broadcast_dimensions"]))
        out = stablehlo.broadcast_in_dim(narrow_type, _in_uint32(op.operands[0], built), dims)
    elif op.name == "stablehlo.multiply":
        out = stablehlo.multiply(_in_uint32(op.operands[0], built), _in_uint32(op.operands[1], built))
    else:
        out = stablehlo.add(_in_uint32(op.operands[0], built), _in_uint32(op.operands[1], built))
    built[value] = out
    return out


def _to_32bit_words_only(value: ir.Value) -> bool:
    found = users(value)
    return bool(found) and all(u.name == "stablehlo.convert" and element_spelling(u.results[0].type)
                               in _NARROW_INTEGERS for u in found)


class LowWordMask(IdiomPattern):
    """`convert(x & 0xFFFFFFFF)` to a 32-bit integer, x int64 (threefry_seed's low word):
    the mask keeps every bit the convert keeps. In int32 it is -1 (what x32 JAX traces);
    the int64 constant 0xFFFFFFFF would be out of int32's range. The mask becomes -1,
    which means the same in 64 bits too."""

    op_names = frozenset({"stablehlo.and"})
    result_elements = frozenset({"i64", "si64"})

    def match_and_rewrite(self, op: ir.Operation, ctx: OpContext) -> Outcome:
        element = element_spelling(op.results[0].type)
        if element not in ("i64", "si64") or not _to_32bit_words_only(op.results[0]):
            return Outcome.NO_MATCH
        wide_mask, narrow_mask = LOW_WORD_MASK
        for operand in op.operands:
            if splat_value(operand) == wide_mask:
                with ctx.rewriter.insert_before(op):
                    ones = splat(operand.type, element, narrow_mask)
                ctx.rewriter.replace_uses_in(op, operand, ones)
                ctx.idioms.maybe_dead.append(producer(operand))
                ctx.report(Kind.LOW_WORD_MASK, Severity.INFO,
                           "x & 0xFFFFFFFF before a convert to 32 bits (threefry_seed's low word): the mask is -1 "
                           "in 32 bits, as x32 JAX traces it")
                return Outcome.REWROTE
        return Outcome.NO_MATCH


def is_seed_split(shift: ir.Operation) -> bool:
    """`shift` is threefry_seed's high word: `convert(seed >> 32)` to uint32, concatenated
    (as a 1-element vector) with the seed's low word `convert(seed)` or
    `convert(seed & mask)` into a uint32[2] key."""
    if shift.name != "stablehlo.shift_right_logical" or splat_value(shift.operands[1]) != RNG_IDIOMS["word_shift"][0]:
        return False
    if element_spelling(shift.results[0].type) not in _WIDE_INTEGERS or shape_of(shift.results[0].type) != []:
        return False
    seed = shift.operands[0]
    for high in users(shift.results[0]):
        if high.name != "stablehlo.convert" or element_spelling(high.results[0].type) != "ui32":
            return False
        for key in _vectors_of(high.results[0]):
            if key.name == "stablehlo.concatenate" and len(key.operands) == 2 \
                    and shape_of(key.results[0].type) == [2] and _is_low_word_of(key.operands[1], seed):
                return True
    return False


def _vectors_of(value: ir.Value) -> list[ir.Operation]:
    """Users of `value` and of its 1-element reshapes/broadcasts."""
    out = []
    for user in users(value):
        if user.name in ("stablehlo.broadcast_in_dim", "stablehlo.reshape"):
            out.extend(users(user.results[0]))
        else:
            out.append(user)
    return out


def _is_low_word_of(value: ir.Value, seed: ir.Value) -> bool:
    op = producer(value)
    if op is not None and op.name in ("stablehlo.broadcast_in_dim", "stablehlo.reshape"):
        op = producer(op.operands[0])
    if op is None or op.name != "stablehlo.convert":
        return False
    source = op.operands[0]
    if source == seed:
        return True
    masked = producer(source, "stablehlo.and")
    return masked is not None and seed in list(masked.operands)
