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
