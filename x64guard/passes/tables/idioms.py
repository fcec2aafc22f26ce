"""The constants of JAX's and torch-xla's dtype-chosen idioms the rules prove and rewrite:
hypot's rescaling, the half-significand split, log_ndtr's switch points, random numbers.
"""

from __future__ import annotations

import numpy as np


# The bit pattern of float64 1.0: x64 `jax.random` ors it into uint64 mantissa bits
# before a bitcast to float64.
FLOAT64_ONE_BITS = 0x3FF0000000000000

# ---- jax 0.12's hypot: power-of-two rescaling from finfo (patterns/hypot.py) ----
# k = (nmant - minexp + 1) // 2 and e_hi = (maxexp - 1) // 2 (jax/_src/lax/lax.py `hypot`):
# float64 k = 537, e_hi = 511; float32 k = 75, e_hi = 63. name -> (float64's, float32's).
HYPOT_SCALES: dict[str, tuple[float, float]] = {
    "high": (2.0 ** 511, 2.0 ** 63),         # m >= 2**e_hi: scale down
    "low": (2.0 ** (511 - 537), 2.0 ** (63 - 75)),   # m <= 2**(e_hi - k): scale up
    "down": (2.0 ** -537, 2.0 ** -75),
    "up": (2.0 ** 537, 2.0 ** 75),
}

# ---- jax 0.12's split of x**2 (patterns/half_significand.py) ----
# Veltkamp's split: `x_hi` = x with the low half of its significand cleared, so that
# `x_hi * x_hi` is exact. jax 0.12's `_split_square` and `_half_mantissa`
# (jax/_src/lax/erf.py: erf/erfc derivatives, erfcx, ndtri, erfinv) clear them by and-ing the
# float's bits with a mask: float64 keeps 26 of 53 significant bits, float32 12 of 24.
def _half_significand_mask(bits: int, nmant: int) -> int:
    kept = (nmant + 1) // 2  # significant bits kept, the implicit leading one included
    return ((1 << bits) - 1) ^ ((1 << (nmant + 1 - kept)) - 1)


# (float64's mask as uint64, float32's as uint32): 0xFFFFFFFFF8000000, 0xFFFFF000.
HALF_SIGNIFICAND_MASKS: tuple[int, int] = (
    _half_significand_mask(64, int(np.finfo(np.float64).nmant)),
    _half_significand_mask(32, int(np.finfo(np.float32).nmant)),
)

# ---- log_ndtr's switch points (patterns/log_ndtr.py) ----
# jax.scipy.special.log_ndtr switches to its asymptotic series below `lower` and to
# `-ndtr(-x)` above `upper`, at points chosen per dtype (jax/_src/scipy/special.py
# `_LOGNDTR_FLOAT64_LOWER` ...; unchanged from jax 0.4 to 0.12). name -> (float64's, float32's).
LOG_NDTR_SEGMENTS: dict[str, tuple[float, float]] = {"lower": (-20.0, -10.0), "upper": (8.0, 5.0)}

# ---- Random numbers: the 64-bit idioms of jax.random / torch-xla and their 32-bit forms ----
# (patterns/random_bits.py, patterns/counters.py, patterns/rng_state.py)

# Threefry-2x32 as specified (Salmon et al., SC'11): the key schedule parity and the
# rotation tables of its 20 rounds. passes/kernels.py proves from a called function's body
# that it computes exactly this, whatever its name and however JAX wrote the loop.
THREEFRY_KEY_PARITY = 0x1BD11BDA
THREEFRY_ROTATIONS: tuple[tuple[int, ...], tuple[int, ...]] = ((13, 15, 26, 6), (17, 29, 16, 24))

# name -> (64-bit program's constant, 32-bit program's constant).
RNG_IDIOMS: dict[str, tuple] = {
    # Words: x64 `(hi << 32) | lo`; x32 `hi ^ lo` (jax/_src/random/threefry2x32.py).
    "word_shift": (32, None),
    # Uniform floats from bits: keep the top 52 (f64) or 23 (f32) bits as the mantissa.
    "float_shift": (12, 9),
    # ... or-ed into the bits of 1.0 and bitcast (jax/_src/random/core.py `_uniform`) ...
    "float_one_bits": (0x3FF0000000000000, 0x3F800000),
    # ... or converted and scaled by 2**-mantissa bits (XLA's client library; torch-xla).
    "float_scale": (2.0 ** -52, 2.0 ** -23),
    # randint mixes two words with 2**(nbits // 2) % span, squared (core.py `_randint`).
    "randint_half_word": (2 ** 32, 2 ** 16),
}

# XLA's RngBitGenerator makes a 64-bit word of two consecutive 32-bit words of its stream,
# the low one first (measured on the CPU backend for DEFAULT, PHILOX and THREE_FRY): a
# u64[n] draw is a u32[n, 2] draw from the same state, pairs (low, high).
RNG_WORD_PAIR: tuple[str, str] = ("low", "high")

# iota_2x32_shape splits a uint64 counter into hi/lo uint32 words in both modes; for
# fewer than this many elements hi is 0 and lo is the counter: exact in 32 bits.
COUNTER_LIMIT = 2 ** 32

# `x & 0xFFFFFFFF` on int64 (threefry_seed's low word) before a convert to 32 bits: in
# int32 that mask is -1, as x32 JAX traces it.
LOW_WORD_MASK = (0xFFFFFFFF, -1)
