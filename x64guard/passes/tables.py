"""The data the narrowing pass is driven by: small tables beside small pure functions.

Kept in the spirit of JAX's ``jax/_src/dtypes.py`` (``_dtype_to_32bit_dtype``): adding a
type, a sentinel, a LAPACK kernel or a target is one entry here, not new code.
"""

from __future__ import annotations

import enum
import functools
import re
from typing import Callable
from dataclasses import dataclass

import numpy as np

# ---- The type table: every element type x64guard converts, converts to, or meets --------
# One row per MLIR element type: the name of the JAX/numpy dtype that carries its values
# (ml_dtypes' for the types numpy lacks), the torch dtype of the same name (None if torch
# has none), its 32-bit counterpart (64-bit rows only) and, for integers, its range. Every
# dtype map of the package derives from these rows (below, and in the front ends): the
# 64->32 map is exactly JAX's canonicalization (int64->int32, uint64->uint32,
# float64->float32, complex128->complex64). The invariants are checked at import, the rows
# against numpy, JAX and torch in tests/passes/test_tables.py.


def _numpy_dtype(name: str) -> np.dtype:
    """numpy's dtype `name`, or ml_dtypes' (bfloat16, the float8 types, int4: JAX's own)."""
    try:
        return np.dtype(name)
    except TypeError:
        import ml_dtypes  # a dependency of jax

        return np.dtype(getattr(ml_dtypes, name))


@dataclass(frozen=True)
class ElementType:
    mlir: str                 # MLIR spelling: "i64", "complex<f64>"
    dtype: str                # name of the JAX/numpy dtype that carries its values: "int64"
    torch: str | None         # name of the torch dtype (`getattr(torch, name)`), None if torch has none
    narrow: str | None = None  # MLIR spelling of the 32-bit counterpart (64-bit rows only)

    @functools.cached_property
    def numpy(self) -> np.dtype:
        return _numpy_dtype(self.dtype)

    @property
    def short(self) -> str:
        """How change summaries name it: the MLIR spelling, complex types by width ("c128")."""
        return f"c{self.numpy.itemsize * 8}" if self.numpy.kind == "c" else self.mlir

    @property
    def integer_range(self) -> tuple[int, int] | None:
        """(min, max) of an integer type (signless integers are read as signed), else None."""
        if self.numpy.kind not in "iu":
            return None
        info = np.iinfo(self.numpy)
        return int(info.min), int(info.max)


ELEMENT_TYPES: tuple[ElementType, ...] = (
    # narrowed: the 64-bit types and their counterparts
    ElementType("i64", "int64", "int64", "i32"),
    ElementType("si64", "int64", "int64", "si32"),
    ElementType("ui64", "uint64", "uint64", "ui32"),
    ElementType("f64", "float64", "float64", "f32"),
    ElementType("complex<f64>", "complex128", "complex128", "complex<f32>"),
    ElementType("i32", "int32", "int32"),
    ElementType("si32", "int32", "int32"),
    ElementType("ui32", "uint32", "uint32"),
    ElementType("f32", "float32", "float32"),
    ElementType("complex<f32>", "complex64", "complex64"),
    # left as they are
    ElementType("i1", "bool", "bool"),
    ElementType("i8", "int8", "int8"),
    ElementType("i16", "int16", "int16"),
    ElementType("ui8", "uint8", "uint8"),
    ElementType("ui16", "uint16", "uint16"),
    ElementType("f16", "float16", "float16"),
    ElementType("bf16", "bfloat16", "bfloat16"),
    # JAX's sub-byte and 8-bit types (jax.numpy 0.10, ml_dtypes 0.7); torch 2.9 has some (its
    # int2/int4 are storage-only shell dtypes)
    ElementType("i2", "int2", "int2"),
    ElementType("i4", "int4", "int4"),
    ElementType("ui2", "uint2", "uint2"),
    ElementType("ui4", "uint4", "uint4"),
    ElementType("f8E4M3FN", "float8_e4m3fn", "float8_e4m3fn"),
    ElementType("f8E5M2", "float8_e5m2", "float8_e5m2"),
    ElementType("f8E4M3FNUZ", "float8_e4m3fnuz", "float8_e4m3fnuz"),
    ElementType("f8E5M2FNUZ", "float8_e5m2fnuz", "float8_e5m2fnuz"),
    ElementType("f8E4M3B11FNUZ", "float8_e4m3b11fnuz", None),
    ElementType("f8E3M4", "float8_e3m4", None),
    ElementType("f8E4M3", "float8_e4m3", None),
    ElementType("f8E8M0FNU", "float8_e8m0fnu", "float8_e8m0fnu"),
    ElementType("f6E2M3FN", "float6_e2m3fn", None),
    ElementType("f6E3M2FN", "float6_e3m2fn", None),
    ElementType("f4E2M1FN", "float4_e2m1fn", None),
)
ELEMENT_TYPE: dict[str, ElementType] = {row.mlir: row for row in ELEMENT_TYPES}
_NARROWED_ROWS = tuple(row for row in ELEMENT_TYPES if row.narrow)

