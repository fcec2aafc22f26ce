"""Issue 23: neuronx-cc's documented rejections, predicted from the module. Every code's
documented trigger (tests/neuron/programs.py, as JAX or torch-xla programs) produces exactly
that code, and a twin the documentation calls fine produces no Neuron finding. The rules
come from the Neuron SDK 2.32 documentation; none was run against neuronx-cc."""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest

import x64guard
from x64guard.findings import Kind, Severity
from x64guard.passes.tables import NEURON_RULES
from tests.neuron.programs import CLEAN, TRIGGERS, lower

TARGETS = ("neuron-trn1", "neuron-trn2", "neuron-trn2-int64")
TORCH_XLA_PROGRAMS = {"NCC_EVRF062"}  # importing torch-xla: seconds


def codes(table) -> list:
    return [pytest.param(code, marks=[pytest.mark.slow, pytest.mark.torch]) if code in TORCH_XLA_PROGRAMS else code
            for code in sorted(table)]


def neuron(findings) -> list:
    return [f for f in findings if f.kind.value.startswith(("NCC_", "neuron-"))]


@functools.cache
def trigger(code: str) -> str:
    return TRIGGERS[code]()


@functools.cache
def clean(code: str) -> str:
    return CLEAN[code]()


def test_every_rule_has_a_kind_a_trigger_and_a_clean_twin():
    assert {row.kind for row in NEURON_RULES} == set(TRIGGERS) == set(CLEAN)
    for row in NEURON_RULES:
        assert Kind(row.kind) and row.fix and row.doc.endswith(".rst")


@pytest.mark.parametrize("code", codes(TRIGGERS))
def test_the_documented_trigger_produces_exactly_its_code(code):
    for target in TARGETS:
        if code == "NCC_EVRF062" and target != "neuron-trn2-int64":
            continue  # (also an EVRF062 there; checked below with the narrowing)
        found = neuron(x64guard.check(trigger(code), target=target).findings)
        assert {f.kind for f in found} == {code}, (target, [str(f) for f in found])
        assert all(f.message and "fix: " in f.message for f in found)


@pytest.mark.parametrize("code", codes(CLEAN))
def test_the_documented_clean_twin_produces_no_neuron_finding(code):
    for target in TARGETS:
        assert neuron(x64guard.check(clean(code), target=target).findings) == [], target


def test_findings_are_at_the_source_line_with_the_documented_fix():
    (finding,) = neuron(x64guard.check(trigger("neuron-cond"), target="neuron-trn2").findings)
    assert finding.location.has_file and finding.location.file.endswith("tests/neuron/programs.py")
    assert "jnp.where" in finding.message and "jax-neuronx-known-issues.rst" in finding.message


def _dot_severity(target, **kwargs):
    (finding,) = neuron(x64guard.check(trigger("NCC_EVRF035"), target=target, **kwargs).findings)
    return finding.severity


def test_compiler_flags_change_the_verdict(monkeypatch):
    monkeypatch.delenv("NEURON_CC_FLAGS", raising=False)
    assert _dot_severity("neuron-trn1") is Severity.WARNING      # trn1 only warns for int32
    assert _dot_severity("neuron-trn2") is Severity.WARNING      # 2.32 default: downcast with a warning
    assert _dot_severity("neuron-trn2-int64") is Severity.ERROR  # the announced next default
    assert _dot_severity("neuron-trn2", neuron_cc_flags="--implicit-integer-downcast=none") is Severity.ERROR
    assert _dot_severity("neuron-trn2-int64", neuron_cc_flags="--implicit-integer-downcast dot") is Severity.WARNING
    monkeypatch.setenv("NEURON_CC_FLAGS", "--implicit-integer-downcast=scatter,pow")
    assert _dot_severity("neuron-trn2") is Severity.ERROR
    with pytest.raises(ValueError, match="implicit-integer-downcast"):
        x64guard.check(trigger("NCC_EVRF035"), target="neuron-trn2", neuron_cc_flags="--implicit-integer-downcast=x")


