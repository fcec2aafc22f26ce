"""The tables the pass is driven by."""

import numpy as np
import pytest

from x64guard.passes.tables import (ELEMENT_TYPES, NARROW_ELEMENT_TYPE, NARROW_NUMPY_DTYPE, NARROW_TORCH_DTYPE,
                                    TARGET_PROFILES, TORCH_MLIR_ELEMENT, narrowed_custom_call_target, numpy_narrowed,
                                    torch_narrowed)


def test_type_map_is_jax_canonicalization():
    assert NARROW_ELEMENT_TYPE["i64"] == "i32"
    assert NARROW_ELEMENT_TYPE["ui64"] == "ui32"
    assert NARROW_ELEMENT_TYPE["f64"] == "f32"
    assert NARROW_ELEMENT_TYPE["complex<f64>"] == "complex<f32>"
    assert set(NARROW_ELEMENT_TYPE) == {"i64", "si64", "ui64", "f64", "complex<f64>"}


@pytest.mark.parametrize("row", ELEMENT_TYPES, ids=lambda row: row.mlir)
def test_a_row_agrees_with_jax_and_numpy(row):
    import jax.numpy as jnp
    from jax._src.interpreters import mlir
    from jax.extend.mlir import ir

    jax_dtype = np.dtype(getattr(jnp, row.dtype))
    assert (row.numpy, row.numpy.itemsize, row.numpy.kind) == (jax_dtype, jax_dtype.itemsize, jax_dtype.kind)
    if not row.mlir.startswith("si"):  # JAX lowers to signless integers; si32/si64 are the signed spellings
        with ir.Context():
            assert str(mlir.dtype_to_ir_type(jax_dtype)) == row.mlir
    if row.narrow:
        narrow = np.dtype(getattr(jnp, next(r.dtype for r in ELEMENT_TYPES if r.mlir == row.narrow)))
        assert (narrow.kind, narrow.itemsize * 2) == (row.numpy.kind, row.numpy.itemsize)
        # JAX's own x32 canonicalization
        from jax._src import dtypes
        assert dtypes._dtype_to_32bit_dtype[row.numpy] == narrow


@pytest.mark.torch   # the matrix's environments have no torch: deselected there, never skipped
@pytest.mark.parametrize("row", ELEMENT_TYPES, ids=lambda row: row.mlir)
def test_a_row_agrees_with_torch(row):
    import torch

    if row.torch is None:
        assert not isinstance(getattr(torch, row.dtype, None), torch.dtype), f"torch has {row.dtype}"
        return
    dtype = getattr(torch, row.torch)
    assert isinstance(dtype, torch.dtype) and dtype.itemsize == row.numpy.itemsize
    assert dtype.is_complex == (row.numpy.kind == "c")
    assert dtype.is_floating_point == row.dtype.startswith(("float", "bfloat"))


def test_derived_maps():
    assert numpy_narrowed(np.float64) == np.float32 and numpy_narrowed("int64") == np.int32
    assert numpy_narrowed(np.int16) == np.int16 and numpy_narrowed(np.complex128) == np.complex64
    assert NARROW_NUMPY_DTYPE == {np.dtype(w): np.dtype(n) for w, n in
                                  [("int64", "int32"), ("uint64", "uint32"), ("float64", "float32"),
                                   ("complex128", "complex64")]}
    assert NARROW_TORCH_DTYPE == {"int64": "int32", "uint64": "uint32", "float64": "float32",
                                  "complex128": "complex64"}
    assert torch_narrowed("float64") == "float32" and torch_narrowed("bfloat16") == "bfloat16"
    assert TORCH_MLIR_ELEMENT["int64"] == "i64" and TORCH_MLIR_ELEMENT["bool"] == "i1"


@pytest.mark.parametrize("wide, narrow", [
    ("lapack_dgetrf_ffi", "lapack_sgetrf_ffi"),
    ("lapack_zgetrf_ffi", "lapack_cgetrf_ffi"),
    ("lapack_dsyevd_ffi", "lapack_ssyevd_ffi"),
    ("lapack_zheevd_ffi", "lapack_cheevd_ffi"),
    ("lapack_dorgqr_ffi", "lapack_sorgqr_ffi"),
    ("lapack_zungqr_ffi", "lapack_cungqr_ffi"),
    ("lapack_dgesdd_ffi", "lapack_sgesdd_ffi"),
    ("blas_dtrsm", "blas_strsm"),
])
def test_lapack_names(wide, narrow):
    assert narrowed_custom_call_target(wide) == narrow


