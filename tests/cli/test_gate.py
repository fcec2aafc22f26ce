"""`x64guard gate -- CMD`: the real command around real pytest suites."""

import json
import sys
import textwrap
from pathlib import Path

import pytest

from tests.cli.conftest import ROOT, run_cli

EXAMPLE = ROOT / "examples" / "ci"
PYTEST = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]


def line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


@pytest.fixture(scope="module")
def example_gate():
    """The example CI suite (one float64 function, `standardise`) under the gate, as JSON."""
    result = run_cli("gate", "--format", "json", "--", *PYTEST, "examples/ci")
    return result, json.loads(result.stdout)


def test_gate_fails_naming_the_f64_function_and_its_line(example_gate):
    result, report = example_gate
    assert result.returncode == 1
    assert report["gate"]["returncode"] == 0  # the tests passed: the modules are what fails
    failing = [m for f in report["files"] for m in f["modules"] if not m["passed"]]
    assert [m["function"] for m in failing] == ["standardise"]
    (module,) = failing
    assert module["name"] == "jit_standardise"
    line = line_of(EXAMPLE / "model.py", "centred = x - jnp.mean(x)")
    paths = {(f["source"]["path"], f["source"]["line"]) for f in module["findings"] if f["source"]}
    assert ("examples/ci/model.py", line) in paths
    assert module["origin"].endswith(f"examples/ci/test_model.py:{line_of(EXAMPLE / 'test_model.py', 'out = model.standardise(x)')}:11")  # 1-based column of `model`


def test_gate_keeps_the_command_output_off_a_machine_readable_stdout(example_gate):
    result, _ = example_gate
    assert "2 passed" in result.stderr  # pytest's own report went to stderr


def test_gate_removes_its_dump_directory_and_names_it_nowhere(example_gate):
    result, report = example_gate
    assert report["gate"]["kept"] is False
    # The deleted temporary directory is named nowhere in the report (issue 21).
    assert report["gate"]["dump_dir"] is None
    assert "x64guard-gate-" not in result.stdout


def test_gate_text_names_the_function(example_gate):
    _, report = example_gate
    result = run_cli("gate", "--", *PYTEST, "examples/ci")
    assert result.returncode == 1
    line = line_of(EXAMPLE / "model.py", "centred = x - jnp.mean(x)")
    assert f"jit(standardise) at examples/ci/model.py:{line}:" in result.stdout
    assert "module(s) without findings: " in result.stdout and "jit(predict)" in result.stdout
    assert "FAIL: " in result.stdout
    # issue 36: a module's repeats say they count compilations (they read "x3").
    repeated = [m for f in report["files"] for m in f["modules"] if m["repeats"] > 1 and not m["findings"]]
    assert repeated
    for module in repeated:
        assert f"jit({module['function']}) (compiled {module['repeats']} times)" in result.stdout


@pytest.fixture(scope="module")
def clean_suite(tmp_path_factory):
    root = tmp_path_factory.mktemp("clean_suite")
    (root / "test_clean.py").write_text(textwrap.dedent("""
        import jax
        import jax.numpy as jnp

        @jax.jit
        def double(x):
            return x * 2.0

        def test_double():
            assert float(double(jnp.ones(3))[0]) == 2.0

        def test_fails_when_asked():
            import os
            assert not os.environ.get("MAKE_IT_FAIL")
    """))
    return root


def test_gate_passes_a_clean_suite(clean_suite):
    result = run_cli("gate", "--", *PYTEST, "test_clean.py", cwd=clean_suite)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "OK: " in result.stdout
    assert "jit(double)" in result.stdout


def test_gate_fails_when_the_command_fails(clean_suite):
    result = run_cli("gate", "--", *PYTEST, "test_clean.py", cwd=clean_suite, env={"MAKE_IT_FAIL": "1"})
    assert result.returncode == 1
    assert "the command failed (exit status 1)" in result.stdout


