"""Random numbers, the words: the 64-bit random words of jax.random and torch-xla, rewritten
into the 32-bit ones JAX (or torch-xla) traces for the same call with 64-bit types off.

Rules of the idiom phase (`passes/idioms.py`), in the order they run:

* `XlaRandintWords`: torch-xla's randint reduces 64-bit words `% span` (for int32
  results too): drawn as uint32 pairs, reduced exactly by long division in 32 bits.
* `RbgWideDraw`: any other 64-bit draw of `rng_bit_generator` (JAX's rbg keys, torch-xla) draws
  32-bit words from the same state instead, as the 32-bit programs do.
* `ThreefryWords`: `(convert(b1) << 32) | convert(b2)` over one threefry2x32 call
  (jax_threefry_partitionable=True) becomes `b1 ^ b2`: the same kernel on the same
  counters, combined as x32 JAX combines them.
* `ThreefryWordsOriginal`: the same for jax_threefry_partitionable=False, where x32 JAX
  feeds the kernel other counters (half as many): the kernel is called again on those.
* `ReshapedRandomWords`: words reshaped to the sample shape are words too.

What is built from the words (uniform floats, randint's multiplier) is rewritten by the
rules of patterns/random_values.py, which run next. They only use words one of the first
three rules here produced (`random_word`): a 64-bit word whose source is not a recognized
generator is left alone, and stays refused by the refusal rules of patterns/rng.py.
"""

from __future__ import annotations

import numpy as np
from jax.extend.mlir import ir
from jax.extend.mlir.dialects import stablehlo

from x64guard.findings import Kind, Severity
from x64guard.passes.driver import OpContext, Outcome
from x64guard.passes.idioms import IdiomPattern
from x64guard.passes.matching import (convert, element_spelling, producer, result_number,
                                      shape_of, splat, splat_value, tensor_type, users)
from x64guard.passes.kernels import computes_threefry2x32, concrete_value
from x64guard.passes.tables import RNG_IDIOMS, RNG_WORD_PAIR

_WIDE_WORDS = ("ui64",)
_NARROW_WORD = "ui32"


# ---- recognizing sources of random bits ------------------------------------------------

def is_threefry_call(op: ir.Operation | None, ctx: OpContext) -> bool:
    """A func.call of a function proved to compute Threefry-2x32 from its body
    (passes/kernels.py): two uint32 keys, two uint32 counter arrays in, the two output
    words out, in that order. Proved once per callee."""
    if op is None or op.name != "func.call" or len(op.operands) != 4 or len(op.results) != 2:
        return False
    if any(element_spelling(v.type) != "ui32" for v in list(op.operands) + list(op.results)):
        return False
    callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
    facts = ctx.idioms.callee_facts
    key = ("threefry2x32", callee)
    if key not in facts:
        function = ctx.idioms.functions.get(callee)
        facts[key] = function is not None and computes_threefry2x32(function, ctx.idioms.functions)
    return facts[key]


def _counters_hold(kernel: ir.Operation, ctx: OpContext, first: np.ndarray, second: np.ndarray) -> bool:
    """The kernel's counter operands hold `first` and `second`, broadcast over any leading
    batch axes (vmap's layout): read from the module by evaluating them, not inferred
    from their shapes."""
    for operand, want in zip(kernel.operands[2:], (first, second)):
        got = concrete_value(operand, ctx.idioms.functions)
        if got is None or got.ndim < want.ndim or got.shape[got.ndim - want.ndim:] != want.shape:
            return False
        if not np.array_equal(got, np.broadcast_to(want.astype(got.dtype), got.shape)):
            return False
    return True


def _linear_index_words(shape: list[int]) -> list[tuple[np.ndarray, np.ndarray]]:
    """iota_2x32_shape's counters (the high and low words of each element's linear index)
    for `shape` and for each of its trailing sub-shapes (a draw vmapped over keys)."""
    out = []
    for start in range(len(shape) + 1):
        index = np.arange(int(np.prod(shape[start:])), dtype=np.uint64).reshape(shape[start:])
        out.append((index >> np.uint64(32), index & np.uint64(0xFFFFFFFF)))
    return out


