"""The library API: inputs, modes, warnings, errors, check, and never mutating the input."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import x64guard
from tests.conftest import narrow_quietly, wide_types
from tests.corpus.oracle import x64
from tests.runner import lower_x64
from tests.support.child import run_code

F64 = """
func.func @main(%x: tensor<3xf64>, %n: tensor<i64>) -> tensor<3xf64> {
  %0 = stablehlo.convert %n : (tensor<i64>) -> tensor<3xf64>
  %1 = stablehlo.add %x, %0 : tensor<3xf64>
  return %1 : tensor<3xf64>
}""".replace("(tensor<i64>) -> tensor<3xf64>", "(tensor<i64>) -> tensor<f64>").replace(
    "%1 = stablehlo.add %x, %0 : tensor<3xf64>",
    "%b = stablehlo.broadcast_in_dim %0, dims = [] : (tensor<f64>) -> tensor<3xf64>\n"
    "  %1 = stablehlo.add %x, %b : tensor<3xf64>")
CLEAN = """
func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  return %x : tensor<3xf32>
}"""


def user_function(x, n):
    return jnp.sin(x) * n


ARGS = (np.linspace(0, 1, 5), np.int64(3))


# --- result ---------------------------------------------------------------------

def test_result_fields():
    result = narrow_quietly(F64)
    assert wide_types(result.module) == []
    assert "tensor<3xf32>" in result.text
    assert result.changes == {"f64->f32": 5, "i64->i32": 1}  # x, the signature, 3 results; n
    assert {f.kind for f in result.findings} == {"type-narrowed"}
    finding = result.findings[0]
    assert {"kind", "severity", "op", "location", "message"} <= set(vars(finding))
    assert result.summary().startswith("x64guard: narrowed 6 types")


def test_jax_locations_point_at_the_users_line():
    result = narrow_quietly(lower_x64(user_function, *ARGS))
    sin = next(f for f in result.findings if f.op == "stablehlo.sine")
    line = user_function.__code__.co_firstlineno + 1
    assert (sin.location.file, sin.location.line) == (__file__, line)


# --- modes ----------------------------------------------------------------------

def test_warn_mode_warns_once_per_module():
    with pytest.warns(x64guard.X64GuardWarning) as record:
        x64guard.narrow(lower_x64(user_function, *ARGS), mode="warn")
    assert len(record) == 1
    assert "narrowed" in str(record[0].message)


def test_warn_mode_adds_one_warning_per_lossy_finding_never_per_element():
    text = f"""
