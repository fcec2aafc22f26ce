"""The child-process runner: a program that kills its child is a `crash` attributed to it,
and the programs after it still run in a fresh child."""

from __future__ import annotations

import pytest

from tests.ecosystem.harness_programs import PROGRAMS
from tests.ecosystem.runner import run_programs

pytestmark = [pytest.mark.ecosystem, pytest.mark.slow]


def test_crash_attributed_and_run_continues():
    records = {r.name: r for r in run_programs(PROGRAMS, workers=1,
                                               registry="tests.ecosystem.harness_programs:PROGRAMS")}
    assert [r.name for r in records.values()] == [p.name for p in PROGRAMS]
    aborted = records["aborts"]
    assert (aborted.outcome, aborted.ok) == ("crash", False)
    assert "SIGABRT" in aborted.detail
    assert (records["identical"].outcome, records["identical"].ok) == ("identical", True)
    assert records["identical"].has_64bit
    wrong = records["shift_by_width_wrong"]
    assert (wrong.outcome, wrong.ok) == ("wrong", False), wrong.detail
    # the probe must find the cause: traced at its own width (int32), the shift is by 16
    assert wrong.cause == "input-width" and "input-width=identical" in wrong.detail, wrong.detail
    refused = records["out_of_range_unjustified"]
    assert (refused.outcome, refused.ok) == ("refused", False)
    assert "input-out-of-range" in refused.detail
    agrees = records["out_of_range_x32_agrees"]
    assert (agrees.outcome, agrees.ok) == ("refused", False)
    assert "not justified (x32 JAX gives the 64-bit program's answer)" in agrees.detail, agrees.detail
