"""jax 0.12's split of `x**2` into an exact `x_hi**2` and a remainder (`_split_square`,
`_half_mantissa` in jax/_src/lax/erf.py: the derivatives of erf/erfc, erfcx, ndtri, erfinv).
It clears the low half of a float's significand by and-ing the float's bits with a mask
whose value follows the dtype: `0xFFFFFFFFF8000000` for float64 (26 significant bits kept),
`0xFFFFF000` for float32 (12 kept). Narrowed as a value, float64's mask does not fit a
uint32 (so it would be refused), and truncated it would keep the sign and 4 exponent bits.

`HalfSignificandMask` proves the structure, not the value alone: a uint64 `and` of float64
bits (`bitcast_convert` from f64) with a splat of float64's mask, whose result is read only
as a float64 again (every user a `bitcast_convert` back to f64). Then the mask is what x32
JAX traces for float32 (`tables.HALF_SIGNIFICAND_MASKS`), written as a uint64 splat for the
narrowing walk to narrow exactly. The surrounding program is narrowed as it is: where JAX
also chose other polynomials or bounds for float64, the result is float32-correct rather
than x32 JAX's bits (docs/limits.md, JAX versions).
"""

from __future__ import annotations

from jax.extend.mlir import ir

from x64guard.findings import Kind, Severity
from x64guard.passes.driver import OpContext, Outcome
from x64guard.passes.idioms import IdiomPattern
from x64guard.passes.matching import element_spelling, producer, splat_value, users
from x64guard.passes.tables import HALF_SIGNIFICAND_MASKS


def _float64_bits(value: ir.Value) -> bool:
    """`value` is a float64 reinterpreted as uint64 bits."""
    op = producer(value, "stablehlo.bitcast_convert")
    return op is not None and element_spelling(op.operands[0].type) == "f64"


def _read_as_float64(op: ir.Operation) -> bool:
    """Every use of `op`'s result reinterprets the bits as a float64 again."""
    found = users(op.results[0])
    return bool(found) and all(u.name == "stablehlo.bitcast_convert"
                               and element_spelling(u.results[0].type) == "f64" for u in found)


class HalfSignificandMask(IdiomPattern):
    """float64's half-significand mask on a float64's bits -> float32's (see the module)."""

    op_names = frozenset({"stablehlo.and"})
    result_elements = frozenset({"ui64"})

    def match_and_rewrite(self, op: ir.Operation, ctx: OpContext) -> Outcome:
        wide, narrow = HALF_SIGNIFICAND_MASKS
        bits, mask = op.operands
        if splat_value(mask) != wide:
            bits, mask = mask, bits
        if splat_value(mask) != wide or not _float64_bits(bits) or not _read_as_float64(op):
            return Outcome.NO_MATCH
        self.replace_constants(ctx, [(op, mask)], "ui64", lambda _: narrow)
        ctx.report(Kind.DTYPE_CONSTANT, Severity.INFO,
                   f"the mask that keeps the high half of a float64's significand ({wide:#x}, jax 0.12's "
                   f"split of x**2 in erf-family functions) made float32's ({narrow:#x}), as x32 JAX traces it")
        return Outcome.REWROTE
