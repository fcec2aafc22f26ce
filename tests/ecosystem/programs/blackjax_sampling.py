"""blackjax, as its users write it: a log density over a pytree position, a kernel built
with blackjax.<algorithm>(logdensity, ...), init and one or a few steps with a key;
window adaptation."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from tests.ecosystem.programs.base import Registry

registry = Registry("blackjax")

_rng = np.random.default_rng(0)
_X = jnp.asarray(_rng.standard_normal((10, 2)).astype(np.float32))
_Y = jnp.asarray((_rng.standard_normal(10) > 0).astype(np.float32))


def _logdensity(position):
    """Logistic regression posterior over {"w": (2,), "log_scale": ()}."""
    w, log_scale = position["w"], position["log_scale"]
    logits = _X @ w
    log_lik = jnp.sum(_Y * jax.nn.log_sigmoid(logits) + (1 - _Y) * jax.nn.log_sigmoid(-logits))
    log_prior = jax.scipy.stats.norm.logpdf(w, 0.0, jnp.exp(log_scale)).sum() + \
        jax.scipy.stats.norm.logpdf(log_scale, 0.0, 1.0)
    return log_lik + log_prior


def _position():
    return {"w": jnp.asarray([0.3, -0.2], jnp.float32), "log_scale": jnp.asarray(0.1, jnp.float32)}


_INV_MASS = jnp.asarray([1.0, 1.0, 0.5], jnp.float32)


@registry.program("blackjax_nuts_steps",
                  "blackjax.nuts(logdensity, step_size, inverse_mass_matrix): state from init outside, two steps "
                  "with split keys", slow=True)
def nuts_steps():
    import blackjax

    nuts = blackjax.nuts(_logdensity, step_size=0.3, inverse_mass_matrix=_INV_MASS)
    state = nuts.init(_position())

    def steps(state, key):
        infos = []
        for k in jax.random.split(key, 2):
            state, info = nuts.step(k, state)
            infos.append((info.acceptance_rate, info.num_integration_steps, info.is_divergent))
        return state, infos

    return steps, (state, jax.random.PRNGKey(0))


@registry.program("blackjax_hmc_init_and_step",
                  "blackjax.hmc with 5 integration steps: init and one step inside jit, from a typed key")
def hmc_step():
    import blackjax

    hmc = blackjax.hmc(_logdensity, step_size=0.2, inverse_mass_matrix=_INV_MASS, num_integration_steps=5)

    def step(position, key):
        state, info = hmc.step(key, hmc.init(position))
        return state.position, state.logdensity, info.acceptance_rate, info.is_accepted

    return step, (_position(), jax.random.key(1))


@registry.program("blackjax_mala_scan",
                  "blackjax.mala: three steps with lax.scan over split keys")
def mala_scan():
    import blackjax

    mala = blackjax.mala(_logdensity, step_size=0.05)

    def run(position, key):
        def one_step(state, k):
            state, info = mala.step(k, state)
            return state, info.acceptance_rate

        return jax.lax.scan(one_step, mala.init(position), jax.random.split(key, 3))

    return run, (_position(), jax.random.PRNGKey(2))


@registry.program("blackjax_random_walk_rmh",
                  "blackjax.additive_step_random_walk.normal_random_walk (Metropolis): three steps")
def random_walk():
    import blackjax

    rw = blackjax.additive_step_random_walk.normal_random_walk(_logdensity, sigma=0.3)

    def run(position, key):
        state = rw.init(position)
        for k in jax.random.split(key, 3):
            state, _ = rw.step(k, state)
        return state

    return run, (_position(), jax.random.PRNGKey(3))


@registry.program("blackjax_window_adaptation",
                  "blackjax.window_adaptation(blackjax.nuts, logdensity).run(key, position, num_steps=6): tuned "
                  "step size and mass matrix", slow=True)
def window_adaptation():
    import blackjax

    warmup = blackjax.window_adaptation(blackjax.nuts, _logdensity)

    def adapt(position, key):
        (state, parameters), _ = warmup.run(key, position, num_steps=6)
        return state.position, parameters["step_size"], parameters["inverse_mass_matrix"]

    return adapt, (_position(), jax.random.PRNGKey(4))


PROGRAMS = registry.programs
