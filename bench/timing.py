"""Timing shared by the benchmark halves: best of N, after an optional warm-up."""

from __future__ import annotations

import gc
import time


def best_of(fn, runs: int, warmup: int = 1) -> tuple[float, list[float]]:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        gc.collect()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times), times
