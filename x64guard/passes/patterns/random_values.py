"""Random numbers, what is built from random words: the 64-bit uniform floats of jax.random
and of XLA's client library (torch-xla), and jax.random.randint's multiplier, rewritten
into what JAX (or torch-xla) traces with 64-bit types off.

Rules of the idiom phase (`passes/idioms.py`), after the word rules of
patterns/random_bits.py, whose words (`random_word`) are the only ones they use:

* `JaxFloatsFromBits`: `bitcast(w >> 12 | bits(1.0)) : f64` becomes
  `bitcast(w >> 9 | 0x3F800000) : f32` (jax.random's uniform floats).
* `XlaFloatsFromBits`: `convert(w >> 12) * 2**-52` becomes `convert(w >> 9) * 2**-23`
  (the uniform floats of XLA's client library, which torch-xla emits).
* `RandintMultiplier`: randint's `2**32 % span` becomes `2**16 % span`.
"""

from __future__ import annotations

from jax.extend.mlir import ir
from jax.extend.mlir.dialects import stablehlo

from x64guard.findings import Kind, Severity
from x64guard.passes.driver import OpContext, Outcome
from x64guard.passes.idioms import IdiomPattern
from x64guard.passes.matching import convert, element_spelling, producer, splat, splat_value, tensor_type, users
from x64guard.passes.patterns.random_bits import random_word
from x64guard.passes.tables import RNG_IDIOMS


class JaxFloatsFromBits(IdiomPattern):
    """jax.random's float64 uniforms: `bitcast(w >> 12 | bits(1.0)) : ui64 -> f64` over
    random words -> `bitcast(w32 >> 9 | 0x3F800000) : ui32 -> f32` (what `_uniform`
    traces for float32), widened back to f64 for the narrowing walk to remove."""

    op_names = frozenset({"stablehlo.bitcast_convert"})
    result_elements = frozenset({"f64"})
    follows_earlier_rules = True

    def match_and_rewrite(self, op: ir.Operation, ctx: OpContext) -> Outcome:
        if element_spelling(op.results[0].type) != "f64" or element_spelling(op.operands[0].type) != "ui64":
            return Outcome.NO_MATCH
        ored = producer(op.operands[0], "stablehlo.or")
        if ored is None:
            return Outcome.NO_MATCH
        (shift_64, shift_32), (one_64, one_32) = RNG_IDIOMS["float_shift"], RNG_IDIOMS["float_one_bits"]
        for shifted, one in (tuple(ored.operands), tuple(reversed(list(ored.operands)))):
            shift = producer(shifted, "stablehlo.shift_right_logical")
            if shift is None or splat_value(shift.operands[1]) != shift_64 or splat_value(one) != one_64:
                continue
            word = random_word(shift.operands[0], ctx)
            if word is None:
                continue
            with ctx.rewriter.insert_before(op):
                mantissa = stablehlo.shift_right_logical(word, splat(word.type, "ui32", shift_32))
                bits = stablehlo.or_(mantissa, splat(word.type, "ui32", one_32))
                floats = stablehlo.bitcast_convert(tensor_type(word.type, "f32"), bits)
                wide = convert(floats, "f64")
            self.replace_root(ctx, op, wide)
            ctx.report(Kind.RNG_FLOATS, Severity.INFO,
                      "float64 uniform bits (w >> 12 | bits of 1.0) built as x32 JAX builds float32 ones "
                      "(w >> 9 | 0x3F800000)")
            return Outcome.REWROTE
        return Outcome.NO_MATCH