def test_every_double_precision_kernel_jaxlib_registers_has_a_registered_single_twin():
    from jaxlib import lapack
    names = {name for name, *_ in lapack.registrations()["cpu"]} if isinstance(lapack.registrations(), dict) \
        else set(lapack.batch_partitionable_targets())
    doubles = [n for n in names if n.startswith(("lapack_d", "lapack_z"))]
    assert doubles
    for name in doubles:
        assert narrowed_custom_call_target(name) in names, name


@pytest.mark.parametrize("name", ["lapack_sgetrf_ffi", "my_kernel", "lapack_", "cusolver_getrf_ffi"])
def test_unknown_or_single_precision_targets_have_no_rename(name):
    assert narrowed_custom_call_target(name) is None


def test_profiles():
    assert not TARGET_PROFILES["x32"].allow_64bit
    assert TARGET_PROFILES["neuron"].neuron_chip == "trn2"  # complex types: the Neuron rules (EVRF004)
    assert TARGET_PROFILES["x64"].allow_64bit


# --- dtype-derived constants ---------------------------------------------------------------------

def test_dtype_constants_are_numpys_finfo_of_both_types():
    from x64guard.passes.tables import DTYPE_CONSTANTS_F64
    f64, f32 = np.finfo(np.float64), np.finfo(np.float32)
    by_name = {row.named("T"): row for row in DTYPE_CONSTANTS_F64.values()}
    assert (by_name["finfo(T).eps"].wide, by_name["finfo(T).eps"].narrow) == (f64.eps, f32.eps)
    assert (by_name["finfo(T).tiny"].wide, by_name["finfo(T).tiny"].narrow) == (f64.tiny, f32.tiny)
    assert by_name["-(1 - finfo(T).epsneg)"].wide == np.nextafter(-1.0, 0.0)
    assert by_name["-(1 - finfo(T).epsneg)"].narrow == np.nextafter(np.float32(-1), np.float32(0))
    for row in DTYPE_CONSTANTS_F64.values():
        assert float(np.float32(row.narrow)) == row.narrow       # exact in float32
        assert np.float32(row.wide) != np.float32(row.narrow)     # rounding alone would not give it
        assert DTYPE_CONSTANTS_F64[-row.wide].narrow == -row.narrow  # both signs


def test_multiples_are_bounded_away_from_user_literals():
    from x64guard.passes.tables import dtype_constant
    eps, tiny = np.finfo(np.float64).eps, np.finfo(np.float64).tiny
    assert dtype_constant(10 * 4 * eps).named("float32") == "40 * finfo(float32).eps"
    assert dtype_constant(-100 * tiny).named("float64") == "-100 * finfo(float64).tiny"
    assert dtype_constant(65537 * eps) is None and dtype_constant(1025 * tiny) is None
    for literal in (2.0**-32, 2.0**-24, 1e-13, 1e-12, 1e-15, 0.0, 1.0, -1.0, 0.5, np.inf, np.nan, 1.5 * eps):
        assert dtype_constant(literal) is None, literal


def test_strict_profile_refuses_the_rng_state_and_reports_exact_idioms():
    from x64guard.passes.tables import RNG_STATE_KEEP, RNG_STATE_REFUSE
    assert TARGET_PROFILES["x32"].rng_state == RNG_STATE_KEEP and TARGET_PROFILES["x32"].exact_idioms_are_info
    strict = TARGET_PROFILES["x32-strict"]
    assert strict.rng_state == RNG_STATE_REFUSE and not strict.exact_idioms_are_info and not strict.allow_64bit


def test_random_idiom_constants_are_what_jax_computes():
    """The table's x64/x32 constants, recomputed the way jax/_src/random/core.py does."""
    import numpy as np

    from x64guard.passes.tables import RNG_IDIOMS
    f64, f32 = np.finfo(np.float64), np.finfo(np.float32)
    assert RNG_IDIOMS["float_shift"] == (64 - f64.nmant, 32 - f32.nmant)
    assert RNG_IDIOMS["float_one_bits"] == (int(np.array(1.0, np.float64).view(np.uint64)),
                                            int(np.array(1.0, np.float32).view(np.uint32)))
    assert RNG_IDIOMS["float_scale"] == (2.0 ** -f64.nmant, 2.0 ** -f32.nmant)
    assert RNG_IDIOMS["randint_half_word"] == (2 ** (64 // 2), 2 ** (32 // 2))


def test_threefry_constants_are_jax_kernels():
    """The specification x64guard proves kernels against uses JAX's threefry constants."""
    import inspect

    from jax._src.random import threefry2x32

    from x64guard.passes.tables import THREEFRY_KEY_PARITY, THREEFRY_ROTATIONS
    source = inspect.getsource(threefry2x32)
    assert hex(THREEFRY_KEY_PARITY).upper().replace("0X", "0x") in source
    for rotations in THREEFRY_ROTATIONS:
        assert str(list(rotations)) in source