def _joined_halves(op: ir.Operation) -> tuple[ir.Value, ir.Value] | None:
    """(hi, lo) of `(convert(hi) << 32) | convert(lo)` with hi, lo uint32, or None."""
    if element_spelling(op.results[0].type) not in _WIDE_WORDS or len(op.operands) != 2:
        return None
    for shifted, low in (tuple(op.operands), tuple(reversed(list(op.operands)))):
        shift = producer(shifted, "stablehlo.shift_left")
        low_convert = producer(low, "stablehlo.convert")
        if shift is None or low_convert is None or splat_value(shift.operands[1]) != RNG_IDIOMS["word_shift"][0]:
            continue
        high_convert = producer(shift.operands[0], "stablehlo.convert")
        if high_convert is None:
            continue
        hi, lo = high_convert.operands[0], low_convert.operands[0]
        if element_spelling(hi.type) == element_spelling(lo.type) == _NARROW_WORD:
            return hi, lo
    return None


def _register_word(op: ir.Operation, ctx: OpContext, word32: ir.Value) -> None:
    """`op`'s 64-bit words are replaced by x32's `word32`, widened for the 64-bit module."""
    with ctx.rewriter.insert_before(op):
        wide = convert(word32, element_spelling(op.results[0].type))
    ctx.rewriter.replace_all_uses(op.results[0], wide)
    ctx.idioms.random_words[wide] = word32
    ctx.idioms.maybe_dead.append(op)


class ThreefryWords(IdiomPattern):
    """uint64 words of jax.random (jax_threefry_partitionable=True): `(convert(b1) << 32)
    | convert(b2)` over the two outputs of one threefry2x32 call -> `b1 ^ b2`."""

    op_names = frozenset({"stablehlo.or"})
    result_elements = frozenset({"ui64"})

    def match_and_rewrite(self, op: ir.Operation, ctx: OpContext) -> Outcome:
        halves = _joined_halves(op)
        if halves is None:
            return Outcome.NO_MATCH
        hi, lo = halves
        kernel = producer(hi)
        if kernel is None or kernel != producer(lo) or (result_number(hi), result_number(lo)) != (0, 1):
            return Outcome.NO_MATCH
        if not is_threefry_call(kernel, ctx) or not _key_words_in_order(kernel):
            return Outcome.NO_MATCH
        # x32 JAX draws these words from the same call only if its counters are
        # iota_2x32_shape's: the high and low words of each element's linear index.
        shape = shape_of(op.results[0].type)
        if shape is None:
            return Outcome.NO_MATCH
        if not any(_counters_hold(kernel, ctx, high, low) for high, low in _linear_index_words(shape)):
            return Outcome.NO_MATCH
        with ctx.rewriter.insert_before(op):
            word = stablehlo.xor(hi, lo)
        _register_word(op, ctx, word)
        ctx.report(Kind.RNG_WORDS, Severity.INFO,
                  "64-bit random words ((b1 << 32) | b2 of threefry2x32) drawn as x32 JAX draws them (b1 ^ b2)")
        return Outcome.REWROTE


def _last_axis_range(op: ir.Operation | None) -> tuple[int, int] | None:
    """(start, limit) along the last axis of a unit-stride slice that keeps every other
    axis whole, or None."""
    if op is None or op.name != "stablehlo.slice":
        return None
    starts = list(ir.DenseI64ArrayAttr(op.attributes["start_indices"]))
    limits = list(ir.DenseI64ArrayAttr(op.attributes["limit_indices"]))
    strides = list(ir.DenseI64ArrayAttr(op.attributes["strides"]))
    shape = shape_of(op.operands[0].type)
    if not starts or shape is None or any(stride != 1 for stride in strides):
        return None
    if starts[:-1] != [0] * (len(starts) - 1) or limits[:-1] != shape[:-1]:
        return None
    return starts[-1], limits[-1]


