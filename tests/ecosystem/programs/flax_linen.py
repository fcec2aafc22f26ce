"""flax.linen, as its users write it: modules with @nn.compact, init, apply with a dropout
rng, value_and_grad with optax, BatchNorm's mutable batch_stats."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from tests.ecosystem.programs.base import Registry

registry = Registry("flax.linen")


def _data(n=8, d=5, classes=3, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d)).astype(np.float32)
    y = rng.integers(0, classes, n).astype(np.int32)
    return jnp.asarray(x), jnp.asarray(y)


def _mlp():
    import flax.linen as nn

    class MLP(nn.Module):
        hidden: int = 16
        classes: int = 3

        @nn.compact
        def __call__(self, x, train: bool):
            x = nn.relu(nn.Dense(self.hidden)(x))
            x = nn.Dropout(rate=0.2, deterministic=not train)(x)
            return nn.Dense(self.classes)(x)

    return MLP()


@registry.program("linen_mlp_dropout_train_step",
                  "MLP with nn.Dropout: value_and_grad of cross-entropy, optax.adam update, raw PRNGKey for dropout")
def mlp_dropout_train_step():
    import optax

    model = _mlp()
    x, y = _data()
    params = model.init(jax.random.PRNGKey(0), x, train=False)
    tx = optax.adam(1e-3)
    opt_state = tx.init(params)

    def train_step(params, opt_state, x, y, dropout_key):
        def loss_fn(p):
            logits = model.apply(p, x, train=True, rngs={"dropout": dropout_key})
            return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    return train_step, (params, opt_state, x, y, jax.random.PRNGKey(1))


@registry.program("linen_mlp_eval_no_dropout",
                  "the same MLP in eval mode (deterministic dropout): apply + softmax + argmax accuracy")
def mlp_eval():
    model = _mlp()
    x, y = _data()
    params = model.init(jax.random.PRNGKey(0), x, train=False)

    def evaluate(params, x, y):
        logits = model.apply(params, x, train=False)
        probs = jax.nn.softmax(logits)
        return probs, jnp.mean(jnp.argmax(logits, -1) == y)

    return evaluate, (params, x, y)


@registry.program("linen_cnn_init_in_jit",
                  "Conv/LayerNorm/Dense model initialised inside jit from a typed key (jax.random.key)")
def cnn_init_in_jit():
    import flax.linen as nn

    class CNN(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.Conv(4, (3, 3))(x)
            x = nn.LayerNorm()(x)
            x = nn.avg_pool(nn.gelu(x), (2, 2), strides=(2, 2))
            return nn.Dense(2)(x.reshape(x.shape[0], -1))

    model = CNN()
    x = jnp.asarray(np.random.default_rng(1).standard_normal((2, 6, 6, 1)).astype(np.float32))

    def init_and_apply(key, x):
        params = model.init(key, x)
        return params, model.apply(params, x)

    return init_and_apply, (jax.random.key(0), x)


@registry.program("linen_batchnorm_train_step",
                  "BatchNorm in training mode (mutable batch_stats) + optax.sgd with momentum")
def batchnorm_train_step():
    import flax.linen as nn
    import optax

    class Net(nn.Module):
        @nn.compact
        def __call__(self, x, train: bool):
            x = nn.Dense(8)(x)
            x = nn.BatchNorm(use_running_average=not train, momentum=0.9)(x)
            return nn.Dense(1)(nn.swish(x))[:, 0]

    model = Net()
    x, _ = _data(seed=2)
    target = jnp.sin(x[:, 0])
    variables = model.init(jax.random.PRNGKey(0), x, train=False)
    tx = optax.sgd(0.05, momentum=0.9)
    opt_state = tx.init(variables["params"])

    def train_step(params, batch_stats, opt_state, x, target):
        def loss_fn(p):
            pred, updates = model.apply({"params": p, "batch_stats": batch_stats}, x, train=True,
                                        mutable=["batch_stats"])
            return jnp.mean((pred - target) ** 2), updates["batch_stats"]

        (loss, new_stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
        updates, opt_state = tx.update(grads, opt_state)
        return optax.apply_updates(params, updates), new_stats, opt_state, loss

    return train_step, (variables["params"], variables["batch_stats"], opt_state, x, target)


@registry.program("linen_attention_dropout",
                  "MultiHeadDotProductAttention with attention dropout and a causal mask, training mode")
def attention_dropout():
    import flax.linen as nn

    attention = nn.MultiHeadDotProductAttention(num_heads=2, qkv_features=8, dropout_rate=0.1)
    x = jnp.asarray(np.random.default_rng(3).standard_normal((2, 5, 8)).astype(np.float32))
    mask = nn.make_causal_mask(jnp.ones((2, 5)))
    params = attention.init(jax.random.PRNGKey(0), x, x, mask=mask, deterministic=True)

    def forward(params, x, key):
        return attention.apply(params, x, x, mask=mask, deterministic=False, rngs={"dropout": key})

    return forward, (params, x, jax.random.PRNGKey(7))


@registry.program("linen_lstm_lm_grad",
                  "Embed + nn.RNN(LSTMCell) language model: gradient of the token cross-entropy", slow=True)
def lstm_lm_grad():
    import flax.linen as nn
    import optax

    class LM(nn.Module):
        vocab: int = 11

        @nn.compact
        def __call__(self, tokens):
            h = nn.Embed(self.vocab, 6)(tokens)
            h = nn.RNN(nn.LSTMCell(8))(h)
            return nn.Dense(self.vocab)(h)

    model = LM()
    tokens = jnp.asarray(np.random.default_rng(4).integers(0, 11, (2, 6)).astype(np.int32))
    params = model.init(jax.random.PRNGKey(0), tokens)

    def loss_and_grad(params, tokens):
        def loss_fn(p):
            logits = model.apply(p, tokens[:, :-1])
            return optax.softmax_cross_entropy_with_integer_labels(logits, tokens[:, 1:]).mean()

        return jax.value_and_grad(loss_fn)(params)

    return loss_and_grad, (params, tokens)


@registry.program("linen_bn_dropout_adamw_train_step",
                  "Dense -> BatchNorm (mutable=['batch_stats']) -> relu -> Dropout (rngs={'dropout': key}) -> Dense, "
                  "optax.adamw, the step's dropout key split from a carried key")
def bn_dropout_adamw_train_step():
    import flax.linen as nn
    import optax

    class Net(nn.Module):
        @nn.compact
        def __call__(self, x, train: bool):
            x = nn.Dense(16)(x)
            x = nn.BatchNorm(use_running_average=not train)(x)
            x = nn.Dropout(0.1, deterministic=not train)(nn.relu(x))
            return nn.Dense(1)(x)[:, 0]

    model = Net()
    x, _ = _data(seed=5)
    target = jnp.cos(x[:, 1])
    variables = model.init(jax.random.PRNGKey(0), x, train=False)
    tx = optax.adamw(1e-2)
    opt_state = tx.init(variables["params"])

    def train_step(params, batch_stats, opt_state, key, x, target):
        key, dropout_key = jax.random.split(key)

        def loss_fn(p):
            pred, updates = model.apply({"params": p, "batch_stats": batch_stats}, x, train=True,
                                        mutable=["batch_stats"], rngs={"dropout": dropout_key})
            return jnp.mean((pred - target) ** 2), updates["batch_stats"]

        (loss, new_stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), new_stats, opt_state, key, loss

    return train_step, (variables["params"], variables["batch_stats"], opt_state, jax.random.PRNGKey(1), x, target)


PROGRAMS = registry.programs
