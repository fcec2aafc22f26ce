"""`x64guard narrow IN -o OUT`: the input's format out, the summary on stderr."""

import re

import pytest

import x64guard
from tests.cli.conftest import run_cli
from x64guard import mlir

WIDE = re.compile(r"\b(?:[su]?i64|f64)\b")


@pytest.mark.parametrize("name, check_output", [
    ("f64.mlir", lambda data: data.decode().lstrip().startswith(("#loc", "module"))),
    ("f64.mlirbc", lambda data: data.startswith(mlir.BYTECODE_MAGIC) and b"StableHLO_v" not in data[:32]),
    ("f64.portable.bc", lambda data: data.startswith(mlir.BYTECODE_MAGIC + b"\rStableHLO_v")),
    ("f64.hlo.txt", lambda data: data.decode().startswith("HloModule jit_f64_model")),
    ("f64.compiled.hlo.txt", lambda data: data.decode().startswith("HloModule jit_f64_model")),
])
def test_narrow_writes_the_inputs_format(artifacts, tmp_path, name, check_output):
    out = tmp_path / f"narrowed-{name}"
    result = run_cli("narrow", artifacts[name], "-o", out)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert re.match(r"x64guard: narrowed \d+ types \(f64->f32 x\d+[^)]*\) at \d+ places; wrote ", result.stderr)
    data = out.read_bytes()
    assert check_output(data)
    if name.endswith(".hlo.txt"):
        assert "f64[" not in data.decode() and "f32[4]" in data.decode()
    else:
        module, _ = mlir.load(data)
        assert not WIDE.search(mlir.to_text(module).split("#loc")[0])
        assert x64guard.check(data, target="x32").ok


def test_portable_artifact_keeps_its_stablehlo_version(artifacts, tmp_path):
    # jax.export writes an older (compatibility) version than the current one.
    from jax import export
    exported = export.deserialize(bytearray(artifacts["f64.exported"].read_bytes()))
    source = tmp_path / "old.bc"
    source.write_bytes(exported.mlir_module_serialized)
    version = re.match(rb"ML\xefR\rStableHLO_v([\d.]+)\x00", source.read_bytes()).group(1)
    out = tmp_path / "old-narrowed.bc"
    assert run_cli("narrow", source, "-o", out).returncode == 0
    assert out.read_bytes().startswith(b"ML\xefR\rStableHLO_v" + version + b"\x00")


def test_mode_error_refuses_and_writes_nothing(artifacts, tmp_path):
    out = tmp_path / "never.mlir"
    result = run_cli("narrow", "--mode", "error", artifacts["f64.mlir"], "-o", out)
    assert result.returncode == 1
    assert "x64guard: refused:" in result.stderr and "stablehlo.cosine" in result.stderr
    assert not out.exists()


def test_mode_allow_keeps_the_module_and_says_what_would_change(artifacts, tmp_path):
    out = tmp_path / "same.mlir"
    result = run_cli("narrow", "--mode", "allow", artifacts["f64.mlir"], "-o", out)
    assert result.returncode == 0
    assert result.stderr.startswith("x64guard: would narrow ")
    assert "tensor<4xf64>" in out.read_text()


def test_overflow_is_refused_unless_chosen(artifacts, tmp_path):
    out = tmp_path / "big.mlir"
    refused = run_cli("narrow", artifacts["big_constant.mlir"], "-o", out)
    assert refused.returncode == 1 and "constant-out-of-range" in refused.stderr and not out.exists()
    saturated = run_cli("narrow", "--overflow", "saturate", artifacts["big_constant.mlir"], "-o", out)
    assert saturated.returncode == 0
    assert "warning: stablehlo.constant" in saturated.stderr and "saturated" in saturated.stderr
    assert "2147483647" in out.read_text()


def test_stdin_to_stdout(artifacts):
    result = run_cli("narrow", "-", "-o", "-", input=artifacts["f64.mlir"].read_text())
    assert result.returncode == 0
    assert "tensor<4xf32>" in result.stdout and "f64" not in result.stdout.split("#loc")[0]


@pytest.mark.parametrize("name, reason", [
    ("f64.exported", "a jax.export artifact cannot be written back"),
    ("truncated.mlirbc", "unreadable MLIR bytecode"),
    ("empty.mlir", "the file is empty"),
])
def test_narrow_bad_or_unwritable_input_exits_2(artifacts, tmp_path, name, reason):
    result = run_cli("narrow", artifacts[name], "-o", tmp_path / "out")
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("x64guard: error: ") and reason in line
    assert not (tmp_path / "out").exists()