def _before_unit_axes(value: ir.Value) -> ir.Value:
    """`value` before reshapes and broadcasts that only add or drop unit axes (the same
    elements in the same order: vmap's layout of a batch of keys)."""
    for _ in range(4):
        op = producer(value)
        if op is None or op.name not in ("stablehlo.reshape", "stablehlo.broadcast_in_dim"):
            return value
        source, result = shape_of(op.operands[0].type), shape_of(op.results[0].type)
        if source is None or result is None or int(np.prod(source)) != int(np.prod(result)):
            return value
        if op.name == "stablehlo.broadcast_in_dim":
            dims = list(ir.DenseI64ArrayAttr(op.attributes["broadcast_dimensions"]))
            if dims != sorted(dims):
                return value
        value = op.operands[0]
    return value


def _key_words_in_order(kernel: ir.Operation) -> bool:
    """The kernel's two key operands are words 0 and 1 of one key (slices of the same
    value along its last axis, reshaped), as jax.random passes them: the words x32 JAX
    draws come from the key in that order."""
    def source(value: ir.Value) -> tuple[ir.Value, tuple[int, int]] | None:
        sliced = producer(_before_unit_axes(value), "stablehlo.slice")
        span = _last_axis_range(sliced)
        return None if span is None else (sliced.operands[0], span)

    first, second = source(kernel.operands[0]), source(kernel.operands[1])
    return first is not None and second is not None and first[0] == second[0] \
        and (first[1], second[1]) == ((0, 1), (1, 2))


def _halves_of(first: ir.Value, second: ir.Value, n: int) -> ir.Value | None:
    """The value whose last axis has length 2n and whose [..., 0:n] and [..., n:2n]
    slices `first` and `second` are."""
    a, b = producer(first), producer(second)
    if _last_axis_range(a) != (0, n) or _last_axis_range(b) != (n, 2 * n):
        return None
    whole = a.operands[0]
    if whole != b.operands[0]:
        return None
    return whole


class ThreefryWordsOriginal(IdiomPattern):
    """uint64 words of jax.random with jax_threefry_partitionable=False: threefry2x32 on
    counters iota(2n) split in halves, outputs concatenated, the two halves of that joined
    `(hi << 32) | lo` (along the last axis, with leading batch axes under vmap). x32 JAX
    draws n words from counters iota(n) (padded with a 0 when n is odd) split in halves of
    m = ceil(n/2): the kernel is called again with those counters, in the n lanes of the
    existing call (lanes past m are not used)."""

    op_names = frozenset({"stablehlo.or"})
    result_elements = frozenset({"ui64"})

    def match_and_rewrite(self, op: ir.Operation, ctx: OpContext) -> Outcome:
        halves = _joined_halves(op)
        shape = shape_of(halves[0].type) if halves is not None else None
        if not shape:
            return Outcome.NO_MATCH
        n, axis = shape[-1], len(shape) - 1
        outputs = _halves_of(halves[0], halves[1], n)
        joined = producer(outputs, "stablehlo.concatenate") if outputs is not None else None
        if joined is None or len(joined.operands) != 2 or ir.IntegerAttr(joined.attributes["dimension"]).value != axis:
            return Outcome.NO_MATCH
        kernel = producer(joined.operands[0])
        if kernel is None or kernel != producer(joined.operands[1]) or not is_threefry_call(kernel, ctx) \
                or [result_number(v) for v in joined.operands] != [0, 1] or not _key_words_in_order(kernel):
            return Outcome.NO_MATCH
        # The counters x64 JAX fed the kernel: iota(2n) split in halves (read, not assumed).
        if not _counters_hold(kernel, ctx, np.arange(n, dtype=np.uint32), np.arange(n, 2 * n, dtype=np.uint32)):
            return Outcome.NO_MATCH
        m = (n + 1) // 2
        lane_type = kernel.operands[2].type
        lane_axis = len(shape_of(lane_type)) - 1
        with ctx.rewriter.insert_before(op):
            x0 = stablehlo.iota(lane_type, lane_axis)
            x1 = stablehlo.add(x0, splat(lane_type, "ui32", m))
            if n % 2:  # x32 JAX pads its odd count with one 0 counter, the last of the second half
                is_pad = stablehlo.compare(x0, splat(lane_type, "ui32", m - 1),
                                           stablehlo.ComparisonDirectionAttr.get("EQ"))
                x1 = stablehlo.select(is_pad, splat(lane_type, "ui32", 0), x1)
            attributes = {name: kernel.attributes[name] for name in kernel.attributes}
            call = ctx.rewriter.create_op("func.call", [r.type for r in kernel.results],
                                          [kernel.operands[0], kernel.operands[1], x0, x1], attributes)
            starts, limits = [0] * len(shape), list(shape[:-1]) + [m]
            used = [stablehlo.slice(result, starts, limits, [1] * len(shape)) for result in call.results]
            words = stablehlo.concatenate(used, axis)
            if 2 * m != n:
                words = stablehlo.slice(words, starts, list(shape), [1] * len(shape))
        ctx.idioms.dead_calls.add(kernel)
        _register_word(op, ctx, words)
        ctx.report(Kind.RNG_WORDS, Severity.INFO,
                  "64-bit random words (jax_threefry_partitionable=False) drawn as x32 JAX draws them: "
                  "threefry2x32 on x32's counters, one 32-bit word each")
        return Outcome.REWROTE