# 64-bit element type -> its 32-bit counterpart, by MLIR spelling.
NARROW_ELEMENT_TYPE: dict[str, str] = {row.mlir: row.narrow for row in _NARROWED_ROWS}
# MLIR spelling -> numpy dtype, used to carry constant values across the change.
NUMPY_DTYPE: dict[str, np.dtype] = {row.mlir: row.numpy for row in ELEMENT_TYPES}
# MLIR spelling -> numpy dtype of the integer (and i1) types: what the kernel evaluator and
# torch-xla's RNG seed reader compute with (the sub-byte ml_dtypes types are not among them).
INTEGER_NUMPY_DTYPE: dict[str, np.dtype] = {row.mlir: row.numpy for row in ELEMENT_TYPES if row.numpy.kind in "biu"}
# numpy dtype -> its 32-bit counterpart (what an input or output dtype becomes; the JAX front end).
NARROW_NUMPY_DTYPE: dict[np.dtype, np.dtype] = {row.numpy: ELEMENT_TYPE[row.narrow].numpy for row in _NARROWED_ROWS}
# torch dtype name -> its 32-bit counterpart's (the torch-xla front end: `getattr(torch, name)`).
NARROW_TORCH_DTYPE: dict[str, str] = {
    row.torch: ELEMENT_TYPE[row.narrow].torch for row in _NARROWED_ROWS if row.torch}
# torch dtype name -> the MLIR spelling torch-xla lowers it to (the signless one: first row wins).
TORCH_MLIR_ELEMENT: dict[str, str] = {}
for _row in ELEMENT_TYPES:
    if _row.torch is not None:
        TORCH_MLIR_ELEMENT.setdefault(_row.torch, _row.mlir)
del _row
# torch dtype name -> the JAX dtype name of the same values (torch-xla's calls into JAX).
TORCH_JAX_DTYPE: dict[str, str] = {row.torch: row.dtype for row in ELEMENT_TYPES if row.torch is not None}
# MLIR spelling -> (min, max) of every integer type in the table.
INTEGER_RANGE: dict[str, tuple[int, int]] = {
    row.mlir: row.integer_range for row in ELEMENT_TYPES if row.integer_range is not None}


def numpy_narrowed(dtype) -> np.dtype:
    """The dtype `dtype` becomes: its 32-bit counterpart if it is 64-bit, else itself."""
    dtype = np.dtype(dtype)
    return NARROW_NUMPY_DTYPE.get(dtype, dtype)


def torch_narrowed(name: str) -> str:
    """The torch dtype name `name` becomes (a name: passes/ imports no torch)."""
    return NARROW_TORCH_DTYPE.get(name, name)


