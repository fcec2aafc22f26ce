"""dm-haiku, as its users write it: hk.transform / hk.transform_with_state modules (MLP,
Conv2D, LayerNorm, BatchNorm with state, LSTM unrolled), a training step with optax Adam,
dropout keyed by hk.next_rng_key, and the jitted init (haiku's initializers)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from tests.ecosystem.programs.base import Registry

registry = Registry("haiku")


def _batch(seed=0, n=16, d=4, classes=3):
    rng = np.random.default_rng(seed)
    x = jnp.asarray(rng.standard_normal((n, d)).astype(np.float32))
    y = jnp.asarray(rng.integers(0, classes, n).astype(np.int32))
    return x, y


@registry.program("haiku_mlp_adam_step",
                  "hk.transform(hk.nets.MLP) classifier, softmax cross-entropy, two optax.adam(1e-2) steps", slow=True)
def mlp_adam_step():
    import haiku as hk
    import optax

    net = hk.without_apply_rng(hk.transform(lambda x: hk.nets.MLP([16, 16, 3])(x)))
    x, y = _batch()
    params = net.init(jax.random.PRNGKey(0), x)
    tx = optax.adam(1e-2)

    def loss(params, x, y):
        return optax.softmax_cross_entropy_with_integer_labels(net.apply(params, x), y).mean()

    def step(params, opt_state, x, y):
        losses = []
        for _ in range(2):
            value, grads = jax.value_and_grad(loss)(params, x, y)
            updates, opt_state = tx.update(grads, opt_state, params)
            params = optax.apply_updates(params, updates)
            losses.append(value)
        return params, opt_state, jnp.stack(losses)

    return step, (params, tx.init(params), x, y)


@registry.program("haiku_dropout_train_step",
                  "hk.transform MLP with hk.dropout(hk.next_rng_key(), 0.2, ...) in training; one SGD step "
                  "with the apply rng", slow=True)
def dropout_train_step():
    import haiku as hk

    def forward(x, is_training):
        h = jax.nn.relu(hk.Linear(32)(x))
        if is_training:
            h = hk.dropout(hk.next_rng_key(), 0.2, h)
        h = jax.nn.relu(hk.Linear(32)(h))
        if is_training:
            h = hk.dropout(hk.next_rng_key(), 0.2, h)
        return hk.Linear(3)(h)

    net = hk.transform(forward)
    x, y = _batch(1)
    params = net.init(jax.random.PRNGKey(1), x, True)

    def step(params, key, x, y):
        def loss(params):
            logits = net.apply(params, key, x, True)
            return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1))

        value, grads = jax.value_and_grad(loss)(params)
        return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads), value

    return step, (params, jax.random.PRNGKey(7), x, y)


@registry.program("haiku_batchnorm_state",
                  "hk.transform_with_state: Linear + hk.BatchNorm(create_scale, create_offset, decay_rate=0.9) "
                  "training apply (state updated) then evaluation apply with the new state")
def batchnorm_state():
    import haiku as hk

    def forward(x, is_training):
        h = hk.Linear(8)(x)
        h = hk.BatchNorm(create_scale=True, create_offset=True, decay_rate=0.9)(h, is_training)
        return hk.Linear(1)(jax.nn.gelu(h))

    net = hk.transform_with_state(forward)
    x, _ = _batch(2)
    params, state = net.init(jax.random.PRNGKey(2), x, True)

    def run(params, state, x):
        out_train, state = net.apply(params, state, None, x, True)
        out_eval, _ = net.apply(params, state, None, x * 2.0, False)
        return out_train, out_eval, state

    return run, (params, state, x)


@registry.program("haiku_conv_layernorm",
                  "hk.Conv2D + hk.LayerNorm + hk.avg_pool + hk.Flatten + hk.Linear forward on an NHWC image batch",
                  slow=True)
def conv_layernorm():
    import haiku as hk

    def forward(img):
        h = hk.Conv2D(8, kernel_shape=3, stride=1)(img)
        h = hk.LayerNorm(axis=-1, create_scale=True, create_offset=True)(h)
        h = jax.nn.swish(h)
        h = hk.avg_pool(h, window_shape=2, strides=2, padding="VALID")
        return hk.Linear(5)(hk.Flatten()(h))

    net = hk.without_apply_rng(hk.transform(forward))
    rng = np.random.default_rng(3)
    img = jnp.asarray(rng.standard_normal((2, 8, 8, 3)).astype(np.float32))
    return net.apply, (net.init(jax.random.PRNGKey(3), img), img)


@registry.program("haiku_lstm_dynamic_unroll",
                  "hk.LSTM unrolled over 6 time steps with hk.dynamic_unroll (a scan), then a Linear head")
def lstm_unroll():
    import haiku as hk

    def forward(seq):
        core = hk.LSTM(12)
        outs, _ = hk.dynamic_unroll(core, seq, core.initial_state(seq.shape[1]))
        return hk.Linear(1)(outs)

    net = hk.without_apply_rng(hk.transform(forward))
    rng = np.random.default_rng(4)
    seq = jnp.asarray(rng.standard_normal((6, 2, 3)).astype(np.float32))
    return net.apply, (net.init(jax.random.PRNGKey(4), seq), seq)


@registry.program("haiku_jit_init",
                  "jax.jit(net.init): hk.nets.MLP and hk.Conv2D parameters from their default initializers "
                  "(truncated normal VarianceScaling) and a key", slow=True)
def jit_init():
    import haiku as hk

    def forward(x, img):
        return hk.nets.MLP([8, 4])(x), hk.Conv2D(4, 3)(img)

    net = hk.transform(forward)
    x, _ = _batch(5)
    img = jnp.zeros((1, 4, 4, 2), jnp.float32)
    return net.init, (jax.random.PRNGKey(5), x, img)


PROGRAMS = registry.programs
