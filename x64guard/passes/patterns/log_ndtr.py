"""`jax.scipy.special.log_ndtr` (norm.logcdf/logsf, truncated normals, numpyro's and TFP's
`Normal.log_cdf`) picks its switch points by dtype: below `lower` the asymptotic series,
above `upper` `-ndtr(-x)`, else `log(ndtr(max(x, lower)))`; -20 and 8 for float64, -10 and
5 for float32 (tables.LOG_NDTR_SEGMENTS). Narrowed as written, float64's points are wrong
in float32: for x in (-20, -10] `ndtr` underflows and the result is `-inf` where x32 JAX
gives about -87 (and 0 where it gives -1e-9 for x in (5, 8]).

`LogNdtrSegments` proves the structure, not the values alone: a float64 value `x` compared
`x > 8`, and the same `x` compared `x > -20`, clamped `max(x, -20)` on the way to an
erf/erfc and `min(x, -20)` on the way to its square (the series). Those four uses (and
only those) get float32's points, in float64 for the narrowing walk to narrow exactly;
the rest of log_ndtr does not depend on the dtype, so the module is x32 JAX's.
"""

from __future__ import annotations

from jax.extend.mlir import ir
from jax.extend.mlir.dialects import stablehlo

from x64guard.findings import Kind, Severity
from x64guard.passes.driver import OpContext, Outcome
from x64guard.passes.idioms import IdiomPattern
from x64guard.passes.matching import element_spelling, splat_value, users
from x64guard.passes.tables import LOG_NDTR_SEGMENTS


def _direction(op: ir.Operation) -> str:
    return stablehlo.ComparisonDirectionAttr(op.attributes["comparison_direction"]).value


def _reaches(value: ir.Value, names: frozenset[str], hops: int) -> bool:
    """Some op named in `names` uses `value`, or what its users compute, within `hops` ops."""
    frontier = [value]
    for _ in range(hops):
        following = []
        for op in (u for v in frontier for u in users(v)):
            if op.name in names:
                return True
            following.extend(op.results)
        frontier = following
    return False


def _uses_with(x: ir.Value, name: str, bound: float) -> list[tuple[ir.Operation, ir.Value]]:
    """(op, constant) for each `name` op of `x` and a splat of `bound`, in either order."""
    found = []
    for op in users(x):
        if op.name != name or len(op.operands) != 2 or x not in list(op.operands):
            continue
        other = op.operands[1] if op.operands[0] == x else op.operands[0]
        if splat_value(other) == bound:
            found.append((op, other))
    return found


class LogNdtrSegments(IdiomPattern):
    """float64 log_ndtr's switch points -> float32's (see the module)."""

    op_names = frozenset({"stablehlo.compare"})
    result_elements = frozenset({"i1"})

    def match_and_rewrite(self, op: ir.Operation, ctx: OpContext) -> Outcome:
        lower, upper = LOG_NDTR_SEGMENTS["lower"][0], LOG_NDTR_SEGMENTS["upper"][0]
        x, bound = op.operands
        if _direction(op) != "GT" or element_spelling(x.type) != "f64" or splat_value(bound) != upper:
            return Outcome.NO_MATCH
        lower_compares = [(c, v) for c, v in _uses_with(x, "stablehlo.compare", lower)
                          if _direction(c) == "GT" and c.operands[0] == x]
        clamped_up = [(m, v) for m, v in _uses_with(x, "stablehlo.maximum", lower)
                      if _reaches(m.results[0], frozenset({"chlo.erf", "chlo.erfc"}), 4)]
        clamped_down = [(m, v) for m, v in _uses_with(x, "stablehlo.minimum", lower)
                        if _reaches(m.results[0], frozenset({"chlo.square"}), 1)]
        if not (lower_compares and clamped_up and clamped_down):
            return Outcome.NO_MATCH
        x32_value = {wide: narrow for wide, narrow in LOG_NDTR_SEGMENTS.values()}
        self.replace_constants(ctx, [(op, bound), *lower_compares, *clamped_up, *clamped_down], "f64",
                               x32_value.__getitem__)
        ctx.report(Kind.DTYPE_CONSTANT, Severity.INFO,
                   "log_ndtr's switch points for float64 (-20, 8) made x32 JAX's for float32 (-10, 5)")
        return Outcome.REWROTE
