"""Random numbers: refusals of the 64-bit idioms no rule of patterns/random_bits.py
recognized (their source is not a known generator): narrowed blindly they would be garbage."""

from __future__ import annotations

from jax.extend.mlir import ir

from x64guard.findings import Kind, Severity
from x64guard.passes.driver import OpContext, Outcome, RewritePattern
from x64guard.passes.ir_queries import read_attribute
from x64guard.passes.tables import CONSTANT_OPS, FLOAT64_ONE_BITS

# How far from the 1.0-bits constant the bitcast may be: broadcast_in_dim -> or -> bitcast.
_IDIOM_DEPTH = 4


class RefuseFloat64RandomBits(RewritePattern):
    """x64 jax.random builds float64 samples from uint64 bits: mantissa bits or-ed with
    the bit pattern of 1.0 (a ui64 constant), then a bitcast to f64. Narrowed blindly this
    yields garbage; the 32-bit program JAX traces uses a different idiom and stream.

    Matched at the constant, the first op of the idiom the walk meets, and reported at
    the bitcast that makes the float.
    """

    op_names = CONSTANT_OPS

    def match_and_rewrite(self, op: ir.Operation, ctx: OpContext) -> Outcome:
        if ctx.converter.element_spelling(ctx.result_types[0]) != "ui64":
            return Outcome.NO_MATCH
        attr = read_attribute(op, "value")
        if not isinstance(attr, ir.DenseIntElementsAttr) or not attr.is_splat \
                or attr.get_splat_value().value != FLOAT64_ONE_BITS:
            return Outcome.NO_MATCH
        bitcast = _bitcast_to_f64_downstream(op, ctx)
        if bitcast is None:
            return Outcome.NO_MATCH
        ctx.report(Kind.RNG_BITS, Severity.ERROR,
                   "float64 numbers built from 64-bit words (mantissa or-ed with the bits of 1.0, bitcast to "
                  "f64) whose source x64guard cannot trace to a random generator it knows (jax.random's "
                  "threefry or rbg draws are rewritten as x32 JAX draws them): narrowed, the result would be "
                   "garbage. Build them from 32-bit words (float32), or keep this module in 64 bits (mode='allow')",
                   at=bitcast)
        return Outcome.REWROTE


def _bitcast_to_f64_downstream(op: ir.Operation, ctx: OpContext) -> ir.Operation | None:
    frontier = [op]
    for _ in range(_IDIOM_DEPTH):
        following = []
        for producer in frontier:
            for result in producer.results:
                for use in result.uses:
                    user = use.owner.operation
                    if user.name == "stablehlo.bitcast_convert":
                        if ctx.converter.element_spelling(user.results[0].type) == "f64":
                            return user
                    elif user.name in ("stablehlo.broadcast_in_dim", "stablehlo.or", "stablehlo.shift_right_logical"):
                        following.append(user)
        frontier = following
    return None


# Ops that only move a kernel's output words (jax_threefry_partitionable=False concatenates
# and slices them) between the call and the words built from them.
_WORD_MOVES = frozenset({"stablehlo.slice", "stablehlo.concatenate", "stablehlo.reshape",
                         "stablehlo.broadcast_in_dim", "stablehlo.transpose"})


def _call_behind(value: ir.Value, depth: int = 6) -> ir.Operation | None:
    """The func.call whose results `value` moves (through slices, concatenations,
    reshapes), or None."""
    owner = value.owner
    if isinstance(owner, ir.Block) or depth == 0:
        return None
    op = owner.operation
    if op.name == "func.call":
        return op
    if op.name in _WORD_MOVES:
        for operand in op.operands:
            found = _call_behind(operand, depth - 1)
            if found is not None:
                return found
    return None


class RefuseWideRandomWords(RewritePattern):
    """uint64 words from a kernel: one 32-bit output of a called function shifted left by
    32 and or-ed with another. Narrowed, the shift drops the high word: valid-looking
    random numbers, but not the stream JAX draws with x64 off. Matched at the shift whose
    operand is any call's 32-bit result (or a slice of its outputs) widened by a convert,
    whatever the callee's name:
    the word rules (patterns/random_bits.py) have already rewritten every such shift they
    proved to be jax.random's, so one still here was not proved."""

    op_names = frozenset({"stablehlo.shift_left"})

    def match_and_rewrite(self, op: ir.Operation, ctx: OpContext) -> Outcome:
        if ctx.converter.element_spelling(ctx.result_types[0]) not in ("ui64", "i64"):
            return Outcome.NO_MATCH
        widened = op.operands[0].owner
        if isinstance(widened, ir.Block) or widened.operation.name != "stablehlo.convert":
            return Outcome.NO_MATCH
        if ctx.converter.element_spelling(widened.operation.operands[0].type) not in ("ui32", "i32"):
            return Outcome.NO_MATCH
        kernel = _call_behind(widened.operation.operands[0])
        if kernel is None:
            return Outcome.NO_MATCH
        callee = ir.FlatSymbolRefAttr(kernel.attributes["callee"]).value
        if _bitcast_to_f64_downstream(op, ctx) is not None:
            return Outcome.REWROTE  # float64 sampling: reported once, at its bitcast, by RefuseFloat64RandomBits
        ctx.report(Kind.RNG_BITS, Severity.ERROR,
                   f"64-bit words assembled from @{callee}'s 32-bit outputs ((hi << 32) | lo), and x64guard could "
                  f"not prove from its body and operands that @{callee} is jax.random's Threefry-2x32 on "
                  "jax.random's counters (the only words it knows how x32 JAX draws): narrowed, the high word "
                  "would be dropped. Ask for 32-bit words (dtype=jnp.uint32) here, or keep this module in 64 bits "
                  "(mode='allow')")
        return Outcome.REWROTE
