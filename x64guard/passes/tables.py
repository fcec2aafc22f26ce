"""The data the narrowing pass is driven by: small tables beside small pure functions.

Kept in the spirit of JAX's ``jax/_src/dtypes.py`` (``_dtype_to_32bit_dtype``): adding a
type, a sentinel, a LAPACK kernel or a target is one entry here, not new code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

# 64-bit element type -> its 32-bit counterpart, by MLIR spelling. Exactly JAX's
# canonicalization: int64->int32, uint64->uint32, float64->float32, complex128->complex64.
NARROW_ELEMENT_TYPE: dict[str, str] = {
    "i64": "i32",
    "si64": "si32",
    "ui64": "ui32",
    "f64": "f32",
    "complex<f64>": "complex<f32>",
}

# numpy dtypes used to carry constant values across the change.
NUMPY_DTYPE: dict[str, np.dtype] = {
    "i64": np.dtype(np.int64), "si64": np.dtype(np.int64), "ui64": np.dtype(np.uint64),
    "f64": np.dtype(np.float64), "complex<f64>": np.dtype(np.complex128),
    "i32": np.dtype(np.int32), "si32": np.dtype(np.int32), "ui32": np.dtype(np.uint32),
    "f32": np.dtype(np.float32), "complex<f32>": np.dtype(np.complex64),
}

# Exact 64-bit sentinels (init values of max/min reductions, iinfo/finfo bounds) and the
# 32-bit value JAX produces for the same Python expression when it traces with x64 off.
INTEGER_SENTINELS: dict[str, dict[int, int]] = {
    "i64": {-(2**63): -(2**31), 2**63 - 1: 2**31 - 1},
    "si64": {-(2**63): -(2**31), 2**63 - 1: 2**31 - 1},
    "ui64": {2**64 - 1: 2**32 - 1},
}
FLOAT64_MAX = float(np.finfo(np.float64).max)
FLOAT32_MAX = float(np.finfo(np.float32).max)
FLOAT_SENTINELS: dict[float, float] = {FLOAT64_MAX: FLOAT32_MAX, -FLOAT64_MAX: -FLOAT32_MAX}

# reduce_precision: the widest format a 32-bit float can represent.
F32_EXPONENT_BITS = 8
F32_MANTISSA_BITS = 23

# Ops whose `value` attribute is data (the only dense i64 attributes that are not structure).
CONSTANT_OPS: frozenset[str] = frozenset({"stablehlo.constant", "mhlo.constant", "arith.constant"})

# custom_call targets whose meaning does not depend on the element type: narrowing the
# types of their operands and results is exactly what x32 tracing produces.
TYPE_GENERIC_CUSTOM_CALLS: frozenset[str] = frozenset({
    "Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape", "MoveToHost", "MoveToDevice",
    "annotate_device_placement", "LayoutConstraint",
    # XLA's approximate top-k: type-generic, its comparator is an ordinary function.
    "ApproxTopK",
    # jaxlib FFI kernels that read the element type from their buffers.
    "tridiagonal_solve_perturbed_ffi", "cpu_lu_pivots_to_permutation",
})

# LAPACK / BLAS kernels encode the element type in their name (jaxlib's
# `build_lapack_fn_target`): double -> single, double complex -> single complex.
# The regular rule covers `lapack_d*` / `lapack_z*`; names outside it are listed.
_LAPACK_NAME = re.compile(r"^(lapack_)([dz])([a-z0-9]+(?:_ffi)?)$")
_SINGLE_PRECISION_LETTER = {"d": "s", "z": "c"}
IRREGULAR_CUSTOM_CALL_RENAMES: dict[str, str] = {
    # jaxlib before the FFI move called BLAS's trsm under its own prefix.
    "blas_dtrsm": "blas_strsm",
    "blas_ztrsm": "blas_ctrsm",
}


def narrowed_custom_call_target(target: str) -> str | None:
    """The single-precision kernel name for a double-precision one, or None if unknown."""
    if target in IRREGULAR_CUSTOM_CALL_RENAMES:
        return IRREGULAR_CUSTOM_CALL_RENAMES[target]
    match = _LAPACK_NAME.match(target)
    if match is None:
        return None
    prefix, letter, rest = match.groups()
    return f"{prefix}{_SINGLE_PRECISION_LETTER[letter]}{rest}"


# What `TargetProfile.rng_state` may say about XLA's RngBitGenerator state, which is
# 64-bit words by definition (u64[2] or u64[3]; JAX bitcasts its uint32[4] rbg keys to it,
# torch-xla builds it from its int64 seed):
RNG_STATE_KEEP = "keep"      # the state, and the seed arithmetic that builds it, stay 64-bit
RNG_STATE_REFUSE = "refuse"  # draws from such a state are refused (rng-state): the target has no u64


@dataclass(frozen=True)
class TargetProfile:
    """What an accelerator accepts. `check` reports anything outside it; `narrow` keeps
    or refuses the RNG state as the profile says."""

    name: str
    description: str
    allow_64bit: bool = False
    allow_complex: bool = True
    # None: any custom_call target is accepted; otherwise only these (and their prefixes).
    known_custom_calls: frozenset[str] | None = None
    # RNG_STATE_KEEP or RNG_STATE_REFUSE (see above).
    rng_state: str = RNG_STATE_KEEP
    # JAX's own 64-bit idioms that are exact in 32 bits (iota_2x32_shape's uint64 counters
    # for fewer than 2**32 elements) are rewritten to 32 bits and reported as `info`.
    # False: `check` reports them as any other 64-bit type.
    exact_idioms_are_info: bool = True


TARGET_PROFILES: dict[str, TargetProfile] = {
    "x32": TargetProfile(
        "x32",
        "no 64-bit element types, except the RNG state JAX's and torch-xla's own 32-bit programs use "
        "(XLA's RngBitGenerator u64[2] state); exact 64-bit idioms of JAX are info"),
    "x32-strict": TargetProfile(
        "x32-strict",
        "no 64-bit element type at all: rng_bit_generator draws (jax.random rbg keys, torch-xla RNG) "
        "are refused, and JAX's exact 64-bit idioms are reported like any 64-bit type",
        rng_state=RNG_STATE_REFUSE, exact_idioms_are_info=False),
    "neuron": TargetProfile(
        "neuron",
        "AWS Neuron: no 64-bit element types (RNG state aside, as with x32), no complex types, "
        "only known custom_call targets",
        allow_complex=False,
        known_custom_calls=frozenset({"Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape",
                                      "AwsNeuronCustomNativeKernel", "AwsNeuronTopK"}),
    ),
    "x64": TargetProfile("x64", "accepts everything (a host CPU or GPU)", allow_64bit=True),
}
DEFAULT_TARGET = "x32"

# The bit pattern of float64 1.0: x64 `jax.random` ors it into uint64 mantissa bits
# before a bitcast to float64.
FLOAT64_ONE_BITS = 0x3FF0000000000000

# Dialects whose ops never carry a TypeAttr: the generic rule skips their attributes.
TYPE_ATTR_FREE_DIALECTS: tuple[str, ...] = ("stablehlo.", "chlo.", "sdy.", "mhlo.", "vhlo.")

# ---- Random numbers: the 64-bit idioms of jax.random / torch-xla and their 32-bit forms ----
# (patterns/random_bits.py, patterns/counters.py, patterns/rng_state.py)

# Constants of the Threefry-2x32 kernel (Salmon et al. 2011) that jax.random's lowering of
# `threefry2x32` holds: the key schedule parity 0x1BD11BDA and the two rotation tables. A
# called function holding all three is the kernel, whatever its name.
THREEFRY_FINGERPRINT: tuple[tuple[int, ...], ...] = ((0x1BD11BDA,), (13, 15, 26, 6), (17, 29, 16, 24))

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

# Functions JAX's PRNG implementations lower to: 64-bit words assembled from their 32-bit
# outputs (`(hi << 32) | lo` for uint64 random bits) are a different stream from the one
# JAX draws with x64 off.
RNG_KERNEL_FUNCTIONS: tuple[str, ...] = ("threefry2x32", "threefry", "philox", "_threefry")