def test_int64_reaches_trn1_as_an_error_and_trn2_int64_natively():
    text = lower(lambda x: x * 3, np.arange(4, dtype=np.int64), wide=True)
    trn1 = x64guard.check(text, target="neuron-trn1")
    assert not trn1.ok and "without a range check" in str(trn1)
    native = x64guard.check(text, target="neuron-trn2-int64")
    assert native.ok and {f.severity for f in native.findings} == {Severity.INFO}
    f64 = x64guard.check(lower(lambda x: x * 3, np.ones(4), wide=True), target="neuron-trn2-int64")
    assert not f64.ok  # no float64 on any Neuron chip
    assert x64guard.check(text, target="neuron").target == "neuron-trn2"  # the alias


@pytest.mark.slow
@pytest.mark.torch
def test_narrow_rewrites_torch_xla_int64_pow_exactly():
    # torch-xla's int64 pow: narrowed to an int32 power, EVRF062 gone.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        powered = x64guard.narrow(trigger("NCC_EVRF062"), target="neuron-trn2-int64")
    assert neuron(powered.findings) == [] and "stablehlo.power" in powered.text and "i64" not in powered.text


@pytest.mark.slow
def test_narrow_rewrites_exactly_and_reports_what_remains():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # a ui64 constant that fits 32 bits: ui32, nothing left.
        small = x64guard.narrow(clean("NCC_ESFH002"), target="neuron-trn2-int64")
        # an int64 dot stays an integer dot (int32), reported, never a float dot.
        dot = x64guard.narrow(lower(lambda a, b: a @ b, np.ones((2, 2), np.int64), np.ones((2, 2), np.int64),
                                    wide=True), target="neuron-trn2-int64")
    assert neuron(small.findings) == [] and "ui64" not in small.text
    assert [f.kind for f in neuron(dot.findings)] == ["NCC_EVRF035"]
    assert "xi32>" in dot.text and "dot_general" in dot.text and "f32" not in dot.text
    assert any("NCC_EVRF035" in str(w.message) for w in caught)
    with pytest.raises(x64guard.X64GuardError, match="constant"):
        x64guard.narrow(trigger("NCC_ESFH002"), target="neuron-trn2")  # beyond 32 bits: refused, range-checked
    with pytest.raises(x64guard.X64GuardError, match="NCC_EVRF035"):
        x64guard.narrow(trigger("NCC_EVRF035"), target="neuron-trn2-int64", mode="error")


def test_jit_refuses_or_warns_before_compiling():
    import jax.numpy as jnp
    from jax import lax

    def step(p, x):
        return lax.cond(p, jnp.sin, jnp.cos, x)

    x = np.float32(0)
    with pytest.raises(x64guard.X64GuardError, match="neuron-cond"):
        x64guard.jit(step, mode="error", target="neuron-trn2-int64")(True, x)
    with pytest.warns(x64guard.X64GuardWarning, match="NCC_EVRF035"):
        out = x64guard.jit(lambda a, b: jnp.dot(a, b), target="neuron-trn2-int64")(np.ones((2, 2), np.int32),
                                                                                  np.ones((2, 2), np.int32))
    assert int(out.sum()) == 8  # warned, then compiled and run (on the CPU here)


@pytest.mark.slow
@pytest.mark.torch
def test_torch_xla_backend_takes_the_target():
    import torch

    import x64guard.torch_xla as xt

    a = torch.arange(4, dtype=torch.int64).reshape(2, 2)
    model = xt.compile(lambda x, y: x @ y, target="neuron-trn2-int64")
    with pytest.warns(x64guard.X64GuardWarning, match="NCC_EVRF035"):
        out = model(xt.to_device(a), xt.to_device(a))
    assert out.cpu().tolist() == (a @ a).tolist()


@pytest.mark.slow
@pytest.mark.torch
def test_narrow_exported_takes_the_target():
    import torch

    import x64guard.torch_xla as xt

    class Pow(torch.nn.Module):
        def forward(self, x, y):
            return torch.pow(x, y), x @ y

    a = torch.arange(1, 5, dtype=torch.int64).reshape(2, 2)
    with pytest.warns(x64guard.X64GuardWarning, match="NCC_EVRF035"):
        program = xt.narrow_exported(torch.export.export(Pow(), (a, a)), target="neuron-trn2-int64")
    assert [f.kind for f in neuron(program.findings)] == ["NCC_EVRF035"]  # the int64 pow narrowed: no EVRF062
    powered, product = program(a, a)
    assert powered.cpu().tolist() == torch.pow(a, a).tolist() and product.cpu().tolist() == (a @ a).tolist()
