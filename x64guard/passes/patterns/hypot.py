"""jax 0.12's `lax.hypot` (jnp.hypot, and `abs` of complex numbers, which rfft magnitudes,
complex linear algebra and `jnp.abs(z)` lower through): it rescales by powers of two taken
from the dtype's finfo, so that the squares cannot overflow or underflow. For float64 the
constants are 2**511, 2**-26, 2**-537 and 2**537; x32 JAX traces 2**63, 2**-12, 2**-75 and
2**75 (jax/_src/lax/lax.py `hypot`; tables.HYPOT_SCALES derives both from finfo). Narrowed
as values the first overflows float32 and 2**-26 looks like sqrt(eps): neither is what x32
JAX computes.

`HypotScale` recognises the structure, not the values alone: `m = max(|a|, |b|)`
compared `m >= 2**511` and `m <= 2**-26`, and the selects those two predicates steer,
whose scaled branches multiply by 2**-537 / 2**537 (or pick them as the inverse scale).
Each of those constants (and only those uses) becomes x32's, in float64 for the narrowing
walk to narrow exactly.
"""

from __future__ import annotations

from jax.extend.mlir import ir
from jax.extend.mlir.dialects import stablehlo

from x64guard.findings import Kind, Severity
from x64guard.passes.driver import OpContext, Outcome
from x64guard.passes.idioms import IdiomPattern
from x64guard.passes.matching import element_spelling, producer, splat_value, users
from x64guard.passes.tables import HYPOT_SCALES


def _direction(op: ir.Operation) -> str:
    return stablehlo.ComparisonDirectionAttr(op.attributes["comparison_direction"]).value


def _is_max_of_abs(value: ir.Value) -> bool:
    op = producer(value, "stablehlo.maximum")
    return op is not None and all(producer(v, "stablehlo.abs") is not None for v in op.operands)


class HypotScale(IdiomPattern):
    """float64 hypot's power-of-two rescaling -> x32 JAX's constants (see the module)."""

    op_names = frozenset({"stablehlo.compare"})
    result_elements = frozenset({"i1"})

    def match_and_rewrite(self, op: ir.Operation, ctx: OpContext) -> Outcome:
        high, low = HYPOT_SCALES["high"], HYPOT_SCALES["low"]
        m, bound = op.operands
        if _direction(op) != "GE" or element_spelling(m.type) != "f64" or splat_value(bound) != high[0]:
            return Outcome.NO_MATCH
        if not _is_max_of_abs(m):
            return Outcome.NO_MATCH
        lows = [u for u in users(m) if u.name == "stablehlo.compare" and u.operands[0] == m
                and _direction(u) == "LE" and splat_value(u.operands[1]) == low[0]]
        if len(lows) != 1:
            return Outcome.NO_MATCH
        scale_uses = _scale_uses(op.results[0], lows[0].results[0])
        if not scale_uses:
            return Outcome.NO_MATCH
        uses = [(op, bound), (lows[0], lows[0].operands[1]), *scale_uses]
        x32_value = {wide: narrow for wide, narrow in HYPOT_SCALES.values()}
        self.replace_constants(ctx, uses, "f64", x32_value.__getitem__)
        ctx.report(Kind.DTYPE_CONSTANT, Severity.INFO,
                   "hypot's power-of-two rescaling for float64 (2**511, 2**-26, 2**-537, 2**537) made x32 JAX's "
                   "for float32 (2**63, 2**-12, 2**-75, 2**75)")
        return Outcome.REWROTE


def _scale_uses(high: ir.Value, low: ir.Value) -> list[tuple[ir.Operation, ir.Value]]:
    """(op, constant operand) for each use of a 2**-537 / 2**537 splat in the selects that
    `high` and `low` steer: as a branch, or as a factor of a product that is a branch."""
    scales = {HYPOT_SCALES["down"][0], HYPOT_SCALES["up"][0]}
    found: list[tuple[ir.Operation, ir.Value]] = []
    for predicate in (high, low):
        for select in users(predicate):
            if select.name != "stablehlo.select" or select.operands[0] != predicate:
                continue
            for branch in list(select.operands)[1:]:
                if splat_value(branch) in scales:
                    found.append((select, branch))
                product = producer(branch, "stablehlo.multiply")
                if product is not None:
                    found.extend((product, v) for v in product.operands if splat_value(v) in scales)
    return found