class XlaRandintWords(IdiomPattern):
    """torch-xla's integer draws (randint, random_): 64-bit words of rng_bit_generator
    reduced `w % span`, even for int32 results (then split `(r >> 1) + (r - (r >> 1))` into
    int64). To draw exactly those numbers in 32 bits, the words are drawn as pairs of
    uint32 from the same state (XLA builds each 64-bit word from two consecutive 32-bit
    words, low first; `RNG_WORD_PAIR`) and `(hi * 2**32 + lo) % span` is computed by long
    division on uint32 (span below 2**32, which it is once the bounds are int32)."""

    op_names = frozenset({"stablehlo.remainder"})
    result_elements = frozenset({"ui64"})

    def match_and_rewrite(self, op: ir.Operation, ctx: OpContext) -> Outcome:
        words, span = op.operands
        generator = producer(words, "stablehlo.rng_bit_generator")
        shape = shape_of(words.type)
        if generator is None or result_number(words) != 1 or element_spelling(words.type) != "ui64" \
                or shape is None or len(users(words)) != 1 or not _split_for_int64(op):
            return Outcome.NO_MATCH
        pair_type = ir.RankedTensorType.get(shape + [2], ir.Type.parse(_NARROW_WORD))
        ctx.rewriter.retype(generator.results[1], pair_type)
        low_at, high_at = RNG_WORD_PAIR.index("low"), RNG_WORD_PAIR.index("high")
        word_type = tensor_type(op.results[0].type, _NARROW_WORD)
        with ctx.rewriter.insert_before(op):
            def part(index: int) -> ir.Value:
                piece = stablehlo.slice(generator.results[1], [0] * len(shape) + [index], shape + [index + 1],
                                        [1] * (len(shape) + 1))
                return stablehlo.reshape(word_type, piece)
            low, high = part(low_at), part(high_at)
            remainder = _remainder_of_pair(high, low, convert(span, _NARROW_WORD))
            wide = convert(remainder, "ui64")
        self.replace_root(ctx, op, wide)
        ctx.report(Kind.RNG_RANDINT, Severity.INFO,
                  "torch-xla's integer draw (64-bit words % span) computed in 32 bits: the same words drawn as "
                  "uint32 pairs from the same state, the remainder by long division; exact")
        return Outcome.REWROTE


