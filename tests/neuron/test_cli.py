"""Issue 23 from the command line: `check --target neuron-...` with the codes as SARIF rule
ids, `--neuron-cc-flags` and NEURON_CC_FLAGS, and `gate` on a real suite, per code."""

import json
import sys

import pytest

from tests.cli.conftest import run_cli
from tests.neuron.programs import TRIGGERS

PYTEST = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]


@pytest.fixture(scope="module")
def dot_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("neuron") / "int_dot.mlir"
    path.write_text(TRIGGERS["NCC_EVRF035"]())
    return path


@pytest.mark.slow
def test_sarif_and_json_carry_the_code_as_the_rule_id(dot_file):
    sarif = json.loads(run_cli("check", "--target", "neuron-trn2-int64", "--format", "sarif", dot_file).stdout)
    (run,) = sarif["runs"]
    rules = {r["id"]: r for r in run["tool"]["driver"]["rules"]}
    assert "NCC_EVRF035" in rules and "EVRF035.rst" in rules["NCC_EVRF035"]["fullDescription"]["text"]
    result = next(r for r in run["results"] if r["ruleId"] == "NCC_EVRF035")
    assert result["level"] == "error"
    assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].endswith("tests/neuron/programs.py")
    report = json.loads(run_cli("check", "--target", "neuron-trn2-int64", "--format", "json", dot_file).stdout)
    assert report["summary"]["by_kind"]["NCC_EVRF035"]["ops"] == 1


@pytest.mark.slow
def test_flags_on_the_command_line_and_in_the_environment(dot_file):
    assert run_cli("check", "--target", "neuron-trn2", dot_file).returncode == 0  # 2.32 default: a warning
    strict = run_cli("check", "--target", "neuron-trn2", "--neuron-cc-flags=--implicit-integer-downcast=none",
                     dot_file)
    assert strict.returncode == 1 and "[NCC_EVRF035]" in strict.stdout
    env = run_cli("check", "--target", "neuron-trn2", dot_file, env={"NEURON_CC_FLAGS": "--implicit-integer-downcast=none"})
    assert env.returncode == 1
    bad = run_cli("check", "--target", "neuron-trn2", "--neuron-cc-flags=--native-int64=maybe", dot_file)
    assert bad.returncode == 2 and "--native-int64" in bad.stderr


@pytest.mark.slow
def test_gate_runs_a_suite_for_neuron_trn2_int64_and_reports_per_code():
    result = run_cli("gate", "--target", "neuron-trn2-int64", "--format", "json", "--",
                     *PYTEST, "tests/neuron/suite/neuron_suite.py", timeout=600)
    report = json.loads(result.stdout)
    assert report["gate"]["returncode"] == 0, result.stderr[-2000:]
    assert result.returncode == 1
    assert {"NCC_EVRF035", "neuron-cond"} <= set(report["summary"]["by_kind"])
    text = run_cli("gate", "--target", "neuron-trn2-int64", "--", *PYTEST, "tests/neuron/suite/neuron_suite.py",
                   timeout=600)
    assert "NCC_EVRF035" in text.stdout and "neuron-cond" in text.stdout