def _check_type_table() -> None:
    """What the rest of the package relies on; a wrong row fails every import, loudly."""
    problems = []
    for row in ELEMENT_TYPES:
        if row.numpy.name != row.dtype:
            problems.append(f"{row.mlir}: numpy calls {row.dtype!r} {row.numpy.name!r}")
        if row.torch is not None and row.torch != row.dtype:
            problems.append(f"{row.mlir}: torch name {row.torch!r} is not the dtype name {row.dtype!r}")
        if row.narrow is None:
            continue
        narrow = ELEMENT_TYPE.get(row.narrow)
        if narrow is None:
            problems.append(f"{row.mlir}: its counterpart {row.narrow!r} has no row")
            continue
        if narrow.narrow is not None:
            problems.append(f"{row.mlir}: its counterpart {row.narrow!r} narrows again")
        if row.numpy.kind != narrow.numpy.kind or row.numpy.itemsize != 2 * narrow.numpy.itemsize:
            problems.append(f"{row.mlir} -> {row.narrow}: not the same kind at half the width "
                            f"({row.numpy} -> {narrow.numpy})")
        if row.numpy.itemsize * 8 != (128 if row.numpy.kind == "c" else 64):
            problems.append(f"{row.mlir}: a narrowing row must be a 64-bit type, not {row.numpy}")
        if NARROW_NUMPY_DTYPE[row.numpy] != narrow.numpy:
            problems.append(f"{row.numpy} narrows to two numpy dtypes")
        if (row.torch is None) != (narrow.torch is None):
            problems.append(f"{row.mlir} -> {row.narrow}: torch names only one side")
    if problems:
        raise ImportError("x64guard: the type table in x64guard/passes/tables.py is inconsistent: "
                          + "; ".join(problems))


_check_type_table()

# Exact 64-bit sentinels (init values of max/min reductions, iinfo/finfo bounds) and the
# 32-bit value JAX produces for the same Python expression when it traces with x64 off.
INTEGER_SENTINELS: dict[str, dict[int, int]] = {
    "i64": {-(2**63): -(2**31), 2**63 - 1: 2**31 - 1},
    "si64": {-(2**63): -(2**31), 2**63 - 1: 2**31 - 1},
    # INT64_MAX is a sentinel whatever its signedness: JAX's shape-polymorphic index clamps
    # (vmap of dynamic_update_slice under jax.export) spell it as a ui64 constant converted
    # to i64. It becomes int32's maximum, as x32 JAX has it (which uint32 also holds).
    "ui64": {2**64 - 1: 2**32 - 1, 2**63 - 1: 2**31 - 1},
}
FLOAT64_MAX = float(np.finfo(np.float64).max)
FLOAT32_MAX = float(np.finfo(np.float32).max)
FLOAT_SENTINELS: dict[float, float] = {FLOAT64_MAX: FLOAT32_MAX, -FLOAT64_MAX: -FLOAT32_MAX}

# Ops whose `value` attribute is data (the only dense i64 attributes that are not structure).
CONSTANT_OPS: frozenset[str] = frozenset({"stablehlo.constant", "mhlo.constant", "arith.constant"})

# ---- spellings: ops written another way than the dialects JAX emits spell them ------------
# torch-xla's StableHLO (HLO converted back by XLA) writes HLO ops that StableHLO lacks as
# custom_calls named after the op. Each row: target -> the op it is, and how many operands
# that op takes (a call with another count is left to the custom_call rules). Seen in
# torch-xla 2.9: `stablehlo.custom_call @mhlo.erf(%x)` (GELU) is CHLO's erf, which expands
# for float32 when compiled (JAX's x32 erf). patterns/spellings.py rewrites them.


@dataclass(frozen=True)
class Spelling:
    op: str        # the op the custom_call stands for: "chlo.erf"
    operands: int  # how many operands that op takes


CUSTOM_CALL_SPELLINGS: dict[str, Spelling] = {
    "mhlo.erf": Spelling("chlo.erf", 1),
}


# ---- custom_call targets (issue 15): what each target means for narrowing ----------------
# A custom_call is a name: nothing in the module says whether its kernel works on any
# element type. Each known target has a policy; a target in none of these tables with a
# 64-bit operand or result (before narrowing) is refused, naming the target.


