"""`x64guard narrow IN -o OUT`: the input's format out, the summary on stderr."""

import os
import re
import stat

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import x64guard
from tests.cli.conftest import run_cli
from tests.sample import SAMPLED_OUT
from x64guard.io import modules

WIDE = re.compile(r"\b(?:[su]?i64|f64)\b")


@pytest.mark.parametrize("name, check_output", [
    ("f64.mlir", lambda data: data.decode().lstrip().startswith(("#loc", "module"))),
    ("f64.mlirbc", lambda data: data.startswith(modules.BYTECODE_MAGIC) and b"StableHLO_v" not in data[:32]),
    pytest.param("f64.portable.bc", lambda data: data.startswith(modules.BYTECODE_MAGIC + b"\rStableHLO_v"),
                 marks=SAMPLED_OUT),
    pytest.param("f64.hlo.txt", lambda data: data.decode().startswith("HloModule jit_f64_model"), marks=SAMPLED_OUT),
    pytest.param("f64.compiled.hlo.txt", lambda data: data.decode().startswith("HloModule jit_f64_model"),
                 marks=SAMPLED_OUT),
])
def test_narrow_writes_the_inputs_format(artifacts, tmp_path, name, check_output):
    out = tmp_path / f"narrowed-{name}"
    result = run_cli("narrow", artifacts[name], "-o", out)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert re.match(r"x64guard: narrowed \d+ types \(f64->f32 x\d+[^)]*\) at \d+ places?; wrote ", result.stderr)
    data = out.read_bytes()
    assert check_output(data)
    if name.endswith(".hlo.txt"):
        assert "f64[" not in data.decode() and "f32[4]" in data.decode()
    else:
        module, _ = modules.load(data)
        assert not WIDE.search(modules.to_text(module).split("#loc")[0])
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
    ("truncated.mlirbc", "unreadable MLIR bytecode"),
    ("empty.mlir", "the file is empty"),
])
def test_narrow_bad_or_unwritable_input_exits_2(artifacts, tmp_path, name, reason):
    result = run_cli("narrow", artifacts[name], "-o", tmp_path / "out")
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("x64guard: error: ") and reason in line
    assert not (tmp_path / "out").exists()


# --- jax.export artifacts: narrowed, written back, run by JAX with x64 off ---------------

def _export(fn, *args, vjp_order=0, **kwargs) -> bytes:
    from jax import export
    jax.config.update("jax_enable_x64", True)
    try:
        return bytes(export.export(jax.jit(fn), **kwargs)(*args).serialize(vjp_order=vjp_order))
    finally:
        jax.config.update("jax_enable_x64", False)


def _bits(tree) -> list[tuple[str, bytes]]:
    return [(str(np.asarray(leaf).dtype), np.asarray(leaf).tobytes()) for leaf in jax.tree_util.tree_leaves(tree)]


def _narrow_export(tmp_path, data: bytes, *options):
    source, out = tmp_path / "model.jaxexport", tmp_path / "model-narrowed.jaxexport"
    source.write_bytes(data)
    result = run_cli("narrow", *options, source, "-o", out)
    return result, out


def _model(x, unused, n, ids):
    """float64 and int64 data, an argument the export drops, several results."""
    h = jnp.tanh(x @ x.T) * n
    return h.sum(axis=1), jnp.argmax(h, axis=1), ids * 3 + n


def test_narrowed_jax_export_deserializes_and_runs_as_x32_jax(tmp_path):
    from jax import export
    x = np.linspace(-1.0, 1.0, 12).reshape(3, 4)
    args64 = (x, np.ones(2), np.int64(5), np.arange(3, dtype=np.int64))
    result, out = _narrow_export(tmp_path, _export(_model, *args64))
    assert result.returncode == 0, result.stderr
    assert re.match(r"x64guard: narrowed \d+ types \(f64->f32 x\d+, i64->i32 x\d+\) at \d+ places; "
                    r"wrote jax.export artifact to ", result.stderr)
    narrowed = export.deserialize(bytearray(out.read_bytes()))
    assert [str(a.dtype) for a in narrowed.in_avals] == ["float32", "float32", "int32", "int32"]
    assert [str(a.dtype) for a in narrowed.out_avals] == ["float32", "int32", "int32"]
    assert not WIDE.search(narrowed.mlir_module().split("#loc")[0])
    args32 = (x.astype(np.float32), np.ones(2, np.float32), np.int32(5), np.arange(3, dtype=np.int32))
    assert not jax.config.jax_enable_x64
    assert _bits(jax.jit(narrowed.call)(*args32)) == _bits(jax.jit(_model)(*args32))
    assert _bits(narrowed.call(*args32)) == _bits(jax.jit(_model)(*args32))


