"""equinox, as its users write it: models are pytrees, split with eqx.partition and
rebuilt with eqx.combine inside the step; eqx.filter_value_and_grad; dropout keys per
example; stateful BatchNorm; equinox's runtime errors (error_if, branched_error_if) and
its nextafter/prevbefore."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from tests.ecosystem.programs.base import Registry

registry = Registry("equinox")


def _data(n=8, d=3, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d)).astype(np.float32)
    return jnp.asarray(x), jnp.asarray(np.sin(x).sum(axis=1, keepdims=True).astype(np.float32))


@registry.program("eqx_mlp_init_in_jit",
                  "eqx.nn.MLP constructed inside jit from a key (default dtypes), its arrays returned")
def mlp_init_in_jit():
    import equinox as eqx

    def init(key):
        model = eqx.nn.MLP(3, 1, width_size=8, depth=2, activation=jax.nn.softplus, key=key)
        return eqx.filter(model, eqx.is_array)

    return init, (jax.random.PRNGKey(0),)


@registry.program("eqx_dropout_train_step",
                  "MLP + eqx.nn.Dropout, eqx.filter_value_and_grad over a partitioned model, per-example dropout "
                  "keys from jax.random.split, optax.adam update on eqx.filter(model, is_inexact_array)")
def dropout_train_step():
    import equinox as eqx
    import optax

    class Net(eqx.Module):
        layers: tuple
        dropout: eqx.nn.Dropout

        def __init__(self, key):
            k1, k2 = jax.random.split(key)
            self.layers = (eqx.nn.Linear(3, 16, key=k1), eqx.nn.Linear(16, 1, key=k2))
            self.dropout = eqx.nn.Dropout(0.2)

        def __call__(self, x, key):
            h = jax.nn.relu(self.layers[0](x))
            return self.layers[1](self.dropout(h, key=key))

    model = Net(jax.random.PRNGKey(0))
    params, static = eqx.partition(model, eqx.is_inexact_array)
    tx = optax.adam(1e-2)
    opt_state = tx.init(params)
    x, y = _data()

    def train_step(params, opt_state, x, y, key):
        @eqx.filter_value_and_grad
        def loss_fn(params):
            model = eqx.combine(params, static)
            keys = jax.random.split(key, x.shape[0])
            return jnp.mean((jax.vmap(model)(x, keys) - y) ** 2)

        loss, grads = loss_fn(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return eqx.apply_updates(params, updates), opt_state, loss

    return train_step, (params, opt_state, x, y, jax.random.PRNGKey(1))


@registry.program("eqx_batchnorm_with_state",
                  "eqx.nn.make_with_state model with BatchNorm, vmapped over the batch axis in training mode: "
                  "outputs and the updated eqx.nn.State")
def batchnorm_with_state():
    import equinox as eqx

    class Net(eqx.Module):
        linear: eqx.nn.Linear
        norm: eqx.nn.BatchNorm

        def __init__(self, key):
            self.linear = eqx.nn.Linear(3, 4, key=key)
            self.norm = eqx.nn.BatchNorm(4, axis_name="batch", mode="ema")

        def __call__(self, x, state):
            h, state = self.norm(self.linear(x), state)
            return jnp.tanh(h), state

    model, state = eqx.nn.make_with_state(Net)(jax.random.PRNGKey(0))
    params, static = eqx.partition(model, eqx.is_array)
    x, _ = _data(seed=1)

    def forward(params, state, x):
        model = eqx.combine(params, static)
        return jax.vmap(model, axis_name="batch", in_axes=(0, None), out_axes=(0, None))(x, state)

    return forward, (params, state, x)


@registry.program("eqx_gru_scan_grad",
                  "eqx.nn.GRUCell unrolled with lax.scan over a sequence: gradient of the final-state loss")
def gru_scan_grad():
    import equinox as eqx

    cell = eqx.nn.GRUCell(2, 5, key=jax.random.PRNGKey(0))
    params, static = eqx.partition(cell, eqx.is_array)
    xs = jnp.asarray(np.random.default_rng(2).standard_normal((6, 2)).astype(np.float32))

    def loss_and_grad(params, xs):
        def loss(params):
            cell = eqx.combine(params, static)

            def step(h, x):
                h = cell(x, h)
                return h, h

            h, _ = jax.lax.scan(step, jnp.zeros(5, xs.dtype), xs)
            return jnp.sum(h ** 2)

        return jax.value_and_grad(loss)(params)

    return loss_and_grad, (params, xs)


@registry.program("eqx_attention_layernorm",
                  "eqx.nn.MultiheadAttention + eqx.nn.LayerNorm + eqx.nn.RotaryPositionalEmbedding forward pass")
def attention_layernorm():
    import equinox as eqx

    k1, k2 = jax.random.split(jax.random.PRNGKey(0))
    attention = eqx.nn.MultiheadAttention(num_heads=2, query_size=8, key=k1)
    norm = eqx.nn.LayerNorm(8)
    rope = eqx.nn.RotaryPositionalEmbedding(embedding_size=4)
    params, static = eqx.partition((attention, norm), eqx.is_array)
    x = jnp.asarray(np.random.default_rng(3).standard_normal((5, 8)).astype(np.float32))

    def forward(params, x):
        attention, norm = eqx.combine(params, static)
        h = jax.vmap(norm)(x)

        def process_heads(q, k, v):
            return jax.vmap(rope, in_axes=1, out_axes=1)(q), jax.vmap(rope, in_axes=1, out_axes=1)(k), v

        return attention(h, h, h, process_heads=process_heads)

    return forward, (params, x)


@registry.program("eqx_nextafter_prevbefore",
                  "equinox.internal nextafter/prevbefore (jump handling in diffrax) at 0, +-1, tiny and large values")
def nextafter_prevbefore():
    import equinox.internal as eqxi

    x = jnp.asarray([0.0, 1.0, -1.0, 1e-38, 3.5, -2e30, 0.1], jnp.float32)

    def steps(x):
        return eqxi.nextafter(x), eqxi.prevbefore(x), eqxi.nextafter(x) > x, eqxi.prevbefore(x) < x

    return steps, (x,)


@registry.program("eqx_error_if_default",
                  "eqx.error_if and eqx.branched_error_if with the default on_error (EQX_ON_ERROR=raise: a host "
                  "callback), conditions false")
def error_if_default():
    import equinox as eqx

    x = jnp.asarray([0.5, 1.5, 2.5], jnp.float32)
    index = jnp.asarray(0, jnp.int32)

    def checked(x, index):
        y = eqx.error_if(x, jnp.any(x < 0), "x must be non-negative")
        y = eqx.branched_error_if(y, jnp.any(jnp.isnan(y)), index, ["nan in y", "never"])
        return jnp.sqrt(y) * 2

    return checked, (x, index)


PROGRAMS = registry.programs
