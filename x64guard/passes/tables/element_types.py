"""The type table: every element type x64guard converts, converts to, or meets, and every
dtype map derived from it; the exact 64-bit sentinels and their x32 counterparts.
"""

from __future__ import annotations

import functools
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
        raise ImportError("x64guard: the type table in x64guard/passes/tables/element_types.py is inconsistent: "
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