def test_gate_keep_keeps_the_dumps(clean_suite, tmp_path):
    keep = tmp_path / "dumps"
    result = run_cli("gate", "--keep", keep, "--", *PYTEST, "test_clean.py", cwd=clean_suite)
    assert result.returncode == 0
    dumps = sorted(p.name for p in (keep / "jax").iterdir())
    assert any(name.endswith("_jit_double_compile.mlir") for name in dumps)
    again = run_cli("gate", "--keep", keep, "--", *PYTEST, "test_clean.py", cwd=clean_suite)
    assert again.returncode == 2 and "must be an empty directory" in again.stderr


def test_gate_unknown_command_exits_2(tmp_path):
    result = run_cli("gate", "--", "no-such-command-x64guard")
    assert result.returncode == 2
    assert result.stderr.strip() == "x64guard: error: command not found: no-such-command-x64guard"


def test_gate_environment_keeps_jax_enable_x64_as_it_is(tmp_path):
    from x64guard.cli.dump import dump_environment
    env = dump_environment(tmp_path, base={"JAX_DUMP_IR_MODES": "jaxpr", "PATH": "/bin"}, torch_xla=False)
    assert env["JAX_DUMP_IR_TO"] == str(tmp_path / "jax")
    assert env["JAX_DUMP_IR_MODES"] == "jaxpr,stablehlo"
    assert env["JAX_INCLUDE_DEBUG_INFO_IN_DUMPS"] == "1"
    assert "JAX_ENABLE_X64" not in env and "XLA_SAVE_TENSORS_FILE" not in env
    with_torch = dump_environment(tmp_path, base={}, torch_xla=True)
    assert with_torch["XLA_SAVE_TENSORS_FILE"] == str(tmp_path / "torch_xla" / "graphs.txt")
    assert with_torch["XLA_SAVE_TENSORS_FMT"] == "stablehlo"


# --- issue 15: the gate's reports agree with each other and with `check` on the kept dump ---

@pytest.fixture(scope="module")
def x64_suite(tmp_path_factory):
    """A small float64 suite that compiles the same functions for several shapes and runs
    eager ops (JAX compiles a module per eager op): repeated compilations to merge."""
    root = tmp_path_factory.mktemp("x64_suite")
    (root / "test_x64.py").write_text(textwrap.dedent("""
        import jax
        import jax.numpy as jnp
        import pytest

        jax.config.update("jax_enable_x64", True)

        @jax.jit
        def scale(x):
            return x * 2.0

        @jax.jit
        def count(x):
            return jnp.sum(x > 0)

        @pytest.mark.parametrize("n", [1, 2, 3, 4])
        def test_scale(n):
            assert float(scale(jnp.ones(n))[0]) == 2.0
            assert int(count(jnp.ones(n))) == n

        def test_eager():
            x = jnp.arange(3.0)
            assert float((x + 1.0).sum()) == 6.0

        def test_lambda():
            assert float(jax.jit(lambda x: x * 3.0)(jnp.ones(2))[0]) == 3.0
    """))
    keep = root / "dumps"
    result = run_cli("gate", "--keep", keep, "--format", "json", "--", *PYTEST, "test_x64.py", cwd=root)
    assert result.returncode == 1, result.stderr
    return root, keep, json.loads(result.stdout)


def _module_keys(report):
    return sorted((m["name"], m["repeats"], len(m["findings"])) for f in report["files"] for m in f["modules"])


def test_check_on_a_kept_dump_merges_repeated_compilations_as_the_gate_does(x64_suite):
    root, keep, gate = x64_suite
    result = run_cli("check", "--format", "json", keep, cwd=root)
    assert result.returncode == 1, result.stderr
    check = json.loads(result.stdout)
    for field in ("modules", "compilations", "findings", "ops", "failing", "by_severity", "by_kind"):
        assert check["summary"][field] == gate["summary"][field], field
    assert _module_keys(check) == _module_keys(gate)
    assert gate["summary"]["compilations"] == gate["gate"]["dumped_files"] > gate["summary"]["modules"]
    assert any(m["repeats"] > 1 for f in gate["files"] for m in f["modules"])
    text = run_cli("check", keep, cwd=root).stdout
    assert f"{gate['summary']['compilations']} compilation dump(s) read, {gate['summary']['modules']} distinct" in text


