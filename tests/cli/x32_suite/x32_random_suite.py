"""A 32-bit JAX test suite that draws random numbers under jit, the way library suites do
(optax's schedules with noise, flax dropout, initializers). It is a fixture: tests/cli/
test_gate_x32.py runs it under `x64guard gate`, which must pass (JAX's own x32 programs hold
uint64 counters and the rbg state, and nothing else 64-bit). Not collected by the main run.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax


@jax.jit
def noisy_sgd_step(params, key):
    noise = 0.01 * jax.random.normal(key, params.shape)
    return params - 0.1 * params + noise


@jax.jit
def dropout(x, key):
    keep = jax.random.bernoulli(key, 0.8, x.shape)
    return jnp.where(keep, x / 0.8, 0.0)


@jax.jit
def init_layer(key):
    k1, k2, k3 = jax.random.split(key, 3)
    w = jax.random.uniform(k1, (4, 3), minval=-0.5, maxval=0.5)
    order = jax.random.permutation(k2, 4)
    labels = jax.random.randint(k3, (4,), 0, 3)
    return w, order, labels


@jax.jit
def sample_many(key):
    keys = jax.random.split(key, 5)
    draws = jax.vmap(lambda k: jax.random.gamma(k, 2.0, (3,)))(keys)
    _, walk = lax.scan(lambda k, _: (jax.random.split(k)[0], jax.random.categorical(k, jnp.zeros(4))), key, None,
                       length=4)
    return draws, walk


def test_noisy_sgd_step():
    params = jnp.ones(8)
    out = noisy_sgd_step(params, jax.random.key(0))
    assert out.dtype == jnp.float32 and bool(jnp.all(jnp.abs(out - 0.9) < 0.1))


def test_dropout_keeps_the_mean():
    x = jnp.ones((64, 64))
    assert abs(float(dropout(x, jax.random.PRNGKey(1)).mean()) - 1.0) < 0.1


def test_init_layer():
    w, order, labels = init_layer(jax.random.key(2))
    assert w.shape == (4, 3) and sorted(np.asarray(order).tolist()) == [0, 1, 2, 3]
    assert labels.dtype == jnp.int32


def test_rbg_keys():
    key = jax.random.key(3, impl="rbg")
    assert dropout(jnp.ones(16), key).shape == (16,)
    assert noisy_sgd_step(jnp.ones(4), jax.random.key(4, impl="unsafe_rbg")).shape == (4,)


def test_vmap_and_scan():
    draws, walk = sample_many(jax.random.key(5))
    assert draws.shape == (5, 3) and walk.shape == (4,)


def test_threefry_not_partitionable():
    with jax.threefry_partitionable(False):
        out = jax.jit(lambda k: jax.random.normal(k, (3,)))(jax.random.key(6))
    assert out.shape == (3,)
