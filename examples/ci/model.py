"""A tiny JAX model, the code the example CI job gates.

`predict` is accelerator-ready. `standardise` is what x64 test suites often hide: with
`jax_enable_x64` on (see test_model.py) its arithmetic runs in float64, which an
accelerator without 64-bit types cannot run as written.
"""

import jax
import jax.numpy as jnp


@jax.jit
def predict(params, x):
    return jnp.tanh(x @ params["w"] + params["b"])


@jax.jit
def standardise(x):
    centred = x - jnp.mean(x)
    return centred / jnp.sqrt(jnp.mean(centred * centred) + 1e-6)
