"""The foreign corpus (tests/foreign/corpus.py): modules x64guard did not see made, one per
lax op x dtype (float64, int64, uint64, complex128, bool), as lowered by JAX, written as
stablehlo/testdata is, and exported with symbolic dimensions.

For every module: no foreign exception from `narrow` or `check`; a narrowed module verifies
and holds no 64-bit element type (in its values' types nor in the data attributes of its
constants and check ops); a refusal's every error kind is justified (justifications.py,
data); `check` agrees with `narrow` on what blocks narrowing. Narrowed modules
(all lowered modules, not only elementwise ones) run on the CPU and compute exactly what
JAX computes with x64 off.
"""

from __future__ import annotations

import os
import re
import warnings

import numpy as np
import pytest

import x64guard
from tests.conftest import wide_types
from tests import module_equality
from tests.corpus import lowering_probes
from tests.corpus.oracle import bit_identical, describe_mismatch, lower_x32, run_oracle, run_text, to32
from tests.foreign import corpus
from tests.foreign.justifications import justified
from tests.foreign.module_exceptions import MODULE_EXCEPTIONS
from x64guard.findings import errors

pytestmark = pytest.mark.slow

_WIDE_ATTRIBUTE = re.compile(r"\bvalue = dense(?:_resource)?<[^>]*> : tensor<[^>]*\b(?:[su]?i64|f64)\b")


@pytest.fixture(scope="session")
def foreign_corpus() -> dict[str, corpus.ForeignModule]:
    """Generated once per session (about 20 s for 460 modules)."""
    return {m.name: m for m in corpus.generate()}


@pytest.fixture(scope="session")
def narrowed(foreign_corpus) -> dict[str, object]:
    """name -> NarrowResult, or the exception narrowing raised."""
    out: dict[str, object] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, module in foreign_corpus.items():
            try:
                out[name] = x64guard.narrow(module.data, trusted=module.trusted)
            except Exception as exc:  # judged by the tests
                out[name] = exc
    return out


def _modules(foreign_corpus, op_name: str) -> list[corpus.ForeignModule]:
    modules = [m for m in foreign_corpus.values() if m.op.name == op_name]
    assert modules, op_name
    return modules


def examine(module: corpus.ForeignModule, outcome) -> list[str]:
    """What is wrong with narrowing `module` (nothing: an empty list)."""
    where = module.name
    problems = []
    try:
        report = x64guard.check(module.data, trusted=module.trusted)
    except ValueError as exc:
        return [f"{where}: check() could not read a module JAX wrote: {exc}"]
    except Exception as exc:  # noqa: BLE001 - a foreign exception is the failure looked for
        return [f"{where}: check() raised {type(exc).__name__}: {exc}"]
    blocking_in_check = sorted({f.kind for f in errors(report.findings)} - {"type-64bit"})
    if isinstance(outcome, x64guard.X64GuardError):
        if "does not verify" in str(outcome):
            return [f"{where}: narrowed module does not verify: {outcome}"]
        refused = errors(outcome.findings)
        for finding in refused:
            if justified(module, finding) is None:
                problems.append(f"{where}: refused with an unjustified {finding.kind} at {finding.op}: "
                                f"{finding.message[:200]}")
        if sorted({f.kind for f in refused}) != blocking_in_check:
            problems.append(f"{where}: narrow refused with {sorted({f.kind for f in refused})}, check reports "
                            f"{blocking_in_check}")
        return problems
    if isinstance(outcome, Exception):
        return [f"{where}: narrow raised {type(outcome).__name__}: {outcome}"]
    if blocking_in_check:
        problems.append(f"{where}: narrowed, but check reports blockers {blocking_in_check}")
    if not outcome.verified:
        problems.append(f"{where}: narrowed module not verified")
    wide = wide_types(outcome.module)
    if wide:
        problems.append(f"{where}: 64-bit types left: {wide[:3]}")
    data = [line.strip()[:160] for line in outcome.text.splitlines()
            if ("constant" in line or "check." in line) and _WIDE_ATTRIBUTE.search(line)]
    if data:
        problems.append(f"{where}: 64-bit data attributes left: {data[:2]}")
    return problems


@pytest.mark.parametrize("op_name", [op.name for op in corpus.OPS])
def test_foreign_modules_narrow_or_are_refused_for_a_justified_reason(foreign_corpus, narrowed, op_name):
    problems = []
    for module in _modules(foreign_corpus, op_name):
        problems.extend(examine(module, narrowed[module.name]))
    assert not problems, "\n".join(problems)


def test_the_corpus_covers_every_dtype_and_form(foreign_corpus, narrowed):
    kinds = {(m.dtype, m.form) for m in foreign_corpus.values()}
    for dtype in corpus.DTYPE_NAMES.values():
        assert {(dtype, form) for form in ("lowered", "testdata", "dynamic")} <= kinds, dtype
    full = os.environ.get("X64GUARD_FOREIGN_CORPUS", "").strip().lower() == "full"
    assert 300 <= len(foreign_corpus) <= (2000 if full else 600)  # a few hundred in make test
    assert any(isinstance(m.data, bytes) for m in foreign_corpus.values() if m.form == "lowered")
    refused = [n for n, r in narrowed.items() if isinstance(r, Exception)]
    assert len(refused) < len(foreign_corpus) // 20, refused  # nearly everything narrows
    dynamic = next(r for n, r in narrowed.items() if n.endswith(".dynamic") and not isinstance(r, Exception))
    assert "tensor<?x" in dynamic.text or "tensor<?xf32>" in dynamic.text


