"""tinygp, as its users write it: a `GaussianProcess` built inside the jitted function from
kernel parameters (log-scale, exponentiated), its `log_probability` and gradient, prediction
by `condition`, a quasiseparable (state-space) kernel, and sampling with a key."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from tests.ecosystem.programs.base import Registry

registry = Registry("tinygp")


def _data(seed=0, n=16):
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(0, 10, n)).astype(np.float32)
    y = (np.sin(x) + 0.1 * rng.standard_normal(n)).astype(np.float32)
    return jnp.asarray(x), jnp.asarray(y)


def _params():
    return {"log_amp": jnp.float32(0.1), "log_scale": jnp.float32(0.3), "log_diag": jnp.float32(-2.0)}


def _gp(params, x, kernel="expsq"):
    from tinygp import GaussianProcess, kernels

    base = kernels.ExpSquared(jnp.exp(params["log_scale"])) if kernel == "expsq" else \
        kernels.quasisep.Matern32(jnp.exp(params["log_scale"]))
    return GaussianProcess(jnp.exp(2 * params["log_amp"]) * base, x, diag=jnp.exp(params["log_diag"]))


@registry.program("tinygp_expsquared_loglike_grad",
                  "jax.value_and_grad of GaussianProcess(amp * ExpSquared(scale), x, diag).log_probability(y)")
def expsquared_loglike_grad():
    def loss(params, x, y):
        return -_gp(params, x).log_probability(y)

    return jax.value_and_grad(loss), (_params(), *_data())


@registry.program("tinygp_condition_predict",
                  "gp.condition(y, x_test).gp: the predictive mean and variance at test points")
def condition_predict():
    def predict(params, x, y, x_test):
        cond = _gp(params, x).condition(y, x_test).gp
        return cond.loc, cond.variance

    x, y = _data(1)
    return predict, (_params(), x, y, jnp.linspace(0, 10, 7, dtype=jnp.float32))


@registry.program("tinygp_quasisep_matern32",
                  "a quasiseparable Matern32 kernel (tinygp's state-space solver): log_probability and its gradient")
def quasisep_matern32():
    def loss(params, x, y):
        return -_gp(params, x, kernel="matern32").log_probability(y)

    return jax.value_and_grad(loss), (_params(), *_data(2))


@registry.program("tinygp_sample_key",
                  "gp.sample(key, shape=(3,)): prior draws with a typed key")
def sample_key():
    def draw(params, x, key):
        return _gp(params, x).sample(key, shape=(3,))

    x, _ = _data(3)
    return draw, (_params(), x, jax.random.key(0))


PROGRAMS = registry.programs
