"""Issue 15: `x64guard gate` passes on a 32-bit JAX suite that draws random numbers under
jit (tests/cli/x32_suite: dropout, noisy steps, initializers, rbg keys, vmap and scan). JAX's
x32 programs hold uint64 counters and the rbg state: on the x32 target those are info."""

import json
import sys

from tests.cli.conftest import run_cli

PYTEST = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
SUITE = "tests/cli/x32_suite/x32_random_suite.py"


def test_gate_passes_an_x32_suite_drawing_random_numbers_under_jit():
    result = run_cli("gate", "--format", "json", "--", *PYTEST, SUITE, timeout=600)
    report = json.loads(result.stdout)
    assert report["gate"]["returncode"] == 0, result.stderr  # the suite itself passed
    assert result.returncode == 0, result.stdout[-3000:]
    findings = [f for file in report["files"] for m in file["modules"] for f in m["findings"]]
    assert {f["kind"] for f in findings} <= {"rng-counters", "rng-state"}
    assert {"rng-counters", "rng-state"} <= {f["kind"] for f in findings}
    assert all(f["severity"] == "info" for f in findings)


def test_gate_on_x32_strict_names_the_64bit_values():
    result = run_cli("gate", "--target", "x32-strict", "--", *PYTEST, SUITE, timeout=600)
    assert result.returncode == 1
    assert "rng-state" in result.stdout and "type-64bit" in result.stdout
