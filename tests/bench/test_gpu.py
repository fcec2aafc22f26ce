"""`make bench`'s accelerator section (bench/gpu.py) runs end to end. There is no GPU on
the machines that run the tests, so it runs on the CPU at a small scale: the figures are
not the point; that the section measures three sides, in fresh processes, and compares
bits under XLA's deterministic flags is."""

from __future__ import annotations

import pytest


def _gpu_bench():
    from bench import gpu

    return gpu


def test_without_a_gpu_the_section_says_so(capsys):
    bench = _gpu_bench()
    if bench.has_gpu():
        pytest.skip("this machine has a GPU: the section measures it (make bench)")
    assert bench.run() == {}
    assert "no GPU among jax.devices()" in capsys.readouterr().out


@pytest.mark.slow
def test_the_section_measures_on_a_named_platform(capsys):
    figures = _gpu_bench().run(calls=2, scale=0.005, platform="cpu", workloads=("rk4_scan",))
    row = figures["rk4_scan"]
    assert set(row["steady_s"]) == set(row["first_s"]) == {"x64", "guard", "x32"}
    assert all(t > 0 for t in row["steady_s"].values())
    assert row["bits_deterministic"] is True  # x64guard's bits are x32 JAX's on the CPU
    assert "rk4_scan" in capsys.readouterr().out
