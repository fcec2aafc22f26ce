"""Casts: identity converts go away; converts of known values must fit; bitcasts must stay valid.

`reduce_precision` to float64's format (e11m52) is left as it is: x32 JAX's trace of the same
expression holds `reduce_precision ..., format = e11m52 : tensor<...xf32>` (more bits than the
type has: the identity, as e8m23 would be), and the narrowed module must be that module."""

from __future__ import annotations

import numpy as np
from jax.extend.mlir import ir

from x64guard.findings import Kind, Severity
from x64guard.passes.constant_io import element_of, read_number_attribute
from x64guard.passes.driver import OpContext, Outcome, RewritePattern
from x64guard.passes.matching import carried_from
from x64guard.passes.tables import CONSTANT_OPS, INTEGER_RANGE, NARROW_ELEMENT_TYPE
from x64guard.passes.values import unfit_convert

# Ops that only move, repeat or reorder their operand's values: a constant seen through them
# is a value x64guard knows (the set of values, which is all a range check needs).
_VALUE_CARRIERS = frozenset({"stablehlo.broadcast_in_dim", "stablehlo.reshape", "stablehlo.transpose"})
_WIDE_INTEGERS = frozenset({"i64", "si64", "ui64"})
# Constant element types whose dense values the bindings hand to numpy (not bf16, i4, ...).
_READABLE_ELEMENTS = frozenset(INTEGER_RANGE) | {"i1", "f16", "f32", "f64"}


class ConvertOutOfRange(RewritePattern):
    """A convert to a 64-bit integer type of a value x64guard knows (a constant, possibly
    broadcast, reshaped or transposed) computes values the narrowed type must hold: the
    constant `4294967295 : ui64` fits uint32, but converted to int64 it is 4294967295, which
    the narrowed convert (ui32 -> i32) makes -1. Refused, as a constant that does not fit is
    (values.unfit_convert says which results count). The rule only reports: the generic rule
    narrows the convert."""

    op_names = frozenset({"stablehlo.convert"})

    def match_and_rewrite(self, op: ir.Operation, ctx: OpContext) -> Outcome:
        wide_out = ctx.converter.element_spelling(ctx.result_types[0])
        if wide_out not in _WIDE_INTEGERS:
            return Outcome.NO_MATCH
        values = known_values(op.operands[0], ctx)
        if values is None or values.size == 0:
            return Outcome.NO_MATCH
        wide_in = ctx.converter.element_spelling(ctx.type_before(op.operands[0]))
        unfit = unfit_convert(values, wide_in, wide_out)
        if not unfit.count:
            return Outcome.NO_MATCH
        narrow_in, narrow_out = NARROW_ELEMENT_TYPE.get(wide_in, wide_in), NARROW_ELEMENT_TYPE[wide_out]
        what = (f"this convert of a constant computes {unfit.count} {wide_out} value(s) ({_listed(unfit.examples)}) "
                f"that do not fit in {narrow_out}: narrowed ({narrow_in} -> {narrow_out}) it gives "
                f"{_listed(unfit.narrowed)} instead")
        if ctx.overflow == "error":
            ctx.report(Kind.CONSTANT_OUT_OF_RANGE, Severity.ERROR,
                       f"{what}; keep this computation in 64 bits (mode='allow'), write the constant in the type it "
                       "is converted to, or accept the change explicitly with overflow='wrap' or overflow='saturate'")
        else:
            ctx.report(Kind.CONSTANT_OUT_OF_RANGE, Severity.WARNING,
                       f"{what} (an integer convert wraps, a float one saturates, whatever the policy), accepted by "
                       f"overflow='{ctx.overflow}'; results change")
        return Outcome.NO_MATCH


def known_values(value: ir.Value, ctx: OpContext) -> np.ndarray | None:
    """The values of `value` as the 64-bit module holds them, when it is a readable constant
    seen through `_VALUE_CARRIERS` (in any layout), else None."""
    op = carried_from(value, _VALUE_CARRIERS)
    if op is None or op.name not in CONSTANT_OPS:
        return None
    wide_type = ctx.type_before(op.results[0])
    if ctx.converter.element_spelling(wide_type) not in _READABLE_ELEMENTS:
        return None
    attr = ctx.rewriter.value_before(op)  # the constant itself is already narrowed
    read = None if attr is None else read_number_attribute(attr, wide_type)
    return None if read is None else read[0]


def _listed(values: list) -> str:
    return ", ".join(str(v) for v in values)