class CustomCallPolicy(enum.StrEnum):
    TYPE_GENERIC = "type-generic"        # narrowed as any op: x32 tracing emits the same call
    RENAMED = "renamed"                  # one kernel per element type: renamed to its 32-bit twin
    HOST_CALLBACK = "host-callback"      # a Python function JAX traced for 64-bit values: refused
    COMPILED_KERNEL = "compiled-kernel"  # code generated for the traced types (Pallas, Triton): refused
    UNKNOWN = "unknown"                  # refused


# Targets whose meaning does not depend on the element type: narrowing the types of their
# operands and results is exactly what x32 tracing produces.
TYPE_GENERIC_CUSTOM_CALLS: frozenset[str] = frozenset({
    "Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape", "MoveToHost", "MoveToDevice",
    "annotate_device_placement", "LayoutConstraint", "InspectSharding", "AllocateBuffer",
    # XLA's approximate top-k: type-generic, its comparator is an ordinary function.
    "ApproxTopK", "stablehlo.dynamic_approx_top_k", "stablehlo.dynamic_top_k",
    "stablehlo.dynamic_reduce_window",
    # jax.export's shape checks: dimension sizes as i64 under x64, i32 in an x32 export.
    "shape_assertion",
    # TPU linear algebra that XLA expands for the operand's element type.
    "Eigh", "Qr", "ProductOfElementaryHouseholderReflectors", "LuDecomposition",
    # jaxlib FFI kernels that read the element type from their buffers.
    "tridiagonal_solve_perturbed_ffi", "cpu_lu_pivots_to_permutation",
    "cu_lu_pivots_to_permutation", "hip_lu_pivots_to_permutation",
    "cu_threefry2x32_ffi", "hip_threefry2x32_ffi",
    # StableHLO's test-data harness (stablehlo/testdata): compare two tensors of one type.
    "check.eq", "check.expect_close", "check.expect_eq", "check.expect_almost_eq",
})

# jaxlib's GPU solver kernels (`cusolver_getrf_ffi`, `hipsolver_syevd_ffi`,
# `cusparse_gtsv2_ffi`, ...): one FFI name for every element type, dispatched on the buffer.
TYPE_GENERIC_CUSTOM_CALL_PATTERN = re.compile(r"^(?:cu|hip)(?:solver|sparse|blas)_[a-z0-9_]+_ffi$")

# JAX's Python host callbacks (jax.pure_callback, io_callback, jax.debug.print/callback) as
# jax 0.10 spells them (jax/_src/callback.py, buffer_callback.py), and older spellings. The
# Python function was traced for the 64-bit avals: handed 32-bit buffers it would compute
# on the wrong types and return results of the wrong size.
HOST_CALLBACK_CUSTOM_CALLS: frozenset[str] = frozenset({
    "xla_ffi_python_cpu_callback", "xla_ffi_python_gpu_callback",
    "xla_ffi_partitioned_python_cpu_callback", "xla_ffi_partitioned_python_gpu_callback",
    "xla_buffer_python_cpu_callback", "xla_buffer_python_gpu_callback",
    "xla_python_cpu_callback", "xla_python_gpu_callback",
    # jax2tf.call_tf: a TensorFlow function traced for the 64-bit types.
    "tf.call_tf_function",
    # jax.experimental.custom_partitioning: Python re-lowers the function during partitioning.
    "CustomSPMDPartitioning",
})

