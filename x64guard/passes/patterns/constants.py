"""Constants are data: their values are converted, checked, and reported when lossy."""

from __future__ import annotations

import numpy as np
from jax.extend.mlir import ir

from x64guard.findings import Kind, Severity
from x64guard.passes.constant_io import UnreadableConstant, constant_attribute, read_constant, scalar_attr
from x64guard.passes.driver import OpContext, Outcome, RewritePattern
from x64guard.passes.ir_queries import read_attribute
from x64guard.passes.tables import CONSTANT_OPS, dtype_constant
from x64guard.passes.values import NarrowedValues, exact_scalar, narrow_scalar, narrow_values

_UNSEEN = object()
_POLICY_HINT = ("keep this computation in 64 bits (mode='allow'), change the constant, or accept "
                "the change explicitly with overflow='saturate' or overflow='wrap'")
# Why a value collapsing onto a boundary matters, and what to do: the same words for 0 and +-1.
_BOUNDARY_HINT = ("If this is a literal, JAX with x64 off rounds it the same way; if it is derived from the "
                  "64-bit type (a finfo(float64) expression), JAX with x64 off holds float32's counterpart instead "
                  "and code that clips to it can now reach the boundary (log(0), division by zero): derive it "
                  "from the data's dtype (jnp.finfo(x.dtype)) or keep this computation in 64 bits (mode='allow')")


class NarrowCleanSplat(RewritePattern):
    """The common case first: a splat that narrows exactly, needs no report and is no
    dtype-derived constant (those are ReplaceDtypeConstants' job)."""

    op_names = CONSTANT_OPS

    def match_and_rewrite(self, op: ir.Operation, ctx: OpContext) -> Outcome:
        attr = read_attribute(op, "value")
        if attr is None:  # complex: the general path reads it
            return Outcome.NO_MATCH
        # Memoized per attribute, clean or not: MLIR attributes are uniqued (and carry their
        # type, the constant's), and modules repeat 0, 1, -inf thousands of times.
        cache = ctx.run.splat_cache
        narrowed = cache.get(attr, _UNSEEN)
        if narrowed is _UNSEEN:
            narrowed = cache[attr] = self._clean_narrowing(attr, ctx)
        if narrowed is None:
            return Outcome.NO_MATCH  # not 64-bit, or the later rules narrow and report it
        ctx.rewriter.set_attribute(op, "value", narrowed)
        return Outcome.REWROTE

    @staticmethod
    def _clean_narrowing(attr: ir.Attribute, ctx: OpContext) -> ir.Attribute | None:
        """The narrowed splat, or None when `attr` is no 64-bit splat that narrows exactly."""
        new_type = ctx.converter.convert(ctx.result_types[0])
        if new_type is None or not isinstance(attr, (ir.DenseIntElementsAttr, ir.DenseFPElementsAttr)) \
                or not attr.is_splat:
            return None
        wide = attr.get_splat_value().value
        value = exact_scalar(wide, ctx.converter.element_spelling(new_type))
        if value is None or isinstance(wide, float) and dtype_constant(wide) is not None:
            return None
        return ir.DenseElementsAttr.get_splat(new_type, scalar_attr(new_type.element_type, value))


class NarrowConstant(RewritePattern):
    """Any other constant: read, narrowed value by value, lossy changes reported."""

    op_names = CONSTANT_OPS

    def match_and_rewrite(self, op: ir.Operation, ctx: OpContext) -> Outcome:
        old_type = ctx.result_types[0]
        new_type = ctx.converter.convert(old_type)
        if new_type is None:
            return Outcome.NO_MATCH
        wide = ctx.converter.element_spelling(old_type)
        try:
            values, splat = read_constant(op, old_type)
        except UnreadableConstant as exc:
            ctx.report(Kind.CONSTANT_UNREADABLE, Severity.ERROR,
                       f"x64guard cannot read this {wide} constant ({exc}), so it cannot narrow it safely; "
                       "keep the module in 64 bits (mode='allow')")
            return Outcome.REWROTE
        narrow_and_write(op, ctx, values, splat, new_type)
        return Outcome.REWROTE


def narrow_and_write(op: ir.Operation, ctx: OpContext, values: np.ndarray, splat: bool, new_type: ir.Type) -> None:
    """Narrow the 64-bit `values` of constant `op`, report what was lossy, and write them
    with the narrowed type. Shared by the rules that rewrite constants."""
    wide = ctx.converter.element_spelling(ctx.result_types[0])
    narrow = ctx.converter.element_spelling(new_type)
    if splat:
        result = narrow_scalar(values.item(), wide, narrow, ctx.overflow)
    else:
        result = narrow_values(values, wide, narrow, ctx.overflow)
    if result.out_of_range:
        _report_out_of_range(ctx, wide, narrow, result)
    if result.underflow:
        ctx.report(Kind.CONSTANT_UNDERFLOW, Severity.WARNING,
                   f"{result.underflow} nonzero {wide} value(s) ({_examples(result.underflow_examples)}) are "
                   f"below {narrow}'s smallest subnormal and become 0. {_BOUNDARY_HINT}")
    if result.to_one:
        ctx.report(Kind.CONSTANT_COLLAPSE, Severity.WARNING,
                   f"{result.to_one} {wide} value(s) ({_examples(result.to_one_examples)}) differ from +-1.0 by "
                   f"less than {narrow}'s precision and become exactly +-1.0. {_BOUNDARY_HINT}")
    ctx.rewriter.set_attribute(op, "value", lambda: constant_attribute(result.values, splat, new_type))


def _examples(values: list) -> str:
    return ", ".join(repr(v) for v in values)


def _report_out_of_range(ctx: OpContext, wide: str, narrow: str, result: NarrowedValues) -> None:
    examples = _examples(result.examples)
    kind = Kind.CONSTANT_OVERFLOW if wide in ("f64", "complex<f64>") else Kind.CONSTANT_OUT_OF_RANGE
    what = f"{result.out_of_range} value(s) ({examples}) do not fit in {narrow}"
    if ctx.overflow == "error":
        ctx.report(kind, Severity.ERROR, f"{what}; {_POLICY_HINT}")
    else:
        verb = "saturated to" if ctx.overflow == "saturate" else "wrapped into"
        ctx.report(kind, Severity.WARNING,
                   f"{what}: {verb} {narrow} as requested by overflow='{ctx.overflow}'; results change")
