"""Programs for testing the harness itself (tests/ecosystem/test_runner.py): one that
kills its process, one that x64guard gets right, one whose x64 trace is another program
than its x32 trace (x64guard.jit's cross-check runs the x32 one; narrowed as traced, it
would be wrong: the diagnosis test uses it), and two refusals whose declared justifications the harness must reject
(wrong finding kind; x32 JAX in fact gives the 64-bit answer)."""

from __future__ import annotations

import os

import jax.numpy as jnp
import numpy as np
from jax import lax

from tests.ecosystem.programs.base import Refusal, Registry

registry = Registry("harness")


@registry.program("aborts", "kills the child process while building (stands for a segfault in the pass)")
def aborts():
    os.abort()


@registry.program("identical", "a plain float computation")
def identical():
    return (lambda x: jnp.tanh(x) * 2.0), (jnp.asarray([0.5, -1.0], jnp.float32),)


@registry.program("shift_by_half_width",
                  "a shift by half the width, iinfo(dtype).bits // 2: the x64 trace shifts by 32, x32 JAX by 16; "
                  "x64guard.jit's cross-check sees the traces differ and runs x32 JAX's program (narrowing the "
                  "x64 one would shift int32 out entirely)")
def shift_by_half_width():
    def half_width_shift(x):
        return lax.shift_left(x, jnp.asarray(jnp.iinfo(x.dtype).bits // 2, x.dtype))

    return half_width_shift, (jnp.asarray([3, 5, -7], jnp.int32),)


@registry.program("out_of_range_unjustified", "an int64 input beyond int32, declared refusable for the wrong kind",
                  refusal=Refusal(("rng-bits",), "a deliberately wrong justification, to see it rejected by kind"))
def out_of_range_unjustified():
    return (lambda t: t - t[0]), (np.asarray([2**40, 2**40 + 5], np.int64),)


@registry.program("out_of_range_x32_agrees",
                  "an int64 input beyond int32 whose value the program ignores: x32 JAX's answer is right",
                  refusal=Refusal(("input-out-of-range",), "declared, but x32 JAX gives the 64-bit answer here, so "
                                                           "the harness must reject the justification"))
def out_of_range_x32_agrees():
    return (lambda t: jnp.zeros(t.shape, jnp.float32) * 2.0), (np.asarray([2**40, 3], np.int64),)


PROGRAMS = registry.programs