func.func @main() -> tensor<1000xf64> {{
  %0 = stablehlo.constant dense<[{", ".join(f"{i + 1}.0e-300" for i in range(1000))}]> : tensor<1000xf64>
  return %0 : tensor<1000xf64>
}}"""
    with pytest.warns(x64guard.X64GuardWarning) as record:
        x64guard.narrow(text)
    assert len(record) == 2  # the summary and the one lossy finding, not 1000 lines
    assert "1000 nonzero" in str(record[1].message)


def test_allow_mode_keeps_64bit_and_reports():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = x64guard.narrow(F64, mode="allow")
    assert "tensor<3xf64>" in result.text
    assert result.changes == {"f64->f32": 5, "i64->i32": 1}  # what would change
    assert result.summary().startswith("x64guard: would narrow")


def test_error_mode_lists_every_64bit_use_with_location():
    with pytest.raises(x64guard.X64GuardError) as info:
        x64guard.narrow(lower_x64(user_function, *ARGS), mode="error")
    error = info.value
    assert isinstance(error, ValueError)
    assert {f.op for f in error.findings} >= {"stablehlo.sine", "stablehlo.multiply", "func.func"}
    assert all(str(f.location) for f in error.findings)
    assert __file__ in str(error)


def test_error_mode_accepts_a_clean_module():
    assert x64guard.narrow(CLEAN, mode="error").changes == {}


def test_mode_names_and_context():
    assert x64guard.Mode("warn") is x64guard.Mode.WARN
    with x64guard.mode("allow"):
        assert "f64" in x64guard.narrow(F64).text
    with x64guard.mode("error"), pytest.raises(x64guard.X64GuardError):
        x64guard.narrow(F64)
    assert x64guard.current_mode() is x64guard.Mode.WARN  # restored
    with pytest.raises(ValueError, match="unknown mode"):
        x64guard.narrow(F64, mode="sometimes")
    with pytest.raises(ValueError, match="overflow"):
        x64guard.narrow(F64, overflow="clip")


@pytest.mark.parametrize("env, expected", [("allow", "allow"), ("ERROR", "error"), ("", "warn")])
def test_mode_from_environment(env, expected):
    code = "import x64guard; print(x64guard.current_mode())"
    proc = run_code(code, env={"X64GUARD_MODE": env})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == expected


def test_bad_mode_in_environment_is_a_clear_error():
    proc = run_code("import x64guard", env={"X64GUARD_MODE": "bogus"})
    assert proc.returncode != 0
    assert "x64guard: unknown mode in $X64GUARD_MODE 'bogus'" in proc.stderr


# --- inputs, and never mutating them ---------------------------------------------

def test_input_formats_text_bytes_bytecode_portable_artifact():
    base = narrow_quietly(F64)
    from x64guard.io import modules
    module, _ = modules.load(F64)
    bytecode = modules.to_bytecode(module)
    artifact = modules.to_portable_artifact(module)
    for given, fmt in [(F64.encode(), "text"), (bytecode, "bytecode"), (artifact, "portable-artifact")]:
        result = narrow_quietly(given)
        assert result.source_format == fmt
        assert result.changes == base.changes
        assert wide_types(result.module) == []
    assert narrow_quietly(artifact).portable_artifact()[:4] == b"ML\xefR"


def test_files_are_read_by_path(tmp_path):
    """A pathlib.Path is a file (a str is MLIR text): bytecode is read by MLIR itself, so
    a large constant is never copied into Python; text files are read as text."""
    from pathlib import Path

    from x64guard.io import modules
    base = narrow_quietly(F64)
    module, _ = modules.load(F64)
    files = {"text": F64.encode(), "bytecode": modules.to_bytecode(module),
             "portable-artifact": modules.to_portable_artifact(module)}
    for fmt, blob in files.items():
        path = tmp_path / f"module-{fmt}"
        path.write_bytes(blob)
        result = narrow_quietly(path)
        assert (result.source_format, result.changes) == (fmt, base.changes)
        assert x64guard.check(path).findings
    with pytest.raises(ValueError, match="^x64guard: cannot read .*missing.mlirbc"):
        x64guard.narrow(tmp_path / "missing.mlirbc")
    (tmp_path / "empty.mlir").write_bytes(b"")
    with pytest.raises(ValueError, match="^x64guard: the input is empty"):
        x64guard.narrow(Path(tmp_path / "empty.mlir"))


def test_a_file_that_changes_while_it_is_vetted_is_refused(tmp_path, monkeypatch):
    """What the reader process vetted must be what this process parses."""
    from x64guard.io import isolated_reader, modules
    path = tmp_path / "module.mlirbc"
    path.write_bytes(modules.to_bytecode(modules.load(F64)[0]))
    vet_file = isolated_reader.vet_file

    def vet_then_change(p):
        verdict = vet_file(p)
        path.write_bytes(path.read_bytes() + b"\0")
        return verdict

    monkeypatch.setattr(isolated_reader, "vet_file", vet_then_change)
    with pytest.raises(ValueError, match="changed while x64guard was reading it"):
        x64guard.narrow(path)


def test_trusted_bytecode_skips_the_reader_process(monkeypatch):
    from x64guard.io import isolated_reader, modules
    bytecode = modules.to_bytecode(modules.load(F64)[0])

    def refuse(data):
        raise AssertionError("the reader process was asked")

    monkeypatch.setattr(isolated_reader, "vet_bytes", refuse)
    assert narrow_quietly(bytecode, trusted=True).changes
    assert x64guard.check(bytecode, trusted=True).findings
    with pytest.raises(AssertionError, match="reader process was asked"):
        x64guard.check(bytecode)


def test_ir_module_input_is_never_mutated():
    from x64guard.io import modules
    module, _ = modules.load(F64)
    before = module.operation.get_asm(enable_debug_info=True)
    result = narrow_quietly(module)
    assert module.operation.get_asm(enable_debug_info=True) == before
    assert result.module is not module and "f32" in result.text


def test_jax_compiler_ir_is_never_mutated_and_jit_still_runs():
    with x64(True):
        jitted = jax.jit(user_function)
        lowered = jitted.lower(*ARGS)
        module = lowered.compiler_ir("stablehlo")
        before = str(module)
        narrow_quietly(module)
        assert str(module) == before
        assert lowered.compiler_ir("stablehlo") is module  # JAX's cached object, untouched
        out = jitted(*ARGS)
        assert out.dtype == jnp.float64
        np.testing.assert_allclose(np.asarray(out), np.sin(ARGS[0]) * 3)


def test_type_errors_for_other_inputs():
    with pytest.raises(TypeError, match="cannot read a module"):
        x64guard.narrow(42)


# --- check ----------------------------------------------------------------------

def test_check_reports_without_rewriting():
    report = x64guard.check(F64)
    assert not report.ok
    assert {f.kind for f in report.findings} == {"type-64bit"}
    assert all(f.severity == "error" for f in report.findings)
    assert x64guard.check(CLEAN).ok
    assert x64guard.check(F64, target="x64").ok


def test_check_reports_blockers():
    report = x64guard.check("""
