"""`make bench`'s Falcon training steps (bench/torch_xla_steps.py) run end to end, each
side from the same weights on the same batches: the losses agree over a few steps, and the report names
the four figures. The times are not checked (speed lives in `make bench`)."""

from __future__ import annotations

import importlib.util

import pytest

pytestmark = [pytest.mark.skipif(importlib.util.find_spec("torch_xla") is None, reason="needs torch-xla"),
              pytest.mark.torch]


@pytest.mark.slow
def test_falcon_steps_run_and_sides_agree(monkeypatch):
    from bench import torch_xla_steps as bench

    monkeypatch.setattr(bench, "STEPS", 2)
    monkeypatch.setattr(bench, "WARMUP", 2)
    figures = bench.run(1)
    for key in ("i_backend", "j_lazy", "l_fresh_int64"):
        assert figures[key]["same_losses"] is True, key
        assert figures[key]["ratio"] > 0
    assert all(figures["k_sync_cpu_ms"][side] > 0 for side in ("x64guard.sync", "torch_xla.sync"))
    lines = bench.report(figures)
    assert [line[:3] for line in lines[1:]] == ["(i)", "(j)", "(k)", "(l)"]
