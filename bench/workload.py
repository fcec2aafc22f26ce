"""The benchmark's input: a deep, unrolled x64 JAX program lowered to StableHLO text.

A Python loop of `steps` iterations of mixed f64/i64 elementwise work (sin, multiply by a
per-step constant, an int64 counter converted to float, clip, compare + where, an f64 ->
i64 conversion feeding integer arithmetic). JAX traces every iteration, so the module
grows by about 28 ops per step. Nothing is compiled: only `jax.jit(f).lower(...)`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

# ~28 ops per step: 1200 steps give about 33-34k ops (all operations in the module,
# the module, functions and returns included).
DEFAULT_STEPS = 1200


def _program(steps: int):
    def f(x, n):
        acc = jnp.zeros_like(x)
        for i in range(steps):
            c = 1.0 + (i % 17) * 1e-3                      # per-step f64 constant
            y = jnp.sin(x) * c + n.astype(jnp.float64)     # i64 counter -> f64
            y = jnp.clip(y, -10.0, 10.0)
            acc = jnp.where(y > 0, acc + y, acc - y * 0.5)
            k = (y * 3.0).astype(jnp.int64)                # f64 -> i64
            n = n + (i % 7 + 1) + k % 5
            x = y
        return acc, n
    return f


def lower_x64(steps: int = DEFAULT_STEPS, width: int = 8, locations: bool = True) -> str:
    """StableHLO text of the program traced with x64 enabled: with JAX's source locations
    (`as_text(debug_info=True)`), or without any (`as_text()`, as most dumps, HLO
    conversions and torch-xla modules are).

    x64 is enabled only for the trace; the previous setting is restored afterwards.
    """
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        lowered = jax.jit(_program(steps)).lower(
            np.linspace(-1.0, 1.0, width, dtype=np.float64), np.arange(width, dtype=np.int64))
        return lowered.as_text(debug_info=locations)
    finally:
        jax.config.update("jax_enable_x64", previous)


def count_ops(module) -> int:
    """Every operation in the module, nested ones included (the module op itself too)."""
    from jax.extend.mlir import ir

    count = 0
    advance = ir.WalkResult.ADVANCE

    def visit(_op):
        nonlocal count
        count += 1
        return advance

    module.operation.walk(visit)
    return count