def _split_for_int64(remainder: ir.Operation) -> bool:
    """The remainder's uses are torch-xla's `r >> 1` and `r - (r >> 1)` (the halves it
    adds as int64 so that no uint64 value is converted to int64 directly)."""
    found = users(remainder.results[0])
    halves = [u for u in found if u.name == "stablehlo.shift_right_logical" and splat_value(u.operands[1]) == 1]
    rests = [u for u in found if u.name == "stablehlo.subtract"]
    return len(halves) == 1 and len(found) == 2 and len(rests) == 1 \
        and list(rests[0].operands) == [remainder.results[0], halves[0].results[0]]


def _remainder_of_pair(high: ir.Value, low: ir.Value, span: ir.Value) -> ir.Value:
    """(high * 2**32 + low) % span on uint32 values (span >= 1): the remainder of high,
    then one bit of low at a time, r = (2r + bit) % span, keeping the bit shifted out of
    r (r < span < 2**32, so one subtraction of span always suffices, modulo 2**32)."""
    t = high.type
    unsigned = stablehlo.ComparisonTypeAttr.get("UNSIGNED")
    zero, one = splat(t, "ui32", 0), splat(t, "ui32", 1)
    top_bit = splat(t, "ui32", 31)
    r = stablehlo.remainder(high, span)
    for bit in range(31, -1, -1):
        next_bit = stablehlo.and_(stablehlo.shift_right_logical(low, splat(t, "ui32", bit)), one)
        carried = stablehlo.compare(stablehlo.shift_right_logical(r, top_bit), zero,
                                    stablehlo.ComparisonDirectionAttr.get("NE"), compare_type=unsigned)
        doubled = stablehlo.or_(stablehlo.shift_left(r, one), next_bit)
        reached = stablehlo.compare(doubled, span, stablehlo.ComparisonDirectionAttr.get("GE"), compare_type=unsigned)
        r = stablehlo.select(stablehlo.or_(carried, reached), stablehlo.subtract(doubled, span), doubled)
    return r


class RbgWideDraw(IdiomPattern):
    """rng_bit_generator drawing 64-bit words (jax.random with rbg/unsafe_rbg keys under
    x64, torch-xla's int64 and float64 draws): the 32-bit programs draw uint32 words of the
    same shape from the same state. The output becomes uint32 (the state is not touched)."""

    op_names = frozenset({"stablehlo.rng_bit_generator"})

    def match_and_rewrite(self, op: ir.Operation, ctx: OpContext) -> Outcome:
        output = op.results[1]
        if element_spelling(output.type) not in _WIDE_WORDS:
            return Outcome.NO_MATCH
        ctx.rewriter.retype(output, tensor_type(output.type, _NARROW_WORD))
        with ctx.rewriter.insert_after(op):
            wide = convert(output, "ui64")
        ctx.rewriter.replace_all_uses(output, wide, except_in=wide.owner.operation)
        ctx.idioms.random_words[wide] = output
        ctx.report(Kind.RNG_DRAW, Severity.INFO,
                  "64-bit words of rng_bit_generator drawn as 32-bit words from the same state, as the 32-bit "
                  "programs draw them (jax.random rbg keys, torch-xla)")
        return Outcome.REWROTE


class ReshapedRandomWords(IdiomPattern):
    """Random words reshaped (jax.random reshapes its flat draw to the sample shape):
    the same reshape of the 32-bit words."""

    op_names = frozenset({"stablehlo.reshape"})
    result_elements = frozenset({"ui64"})
    follows_earlier_rules = True

    def match_and_rewrite(self, op: ir.Operation, ctx: OpContext) -> Outcome:
        word = random_word(op.operands[0], ctx)
        if word is None:
            return Outcome.NO_MATCH
        with ctx.rewriter.insert_before(op):
            reshaped = stablehlo.reshape(tensor_type(op.results[0].type, _NARROW_WORD), word)
        _register_word(op, ctx, reshaped)
        return Outcome.REWROTE


def random_word(value: ir.Value, ctx: OpContext) -> ir.Value | None:
    """The 32-bit words x32 draws for the 64-bit random words `value`, if a word rule made them."""
    return ctx.idioms.random_words.get(value)
