"""`x64guard check`: exit status, locations, every input format, bad input."""

import pytest

from tests.cli.conftest import PROGRAMS, ROOT, run_cli
from tests.sample import SAMPLED_OUT

REL_PROGRAMS = PROGRAMS.relative_to(ROOT).as_posix()


def test_clean_module_exits_0(artifacts):
    result = run_cli("check", artifacts["clean.mlir"])
    assert result.returncode == 0, result.stderr
    assert "OK: 1 module(s)" in result.stdout
    assert result.stderr == ""


def test_f64_module_under_x32_exits_1_with_the_source_line(artifacts, f64_line):
    result = run_cli("check", "--target", "x32", artifacts["f64.mlir"])
    assert result.returncode == 1
    assert f"{REL_PROGRAMS}:{f64_line}:" in result.stdout
    assert "stablehlo.cosine" in result.stdout and "[type-64bit]" in result.stdout
    assert "FAIL:" in result.stdout
    assert "jit(f64_model)" in result.stdout


@pytest.mark.parametrize("name, fmt", [
    ("f64.mlirbc", "MLIR bytecode"),
    ("f64.portable.bc", "StableHLO portable artifact"),
    pytest.param("f64.hlo.txt", "HLO text", marks=SAMPLED_OUT),
    pytest.param("f64.hlo.pb", "HLO proto", marks=SAMPLED_OUT),
    pytest.param("f64.compiled.hlo.txt", "HLO text", marks=SAMPLED_OUT),
    ("f64.exported", "jax.export artifact"),
])
def test_every_input_format_is_read_with_its_locations(artifacts, f64_line, name, fmt):
    result = run_cli("check", artifacts[name])
    assert result.returncode == 1, result.stderr
    assert f"[{fmt}" in result.stdout
    assert f"{REL_PROGRAMS}:{f64_line}:" in result.stdout
    assert "type-64bit" in result.stdout


def test_complex64_passes_x32_but_not_neuron(artifacts):
    assert run_cli("check", "--target", "x32", artifacts["complex64.mlir"]).returncode == 0
    neuron = run_cli("check", "--target", "neuron", artifacts["complex64.mlir"])
    assert neuron.returncode == 1
    assert "[NCC_EVRF004]" in neuron.stdout  # neuron: an alias of neuron-trn2 (issue 23)
    from tests.cli.programs import marker_line
    assert f"{REL_PROGRAMS}:{marker_line('complex')}:" in neuron.stdout


def test_errors_are_one_line_unless_debugging(artifacts, tmp_path):
    # A directory where the report file should go: writing it fails.
    (tmp_path / "report.json").mkdir()
    args = ("check", "--format", "json", "-o", tmp_path / "report.json" / ".", artifacts["clean.mlir"])
    quiet = run_cli(*args)
    assert quiet.returncode == 2
    (line,) = quiet.stderr.strip().splitlines()
    assert line.startswith("x64guard: error: ") and "cannot write" in line and "Traceback" not in quiet.stderr
    loud = run_cli(*args, env={"X64GUARD_DEBUG": "1"})
    assert loud.returncode == 2 and "Traceback (most recent call last)" in loud.stderr


def test_x64_target_accepts_f64(artifacts):
    result = run_cli("check", "--target", "x64", artifacts["f64.mlir"])
    assert result.returncode == 0, result.stdout


def test_fail_on_lowers_the_threshold(artifacts):
    # Under x64 every 64-bit use is an info finding: fails only with --fail-on info.
    assert run_cli("check", "--target", "x64", "--fail-on", "warning", artifacts["f64.mlir"]).returncode == 0
    assert run_cli("check", "--target", "x64", "--fail-on", "info", artifacts["f64.mlir"]).returncode == 1


def test_a_directory_is_searched(artifacts):
    directory = artifacts["clean.mlir"].parent
    result = run_cli("check", "--format", "json", directory)
    assert result.returncode == 2  # the directory holds the broken files too
    import json
    report = json.loads(result.stdout)
    paths = {f["path"].rsplit("/", 1)[-1] for f in report["files"]}
    assert {"clean.mlir", "f64.mlir", "f64.mlirbc", "f64.portable.bc", "f64.hlo.txt", "f64.exported",
            "truncated.mlirbc", "garbage.mlir", "empty.mlir"} <= paths
    assert "garbage.bin" not in paths  # not a module suffix: only read when named


