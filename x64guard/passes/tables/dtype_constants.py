"""Dtype-derived float constants: `finfo(float64)` expressions in library code and the
values x32 JAX computes for them.
"""

from __future__ import annotations

from typing import Callable
from dataclasses import dataclass

import numpy as np


# ---------------------------------------------------------------------------------------
# Dtype-derived float constants (issue 11): float64 values that are `numpy.finfo(float64)`
# expressions in library code (`jnp.finfo(x.dtype).eps`, `1 - eps`, `tiny`,
# `np.nextafter(-1, 0)`, ...). JAX traced with x64 off evaluates the same expression for
# float32; rounding float64's value is something else (1 - eps64 rounds to 1.0, tiny64 to 0).
# The expressions are the ones tools/discover_dtype_constants.py finds by lowering library
# code both ways (docs/constants.md lists where each was seen). Every value is computed
# here with numpy in each type's own arithmetic, never typed in.

_F64, _F32 = np.finfo(np.float64), np.finfo(np.float32)


@dataclass(frozen=True)
class DtypeConstant:
    """One finfo expression, evaluated for float64 (`wide`) and float32 (`narrow`)."""

    expression: str  # "{T}" stands for the type: "1 - finfo({T}).eps"
    wide: float
    narrow: float    # exactly representable in float32

    def named(self, type_name: str) -> str:
        return self.expression.format(T=type_name)

    def describe(self) -> str:
        """'finfo(float64).eps -> finfo(float32).eps'"""
        return f"{self.named('float64')} -> {self.named('float32')}"


# (expression, its value for a finfo object, in that type's arithmetic). Each row also
# stands for its negation (`-finfo(T).tiny`, `-(1 - finfo(T).eps)`): both signs are seen.
FINFO_EXPRESSIONS: tuple[tuple[str, "Callable[[np.finfo], np.floating]"], ...] = (
    ("finfo({T}).eps", lambda fi: fi.eps),
    ("finfo({T}).epsneg", lambda fi: fi.epsneg),                    # = eps / 2 in both types
    ("finfo({T}).eps ** 2", lambda fi: fi.eps * fi.eps),            # = spacing(eps): jnp.interp
    ("finfo({T}).tiny", lambda fi: fi.tiny),                        # = smallest_normal
    ("finfo({T}).tiny * (1 + finfo({T}).eps)", lambda fi: fi.tiny * (fi.dtype.type(1) + fi.eps)),
    ("finfo({T}).smallest_subnormal", lambda fi: fi.smallest_subnormal),
    ("1 - finfo({T}).eps", lambda fi: fi.dtype.type(1) - fi.eps),
    ("1 - finfo({T}).epsneg", lambda fi: fi.dtype.type(1) - fi.epsneg),  # = nextafter(1, 0)
    ("1 + finfo({T}).eps", lambda fi: fi.dtype.type(1) + fi.eps),        # = nextafter(1, 2)
    ("sqrt(log(finfo({T}).max))", lambda fi: np.sqrt(np.log(fi.max))),   # jax.scipy.special.erfcx
    # jax.random.gumbel(mode="high") in jax 0.12: uniforms floored at 2**-(2 * nmant + 1).
    ("2 ** -(2 * finfo({T}).nmant + 1)", lambda fi: fi.dtype.type(2.0) ** -(2 * fi.nmant + 1)),
)

# Integer multiples k * base (k >= 2): rcond = max(M, N) * eps (lstsq, polyfit),
# 10 * N * eps (numpyro's constraints), 50 * eps (hyp1f1), 2 * tiny (betainc),
# 100 * tiny (numpyro's censored distributions). The bound keeps shape-derived multiples
# in and user literals out: 65536 * eps64 = 2**-36, far below 2**-32 or 2**-24.
FINFO_MULTIPLES: tuple[tuple[str, str, int], ...] = (
    # (expression with {k}, finfo attribute, largest k)
    ("{k} * finfo({T}).eps", "eps", 2**16),
    ("{k} * finfo({T}).tiny", "tiny", 2**10),
)


def _expression_rows() -> dict[float, DtypeConstant]:
    rows: dict[float, DtypeConstant] = {}
    for expression, value in FINFO_EXPRESSIONS:
        wide, narrow = float(value(_F64)), float(np.float32(value(_F32)))
        for sign, form in ((1.0, expression), (-1.0, f"-({expression})" if " " in expression else f"-{expression}")):
            row = DtypeConstant(form, sign * wide, sign * narrow)
            if rows.setdefault(row.wide, row).narrow != row.narrow:  # two meanings: keep neither
                raise ValueError(f"x64guard: ambiguous dtype constant {row.wide!r}")
    return rows


# float64 value -> its row; multiples are found by `dtype_constant`, not listed.
DTYPE_CONSTANTS_F64: dict[float, DtypeConstant] = _expression_rows()
# Sorted, with float32's values beside them, for vectorized lookups in large constants.
DTYPE_CONSTANT_VALUES_F64: np.ndarray = np.array(sorted(DTYPE_CONSTANTS_F64), dtype=np.float64)
DTYPE_CONSTANT_NARROW_VALUES: np.ndarray = np.array(
    [DTYPE_CONSTANTS_F64[v].narrow for v in DTYPE_CONSTANT_VALUES_F64.tolist()], dtype=np.float64)


def _magnitude_ranges(values: list[float], bound: float) -> tuple[tuple[float, float], ...]:
    """[lo, hi] ranges holding every listed magnitude above `bound` (those below are found
    as small values): neighbours closer than 1e-12 relative share one range."""
    ranges: list[list[float]] = []
    for m in sorted({abs(v) for v in values if abs(v) > bound}):
        if ranges and m <= ranges[-1][1] * (1 + 1e-12):
            ranges[-1][1] = m
        else:
            ranges.append([m, m])
    return tuple((lo, hi) for lo, hi in ranges)


# (expression, float64 base, float32 base, largest k)
DTYPE_MULTIPLE_BASES = tuple((expression, float(getattr(_F64, attr)), np.float32(getattr(_F32, attr)), largest)
                             for expression, attr, largest in FINFO_MULTIPLES)
# Largest magnitude a multiple can have: anything above it is not one.
DTYPE_MULTIPLE_BOUND = max(base * largest for _, base, _, largest in DTYPE_MULTIPLE_BASES)
# The magnitudes of the listed values above that bound lie in these few ranges (near 1,
# sqrt(log(max))): a cheap first test before any lookup in large constants.
DTYPE_CONSTANT_RANGES = _magnitude_ranges(list(DTYPE_CONSTANTS_F64), DTYPE_MULTIPLE_BOUND)


def dtype_constant(value: float) -> DtypeConstant | None:
    """The finfo expression a float64 value is, if it is one x64guard knows."""
    row = DTYPE_CONSTANTS_F64.get(value)
    if row is not None or not (0.0 < abs(value) <= DTYPE_MULTIPLE_BOUND):
        return row
    for expression, base, narrow_base, largest in DTYPE_MULTIPLE_BASES:
        k = value / base  # exact: the bases are powers of two, the values normal or subnormal
        if k == int(k) and 2 <= abs(k) <= largest and k * base == value:
            k = int(k)
            name = expression.format(k=abs(k), T="{T}")
            return DtypeConstant(name if k > 0 else f"-{name}", value, float(np.float32(k) * narrow_base))