func.func @main(%x: tensor<i64>) -> tensor<i64> {
  %c = stablehlo.constant dense<1099511627776> : tensor<i64>
  %0 = stablehlo.add %x, %c : tensor<i64>
  return %0 : tensor<i64>
}""")
    assert "constant-out-of-range" in {f.kind for f in report.findings}


def test_neuron_target_refuses_complex_and_unknown_custom_calls():
    report = x64guard.check("""
func.func @main(%x: tensor<3xcomplex<f32>>) -> tensor<3xcomplex<f32>> {
  %0 = stablehlo.custom_call @my_kernel(%x) : (tensor<3xcomplex<f32>>) -> tensor<3xcomplex<f32>>
  return %0 : tensor<3xcomplex<f32>>
}""", target="neuron")
    assert {"NCC_EVRF004", "NCC_EHCA005"} <= {f.kind for f in report.findings}  # neuronx-cc's codes (issue 23)
    assert not report.ok
    assert x64guard.check(CLEAN, target="neuron").ok
    with pytest.raises(ValueError, match="known targets"):
        x64guard.check(CLEAN, target="tpu9")


# --- versions -------------------------------------------------------------------

def test_untested_jax_version_gives_a_clear_error():
    code = ("import jax, jaxlib; jax.__version__ = '0.13.0'; "
            "import x64guard")
    proc = run_code(code, unset=("X64GUARD_ALLOW_UNTESTED_JAX",))
    assert proc.returncode != 0
    assert "x64guard is tested with jax >= 0.10.0 and < 0.13.0, but jax 0.13.0 is installed" in proc.stderr


@pytest.mark.torch
@pytest.mark.slow  # imports torch-xla in a child process: 6.5 s of CPU
def test_untested_torch_xla_version_gives_a_clear_error():
    code = ("import torch_xla; torch_xla.__version__ = '2.10.0'; "
            "import x64guard.torch_xla")
    proc = run_code(code, unset=("X64GUARD_ALLOW_UNTESTED_TORCH_XLA",), env={"PJRT_DEVICE": "CPU"})
    assert proc.returncode != 0
    assert ("x64guard.torch_xla is tested with torch-xla >= 2.9.0 and < 2.10.0, but torch-xla 2.10.0 is "
            "installed") in proc.stderr
