"""`pytest --x64guard[=TARGET]` (x64guard/pytest_plugin.py): a real suite of JAX tests run
under the plugin in a child pytest, against `x64guard gate` on the same suite."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from importlib import metadata

import pytest

from tests.cli.conftest import ROOT, run_cli

pytest_plugins = ["pytester"]

SUITE = textwrap.dedent("""
    import jax
    import jax.numpy as jnp
    import numpy as np


    def scale(x):
        return x * 2.0


    def test_float32_model():
        assert jax.jit(scale)(np.ones(3, np.float32)).dtype == np.float32


    def test_float64_model():
        with jax.enable_x64(True):
            out = jax.jit(lambda x: jnp.cos(x) + 1.0)(np.ones(3))
        assert out.dtype == np.float64
""")


def plugin_args() -> list[str]:
    """`-p x64guard.pytest_plugin` unless the installed metadata already has the entry point
    (loading it twice under two names is an error)."""
    installed = {ep.value for ep in metadata.entry_points(group="pytest11")}
    return [] if "x64guard.pytest_plugin" in installed else ["-p", "x64guard.pytest_plugin"]


@pytest.fixture
def suite(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    monkeypatch.delenv("JAX_ENABLE_X64", raising=False)
    pytester.makepyfile(test_models=SUITE)
    return pytester


def run_pytest(pytester, *args):
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *plugin_args(), *args, timeout=300)


def findings(report: dict) -> list[tuple]:
    return sorted((m["name"], m["function"], m["passed"], f["kind"], f["op"], f["location"], f["message"], f["count"])
                  for file in report["files"] for m in file["modules"] for f in m["findings"])


@pytest.mark.slow
def test_the_plugin_gates_a_suite_as_x64guard_gate_does(suite):
    result = run_pytest(suite, "--x64guard", "--x64guard-report=gated.json", "--x64guard-report=gated.sarif")
    assert result.ret == 1, result.stdout.str()  # the tests passed; a module does not
    result.assert_outcomes(passed=2)
    text = result.stdout.str()
    assert "= x64guard =" in text and "FAIL: 5 finding(s) at or above error in 1 of 2 module(s)" in text
    line = next(i for i, text_line in enumerate((suite.path / "test_models.py").read_text().splitlines(), 1)
                if "lambda" in text_line)
    assert f"jit(<lambda>) at test_models.py:{line}:" in text and "module(s) without findings: jit(scale)" in text
    plugin = json.loads((suite.path / "gated.json").read_text())
    from tests.cli.test_formats import report_schema_validator
    report_schema_validator().validate(plugin)
    assert plugin["command"] == "gate" and plugin["gate"]["returncode"] == 0 and plugin["exit_code"] == 1
    sarif = json.loads((suite.path / "gated.sarif").read_text())
    assert len(sarif["runs"][0]["results"]) == plugin["summary"]["findings"]
    gate = run_cli("gate", "--format", "json", "--", sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                   "test_models.py", cwd=suite.path, env={"PYTHONPATH": os.environ["PYTHONPATH"]})
    assert gate.returncode == 1, gate.stderr
    gated = json.loads(gate.stdout)
    assert findings(plugin) == findings(gated) and plugin["summary"] == gated["summary"]


@pytest.mark.slow
def test_a_clean_target_passes_and_a_failing_test_keeps_pytests_status(suite):
    clean = run_pytest(suite, "--x64guard=x64", "-q")  # x64 accepts every 64-bit type
    assert clean.ret == 0, clean.stdout.str()
    assert "OK: 2 module(s), nothing at or above error for target x64" in clean.stdout.str()
    suite.makepyfile(test_broken="def test_broken():\n    assert False\n")
    failed = run_pytest(suite, "--x64guard=x64", "-q")
    assert failed.ret == 1 and "1 failed" in failed.stdout.str()


@pytest.mark.slow
def test_without_the_flag_the_plugin_does_nothing(suite):
    quiet = run_pytest(suite, "-q")
    assert quiet.ret == 0 and "x64guard" not in quiet.stdout.str()


def test_loading_the_plugin_imports_neither_jax_nor_the_pass():
    probe = ("import os, sys; before = dict(os.environ); import x64guard.pytest_plugin; "
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('jax', 'jaxlib') "
             "or m.startswith('x64guard.passes')), os.environ == before)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True).stdout
    assert out.strip() == "[] True"


def test_a_target_that_is_not_one_is_a_usage_error(suite):
    result = run_pytest(suite, "--x64guard", "test_models.py")  # the path is read as the target
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--x64guard: unknown target 'test_models.py'" in result.stderr.str()
    assert "write --x64guard=TARGET" in result.stderr.str()