def test_stdin(artifacts):
    result = run_cli("check", "-", input=artifacts["f64.mlir"].read_text())
    assert result.returncode == 1
    assert "<stdin>" in result.stdout


@pytest.mark.parametrize("name, reason", [
    ("garbage.mlir", "is not a valid MLIR module"),
    pytest.param("empty.mlir", "the file is empty", marks=SAMPLED_OUT),
    ("truncated.mlirbc", "unreadable MLIR bytecode"),
    pytest.param("garbage.bin", "not a module x64guard can read", marks=SAMPLED_OUT),
])
def test_bad_input_exits_2_with_one_line_and_no_traceback(artifacts, name, reason):
    result = run_cli("check", artifacts[name])
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"x64guard: error: {artifacts[name]}: ")
    assert reason in lines[0]
    assert "Traceback" not in result.stderr + result.stdout


def test_missing_path_exits_2(tmp_path):
    result = run_cli("check", tmp_path / "nope.mlir")
    assert result.returncode == 2
    assert result.stderr.strip() == f"x64guard: error: {tmp_path / 'nope.mlir'}: no such file or directory"
    assert result.stdout == ""


def test_an_unreadable_file_does_not_hide_the_others(artifacts):
    result = run_cli("check", artifacts["f64.mlir"], artifacts["empty.mlir"])
    assert result.returncode == 2
    assert "type-64bit" in result.stdout
    assert "empty.mlir: the file is empty" in result.stderr


@pytest.mark.parametrize("args, reason", [
    (["check", "--target", "tpu9", "x.mlir"], "invalid choice: 'tpu9'"),
    (["check"], "the following arguments are required: PATH"),
    pytest.param(["frobnicate"], "invalid choice: 'frobnicate'", marks=SAMPLED_OUT),
    pytest.param([], "give a command: check, narrow, gate or targets", marks=SAMPLED_OUT),
    pytest.param(["gate", "pytest"], "gate needs the command after `--`", marks=SAMPLED_OUT),
    pytest.param(["narrow", "in.mlir"], "the following arguments are required: -o/--output", marks=SAMPLED_OUT),
])
def test_usage_errors_exit_2_in_one_line(args, reason):
    result = run_cli(*args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("x64guard: error: ") and reason in lines[0], result.stderr


def test_targets_come_from_the_core_table():
    # issue 36: `--target` help is one line (its choices and a pointer); `x64guard targets`
    # lists each profile on one line, an alias naming its profile rather than repeating it.
    from x64guard.passes.tables import TARGET_ALIASES, TARGET_PROFILES
    help_text = run_cli("check", "--help").stdout
    target_help = help_text[help_text.index("  --target"):help_text.index("  --neuron-cc-flags")]
    assert len(target_help.splitlines()) <= 4, target_help
    listed = run_cli("targets")
    assert listed.returncode == 0 and listed.stderr == ""
    lines = listed.stdout.splitlines()
    assert [line.split()[0] for line in lines] == list(TARGET_PROFILES)
    for line in lines:
        name, text = line.split(None, 1)
        assert name in help_text and len(line) <= 120
        if name in TARGET_ALIASES:
            assert text == f"alias of {TARGET_ALIASES[name]}"
        else:
            assert text.removesuffix(" (default)") == TARGET_PROFILES[name].summary


def test_console_script_is_installed(artifacts):
    import subprocess
    import sys
    from pathlib import Path
    script = Path(sys.executable).parent / "x64guard"
    assert script.exists(), "pip install -e . declares the x64guard console script"
    proc = subprocess.run([str(script), "check", str(artifacts["clean.mlir"])], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_an_unexpected_exception_is_exit_2_in_one_line(monkeypatch, capsys):
    from x64guard.cli import app

    def boom(args):
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr(app, "_check", boom)
    monkeypatch.delenv("X64GUARD_DEBUG", raising=False)
    assert app.main(["check", "x.mlir"]) == 2
    err = capsys.readouterr().err
    assert err == "x64guard: error: internal error: RuntimeError: boom (set X64GUARD_DEBUG=1 for a traceback)\n"