# Kernels compiled for the types they were traced with: Pallas (TPU, Mosaic GPU), Triton, cuDNN.
COMPILED_KERNEL_CUSTOM_CALLS: frozenset[str] = frozenset({
    "tpu_custom_call", "mosaic_gpu", "mosaic_gpu_v2", "__gpu$xla.gpu.triton", "triton_kernel_call",
    "triton_kernel_call_ffi", "__cudnn$fusion",
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


# custom_call targets whose called computations JAX names after the operand's element type
# (jax/_src/lax/ann.py `_comparator_builder_mlir`: "top_k_{gt|lt}_{element type}_comparator",
# uniquified by a "_N" suffix; seen in jax 0.10.2, 0.11.2 and 0.12.0.1): narrowed, x32 JAX's
# name is the same with the 32-bit element type. A name outside the pattern is left as it is.
DTYPE_NAMED_COMPUTATIONS: dict[str, "re.Pattern[str]"] = {
    "ApproxTopK": re.compile(r"^top_k_(?:gt|lt)_(?P<type>[a-z0-9]+)_comparator(?:_\d+)?$"),
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


def custom_call_policy(target: str) -> tuple[CustomCallPolicy, str | None]:
    """(policy, the 32-bit target for RENAMED, else None) for a custom_call target."""
    if target in TYPE_GENERIC_CUSTOM_CALLS or TYPE_GENERIC_CUSTOM_CALL_PATTERN.match(target):
        return CustomCallPolicy.TYPE_GENERIC, None
    if target in HOST_CALLBACK_CUSTOM_CALLS:
        return CustomCallPolicy.HOST_CALLBACK, None
    if target in COMPILED_KERNEL_CUSTOM_CALLS:
        return CustomCallPolicy.COMPILED_KERNEL, None
    renamed = narrowed_custom_call_target(target)
    if renamed is not None:
        return CustomCallPolicy.RENAMED, renamed
    return CustomCallPolicy.UNKNOWN, None


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
    # AWS Neuron (issue 23): the chip ("trn1", "trn2") whose neuronx-cc rules apply (the
    # NEURON_RULES below), and the compiler flags the profile stands for (NEURON_CC_FLAGS
    # and --neuron-cc-flags are read after them). None: not a Neuron target.
    neuron_chip: str | None = None
    neuron_flags: str = ""


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
    # AWS Neuron (issue 23; docs/targets.md): neuronx-cc's documented rejections, as findings
    # whose kind is the compiler's own code (NEURON_RULES). Complex types and custom_call
    # targets are judged by those rules (EVRF004, EHCA005), not by the generic fields.
    "neuron-trn1": TargetProfile(
        "neuron-trn1",
        "AWS Trainium1/Inferentia2 (neuronx-cc --target trn1, Neuron 2.32 documentation): 64-bit integers "
        "are converted to 32 bits by the compiler without a range check, so they must be narrowed; "
        "neuronx-cc's documented rejections reported with their NCC_ codes",
        neuron_chip="trn1"),
    "neuron-trn2": TargetProfile(
        "neuron-trn2",
        "AWS Trainium2 (neuronx-cc --target trn2) with the 2.32 defaults (--native-int64=default: 64-bit "
        "integers downcast to 32 bits; --implicit-integer-downcast=all: integer dot/scatter/collectives/pow "
        "downcast with a warning); NCC_ codes as for neuron-trn1",
        neuron_chip="trn2"),
    "neuron-trn2-int64": TargetProfile(
        "neuron-trn2-int64",
        "AWS Trainium2 with --native-int64=enabled --implicit-integer-downcast=none, the defaults the 2.32 "
        "release notes announce for the next release: int64 runs natively, integer dot/scatter/collectives/"
        "pow are hard errors",
        neuron_chip="trn2", neuron_flags="--native-int64=enabled --implicit-integer-downcast=none"),
    "x64": TargetProfile("x64", "accepts everything (a host CPU or GPU)", allow_64bit=True),
}
# `neuron`, the profile of x64guard before issue 23, is the current Neuron chip with the
# compiler's current defaults.
TARGET_ALIASES: dict[str, str] = {"neuron": "neuron-trn2"}
TARGET_PROFILES["neuron"] = TARGET_PROFILES[TARGET_ALIASES["neuron"]]
DEFAULT_TARGET = "x32"

# The bit pattern of float64 1.0: x64 `jax.random` ors it into uint64 mantissa bits
# before a bitcast to float64.
FLOAT64_ONE_BITS = 0x3FF0000000000000

# Dialects whose ops never carry a TypeAttr and have a fixed number of regions, and ops of
# other dialects that have neither (func.call and func.return are a tenth of a JAX module):
# the generic rule and the legality check skip their attributes.
TYPE_ATTR_FREE_DIALECTS: tuple[str, ...] = ("stablehlo.", "chlo.", "sdy.", "mhlo.", "vhlo.")
TYPE_ATTR_FREE_OPS: frozenset[str] = frozenset({"func.call", "func.return"})


def never_has_type_attributes(op_name: str) -> bool:
    """True for a (registered) op that never carries a TypeAttr and whose region count is fixed."""
    return op_name.startswith(TYPE_ATTR_FREE_DIALECTS) or op_name in TYPE_ATTR_FREE_OPS

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
    return None
# ---- StableHLO's `check` dialect (issue 15): the test harness of stablehlo/testdata -----------
# Ops of a dialect jaxlib does not register, but whose meaning is known: each compares its
# operand(s) with an expected value of the same type, whatever the type. Value -> the
# attribute that holds the expected value (data, narrowed as a constant's), or None.
CHECK_DIALECT_OPS: dict[str, str | None] = {
    "check.expect_eq": None,
    "check.expect_almost_eq": None,
    "check.expect_close": None,
    "check.expect_serialized_eq": None,
    "check.expect_eq_const": "value",
    "check.expect_almost_eq_const": "value",
}


# ---- AWS Neuron (issue 23): neuronx-cc's documented rejections ------------------------------
# Read from the Neuron SDK 2.32 documentation (aws-neuron/aws-neuron-sdk; compiler 2.27),
# never run against neuronx-cc (it is not installable here). One row per finding kind:
# the compiler's own code (`NCC_...`, the SARIF rule id) or, for what jax-neuronx documents
# without a code, a `neuron-...` kind. `downcast`: the --implicit-integer-downcast mode that
# turns the rejection into a downcast with a warning (None: always an error).
_ERROR_CODES = "compiler/error-codes/{}.rst"
_JAX_KNOWN_ISSUES = "frameworks/jax/setup/jax-neuronx-known-issues.rst"


@dataclass(frozen=True)
class NeuronRule:
    kind: str        # "NCC_EVRF035" or "neuron-cond": a `findings.Kind` value
    ops: str         # the StableHLO ops it looks at (documentation)
    trigger: str     # what neuronx-cc rejects
    fix: str         # the documented fix
    doc: str         # the page of aws-neuron/aws-neuron-sdk it comes from
    downcast: str | None = None


NEURON_RULES: tuple[NeuronRule, ...] = (
    NeuronRule("NCC_ESFH002", "stablehlo.constant", "a ui64 constant whose value does not fit in 32 bits",
               "use 32-bit constants (x64guard narrow does, range-checked)", _ERROR_CODES.format("ESFH002")),
    NeuronRule("NCC_EVRF035", "stablehlo.dot, stablehlo.dot_general",
               "a dot with integer operands (int64 on every chip; int32 on trn2 and later, trn1 only warns)",
               "cast the operands to a float type, or compile with --implicit-integer-downcast=dot",
               _ERROR_CODES.format("EVRF035"), downcast="dot"),
    NeuronRule("NCC_EVRF060", "stablehlo.scatter",
               "a scatter that combines (add, multiply, min, max) integer values; an overwriting scatter is fine",
               "cast to a float type, or compile with --implicit-integer-downcast=scatter",
               _ERROR_CODES.format("EVRF060"), downcast="scatter"),
    NeuronRule("NCC_EVRF016", "stablehlo.scatter", "a scatter that combines boolean values",
               "cast to f32/bf16 before the scatter", _ERROR_CODES.format("EVRF016")),
    NeuronRule("NCC_EVRF061", "stablehlo.all_reduce", "an all-reduce of integer values",
               "cast to a float type, or compile with --implicit-integer-downcast=all_reduce",
               _ERROR_CODES.format("EVRF061"), downcast="all_reduce"),
    NeuronRule("NCC_EVRF063", "stablehlo.reduce_scatter", "a reduce-scatter of integer values",
               "cast to a float type, or compile with --implicit-integer-downcast=reduce_scatter",
               _ERROR_CODES.format("EVRF063"), downcast="reduce_scatter"),
    NeuronRule("NCC_EVRF062", "stablehlo.power", "an int64 power",
               "narrow it to int32 (x64guard narrow), cast to a float type, or compile with "
               "--implicit-integer-downcast=pow", _ERROR_CODES.format("EVRF062"), downcast="pow"),
    NeuronRule("NCC_EVRF022", "stablehlo.shift_right_arithmetic",
               "a shift-right-arithmetic whose operand is not s32, u32 or f32",
               "make the operand 32-bit (x64guard narrow does for int64)", _ERROR_CODES.format("EVRF022")),
    NeuronRule("NCC_EVRF013", "chlo.top_k, custom_call @TopK", "TopK on integer input",
               "cast the input to a float type", _ERROR_CODES.format("EVRF013")),
    NeuronRule("NCC_EVRF014", "chlo.top_k, custom_call @TopK", "TopK with k > 16384",
               "use a smaller k (or split the dimension)", _ERROR_CODES.format("EVRF014")),
    NeuronRule("NCC_EVRF004", "any op", "complex values (complex128 always; complex64 outside the ops the "
               "2.32 release notes list)", "split into real and imaginary parts (jnp.real/jnp.imag)",
               _ERROR_CODES.format("EVRF004")),
    NeuronRule("NCC_EVRF006", "stablehlo.rng_bit_generator",
               "an rng_bit_generator with an explicit algorithm (THREE_FRY, PHILOX)",
               "use the framework's default RNG (jax.random with rbg keys: algorithm DEFAULT)",
               _ERROR_CODES.format("EVRF006")),
    NeuronRule("NCC_EHCA005", "stablehlo.custom_call",
               "a custom_call target that is not one of Neuron's (NEURON_CUSTOM_CALLS)",
               "use a recognised target, or express the computation in StableHLO ops",
               _ERROR_CODES.format("EHCA005")),
    NeuronRule("NCC_EUOC002", "stablehlo.triangular_solve (NEURON_UNSUPPORTED_OPS)",
               "an operator neuronx-cc does not support", "rewrite it (a triangular solve: through an inverse)",
               _ERROR_CODES.format("EUOC002")),
    NeuronRule("NCC_EMOD025", "any op", "a dynamic dimension (bounded or not), or set_dimension_size",
               "use static shapes: pad or bucket to fixed sizes", _ERROR_CODES.format("EMOD025")),
    NeuronRule("NCC_EVRF010", "stablehlo.convolution", "a convolution with both input and kernel dilation",
               "use only input or only kernel dilation, or dilate by hand", _ERROR_CODES.format("EVRF010")),
    NeuronRule("NCC_EVRF011", "stablehlo.convolution", "a strided convolution with input dilation",
               "remove the stride or the input dilation (upsample and downsample separately)",
               _ERROR_CODES.format("EVRF011")),
    NeuronRule("NCC_EVRF017", "stablehlo.reduce_window", "a reduce_window with base dilation > 1",
               "use base dilation 1 (dilate by hand)", _ERROR_CODES.format("EVRF017")),
    NeuronRule("NCC_EVRF018", "stablehlo.reduce_window", "a reduce_window with window dilation > 1",
               "use window dilation 1 (dilate by hand)", _ERROR_CODES.format("EVRF018")),
    NeuronRule("NCC_EVRF019", "stablehlo.reduce_window", "a reduce_window with other than one input and "
               "one initial value", "split it into single-input reduce_windows", _ERROR_CODES.format("EVRF019")),
    # jax-neuronx's known issues: documented without a code.
    NeuronRule("neuron-cond", "stablehlo.case, stablehlo.if", "lax.cond / lax.switch",
               "compute both branches and jnp.where / lax.select between them", _JAX_KNOWN_ISSUES),
    NeuronRule("neuron-dynamic-while", "stablehlo.while",
               "a while loop without a static trip count (only counted loops are supported)",
               "use lax.fori_loop/lax.scan with constant bounds", _JAX_KNOWN_ISSUES),
    NeuronRule("neuron-host-callback", "stablehlo.custom_call (host callback targets)",
               "a host callback (jax.pure_callback, io_callback, jax.debug.print)",
               "move the callback out of the jitted function", _JAX_KNOWN_ISSUES),
    NeuronRule("neuron-sort-comparator", "stablehlo.sort",
               "a sort comparator other than one LT/LE/GT/GE compare (JAX's multi-key comparator)",
               "sort on one key (argsort, then gather)", _JAX_KNOWN_ISSUES),
    NeuronRule("neuron-reduce-precision", "stablehlo.reduce_precision", "reduce_precision",
               "cast to the narrower type and back (astype)", _JAX_KNOWN_ISSUES),
    NeuronRule("neuron-variadic-reduce", "stablehlo.reduce", "a reduction of several inputs at once "
               "(jnp.argmax/argmin lower to one)", "reduce each input on its own (argmax: max, then a "
               "compare and a min of an iota)", _JAX_KNOWN_ISSUES),
    NeuronRule("neuron-threefry", "func.call @threefry2x32", "jax.random's threefry kernel: \"not completely "
               "supported\" (a warning)", "jax.config.update('jax_default_prng_impl', 'rbg')", _JAX_KNOWN_ISSUES),
)
NEURON_RULE: dict[str, NeuronRule] = {row.kind: row for row in NEURON_RULES}

# custom_call targets neuronx-cc recognises (EHCA005's page), and those consumed before the
# module reaches neuronx-cc: sharding annotations (XLA's SPMD partitioner) and jax.export's
# shape assertions (JAX's shape refinement).
NEURON_CUSTOM_CALLS: frozenset[str] = frozenset({
    "AwsNeuronErf", "AwsNeuronGelu", "AwsNeuronGeluApprxTanh", "AwsNeuronGeluBackward", "AwsNeuronSilu",
    "AwsNeuronSiluBackward", "AwsNeuronRmsNorm", "AwsNeuronSoftmax", "AwsNeuronSoftmaxBackward",
    "AwsNeuronCollectiveMatmul", "AwsNeuronIntMatmult", "AwsNeuronArgMax", "AwsNeuronArgMin", "AwsNeuronTopK",
    "AwsNeuronDropoutMaskV1", "AwsNeuronCustomNativeKernel", "AwsNeuronCustomOp", "AwsNeuronDevicePrint",
    "ResizeNearest", "ResizeBilinear", "ResizeNearestGrad", "AwsNeuronLNCShardingConstraint",
    "AwsNeuronTransferWithStaticRing", "AwsNeuronModuleMarkerStart-Forward", "AwsNeuronModuleMarkerStart-Backward",
    "AwsNeuronModuleMarkerEnd-Forward", "AwsNeuronModuleMarkerEnd-Backward", "NeuronBoundaryMarker-Start",
    "NeuronBoundaryMarker-End",
})
XLA_SHARDING_CUSTOM_CALLS: frozenset[str] = frozenset({"Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape",
                                                      "shape_assertion"})

# Operators neuronx-cc does not support (EUOC002; the page's example).
NEURON_UNSUPPORTED_OPS: frozenset[str] = frozenset({"stablehlo.triangular_solve"})

# complex64 ops the 2.32 release notes name (the notes add "about 30"; only the named ones
# are listed, so a complex64 op outside them is reported), and ops that only carry values.
NEURON_COMPLEX64_OPS: frozenset[str] = frozenset({
    "stablehlo.add", "stablehlo.multiply", "stablehlo.dot_general", "stablehlo.exponential", "stablehlo.sine",
    "stablehlo.reshape", "stablehlo.slice",
    "func.func", "func.return", "func.call", "stablehlo.return",
})

NEURON_TOPK_MAX_K = 16384                       # EVRF014
NEURON_SORT_COMPARISONS = frozenset({"LT", "LE", "GT", "GE"})
NEURON_DOWNCAST_OPS: tuple[str, ...] = ("dot", "scatter", "all_reduce", "reduce_scatter", "pow")
# What neuronx-cc 2.27 (Neuron 2.32) does without flags: int64 downcast, the integer-datapath
# ops downcast with a warning. --native-int64 only exists on trn2 and later.
NEURON_DEFAULT_FLAGS = "--native-int64=default --implicit-integer-downcast=all"
NEURON_FLAGS_ENV = "NEURON_CC_FLAGS"