class RemoveIdentityConvert(RewritePattern):
    """`convert` whose operand and result types coincide after narrowing but not before
    (f32->f64, f64->f32 of an array): x32 JAX traces no convert there (`astype` to the dtype
    a value already has is no op). Two kinds stay, narrowed, because x32 JAX's trace holds
    them as f32->f32 / i32->i32 converts: a convert that was already an identity (f64->f64),
    and a scalar's 64->32-bit convert (a weak-typed value made float32/int32). The narrowed
    module must be the module x32 JAX lowers (tests/module_equality.py)."""

    op_names = frozenset({"stablehlo.convert"})

    def match_and_rewrite(self, op: ir.Operation, ctx: OpContext) -> Outcome:
        source, result = ctx.type_before(op.operands[0]), ctx.result_types[0]
        if source == result or ctx.narrowed(source) != ctx.narrowed(result):
            return Outcome.REWROTE
        if not _weak_scalar_convert(op.operands[0], source, result):
            ctx.rewriter.forward_operand(op)
            return Outcome.REWROTE
        # Kept: x32 JAX holds this convert if the scalar was weak-typed, and none if it was a
        # strong int32/float32; the module does not say which. Either way it computes nothing.
        ctx.report(Kind.IDENTITY_CONVERT, Severity.INFO,
                   "a scalar's 64-to-32-bit convert, kept as a convert to the type its operand has: x32 JAX's "
                   "module holds one where the scalar was weak-typed and none where it was a strong 32-bit value, "
                   "which the module does not record; it computes nothing")
        return Outcome.REWROTE


def _weak_scalar_convert(operand: ir.Value, source: ir.Type, result: ir.Type) -> bool:
    """A scalar converted from a 64-bit type to its 32-bit counterpart (f64 -> f32,
    i64 -> i32): what a weak-typed value (a Python scalar, a library's scalar argument)
    becomes when an op asks for float32/int32. x32 JAX traces that as an identity convert
    (weak f32 -> f32), so it stays. Anything else that narrowing makes an identity (f32 ->
    f64, an array's f64 -> f32) is an `astype` x32 JAX traces as nothing."""
    if not isinstance(source, ir.RankedTensorType) or source.rank != 0:
        return False
    width_in, width_out = bit_width(source), bit_width(result)
    if width_in is None or width_out is None or width_in <= width_out:
        return False
    # Integer scalars (indices, counts, Python ints), and float scalars that a function takes
    # as an argument (a library's `minval`): weak-typed in the x64 trace. A float scalar the
    # trace computed (optax's bias correction in float64) is strong: x32 JAX has no convert.
    return isinstance(element_of(source), ir.IntegerType) or isinstance(operand.owner, ir.Block)


def bit_width(t: ir.Type) -> int | None:
    element = element_of(t)
    if isinstance(element, ir.ComplexType):
        inner = bit_width(element.element_type)
        return None if inner is None else 2 * inner
    return getattr(element, "width", None)


def bitcast_is_valid(source: ir.Type, result: ir.Type) -> bool:
    """StableHLO's rule: equal widths keep the shape; a wider side has one fewer
    dimension, the narrower side's last dimension being the width ratio."""
    w_in, w_out = bit_width(source), bit_width(result)
    if w_in is None or w_out is None:
        return True  # not a width x64guard changes
    if not (isinstance(source, ir.RankedTensorType) and isinstance(result, ir.RankedTensorType)):
        return w_in == w_out
    s_in, s_out = list(source.shape), list(result.shape)
    if w_in == w_out:
        return s_in == s_out
    if w_in > w_out:
        return s_out == s_in + [w_in // w_out] and w_in % w_out == 0
    return s_in == s_out + [w_out // w_in] and w_out % w_in == 0


class NarrowBitcastConvert(RewritePattern):
    """A bitcast reinterprets bits: it must still be a valid bitcast after narrowing.

    f64 -> i64 narrows to f32 -> i32 (what x32 tracing does); f64 -> tensor<...x2xui32>
    or its reverse would change the number of elements and cannot be narrowed.
    """

    op_names = frozenset({"stablehlo.bitcast_convert"})

    def match_and_rewrite(self, op: ir.Operation, ctx: OpContext) -> Outcome:
        source, result = op.operands[0].type, ctx.result_types[0]
        new_source, new_result = ctx.narrowed(source), ctx.narrowed(result)
        if not bitcast_is_valid(new_source, new_result):
            ctx.report(Kind.BITCAST_WIDTH, Severity.ERROR,
                      f"this bitcast to {result} would become {new_source} -> {new_result}, which no longer "
                      "reinterprets the same bits; keep it in 64 bits (mode='allow') or rewrite it on "
                      "32-bit values (lax.bitcast_convert_type on float32/uint32)")
        return Outcome.REWROTE