@SAMPLED_OUT
def test_narrowed_jax_export_keeps_its_vjps_narrowed(tmp_path):
    from jax import export

    def loss(w, x):
        return jnp.sum(jnp.sin(x @ w) ** 2)

    w, x = np.linspace(0.0, 1.0, 6).reshape(3, 2), np.linspace(-2.0, 2.0, 12).reshape(4, 3)
    result, out = _narrow_export(tmp_path, _export(loss, w, x, vjp_order=2))
    assert result.returncode == 0, result.stderr
    assert "with its 2 VJP module(s)" in result.stderr
    narrowed = export.deserialize(bytearray(out.read_bytes()))
    assert narrowed.has_vjp() and narrowed.vjp().has_vjp() and not narrowed.vjp().vjp().has_vjp()
    assert {str(a.dtype) for a in narrowed.vjp().in_avals + narrowed.vjp().out_avals} == {"float32"}
    w32, x32 = w.astype(np.float32), x.astype(np.float32)
    assert _bits(jax.grad(narrowed.call)(w32, x32)) == _bits(jax.grad(loss)(w32, x32))
    hessian_row = lambda f: jax.grad(lambda w: jax.grad(f)(w, x32)[0, 0])(w32)  # noqa: E731
    assert _bits(hessian_row(narrowed.call)) == _bits(hessian_row(loss))


@SAMPLED_OUT
def test_narrowed_jax_export_for_several_platforms_and_symbolic_shapes(tmp_path):
    from jax import export

    def scaled(x):
        return jnp.cumsum(x) * x.shape[0] + 0.5

    shape = export.symbolic_shape("n")
    data = _export(scaled, jax.ShapeDtypeStruct(shape, jnp.float64), platforms=("cpu", "cuda"))
    result, out = _narrow_export(tmp_path, data)
    assert result.returncode == 0, result.stderr
    narrowed = export.deserialize(bytearray(out.read_bytes()))
    assert narrowed.platforms == ("cpu", "cuda") and str(narrowed.in_avals[0].shape) == "(n,)"
    for n in (1, 5):
        x = np.linspace(0.0, 1.0, n, dtype=np.float32)
        assert _bits(narrowed.call(x)) == _bits(jax.jit(scaled)(x))


@SAMPLED_OUT
def test_jax_export_refusal_and_allow(tmp_path):
    from jax import export

    def big(i):
        return i + jnp.int64(2**40)

    data = _export(big, np.arange(3, dtype=np.int64))
    result, out = _narrow_export(tmp_path, data)
    assert result.returncode == 1 and "constant-out-of-range" in result.stderr and not out.exists()
    result, out = _narrow_export(tmp_path, data, "--mode", "allow")
    assert result.returncode == 0 and result.stderr.startswith("x64guard: would narrow ")
    kept = export.deserialize(bytearray(out.read_bytes()))
    assert [str(a.dtype) for a in kept.in_avals] == ["int64"]


def test_bytecode_files_are_read_by_path(artifacts, tmp_path, monkeypatch):
    """The command line hands bytecode files to MLIR by path (vetted first by the reader
    process), never as Python bytes."""
    from pathlib import Path

    from x64guard.cli.inputs import read_units
    for name in ("f64.mlirbc", "f64.portable.bc"):
        (unit,) = read_units(str(artifacts[name]))
        assert isinstance(unit.data, Path)
    (text_unit,) = read_units(str(artifacts["f64.mlir"]))
    assert isinstance(text_unit.data, str)


# ---- issue 21: honest reports ------------------------------------------------------------

_COUNTERS_ONLY = """
func.func @main() -> (tensor<2x3xui32>, tensor<2x3xui32>) {
  %rows = stablehlo.iota dim = 0 : tensor<2x3xui64>
  %cols = stablehlo.iota dim = 1 : tensor<2x3xui64>
  %three = stablehlo.constant dense<3> : tensor<2x3xui64>
  %scaled = stablehlo.multiply %three, %rows : tensor<2x3xui64>
  %counter = stablehlo.add %scaled, %cols : tensor<2x3xui64>
  %c32 = stablehlo.constant dense<32> : tensor<2x3xui64>
  %high = stablehlo.shift_right_logical %counter, %c32 : tensor<2x3xui64>
  %hi = stablehlo.convert %high : (tensor<2x3xui64>) -> tensor<2x3xui32>
  %lo = stablehlo.convert %counter : (tensor<2x3xui64>) -> tensor<2x3xui32>
  return %hi, %lo : tensor<2x3xui32>, tensor<2x3xui32>
}
"""


def test_narrow_counts_the_ui64_values_an_idiom_rule_rewrote(tmp_path):
    # Every ui64 value here is an iota_2x32_shape counter the counter rule rewrites to
    # ui32: the module changed, and the summary must say so (it said "no 64-bit types").
    source, out = tmp_path / "counters.mlir", tmp_path / "out.mlir"
    source.write_text(_COUNTERS_ONLY)
    result = run_cli("narrow", source, "-o", out)
    assert result.returncode == 0, result.stderr
    assert "no 64-bit types" not in result.stderr
    assert re.search(r"narrowed \d+ types \(ui64->ui32 x\d+\)", result.stderr), result.stderr
    assert not WIDE.search(out.read_text())


