"""The tables the pass is driven by."""

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
    assert not TARGET_PROFILES["neuron"].allow_complex
    assert TARGET_PROFILES["x64"].allow_64bit


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


def test_threefry_fingerprint_is_jax_kernels():
    """The constants x64guard recognizes the kernel by are in JAX's threefry source."""
    import inspect

    from jax._src.random import threefry2x32

    from x64guard.passes.tables import THREEFRY_FINGERPRINT
    source = inspect.getsource(threefry2x32)
    assert "0x1BD11BDA" in source
    for rotations in THREEFRY_FINGERPRINT[1:]:
        assert str(list(rotations)) in source