def test_testdata_check_values_are_narrowed_with_their_operand(foreign_corpus, narrowed):
    """`check.expect_almost_eq_const` / `check.expect_eq_const` hold the expected value as data
    of the checked operand's type: narrowed to the same 32-bit type, value for value."""
    module = foreign_corpus["exp.complex128.testdata"]
    text = narrowed[module.name].text
    (line,) = [line for line in text.splitlines() if '"check.expect_almost_eq_const"' in line]
    assert ": tensor<4xcomplex<f32>>}" in line and "(tensor<4xcomplex<f32>>) -> ()" in line


@pytest.mark.parametrize("op_name", [op.name for op in corpus.OPS])
def test_narrowed_lowered_modules_compute_what_x32_jax_computes(foreign_corpus, narrowed, op_name):
    """Bit for bit: the narrowed module on the CPU against the same op traced and run by JAX
    with x64 off, on the same 32-bit inputs. Elementwise ops, and the reductions, shape ops,
    indexing, control flow, FFT and LAPACK calls of the table too."""
    problems = []
    for module in _modules(foreign_corpus, op_name):
        result = narrowed[module.name]
        if module.form != "lowered" or isinstance(result, Exception):
            continue
        args32 = [to32(a) for a in module.args]
        got = run_text(result.text, args32)
        want = run_oracle(module.op.fn, args32)
        # Where the running JAX lowers the op by dtype (jax 0.12's float64 lgamma is
        # chlo.lgamma, its float32 one JAX's expansion: tests/corpus/lowering_probes.py), the
        # narrowed module is another program than x32's: correct to float32, as the corpus
        # checks it, not x32's bits.
        by_dtype = module.op.name in lowering_probes.PROBES and lowering_probes.PROBES[module.op.name]()
        for g, w in zip(got, want):
            if by_dtype and np.allclose(g, w, rtol=1e-5, atol=1e-6, equal_nan=True):
                continue
            if not bit_identical(g, w):
                problems.append(f"{module.name}: {describe_mismatch(g, w)}")
    assert not problems, "\n".join(problems)


def test_narrowed_lowered_modules_are_the_modules_x32_jax_lowers(foreign_corpus, narrowed):
    """Module equality first: every lowered module that narrows must be the module JAX lowers
    for the same op with x64 off, after normalising SSA names and locations only, or a
    difference named in tests/foreign/module_exceptions.py (per op; the finding that names
    it present). Lowering only, no compile."""
    problems, verdicts = [], []
    for module in foreign_corpus.values():
        result = narrowed[module.name]
        if module.form != "lowered" or isinstance(result, Exception):
            continue
        comparison = module_equality.compare(result.module,
                                             lower_x32(module.op.fn, [to32(a) for a in module.args], keep_unused=False))
        known = MODULE_EXCEPTIONS.get(module.name)
        verdicts.append("equal" if comparison.equal else "named" if known else "differs")
        if comparison.equal:
            if known is not None:
                problems.append(f"{module.name}: listed as a known difference ({known.why}) but now module-equal")
        elif known is None:
            problems.append(f"{module.name}: not x32 JAX's module:\n{comparison.describe(8)}")
        elif known.kind is not None and known.kind not in {str(f.kind) for f in result.findings}:
            problems.append(f"{module.name}: differs for the reason {known.kind!r} names, but no such finding")
    assert verdicts
    if problems:
        module_equality.fail_or_report("\n".join(problems), pytest.fail)


_NARROW_DTYPE = {np.dtype(np.float64): np.dtype(np.float32), np.dtype(np.int64): np.dtype(np.int32),
                 np.dtype(np.uint64): np.dtype(np.uint32), np.dtype(np.complex128): np.dtype(np.complex64)}


def test_narrowed_dynamic_shape_exports_run_as_x32_jax(foreign_corpus, narrowed):
    """The `jax.export` modules with a symbolic dimension, narrowed, put back into their
    Exported with 32-bit avals and called (shape refinement, shape assertions and all) on
    inputs of two sizes: what JAX computes with x64 off, bit for bit."""
    import dataclasses

    import jax

    from tests.corpus.oracle import x64

    problems, ran = [], 0
    for module in foreign_corpus.values():
        result = narrowed[module.name]
        if module.form != "dynamic" or isinstance(result, Exception):
            continue
        exported = module.exported
        avals = {name: tuple(a.update(dtype=_NARROW_DTYPE.get(a.dtype, a.dtype)) for a in getattr(exported, name))
                 for name in ("in_avals", "out_avals")}
        narrowed_export = dataclasses.replace(exported, mlir_module_serialized=result.portable_artifact(), **avals)
        for size in (4, 7):
            args32 = [to32(np.resize(a, (size,))) for a in module.args]
            with x64(False), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                got = [np.asarray(g) for g in jax.tree_util.tree_leaves(jax.jit(narrowed_export.call)(*args32))]
            want = run_oracle(module.op.fn, args32)
            ran += 1
            for g, w in zip(got, want):
                if not bit_identical(g, w):
                    problems.append(f"{module.name} (n={size}): {describe_mismatch(g, w)}")
    assert ran >= 100 and not problems, "\n".join(problems)


def test_x32_jax_modules_pass_check_target_x32_on_the_command_line(tmp_path):
    """JAX's own 32-bit programs of the same ops and dtypes: `x64guard check --target x32` on
    the directory passes (exit 0). A hook: the x32 profile's work adds its programs here."""
    from tests.cli.conftest import run_cli

    modules = corpus.generate_x32()
    for name, text in modules.items():
        (tmp_path / f"{name}.mlir").write_text(text)
    result = run_cli("check", "--target", "x32", "--format", "json", tmp_path, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    import json
    assert json.loads(result.stdout)["summary"]["modules"] == len(modules) >= 200
