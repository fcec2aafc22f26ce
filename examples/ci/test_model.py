"""The example suite: plain pytest, run by `x64guard gate -- python -m pytest examples/ci`."""

import jax
import jax.numpy as jnp
import numpy as np

import model

jax.config.update("jax_enable_x64", True)  # as many scientific test suites do


def test_predict_is_float32():
    params = {"w": jnp.ones((3, 2), jnp.float32), "b": jnp.zeros(2, jnp.float32)}
    out = model.predict(params, jnp.ones((4, 3), jnp.float32))
    assert out.shape == (4, 2) and out.dtype == jnp.float32


def test_standardise():
    x = np.linspace(0.0, 1.0, 8)  # NumPy's default float64 stays float64 under x64
    out = model.standardise(x)
    np.testing.assert_allclose(np.mean(np.asarray(out)), 0.0, atol=1e-6)
