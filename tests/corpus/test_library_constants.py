"""Dtype-derived constants in real library code: the slow corpus cases, and the discovery
script (tools/discover_dtype_constants.py) on a few programs, tying x64guard's table to
what library lowerings actually hold."""

from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path

import pytest

import x64guard
from tests.corpus import library_constants, oracle

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import discover_dtype_constants as discovery  # noqa: E402


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::x64guard.X64GuardWarning")
@pytest.mark.parametrize("case", library_constants.slow_cases(), ids=lambda c: c.name)
def test_slow_library_cases(case):
    oracle.check_case(case, x64guard.narrow, x64guard.X64GuardError)


def run_discovery(*argv: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert discovery.main(list(argv)) == 0
    return out.getvalue()


def table_rows(report: str) -> dict[str, str]:
    """First column -> its rows (joined), for the markdown table the script prints."""
    rows: dict[str, str] = {}
    for line in report.splitlines():
        if line.startswith("| ") and not line.startswith("| finfo expr"):
            label = line.split(" | ")[0].removeprefix("| ")
            rows[label] = rows.get(label, "") + line + "\n"
    return rows


def test_discovery_explains_numpyro_clamp_probs_with_the_table():
    rows = table_rows(run_discovery("-k", "numpyro/clamp_probs"))
    assert set(rows) == {"finfo(T).tiny", "1 - finfo(T).eps"}
    assert "| 0.9999999999999998 | 0.9999998807907104 |" in rows["1 - finfo(T).eps"]


def test_discovery_finds_normal_lower_bound_and_flags_unexplained_constants():
    report = run_discovery("-k", "jax.random/normal")
    rows = table_rows(report)
    assert "| -0.9999999999999999 | -0.9999999403953552 |" in rows["-(1 - finfo(T).epsneg)"]
    # The float64 random-bit idiom is not a finfo constant: listed as unexplained (the rng rewrite's job).
    assert "| ui64 | 4607182418800017408 | 1065353216 |" in rows["?"]


def test_discovery_reports_the_known_false_positive():
    """optax writes jnp.finfo(float).eps, which is float64's eps in x32 JAX too."""
    rows = table_rows(run_discovery("-k", "optax/polyak_sgd"))
    assert list(rows) == ["FALSE POSITIVE finfo(T).eps"]
