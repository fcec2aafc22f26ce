"""The tables the pass is driven by."""

import numpy as np
import pytest

from x64guard.passes.tables import NARROW_ELEMENT_TYPE, TARGET_PROFILES, narrowed_custom_call_target


def test_type_map_is_jax_canonicalization():
    assert NARROW_ELEMENT_TYPE["i64"] == "i32"
    assert NARROW_ELEMENT_TYPE["ui64"] == "ui32"
    assert NARROW_ELEMENT_TYPE["f64"] == "f32"
    assert NARROW_ELEMENT_TYPE["complex<f64>"] == "complex<f32>"


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
