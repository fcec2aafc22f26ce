"""Target profiles know JAX's own x32 programs: `check --target x32` accepts every jax.random
sampler lowered with x64 off (threefry partitionable on and off, raw, typed, rbg and
unsafe_rbg keys, under jit, vmap, grad and scan), whose only 64-bit values are
iota_2x32_shape's uint64 counters (exact in 32 bits) and the RngBitGenerator state (kept):
both are info. `x32-strict` reports every 64-bit element type. (That every x64 program of the
corpus still fails `check --target x32` is asserted by tests/corpus/test_corpus.py.)"""

from __future__ import annotations

import warnings

import jax
import pytest

import x64guard
from tests.cli.conftest import run_cli
from tests.corpus.oracle import _forget_traces, has_64bit_type, x64
from tests.corpus.random_programs import x32_programs
from tests.sample import named_params

PROGRAMS = x32_programs()


def lower_x32(fn, args) -> str:
    _forget_traces()
    with x64(False), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return jax.jit(fn).lower(*args).as_text()


@pytest.mark.parametrize("name, fn, args", named_params(PROGRAMS))
def test_check_x32_accepts_jax_x32_programs(name, fn, args):
    text = lower_x32(fn, args)
    report = x64guard.check(text, target="x32")
    assert report.ok, str(report)
    assert all(f.severity is x64guard.Severity.INFO for f in report.findings), str(report)
    strict = x64guard.check(text, target="x32-strict")
    assert strict.ok is not has_64bit_type(text), str(strict)


def test_the_program_list_covers_every_sampler_key_and_transformation():
    names = [p[0] for p in PROGRAMS]
    for sampler in ("bits", "uniform", "normal", "bernoulli", "randint", "categorical", "gumbel", "gamma", "beta",
                    "dirichlet", "truncated_normal", "exponential", "choice", "permutation", "poisson", "t",
                    "laplace", "multivariate_normal"):
        for key in ("raw", "typed", "rbg", "unsafe_rbg"):
            if (sampler, key) in (("poisson", "rbg"), ("poisson", "unsafe_rbg")):
                continue  # JAX implements poisson for threefry keys only
            assert f"{sampler}_{key}" in names and f"{sampler}_{key}_not_partitionable" in names
    assert any(n.endswith("_vmap") for n in names) and any(n.endswith("_scan") for n in names)
    assert any(n.startswith("grad_") for n in names)


@pytest.mark.slow  # two command-line processes (about 5 s of CPU); check's verdicts are tested in process above
def test_check_command_line_accepts_an_x32_rbg_program_and_strict_refuses_it(tmp_path):
    fn = dict((p[0], p) for p in PROGRAMS)["randint_rbg_vmap"][1:]
    path = tmp_path / "randint_rbg.mlir"
    path.write_text(lower_x32(*fn))
    ok = run_cli("check", "--target", "x32", path)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "rng-state" in ok.stdout and "rng-counters" in ok.stdout
    strict = run_cli("check", "--target", "x32-strict", path)
    assert strict.returncode == 1 and "rng-state" in strict.stdout and "x32-strict" in strict.stdout