class XlaFloatsFromBits(IdiomPattern):
    """XLA's client-library uniforms (torch-xla's rand/randn/bernoulli/dropout on float64):
    `convert(w >> 12) * 2**-52` over random words -> `convert(w32 >> 9) * 2**-23`, as the
    float32 graph computes them."""

    op_names = frozenset({"stablehlo.convert"})
    result_elements = frozenset({"f64"})
    follows_earlier_rules = True

    def match_and_rewrite(self, op: ir.Operation, ctx: OpContext) -> Outcome:
        if element_spelling(op.results[0].type) != "f64":
            return Outcome.NO_MATCH
        shift = producer(op.operands[0], "stablehlo.shift_right_logical")
        (shift_64, shift_32), (scale_64, scale_32) = RNG_IDIOMS["float_shift"], RNG_IDIOMS["float_scale"]
        if shift is None or splat_value(shift.operands[1]) != shift_64:
            return Outcome.NO_MATCH
        word = random_word(shift.operands[0], ctx)
        scaled = users(op.results[0])
        if word is None or len(scaled) != 1 or scaled[0].name != "stablehlo.multiply":
            return Outcome.NO_MATCH
        scale = scaled[0]
        factor = [v for v in scale.operands if v != op.results[0]]
        if len(factor) != 1 or splat_value(factor[0]) != scale_64:
            return Outcome.NO_MATCH
        with ctx.rewriter.insert_before(scale):
            mantissa = stablehlo.shift_right_logical(word, splat(word.type, "ui32", shift_32))
            floats = convert(mantissa, "f32")
            product = stablehlo.multiply(floats, splat(floats.type, "f32", scale_32))
            wide = convert(product, "f64")
        self.replace_root(ctx, scale, wide)
        ctx.report(Kind.RNG_FLOATS, Severity.INFO,
                  "float64 uniforms (convert(w >> 12) * 2**-52) built as the float32 graph builds them "
                  "(convert(w >> 9) * 2**-23)")
        return Outcome.REWROTE


class RandintMultiplier(IdiomPattern):
    """jax.random.randint on 64-bit words: `m = 2**32 % span; (m * m) % span` mixes a high
    and a low word; x32 JAX mixes its 32-bit words with `2**16 % span`. Matched at the
    remainder, checked against the use it feeds: `(hi % span) * ((m * m) % span)` over
    random words."""

    op_names = frozenset({"stablehlo.remainder"})
    result_elements = frozenset({"ui64"})
    follows_earlier_rules = True

    def match_and_rewrite(self, op: ir.Operation, ctx: OpContext) -> Outcome:
        wide_half, narrow_half = RNG_IDIOMS["randint_half_word"]
        if element_spelling(op.results[0].type) != "ui64" or splat_value(op.operands[0]) != wide_half:
            return Outcome.NO_MATCH
        if not _mixes_random_words(op, ctx):
            return Outcome.NO_MATCH
        with ctx.rewriter.insert_before(op):
            half = splat(op.operands[0].type, "ui64", narrow_half)
        old = op.operands[0]
        ctx.rewriter.replace_uses_in(op, old, half)
        ctx.idioms.maybe_dead.append(producer(old))
        ctx.report(Kind.RNG_RANDINT, Severity.INFO,
                  "randint's multiplier 2**32 % span (for 64-bit words) is 2**16 % span, as x32 JAX mixes its "
                  "32-bit words")
        return Outcome.REWROTE


def _mixes_random_words(remainder: ir.Operation, ctx: OpContext) -> bool:
    """`remainder` is randint's `m`: squared, reduced by the same span, and multiplied with
    a remainder of random words."""
    span = remainder.operands[1]
    for square in users(remainder.results[0]):
        if square.name != "stablehlo.multiply" or list(square.operands) != [remainder.results[0]] * 2:
            continue
        for reduced in users(square.results[0]):
            if reduced.name != "stablehlo.remainder" or reduced.operands[1] != span:
                continue
            if any(_times_random_remainder(v, ctx) for v in _broadcasts_of(reduced.results[0])):
                return True
    return False


def _broadcasts_of(value: ir.Value) -> list[ir.Value]:
    """`value` and its broadcasts, broadcasts of those, ... (vmap adds a level)."""
    out, frontier = [value], [value]
    for _ in range(4):
        frontier = [u.results[0] for v in frontier for u in users(v) if u.name == "stablehlo.broadcast_in_dim"]
        out.extend(frontier)
    return out


def _times_random_remainder(multiplier: ir.Value, ctx: OpContext) -> bool:
    for product in users(multiplier):
        if product.name != "stablehlo.multiply":
            continue
        for factor in product.operands:
            rem = producer(factor, "stablehlo.remainder")
            if rem is not None and random_word(rem.operands[0], ctx) is not None:
                return True
    return False
