"""Pure functions that narrow constant values: numpy in, numpy out, plus what was lossy.

Floats round to nearest even (numpy's `astype`, the bits JAX produces when it builds
the same constant with x64 off). Exact 64-bit sentinels map to their 32-bit sentinels.
Anything else the 32-bit type cannot hold is reported, and handled by the overflow policy.
Floats that rounding collapses onto a boundary (0, or +-1.0) are counted: x32 JAX holds
the same value only if it was a literal. `substitute_dtype_constants` finds the float64
values that are finfo(float64) expressions (tables.dtype_constant) before narrowing.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from x64guard.passes.tables import (
    DTYPE_CONSTANT_NARROW_VALUES, DTYPE_CONSTANT_RANGES, DTYPE_CONSTANT_VALUES_F64, DTYPE_MULTIPLE_BASES, DTYPE_MULTIPLE_BOUND,
    FLOAT32_MAX, FLOAT_SENTINELS, INTEGER_RANGE, INTEGER_SENTINELS, NARROW_ELEMENT_TYPE, NUMPY_DTYPE,
    dtype_constant,
)

# 64-bit integer type -> the range of its 32-bit counterpart (from the type table).
_INT32_RANGE = {wide: INTEGER_RANGE[narrow] for wide, narrow in NARROW_ELEMENT_TYPE.items() if narrow in INTEGER_RANGE}
# Where saturation clips values beyond the 32-bit range. Unsigned values clip to 2**31-1,
# the largest value int32 and uint32 both hold: a saturated uint64 is often converted to a
# signed type later (JAX's shape-polymorphic clamps convert ui64 to i64), and 2**32-1 would
# turn that maximum into -1.
_SATURATION_RANGE = {wide: (lo, min(hi, INTEGER_RANGE["i32"][1])) for wide, (lo, hi) in _INT32_RANGE.items()}
_EXAMPLES = 3


@dataclass
class NarrowedValues:
    values: np.ndarray
    sentinels: int = 0
    out_of_range: int = 0
    examples: list = field(default_factory=list)  # a few offending values, for messages
    underflow: int = 0    # nonzero floats that became 0
    to_one: int = 0       # floats other than +-1 that became exactly +-1
    underflow_examples: list = field(default_factory=list)
    to_one_examples: list = field(default_factory=list)


def narrow_integers(values: np.ndarray, wide: str, narrow: str, overflow: str) -> NarrowedValues:
    """int64/uint64 -> int32/uint32. `overflow`: error (values kept, caller refuses),
    saturate (clip to the 32-bit range; unsigned values to 2**31-1, see _SATURATION_RANGE)
    or wrap (two's complement truncation)."""
    lo, hi = _INT32_RANGE[wide]
    values = np.asarray(values)
    sentinel_mask = np.zeros(values.shape, dtype=bool)
    result_overrides = []
    for wide_value, narrow_value in INTEGER_SENTINELS.get(wide, {}).items():
        mask = values == wide_value
        if mask.any():
            sentinel_mask |= mask
            result_overrides.append((mask, narrow_value))
    bad = ((values < lo) | (values > hi)) & ~sentinel_mask
    out = NarrowedValues(values=np.empty(values.shape, NUMPY_DTYPE[narrow]))
    out.sentinels = int(sentinel_mask.sum())
    out.out_of_range = int(bad.sum())
    if out.out_of_range:
        out.examples = [int(v) for v in values[bad].ravel()[:_EXAMPLES]]
    if overflow == "saturate":
        saturated_lo, saturated_hi = _SATURATION_RANGE[wide]
        out.values[...] = np.where(bad, np.clip(values, saturated_lo, saturated_hi), values)
    else:  # wrap, or error (the caller refuses; the wrapped values are never used)
        out.values[...] = values.astype(NUMPY_DTYPE[narrow], casting="unsafe")
    for mask, narrow_value in result_overrides:
        out.values[mask] = narrow_value
    return out


def narrow_floats(values: np.ndarray, overflow: str) -> NarrowedValues:
    """float64 -> float32, round to nearest even. Finite values beyond float32's range
    are out of range (saturate: clip to +-max; wrap: IEEE rounding to +-inf).

    Only elements that rounded to +-inf (sentinels, out of range) need a second look, and
    they are few: they are found by index rather than with full-size masks, so narrowing
    a large constant needs little beyond its float32 copy."""
    values = np.asarray(values, dtype=np.float64)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        narrowed = values.astype(np.float32)
    out = NarrowedValues(values=narrowed)
    rounded_to_inf = np.flatnonzero(np.isinf(narrowed))
    if rounded_to_inf.size:
        wide = values.flat[rounded_to_inf]
        special = ~np.isfinite(wide)  # inf stays inf
        for wide_value, narrow_value in FLOAT_SENTINELS.items():
            mask = wide == wide_value
            narrowed.flat[rounded_to_inf[mask]] = narrow_value
            out.sentinels += int(mask.sum())
            special |= mask
        bad = rounded_to_inf[~special]
        out.out_of_range = int(bad.size)
        if bad.size:
            out.examples = [float(v) for v in values.flat[bad[:_EXAMPLES]]]
            if overflow == "saturate":
                narrowed.flat[bad] = np.copysign(FLOAT32_MAX, values.flat[bad])
    _count_collapses(values, narrowed, out)
    return out


def _count_collapses(values: np.ndarray, narrowed: np.ndarray, out: NarrowedValues, chunk: int = 1 << 20) -> None:
    """Nonzero values that became 0, and values other than +-1 that became +-1, counted
    a chunk at a time (no full-size masks), with a few examples of each."""
    wide, narrow = values.ravel(), narrowed.ravel()
    for i in range(0, wide.size, chunk):
        w, n = wide[i:i + chunk], narrow[i:i + chunk]
        under = np.flatnonzero((n == 0) & (w != 0))
        one = np.flatnonzero((np.abs(n) == 1) & (np.abs(w) != 1))
        out.underflow += int(under.size)
        out.to_one += int(one.size)
        if under.size and len(out.underflow_examples) < _EXAMPLES:
            out.underflow_examples += [float(v) for v in w[under[:_EXAMPLES]]]
        if one.size and len(out.to_one_examples) < _EXAMPLES:
            out.to_one_examples += [float(v) for v in w[one[:_EXAMPLES]]]
    del out.underflow_examples[_EXAMPLES:], out.to_one_examples[_EXAMPLES:]


def narrow_complex(values: np.ndarray, overflow: str) -> NarrowedValues:
    """complex128 -> complex64, each part as `narrow_floats`."""
    values = np.asarray(values, dtype=np.complex128)
    real = narrow_floats(values.real, overflow)
    imag = narrow_floats(values.imag, overflow)
    out = NarrowedValues(values=np.empty(values.shape, np.complex64))
    out.values.real, out.values.imag = real.values, imag.values  # exact parts, no arithmetic
    out.sentinels = real.sentinels + imag.sentinels
    out.out_of_range = real.out_of_range + imag.out_of_range
    out.examples = (real.examples + imag.examples)[:_EXAMPLES]
    out.underflow = real.underflow + imag.underflow
    out.to_one = real.to_one + imag.to_one
    out.underflow_examples = (real.underflow_examples + imag.underflow_examples)[:_EXAMPLES]
    out.to_one_examples = (real.to_one_examples + imag.to_one_examples)[:_EXAMPLES]
    return out


def narrow_values(values: np.ndarray, wide: str, narrow: str, overflow: str) -> NarrowedValues:
    if wide == "f64":
        return narrow_floats(values, overflow)
    if wide == "complex<f64>":
        return narrow_complex(values, overflow)
    return narrow_integers(values, wide, narrow, overflow)


def narrow_scalar(value, wide: str, narrow: str, overflow: str) -> NarrowedValues:
    """The same semantics as `narrow_values` for one Python number, without numpy's
    per-call overhead (most constants in a module are scalars or splats)."""
    if wide in _INT32_RANGE:
        lo, hi = _INT32_RANGE[wide]
        sentinel = INTEGER_SENTINELS.get(wide, {}).get(value)
        if sentinel is not None:
            return NarrowedValues(values=np.array(sentinel, NUMPY_DTYPE[narrow]), sentinels=1)
        if lo <= value <= hi:
            return NarrowedValues(values=np.array(value, NUMPY_DTYPE[narrow]))
    elif wide == "f64":
        sentinel = FLOAT_SENTINELS.get(value)
        if sentinel is not None:
            return NarrowedValues(values=np.array(sentinel, np.float32), sentinels=1)
        if -FLOAT32_MAX <= value <= FLOAT32_MAX:  # finite, cannot overflow
            narrowed = np.float32(value)
            if (narrowed != 0 or value == 0) and (abs(narrowed) != 1 or abs(value) == 1):
                return NarrowedValues(values=np.array(narrowed))
    return narrow_values(np.array(value, dtype=NUMPY_DTYPE[wide]), wide, narrow, overflow)


def exact_scalar(value, narrow: str):
    """`value` as the 32-bit type holds it when that needs no report (in range, not a
    sentinel, not underflowing, not collapsing onto +-1), else None. The hot path for
    splat constants."""
    if isinstance(value, int):
        lo, hi = INTEGER_RANGE[narrow]
        return value if lo <= value <= hi else None
    if -FLOAT32_MAX <= value <= FLOAT32_MAX:  # finite; +-float64 max is a sentinel, not here
        narrowed = float(np.float32(value))
        if (narrowed != 0.0 or value == 0.0) and (abs(narrowed) != 1.0 or abs(value) == 1.0):
            return narrowed
    return None


# --- converts of known values ---------------------------------------------------------

@dataclass
class UnfitConvert:
    """What a convert to a 64-bit integer type computes that its narrowed type cannot hold."""

    count: int = 0
    examples: list = field(default_factory=list)  # a few results of the 64-bit module
    narrowed: list = field(default_factory=list)  # what the narrowed convert gives for them


def unfit_convert(values: np.ndarray, wide_in: str, wide_out: str) -> UnfitConvert:
    """The results of `convert(values)`, `wide_in` -> the 64-bit integer type `wide_out`, as
    the 64-bit module computes them, that its 32-bit counterpart cannot hold (the narrowed
    convert computes another value). StableHLO's integer convert wraps; XLA's float-to-integer
    convert truncates and saturates (NaN gives 0). Not counted: operand elements the constant
    rules report or map (64-bit sentinels, values outside the narrowed operand's range), and
    results that are `wide_out` sentinels, which become the 32-bit sentinels (a saturated
    float, a -1 made unsigned): the narrowed convert gives exactly those."""
    narrow_out = NARROW_ELEMENT_TYPE[wide_out]
    values = np.asarray(values)
    if wide_in in INTEGER_RANGE or wide_in == "i1":
        wide, narrowed, bad = _integer_convert(values, wide_in, wide_out, narrow_out)
    else:
        wide, narrowed, bad = _float_convert(values.astype(np.float64), wide_in, wide_out, narrow_out)
    found = np.flatnonzero(bad)
    return UnfitConvert(int(found.size), [int(v) for v in wide.flat[found[:_EXAMPLES]]],
                        [int(v) for v in narrowed.flat[found[:_EXAMPLES]]])


def _integer_convert(values: np.ndarray, wide_in: str, wide_out: str, narrow_out: str):
    """(the 64-bit module's results, the narrowed convert's, which differ), integers in."""
    lo, hi = INTEGER_RANGE[narrow_out]
    wide = values.astype(NUMPY_DTYPE[wide_out], casting="unsafe")
    narrowed = values.astype(NUMPY_DTYPE[narrow_out], casting="unsafe")
    sentinels = np.array(list(INTEGER_SENTINELS.get(wide_out, {})), dtype=wide.dtype)
    bad = ((wide < lo) | (wide > hi)) & ~np.isin(wide, sentinels)
    if wide_in in _INT32_RANGE:  # the constant rules' part: sentinels, and values that do not fit
        operand_lo, operand_hi = _INT32_RANGE[wide_in]
        bad &= (values >= operand_lo) & (values <= operand_hi)
        bad &= ~np.isin(values, np.array(list(INTEGER_SENTINELS.get(wide_in, {})), dtype=values.dtype))
    return wide, narrowed, bad


def _float_convert(values: np.ndarray, wide_in: str, wide_out: str, narrow_out: str):
    """As `_integer_convert`, floats in (float64 operands narrowed to float32 first)."""
    wide_lo, wide_hi = INTEGER_RANGE[wide_out]
    lo, hi = INTEGER_RANGE[narrow_out]
    with np.errstate(invalid="ignore", over="ignore"):
        narrow_in = values.astype(np.float32).astype(np.float64) if wide_in == "f64" else values
        wide = _saturated(values, wide_lo, wide_hi)
        narrowed = _saturated(narrow_in, lo, hi).astype(NUMPY_DTYPE[narrow_out])
    sentinels = INTEGER_SENTINELS.get(wide_out, {})
    # Bounds compared as floats: float(2**63 - 1) is 2**63, where saturation starts.
    sentinel = (wide >= float(wide_hi)) & (wide_hi in sentinels) | (wide <= float(wide_lo)) & (wide_lo in sentinels)
    bad = ((wide < lo) | (wide > hi)) & ~sentinel
    return wide, narrowed, bad


def _saturated(floats: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """XLA's float-to-integer convert, in floats: truncated, clipped to [lo, hi], NaN 0."""
    return np.clip(np.nan_to_num(np.trunc(floats), nan=0.0, posinf=np.inf, neginf=-np.inf), float(lo), float(hi))


# --- dtype-derived constants ------------------------------------------------------------

def substitute_dtype_constants(values: np.ndarray, chunk: int = 1 << 20) -> tuple[np.ndarray, Counter]:
    """float64 (complex128) values with every element (part) that is a finfo(float64)
    expression x64guard knows (tables.dtype_constant) replaced by the float32 value of the
    same expression, held exactly in float64; and how many of each were replaced.

    The input is never modified; it is returned as is when nothing matches. Scanned a
    chunk at a time: a large constant costs no full-size temporaries."""
    values = np.asarray(values)
    flat = values.reshape(-1)  # a view for the contiguous arrays constants are read into
    parts = (np.real, np.imag) if values.dtype.kind == "c" else (np.real,)
    out, hits = None, Counter()
    for start in range(0, flat.size, chunk):
        for part in parts:
            wide = part(flat[start:start + chunk])
            found, narrow = _dtype_constants_in(wide)
            if not found.size:
                continue
            if out is None:
                out = values.copy()
            # Parts assigned in place: the other part of a complex element (-0.0, inf, nan) is kept.
            target = part(out.reshape(-1)[start:start + chunk])
            target[found] = narrow
            unique, counts = np.unique(wide[found], return_counts=True)
            for value, count in zip(unique.tolist(), counts.tolist()):
                hits[dtype_constant(value)] += count
    return (values if out is None else out), hits


def _dtype_constants_in(part: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the elements of `part` that are dtype constants, and float32's values.
    A few cheap comparisons pick the candidates (every table value is a small magnitude
    or lies in one of a few narrow ranges); only those are looked up."""
    magnitude = np.abs(part)
    maybe = (magnitude <= DTYPE_MULTIPLE_BOUND) & (magnitude != 0)
    for lo, hi in DTYPE_CONSTANT_RANGES:
        inside = (magnitude >= lo) & (magnitude <= hi)
        if lo < 1.0 < hi:
            inside &= magnitude != 1.0  # +-1 themselves, common in data, are no dtype constant
        maybe |= inside
    candidates = np.flatnonzero(maybe)
    if not candidates.size:
        return candidates, np.empty(0)
    values = part[candidates]
    keys = DTYPE_CONSTANT_VALUES_F64
    position = np.minimum(np.searchsorted(keys, values), keys.size - 1)
    narrow = np.where(keys[position] == values, DTYPE_CONSTANT_NARROW_VALUES[position], np.nan)
    for _, base, narrow_base, largest in DTYPE_MULTIPLE_BASES:
        k = values / base  # exact: the bases are powers of two
        multiple = (k == np.round(k)) & (np.abs(k) >= 2) & (np.abs(k) <= largest) & (k * base == values)
        if multiple.any():
            narrow[multiple] = k[multiple].astype(np.float32) * narrow_base
    matched = ~np.isnan(narrow)
    return candidates[matched], narrow[matched]
