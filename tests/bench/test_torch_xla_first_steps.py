"""`make bench`'s torch-xla compile-time cases (bench/torch_xla_first_steps.py) run end to
end: one fresh process per side. The times are not checked (speed lives in `make
bench`); what is: both sides train to the same losses, and the step where dynamo
recompiles compiles no XLA program on either side (x64guard reuses the programs of the
first step's identical graphs, as torch-xla's cache does for openxla)."""

from __future__ import annotations

import importlib.util

import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch_xla") is None, reason="needs torch-xla")


def _first_steps():
    from bench import torch_xla_first_steps

    return torch_xla_first_steps


@pytest.mark.slow
def test_recompile_case_runs_and_compiles_nothing_at_the_recompile():
    bench = _first_steps()
    figures = bench.run(processes=1, paths=("backend",))["backend"]
    assert figures["losses_equal"] is True
    assert figures["recompile_compiles"] == {"openxla": 0, "x64guard": 0}
    (ours,) = figures["runs"]["x64guard"]
    recompiled = ours["steps"][1]["x64guard"]
    assert recompiled.get("traces") == 2 and recompiled.get("programs_shared") == 2 and "programs" not in recompiled
    lines = bench.report({"backend": figures})
    assert lines[0].startswith("(g) recompile step") and "ratio" in lines[0]
