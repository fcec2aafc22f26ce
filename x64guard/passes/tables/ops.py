"""Ops by name: constants, torch-xla's spellings, what each custom_call target means for
narrowing, ops that never carry a type attribute, StableHLO's `check` dialect.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass



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


# ---- CHLO ops x32 JAX may not emit ----------------------------------------------------
# A CHLO op is type-generic: narrowed from float64, XLA expands it for float32 when
# compiled, as for x32 JAX's own CHLO op. Some JAX releases lower the float32 primitive to
# an expansion of their own instead (jax 0.12: `lgamma` at float32 is `lgamma_impl`, about
# 450 ops; at float64 it is `chlo.lgamma`), so the narrowed op is a correct float32 result
# but not x32 JAX's bits. CHLO op -> the `jax.lax` function whose float32 lowering says
# which (probed on the running JAX by x64guard/x32_lowerings.py; seen in 0.10.2 and 0.11.2:
# chlo.lgamma at both widths).
X32_EXPANDED_CHLO: dict[str, str] = {
    "chlo.lgamma": "lgamma",
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

# Dialects whose ops never carry a TypeAttr and have a fixed number of regions, and ops of
# other dialects that have neither (func.call and func.return are a tenth of a JAX module):
# the generic rule and the legality check skip their attributes.
TYPE_ATTR_FREE_DIALECTS: tuple[str, ...] = ("stablehlo.", "chlo.", "sdy.", "mhlo.", "vhlo.")
TYPE_ATTR_FREE_OPS: frozenset[str] = frozenset({"func.call", "func.return"})


def never_has_type_attributes(op_name: str) -> bool:
    """True for a (registered) op that never carries a TypeAttr and whose region count is fixed."""
    return op_name.startswith(TYPE_ATTR_FREE_DIALECTS) or op_name in TYPE_ATTR_FREE_OPS

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
