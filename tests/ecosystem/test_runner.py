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
    # the traces differ (shift by 32 under x64, by 16 under x32): the cross-check runs x32's
    # program, whose answer is x32 JAX's by construction: said at INFO, never warned (jit.md)
    shifted = records["shift_by_half_width"]
    assert (shifted.outcome, shifted.ok) == ("identical", True), shifted.detail
    assert not any("another program than with x64 off" in w for w in shifted.warnings), shifted.warnings
    refused = records["out_of_range_unjustified"]
    assert (refused.outcome, refused.ok) == ("refused", False)
    assert "input-out-of-range" in refused.detail
    agrees = records["out_of_range_x32_agrees"]
    assert (agrees.outcome, agrees.ok) == ("refused", False)
    assert "not justified (x32 JAX gives the 64-bit program's answer)" in agrees.detail, agrees.detail


def test_diagnosis_names_the_input_width_cause():
    """A wrong answer is diagnosed by probes that narrow variants of the x64 lowering with
    x64guard.narrow (no cross-check there): the half-width shift narrowed as traced with
    widened inputs is wrong, traced at its inputs' own width (int32) it is x32 JAX's."""
    import jax

    from tests.ecosystem.harness import Record, diagnose, x64, x64_lowering

    program = next(p for p in PROGRAMS if p.name == "shift_by_half_width")
    with x64(False):
        fn, args = program.build()
        reference = jax.jit(fn)(*args)
    record = Record(program.name, program.library, outcome="wrong", ok=False)
    cause = diagnose(record, x64_lowering(fn, args), fn, args, reference)
    assert cause == "input-width", record.detail
    assert "finfo-constant=differs" in record.detail and "input-width=identical" in record.detail, record.detail
