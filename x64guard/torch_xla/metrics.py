"""torch-xla's metrics, through its public `torch_xla.debug.metrics` (and
`xm.wait_device_ops`): how many graphs it compiled and ran from its cache, executed, or
ran on the CPU; and which of those x64guard itself caused (`own_compiles`), so that the
lazy loop's `lazy-read` warning counts only the user's unnarrowed graphs.
"""

from __future__ import annotations

import contextlib
from typing import Iterator


# seen in torch 2.9.0 / torch-xla 2.9.0: torch_xla.core.xla_model.wait_device_ops
def wait_device_ops() -> None:
    """Block until torch-xla's dispatched executions finish (they count in ExecuteTime then)."""
    import torch_xla.core.xla_model as xm

    xm.wait_device_ops()


# seen in torch 2.9.0 / torch-xla 2.9.0: torch_xla.debug.metrics.metric_data
def execution_count() -> int:
    """How many graphs torch-xla has executed so far (its ExecuteTime metric)."""
    import torch_xla.debug.metrics as metrics

    data = metrics.metric_data("ExecuteTime")
    return int(data[0]) if data else 0


# seen in torch 2.9.0 / torch-xla 2.9.0: torch_xla.debug.metrics.counter_value, torch_xla.debug.metrics.counter_names
def fallback_counts() -> dict[str, int]:
    """torch-xla's per-op counters of aten ops it ran on the CPU (no lowering)."""
    import torch_xla.debug.metrics as metrics

    return {name: counter(name) for name in metrics.counter_names() if name.startswith("aten::")}


# seen in torch 2.9.0 / torch-xla 2.9.0: torch_xla.debug.metrics.counter_value
def counter(name: str) -> int:
    """torch-xla's counter `name`: UncachedCompile, how many graphs it has compiled so far;
    CachedCompile, how many times it found a graph it was to run in its compile cache (a
    sync or read of a graph compiled earlier in the process)."""
    import torch_xla.debug.metrics as metrics

    return int(metrics.counter_value(name) or 0)


def compile_count() -> int:
    return counter("UncachedCompile")


def cached_run_count() -> int:
    return counter("CachedCompile")


# compiles and cached runs x64guard asked torch-xla for (warm_up): the rest are torch-xla's own
_OWN_COMPILES = [0, 0]


@contextlib.contextmanager
def own_compiles() -> Iterator[None]:
    """Count torch-xla's compiles and cached runs in this block as x64guard's: its warm-ups,
    and the small eager graphs of its own checks (the stacked range bounds read back), so
    that the lazy loop's `lazy-read` warning counts only the user's unnarrowed graphs."""
    before = compile_count(), cached_run_count()
    try:
        yield
    finally:
        _OWN_COMPILES[0] += compile_count() - before[0]
        _OWN_COMPILES[1] += cached_run_count() - before[1]


def own_compile_count(cached: bool = False) -> int:
    """How many of torch-xla's compiles (`compile_count`), or with `cached` its cached runs
    (`cached_run_count`), x64guard caused (`own_compiles`)."""
    return _OWN_COMPILES[1 if cached else 0]
