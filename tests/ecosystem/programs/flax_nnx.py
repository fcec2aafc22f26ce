"""flax.nnx, as its users write it under jax.jit: nnx.split/merge around a train step,
nnx.Rngs (typed keys) carried in the state, nnx.Optimizer updates, modules as pytrees."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from tests.ecosystem.programs.base import Registry

registry = Registry("flax.nnx")


def _data(n=8, d=4, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d)).astype(np.float32)
    return jnp.asarray(x), jnp.asarray((x @ np.array([1.0, -2.0, 0.5, 0.0], np.float32))[:, None])


def _model_class():
    from flax import nnx

    class MLP(nnx.Module):
        def __init__(self, rngs: nnx.Rngs):
            self.hidden = nnx.Linear(4, 16, rngs=rngs)
            self.dropout = nnx.Dropout(0.1, rngs=rngs)
            self.out = nnx.Linear(16, 1, rngs=rngs)

        def __call__(self, x):
            return self.out(self.dropout(nnx.relu(self.hidden(x))))

    return MLP


@registry.program("nnx_train_step_split_merge",
                  "nnx.Optimizer(adamw) train step with Dropout: nnx.merge -> nnx.value_and_grad -> update -> "
                  "nnx.state, the (model, optimizer) state with its Rngs typed keys in and out")
def train_step_split_merge():
    import optax
    from flax import nnx

    model = _model_class()(nnx.Rngs(0))
    optimizer = nnx.Optimizer(model, optax.adamw(1e-2), wrt=nnx.Param)
    graphdef, state = nnx.split((model, optimizer))
    x, y = _data()

    def train_step(state, x, y):
        model, optimizer = nnx.merge(graphdef, state)

        def loss_fn(model):
            return jnp.mean((model(x) - y) ** 2)

        loss, grads = nnx.value_and_grad(loss_fn)(model)
        optimizer.update(model, grads)
        return loss, nnx.state((model, optimizer))

    return train_step, (state, x, y)


@registry.program("nnx_init_in_jit",
                  "model constructed inside jit from nnx.Rngs(params=key): parameter init draws, state out")
def init_in_jit():
    from flax import nnx

    MLP = _model_class()

    def init(key):
        return nnx.state(MLP(nnx.Rngs(params=key, dropout=1)))

    return init, (jax.random.key(0),)


@registry.program("nnx_module_as_pytree",
                  "an nnx module passed straight through jit (modules are pytrees in flax 0.12): dropout forward "
                  "pass in training mode, the module (rng counts advanced) returned")
def module_as_pytree():
    from flax import nnx

    model = _model_class()(nnx.Rngs(0))
    x, _ = _data(seed=1)

    def forward(model, x):
        return model(x), model

    return forward, (model, x)


@registry.program("nnx_batchnorm_train_step",
                  "nnx.BatchNorm in training mode updates its batch statistics; SGD with momentum via nnx.Optimizer")
def batchnorm_train_step():
    import optax
    from flax import nnx

    class Net(nnx.Module):
        def __init__(self, rngs):
            self.linear = nnx.Linear(4, 8, rngs=rngs)
            self.norm = nnx.BatchNorm(8, momentum=0.9, rngs=rngs)
            self.head = nnx.Linear(8, 1, rngs=rngs)

        def __call__(self, x):
            return self.head(nnx.gelu(self.norm(self.linear(x))))

    model = Net(nnx.Rngs(0))
    model.train()
    return _split_merge_step(model, optax.sgd(0.05, momentum=0.9), seed=2)


def _split_merge_step(model, tx, seed: int):
    """The train step nnx users write: nnx.split outside, nnx.merge inside, an
    nnx.Optimizer(tx, wrt=nnx.Param) update, the (model, optimizer) state out."""
    from flax import nnx

    optimizer = nnx.Optimizer(model, tx, wrt=nnx.Param)
    graphdef, state = nnx.split((model, optimizer))
    x, y = _data(seed=seed)

    def train_step(state, x, y):
        model, optimizer = nnx.merge(graphdef, state)
        loss, grads = nnx.value_and_grad(lambda m: jnp.mean((m(x) - y) ** 2))(model)
        optimizer.update(model, grads)
        return loss, nnx.state((model, optimizer))

    return train_step, (state, x, y)


@registry.program("nnx_conv_attention_eval",
                  "nnx.Conv + nnx.LayerNorm + nnx.MultiHeadAttention forward pass, eval mode, via split/merge")
def conv_attention_eval():
    from flax import nnx

    class Encoder(nnx.Module):
        def __init__(self, rngs):
            self.conv = nnx.Conv(3, 8, kernel_size=(3,), rngs=rngs)
            self.norm = nnx.LayerNorm(8, rngs=rngs)
            self.attention = nnx.MultiHeadAttention(num_heads=2, in_features=8, decode=False, rngs=rngs)

        def __call__(self, x):
            h = self.norm(nnx.silu(self.conv(x)))
            return self.attention(h).mean(axis=1)

    model = Encoder(nnx.Rngs(0))
    model.eval()
    graphdef, state = nnx.split(model)
    x = jnp.asarray(np.random.default_rng(3).standard_normal((2, 6, 3)).astype(np.float32))

    def forward(state, x):
        return nnx.merge(graphdef, state)(x)

    return forward, (state, x)


@registry.program("nnx_bn_dropout_adamw_train_step",
                  "issue 21's program: Linear -> BatchNorm (training) -> relu -> Dropout -> Linear, "
                  "nnx.Optimizer(adamw, wrt=nnx.Param), split outside and merge inside the step, typed Rngs keys "
                  "in the state")
def bn_dropout_adamw_train_step():
    import optax
    from flax import nnx

    class Net(nnx.Module):
        def __init__(self, rngs):
            self.linear = nnx.Linear(4, 16, rngs=rngs)
            self.norm = nnx.BatchNorm(16, rngs=rngs)
            self.dropout = nnx.Dropout(0.1, rngs=rngs)
            self.head = nnx.Linear(16, 1, rngs=rngs)

        def __call__(self, x):
            return self.head(self.dropout(nnx.relu(self.norm(self.linear(x)))))

    model = Net(nnx.Rngs(0))
    model.train()
    return _split_merge_step(model, optax.adamw(1e-2), seed=3)


@registry.program("nnx_bn_dropout_eval_after_step",
                  "the same model: one training step (BatchNorm statistics and Dropout's rng count updated), "
                  "then an eval-mode forward pass with the running statistics, in one jitted function")
def bn_dropout_eval_after_step():
    import optax
    from flax import nnx

    class Net(nnx.Module):
        def __init__(self, rngs):
            self.linear = nnx.Linear(4, 8, rngs=rngs)
            self.norm = nnx.BatchNorm(8, momentum=0.8, rngs=rngs)
            self.dropout = nnx.Dropout(0.25, rngs=rngs)
            self.head = nnx.Linear(8, 1, rngs=rngs)

        def __call__(self, x):
            return self.head(self.dropout(nnx.gelu(self.norm(self.linear(x)))))

    model = Net(nnx.Rngs(params=1, dropout=2))
    optimizer = nnx.Optimizer(model, optax.adam(3e-3), wrt=nnx.Param)
    graphdef, state = nnx.split((model, optimizer))
    x, y = _data(seed=4)

    def step_then_eval(state, x, y):
        model, optimizer = nnx.merge(graphdef, state)
        model.train()
        loss, grads = nnx.value_and_grad(lambda m: jnp.mean((m(x) - y) ** 2))(model)
        optimizer.update(model, grads)
        model.eval()
        return loss, model(x), nnx.state((model, optimizer))

    return step_then_eval, (state, x, y)


PROGRAMS = registry.programs
