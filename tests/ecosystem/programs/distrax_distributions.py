"""distrax, as its users write it (reinforcement-learning policies, variational families):
log-probabilities, entropies and KL divergences, `sample_and_log_prob` with a key, a
tanh-squashed Gaussian policy (`Transformed` with `Block(Tanh)`), a `MixtureSameFamily`
and a full-covariance `MultivariateNormalTri`."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from tests.ecosystem.programs.base import Registry

registry = Registry("distrax")


@registry.program("distrax_categorical_policy",
                  "a Categorical policy from logits: sample_and_log_prob(seed=key), entropy, "
                  "KL to a uniform one")
def categorical_policy():
    import distrax

    def act(logits, key):
        pi = distrax.Categorical(logits=logits)
        action, log_prob = pi.sample_and_log_prob(seed=key)
        uniform = distrax.Categorical(logits=jnp.zeros_like(logits))
        return action, log_prob, pi.entropy(), pi.kl_divergence(uniform)

    logits = jnp.asarray([[0.1, 2.0, -1.0, 0.5], [3.0, 0.0, 0.0, -2.0]], jnp.float32)
    return act, (logits, jax.random.key(1))


@registry.program("distrax_tanh_gaussian_policy",
                  "a tanh-squashed diagonal Gaussian policy: Transformed(MultivariateNormalDiag, "
                  "Block(Tanh(), 1)), sample_and_log_prob")
def tanh_gaussian_policy():
    import distrax

    def act(mean, log_std, key):
        base = distrax.MultivariateNormalDiag(mean, jnp.exp(log_std))
        pi = distrax.Transformed(base, distrax.Block(distrax.Tanh(), ndims=1))
        return pi.sample_and_log_prob(seed=key)

    return act, (jnp.asarray([0.2, -0.5, 1.0], jnp.float32), jnp.asarray([-1.0, 0.0, -0.5], jnp.float32),
                 jax.random.key(2))


@registry.program("distrax_normal_kl_grad",
                  "jax.grad of KL(Normal(mu, sigma) || Normal(0, 1)) plus a log_prob term")
def normal_kl_grad():
    import distrax

    def loss(mu, log_sigma, x):
        q = distrax.Normal(mu, jnp.exp(log_sigma))
        return jnp.sum(q.kl_divergence(distrax.Normal(0.0, 1.0))) - jnp.sum(q.log_prob(x))

    return jax.grad(loss, argnums=(0, 1)), (jnp.asarray([0.5, -1.0], jnp.float32),
                                            jnp.asarray([0.1, -0.3], jnp.float32),
                                            jnp.asarray([0.4, 0.2], jnp.float32))


@registry.program("distrax_mixture_log_prob",
                  "MixtureSameFamily(Categorical, Normal): log_prob at points and a sample with a key")
def mixture_log_prob():
    import distrax

    def mixture(logits, locs, scales, x, key):
        mix = distrax.MixtureSameFamily(distrax.Categorical(logits=logits), distrax.Normal(locs, scales))
        return mix.log_prob(x), mix.sample(seed=key, sample_shape=(4,))

    return mixture, (jnp.asarray([0.0, 1.0, -1.0], jnp.float32), jnp.asarray([-2.0, 0.0, 3.0], jnp.float32),
                     jnp.asarray([0.5, 1.0, 0.7], jnp.float32), jnp.asarray([-1.9, 0.1, 2.5, 10.0], jnp.float32),
                     jax.random.key(3))


@registry.program("distrax_mvn_tri_log_prob",
                  "MultivariateNormalTri(loc, scale_tri) with a Cholesky factor: log_prob and entropy")
def mvn_tri_log_prob():
    import distrax

    rng = np.random.default_rng(4)
    a = rng.standard_normal((3, 3)).astype(np.float32)
    scale_tri = jnp.asarray(np.linalg.cholesky(a @ a.T + 3 * np.eye(3)).astype(np.float32))

    def density(loc, scale_tri, x):
        d = distrax.MultivariateNormalTri(loc, scale_tri)
        return d.log_prob(x), d.entropy()

    return density, (jnp.zeros(3, jnp.float32), scale_tri, jnp.asarray([[0.5, -0.2, 1.0], [3.0, 3.0, -3.0]],
                                                                        jnp.float32))


PROGRAMS = registry.programs