def test_gate_json_paths_are_relative_and_every_finding_is_placed(x64_suite):
    root, _, gate = x64_suite
    assert str(root) not in json.dumps(gate)  # the suite runs in root: paths inside it are relative
    assert gate["gate"]["dump_dir"] == "dumps"
    findings = [f for file in gate["files"] for m in file["modules"] for f in m["findings"]]
    assert findings and all((f["source"] is None) != (f["position"] is None) for f in findings)
    signature = next(f for f in findings if f["op"] == "func.func")
    assert signature["position"]["function"] == "main" and signature["position"]["path"].startswith("dumps/jax/")
    scale = next(f for f in findings if f["op"] == "stablehlo.multiply")
    assert scale["source"]["path"] == "test_x64.py"


def test_gate_json_follows_the_schema_and_places_a_lambdas_signature(x64_suite):
    from tests.cli.test_formats import report_schema_validator
    root, _, gate = x64_suite
    report_schema_validator().validate(gate)
    # issue 36: `jit(<lambda>)` is the module jit__lambda; its signature finding had no
    # call site (the module's name was looked for as `jit(_lambda)`).
    (module,) = [m for f in gate["files"] for m in f["modules"] if m["name"] == "jit__lambda"]
    line = line_of(root / "test_x64.py", "jax.jit(lambda x: x * 3.0)")
    assert module["function"] == "<lambda>" and module["origin"].startswith(f"test_x64.py:{line}:")
    signature = next(f for f in module["findings"] if f["op"] == "func.func")
    assert signature["position"]["anchor"] == {"path": "test_x64.py", "line": line,
                                               "column": signature["position"]["anchor"]["column"],
                                               "in_function": None}


def test_no_torch_xla_folder_or_flag_when_torch_xla_dumped_nothing(x64_suite):
    _, keep, gate = x64_suite
    assert sorted(p.name for p in keep.iterdir()) == ["jax"]
    assert gate["gate"]["torch_xla"] is False


def test_text_report_leads_with_the_summary_and_caps_long_listings(x64_suite, monkeypatch):
    from x64guard.cli import formats
    from x64guard.cli.results import Run, check_file, merge_repeated_compilations
    root, keep, gate = x64_suite
    text = run_cli("gate", "--", *PYTEST, "test_x64.py", cwd=root).stdout
    lines = text.splitlines()
    lines = lines[next(i for i, line in enumerate(lines) if line.startswith("x64guard gate --target")):]
    assert lines[2] == "" and lines[3] == "Summary"  # after the header and the command's line
    verdict = next(i for i, line in enumerate(lines) if line.startswith("FAIL: "))
    assert verdict < next(i for i, line in enumerate(lines) if line.startswith("jit("))
    # Caps: a run with more groups and findings than the limits lists what is left.
    run = Run("check", "x32", "error")
    run.files = merge_repeated_compilations([check_file(str(p), "x32") for p in sorted((keep / "jax").iterdir())])
    full = formats.render_text(run, formats.Style(False))
    assert "more finding(s) here" not in full  # a short report is printed whole
    # The verdict again as the last line only when the details are long (issue 36: a short
    # report said FAIL twice).
    monkeypatch.setattr(formats, "VERDICT_REPEATED_AFTER", len(full.splitlines()))
    assert formats.render_text(run, formats.Style(False)).count("FAIL: ") == 1
    monkeypatch.setattr(formats, "VERDICT_REPEATED_AFTER", 0)
    repeated = formats.render_text(run, formats.Style(False)).splitlines()
    assert repeated[-1].startswith("FAIL: ") and sum(line.startswith("FAIL: ") for line in repeated) == 2
    monkeypatch.setattr(formats, "UNCAPPED_LINES", 0)
    monkeypatch.setattr(formats, "MAX_FINDINGS_PER_GROUP", 1)
    fewer_findings = formats.render_text(run, formats.Style(False))
    assert "more finding(s) here (`--format json` lists every finding)" in fewer_findings
    monkeypatch.setattr(formats, "MAX_GROUPS", 1)
    one_group = formats.render_text(run, formats.Style(False))
    assert "more module(s) with findings: " in one_group
    assert len(one_group.splitlines()) < len(fewer_findings.splitlines()) < len(full.splitlines())
