"""Dtype-derived constants: finfo(float64) values become finfo(float32)'s.

Library code writes `jnp.finfo(x.dtype).eps`, `1 - eps`, `tiny`, `np.nextafter(-1, 0)`.
JAX traced with x64 off evaluates those expressions for float32; the x64 module holds
float64's values, and rounding them is not the same thing (1 - eps64 rounds to 1.0 and
tiny64 to 0, so clipped probabilities reach log(0)). Each float64 element (or complex
part) that is a known finfo expression (`tables.dtype_constant`) is replaced by float32's
value of the same expression, reported as an `info` finding naming it; the constant is
then narrowed as any other (`constants.narrow_and_write`), which now is exact for those
elements and still checks the rest.

A literal that happens to equal one of these values is replaced too: the table holds
only values a program is very unlikely to write by hand (docs/constants.md).
"""

from __future__ import annotations

import numpy as np
from jax.extend.mlir import ir

from x64guard.findings import Kind, Severity
from x64guard.passes.constant_io import UnreadableConstant, read_constant
from x64guard.passes.driver import OpContext, Outcome, RewritePattern
from x64guard.passes.ir_queries import read_attribute
from x64guard.passes.patterns.constants import narrow_and_write
from x64guard.passes.tables import CONSTANT_OPS, DtypeConstant, dtype_constant
from x64guard.passes.values import substitute_dtype_constants

_FLOAT64_ELEMENTS = frozenset({"f64", "complex<f64>"})


class ReplaceDtypeConstants(RewritePattern):
    op_names = CONSTANT_OPS

    def match_and_rewrite(self, op: ir.Operation, ctx: OpContext) -> Outcome:
        old_type = ctx.result_types[0]
        if ctx.converter.element_spelling(old_type) not in _FLOAT64_ELEMENTS:
            return Outcome.NO_MATCH
        new_type = ctx.converter.convert(old_type)
        attr = read_attribute(op, "value")  # None for complex dense attributes: read from their printed form below
        if isinstance(attr, ir.DenseFPElementsAttr) and attr.is_splat or isinstance(attr, ir.FloatAttr):
            value = attr.get_splat_value().value if isinstance(attr, ir.DenseFPElementsAttr) else attr.value
            row = dtype_constant(value)
            if row is None:
                return Outcome.NO_MATCH
            values, splat, hits = np.array(row.narrow), True, {row: 1}
        else:
            try:
                wide_values, splat = read_constant(op, old_type)
            except UnreadableConstant:
                return Outcome.NO_MATCH  # NarrowConstant reports it
            values, hits = substitute_dtype_constants(wide_values)
            if not hits:
                return Outcome.NO_MATCH
        for row in hits:
            _report(ctx, row)
        narrow_and_write(op, ctx, values, splat, new_type)
        return Outcome.REWROTE


def _report(ctx: OpContext, row: DtypeConstant) -> None:
    ctx.report(Kind.DTYPE_CONSTANT, Severity.INFO,
               f"{row.describe()}: {row.wide!r} becomes {float(np.float32(row.narrow))!r}, the value JAX computes "
               "for this expression when it traces with x64 off")
