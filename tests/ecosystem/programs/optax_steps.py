"""optax, as its users write it: an optimizer (adam, adamw, sgd with momentum, lbfgs,
adafactor, lamb, chains with clipping) and a schedule, a few update steps inside one jit;
schedules on their own; the common losses at extreme logits."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from tests.ecosystem.programs.base import Registry

registry = Registry("optax")


def _regression(seed=0, n=16, d=3):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d)).astype(np.float32)
    y = (x @ np.array([1.5, -2.0, 0.25], np.float32) + 0.3).astype(np.float32)
    params = {"w": jnp.zeros((d,), jnp.float32), "b": jnp.zeros((), jnp.float32)}
    return params, jnp.asarray(x), jnp.asarray(y)


def _loss(params, x, y):
    return jnp.mean((x @ params["w"] + params["b"] - y) ** 2)


def _steps(tx, steps=3):
    """`steps` optimizer updates of a least-squares fit in one function, as a training
    loop inside jit does; returns the final params, state and the losses."""
    import optax

    params, x, y = _regression()

    def run(params, opt_state, x, y):
        losses = []
        for _ in range(steps):
            loss, grads = jax.value_and_grad(_loss)(params, x, y)
            updates, opt_state = tx.update(grads, opt_state, params)
            params = optax.apply_updates(params, updates)
            losses.append(loss)
        return params, opt_state, jnp.stack(losses)

    return run, (params, tx.init(params), x, y)


@registry.program("optax_adam_steps", "optax.adam: three value_and_grad + update steps")
def adam_steps():
    import optax

    return _steps(optax.adam(0.1))


@registry.program("optax_adamw_warmup_cosine",
                  "optax.adamw with a warmup_cosine_decay_schedule learning rate and a weight-decay mask")
def adamw_warmup_cosine():
    import optax

    schedule = optax.warmup_cosine_decay_schedule(0.0, 0.1, warmup_steps=2, decay_steps=10, end_value=1e-3)
    return _steps(optax.adamw(schedule, weight_decay=1e-2, mask=lambda p: {"w": True, "b": False}))


@registry.program("optax_sgd_nesterov_exponential_decay",
                  "optax.sgd with Nesterov momentum and a staircase exponential_decay schedule")
def sgd_nesterov():
    import optax

    schedule = optax.exponential_decay(0.05, transition_steps=2, decay_rate=0.5, staircase=True)
    return _steps(optax.sgd(schedule, momentum=0.9, nesterov=True))


@registry.program("optax_chain_clip_global_norm",
                  "optax.chain(clip_by_global_norm, scale_by_adam, scale_by_schedule(cosine_decay), scale(-1))")
def chain_clip():
    import optax

    tx = optax.chain(optax.clip_by_global_norm(0.5), optax.scale_by_adam(),
                     optax.scale_by_schedule(optax.cosine_decay_schedule(0.1, decay_steps=5)), optax.scale(-1.0))
    return _steps(tx)


@registry.program("optax_adafactor_lamb_steps",
                  "optax.adafactor and optax.lamb side by side, two steps each on a 2-D weight")
def adafactor_lamb():
    import optax

    rng = np.random.default_rng(1)
    x = jnp.asarray(rng.standard_normal((8, 4)).astype(np.float32))
    y = jnp.asarray(rng.standard_normal((8, 3)).astype(np.float32))
    params = {"w": jnp.asarray(rng.standard_normal((4, 3)).astype(np.float32) * 0.1)}
    txs = (optax.adafactor(1e-2), optax.lamb(1e-2))

    def run(params, states, x, y):
        out = []
        for tx, state in zip(txs, states):
            p = params
            for _ in range(2):
                grads = jax.grad(lambda q: jnp.mean((x @ q["w"] - y) ** 2))(p)
                updates, state = tx.update(grads, state, p)
                p = optax.apply_updates(p, updates)
            out.append((p, state))
        return out

    return run, (params, tuple(tx.init(params) for tx in txs), x, y)


@registry.program("optax_lbfgs_rosenbrock",
                  "optax.lbfgs (zoom line search) with value_and_grad_from_state: three iterations on Rosenbrock",
                  slow=True)
def lbfgs():
    import optax

    def rosenbrock(p):
        return jnp.sum(100.0 * (p[1:] - p[:-1] ** 2) ** 2 + (1.0 - p[:-1]) ** 2)

    opt = optax.lbfgs()
    value_and_grad = optax.value_and_grad_from_state(rosenbrock)
    params = jnp.asarray([-1.2, 1.0, -0.5], jnp.float32)

    def run(params, state):
        values = []
        for _ in range(3):
            value, grad = value_and_grad(params, state=state)
            updates, state = opt.update(grad, state, params, value=value, grad=grad, value_fn=rosenbrock)
            params = optax.apply_updates(params, updates)
            values.append(value)
        return params, jnp.stack(values)

    return run, (params, opt.init(params))


@registry.program("optax_schedules",
                  "schedules evaluated at int32 step counts: warmup_cosine_decay, linear_onecycle, polynomial, "
                  "piecewise_constant, join_schedules, exponential_decay")
def schedules():
    import optax

    fns = (
        optax.warmup_cosine_decay_schedule(0.0, 1.0, warmup_steps=10, decay_steps=100, end_value=0.01),
        optax.linear_onecycle_schedule(100, 0.5),
        optax.polynomial_schedule(1.0, 0.0, power=2, transition_steps=50, transition_begin=5),
        optax.piecewise_constant_schedule(0.1, {20: 0.5, 60: 0.1}),
        optax.join_schedules([optax.linear_schedule(0.0, 1.0, 10), optax.cosine_decay_schedule(1.0, 90)], [10]),
        optax.exponential_decay(1.0, transition_steps=7, decay_rate=0.9, transition_begin=3, end_value=0.05),
    )
    steps = jnp.asarray([0, 1, 5, 9, 10, 11, 33, 60, 99, 100, 150], jnp.int32)

    def evaluate(steps):
        return [jax.vmap(fn)(steps) for fn in fns]

    return evaluate, (steps,)


@registry.program("optax_losses_extreme_logits",
                  "optax losses at extreme logits: sigmoid_binary_cross_entropy (+-100), softmax_cross_entropy with "
                  "masked -1e9 logits, poly_loss, huber, log_cosh, smooth_labels, kl_divergence")
def losses_extreme():
    import optax

    logits = jnp.asarray([[100.0, -100.0, 0.0], [30.0, -1e9, 2.0], [-20.0, 20.0, 1e-6]], jnp.float32)
    labels = jnp.asarray([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 1.0, 0.0]], jnp.float32)
    ints = jnp.asarray([0, 1, 1], jnp.int32)

    def losses(logits, labels, ints):
        return {
            "sigmoid_bce": optax.sigmoid_binary_cross_entropy(logits, labels),
            "sigmoid_focal": optax.losses.sigmoid_focal_loss(logits, labels),
            "softmax_ce": optax.softmax_cross_entropy(logits, optax.smooth_labels(labels, 0.1)),
            "softmax_ce_int": optax.softmax_cross_entropy_with_integer_labels(logits, ints),
            "poly": optax.losses.poly_loss_cross_entropy(logits, labels),
            "huber": optax.huber_loss(logits / 50, labels),
            "log_cosh": optax.log_cosh(logits / 50, labels),
            "kl": optax.kl_divergence(jax.nn.log_softmax(logits), jax.nn.softmax(labels * 5)),
            "hinge": optax.losses.hinge_loss(logits[:, 0], 2 * labels[:, 0] - 1),
        }

    return losses, (logits, labels, ints)


@registry.program("optax_inject_hyperparams_noisy_sgd",
                  "optax.inject_hyperparams(adam) with the learning rate in the state, chained with add_noise "
                  "(gradient noise from the state's key)")
def inject_noisy():
    import optax

    tx = optax.chain(optax.add_noise(0.01, 0.55, seed=0), optax.inject_hyperparams(optax.adam)(learning_rate=0.05))
    return _steps(tx, steps=2)


PROGRAMS = registry.programs
