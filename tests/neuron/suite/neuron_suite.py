"""A small JAX test suite `x64guard gate --target neuron-trn2-int64` runs (issue 23): it
passes on the CPU, and compiles what neuronx-cc documents it rejects."""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax


def test_integer_matmul_counts():
    counts = jax.jit(lambda a, b: a @ b)(np.ones((2, 3), np.int32), np.ones((3, 2), np.int32))
    assert int(counts.sum()) == 12


def test_branching_step():
    step = jax.jit(lambda p, x: lax.cond(p, jnp.sin, jnp.cos, x))
    assert float(step(True, np.float32(0))) == 0.0


def test_float_matmul_is_fine():
    out = jax.jit(lambda a, b: a @ b)(np.ones((2, 3), np.float32), np.ones((3, 2), np.float32))
    assert float(out.sum()) == 12.0
