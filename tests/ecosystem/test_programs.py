"""The ecosystem programs as data, and the harness's own machinery (fast, no libraries)."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import jax
import jax.numpy as jnp

import x64guard
from tests.corpus.oracle import bit_identical, run_oracle
from tests.ecosystem import harness
from tests.ecosystem.programs import MODULES, all_programs

pytestmark = pytest.mark.ecosystem

LIBRARIES = {"flax.linen", "flax.nnx", "optax", "equinox", "diffrax", "numpyro", "blackjax", "jax"}
# The second suite (issue 22 item 5; docs/ecosystem.md).
LIBRARIES_2 = {"lineax", "optimistix", "quadax", "tfp", "haiku"}
# The third: libraries first met in a field run (docs/ecosystem.md).
LIBRARIES_3 = {"jaxopt", "tinygp", "interpax", "ott-jax", "evosax", "distrax"}


def test_at_least_fifty_programs_over_every_library():
    programs = all_programs()
    assert len(programs) >= 50
    assert len({p.name for p in programs}) == len(programs)
    assert {p.library for p in programs} == LIBRARIES | LIBRARIES_2 | LIBRARIES_3
    assert len([p for p in programs if p.library in LIBRARIES_2]) >= 30
    assert all(len([p for p in programs if p.library == library]) >= 3 for library in LIBRARIES_3)
    for p in programs:
        assert re.fullmatch(r"[a-z0-9_]+", p.name), p.name
        assert p.what and callable(p.build)
        if p.refusal is not None:
            assert p.refusal.kinds and len(p.refusal.why) > 40, p.name


def test_listing_the_programs_imports_no_library():
    """The table's parent process and pytest collection only need the names."""
    import subprocess
    import sys

    code = ("import sys; from tests.ecosystem.programs import all_programs; all_programs(); "
            "print(sorted(m for m in ('flax', 'optax', 'equinox', 'diffrax', 'numpyro', 'blackjax', 'jaxopt', "
            "'tinygp', 'interpax', 'ott', 'evosax', 'distrax') "
            "if m in sys.modules))")
    from tests.ecosystem.runner import ROOT

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.strip() == "[]", (MODULES, out)


def _clip_probs(p):
    """numpyro's clamp_probs, as library code writes it."""
    finfo = jnp.finfo(p.dtype)
    return jnp.clip(p, finfo.tiny, 1.0 - finfo.eps)


def test_finfo_constants_named_and_replaced_by_float32_counterparts():
    args = (np.asarray([0.0, 0.5, 1.0], np.float32),)
    text = harness.x64_lowering(_clip_probs, args)
    assert sorted(harness.finfo_constants(text)) == ["1-eps", "tiny"]
    replaced = harness.replace_finfo_constants(text)
    assert harness.finfo_constants(replaced) == []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        narrowed = x64guard.narrow(replaced, mode="warn").text
    from tests.corpus.oracle import run_text
    got = run_text(narrowed, list(args))
    want = run_oracle(_clip_probs, list(args))
    assert bit_identical(got[0], want[0])
    # and without the replacement (the pass's own rule off too), narrowing is off by float32's
    # tiny and 1 - eps
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = run_text(x64guard.narrow(text, mode="warn", dtype_constants=False).text, list(args))
    assert not bit_identical(plain[0], want[0])


def test_a_constant_float32_holds_exactly_is_not_mistaken_for_a_finfo_value():
    assert harness._finfo_name(1.0) is None
    assert harness._finfo_name(0.5) is None
    assert harness._finfo_name(float(np.finfo(np.float64).eps)) == "eps"  # 2**-52: exact in float32, by value
    assert harness._finfo_name(-float(np.finfo(np.float64).tiny)) == "-tiny"
    assert harness._finfo_name(1.0 - float(np.finfo(np.float64).eps)) == "1-eps"


def test_compare_sees_dtypes_structure_bits_and_typed_keys():
    a = {"x": jnp.asarray([1.0, 2.0]), "k": jax.random.key(0)}
    assert harness.compare(a, {"x": jnp.asarray([1.0, 2.0]), "k": jax.random.key(0)}) == ""
    assert "dtype" in harness.compare(a, {"x": jnp.asarray([1, 2]), "k": jax.random.key(0)})
    assert "differ" in harness.compare(a, {"x": jnp.asarray([1.0, np.nextafter(2.0, 3.0, dtype=np.float32)]),
                                           "k": jax.random.key(0)})
    assert "differ" in harness.compare(a, {"x": jnp.asarray([1.0, 2.0]), "k": jax.random.key(1)})
    assert "key<rbg>" in harness.compare(a, {"x": jnp.asarray([1.0, 2.0]), "k": jax.random.key(0, impl="rbg")})
    assert "structure" in harness.compare(a, {"x": jnp.asarray([1.0, 2.0])})
    assert harness.compare(jnp.asarray(-0.0), jnp.asarray(0.0)) != ""  # bits, not values


@pytest.mark.parametrize("detail, cause", [
    ("NotImplementedError: serialization of host_callbacks is not yet implemented", "callback"),
    ("TypeError: Cannot interpret 'key<fry>' as a data type", "typed-key"),
    ("input widening: traces with x64 on ...: TypeError: scan body", "input-width"),
    ("RuntimeError: something else", "other"),
])
def test_crash_causes(detail, cause):
    record = harness.Record("p", "lib", "crash", False, detail=detail)
    assert harness.diagnose(record, None) == cause


def test_refusal_causes():
    assert harness.diagnose(harness.Record("p", "l", "refused", False, findings=["rng-bits@stablehlo.bitcast_convert"]),
                            None) == "rng-bits"
    assert harness.diagnose(harness.Record("p", "l", "refused", False, findings=["custom-call@x"]), None) == "other"
    seed = harness.Record("p", "l", "refused", False, findings=["constant-out-of-range@stablehlo.constant"],
                          detail="x.py:4:11: error: stablehlo.constant: 1 value(s) (4294967295) do not fit in i32")
    assert harness.diagnose(seed, None) == "rng-seed"