def test_output_files_follow_the_umask(tmp_path):
    from x64guard.cli.inputs import write_atomically
    previous = os.umask(0o027)
    try:
        write_atomically(str(tmp_path / "new.mlir"), b"module {}\n")
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "new.mlir").stat().st_mode) == 0o640
    existing = tmp_path / "existing.mlir"
    existing.write_bytes(b"")
    existing.chmod(0o604)
    write_atomically(str(existing), b"module {}\n")
    assert stat.S_IMODE(existing.stat().st_mode) == 0o604
    assert existing.read_bytes() == b"module {}\n"


# ---- issue 36: the command line on real input ------------------------------------------

def _random_bits_module(tmp_path):
    """What StableHLO's testdata `iota_2x32_shape_.mlir` is: a module of JAX's x32 random
    bits without debug locations, whose only 64-bit values are iota_2x32_shape's uint64
    counters (the counter rule computes them in 32 bits, exactly)."""
    with jax.enable_x64(False):
        text = jax.jit(lambda key: jax.random.bits(key, (2, 3))).lower(jax.random.PRNGKey(0)).as_text()
    assert "ui64" in text
    path = tmp_path / "iota_2x32_shape_.mlir"
    path.write_text(text)
    return path


def test_parse_errors_and_narrowed_text_name_the_file(artifacts, tmp_path):
    # MLIR's parser calls the text it reads "-"; the command line names the file instead.
    garbage = artifacts["garbage.mlir"]
    for args in (["check", garbage], ["narrow", garbage, "-o", tmp_path / "never.mlir"]):
        result = run_cli(*args)
        assert result.returncode == 2
        assert f"{garbage}:1:1: custom op 'this' is unknown" in result.stderr, result.stderr
        assert 'loc("-"' not in result.stderr + result.stdout
    source, out = tmp_path / "counters.mlir", tmp_path / "out.mlir"
    source.write_text(_COUNTERS_ONLY)
    assert run_cli("narrow", source, "-o", out).returncode == 0
    text = out.read_text()
    assert '"-":' not in text and f'#loc2 = loc("{source}":9:11)' in text, text
    assert modules.load(text)  # the locations it names read back
    piped = run_cli("narrow", "-", "-o", "-", input=_COUNTERS_ONLY)  # standard input stays "-"
    assert piped.returncode == 0 and 'loc("-":9:11)' in piped.stdout


def test_narrow_refusals_are_placed_as_check_places_them(tmp_path):
    source = tmp_path / "wide.mlir"
    source.write_text("func.func @main(%x: tensor<i32>) -> tensor<i64> {\n"
                      "  %big = stablehlo.constant dense<1099511627776> : tensor<i64>\n"
                      "  return %big : tensor<i64>\n}\n")
    refused = run_cli("narrow", source, "-o", tmp_path / "out.mlir")
    assert refused.returncode == 1 and not (tmp_path / "out.mlir").exists()
    checked = run_cli("check", source)
    placed = f"{source}:2:10: error: stablehlo.constant: "  # was "line 2:10 of the input"
    assert placed in refused.stderr and "[constant-out-of-range]" in refused.stderr, refused.stderr
    assert placed in checked.stdout and "of the input" not in refused.stderr + checked.stdout


def test_random_bits_narrow_to_one_place_and_refuse_with_a_finding(tmp_path):
    # narrow said "narrowed 17 types (ui64->ui32 x17) at 0 places", and mode=error refused
    # with no reason at all (X64GuardError.findings == []).
    path = _random_bits_module(tmp_path)
    narrowed = run_cli("narrow", path, "-o", tmp_path / "out.mlir")
    assert narrowed.returncode == 0
    assert re.match(r"x64guard: narrowed \d+ types \(ui64->ui32 x\d+\) at 1 place; ", narrowed.stderr), narrowed.stderr
    refused = run_cli("narrow", "--mode", "error", path, "-o", tmp_path / "refused.mlir")
    assert refused.returncode == 1
    line = next(line for line in refused.stderr.splitlines() if "[type-64bit]" in line)
    assert re.match(rf"  {re.escape(str(path))}:\d+:\d+: error: stablehlo\.shift_right_logical: 64-bit types "
                    r"\(ui64->ui32 x\d+ in the module\) in iota_2x32_shape's uint64 counters", line), line
    with pytest.raises(x64guard.X64GuardError) as refusal:
        x64guard.narrow(path.read_text(), mode="error")
    (finding,) = refusal.value.findings
    assert finding.kind == "type-64bit" and finding.op == "stablehlo.shift_right_logical"
    assert finding.location.line is not None and "mode='error' refuses them" in finding.message
    assert "at 1 place(s)" in str(refusal.value)
