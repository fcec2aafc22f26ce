"""TensorFlow Probability on JAX (`tensorflow_probability.substrates.jax`), as its users
write it: distributions' log_prob, log_cdf and log_survival_function at the tails,
bijectors, tfp.math special functions (owens_t, lambertw and others), an MCMC kernel run
with tfp.mcmc.sample_chain, and Gaussian-process regression (GaussianProcess log_prob and
its gradient)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from tests.ecosystem.programs.base import Registry

registry = Registry("tfp")


def _tfp():
    from tensorflow_probability.substrates import jax as tfp

    return tfp


@registry.program("tfp_normal_log_cdf_tails",
                  "tfd.Normal(0, 1).log_cdf at 7.5 and -15 (and the usual points), log_survival_function, cdf")
def normal_log_cdf():
    tfd = _tfp().distributions

    def tails(x):
        d = tfd.Normal(jnp.zeros((), x.dtype), jnp.ones((), x.dtype))
        return {"log_cdf": d.log_cdf(x), "log_sf": d.log_survival_function(x), "cdf": d.cdf(x),
                "log_prob": d.log_prob(x)}

    return tails, (jnp.asarray([7.5, -15.0, -40.0, -5.0, 0.0, 3.0, 12.0], jnp.float32),)


@registry.program("tfp_distribution_log_prob_tails",
                  "log_prob / log_cdf of StudentT, Gamma, Beta, LogNormal, Poisson, Binomial, Laplace, Logistic "
                  "at extreme arguments", slow=True)
def distribution_tails():
    tfd = _tfp().distributions

    def tails(x, u, k):
        ax = jnp.abs(x) + 1e-30
        return {"student_t": tfd.StudentT(2.5, 0.0, 1.0).log_prob(x),
                "student_t_cdf": tfd.StudentT(2.5, 0.0, 1.0).log_cdf(x),
                "gamma": tfd.Gamma(0.5, 2.0).log_prob(ax), "gamma_cdf": tfd.Gamma(0.5, 2.0).log_cdf(ax),
                "beta": tfd.Beta(0.5, 3.0).log_prob(u), "beta_cdf": tfd.Beta(0.5, 3.0).cdf(u),
                "lognormal": tfd.LogNormal(0.0, 1.0).log_prob(ax),
                "poisson": tfd.Poisson(rate=1e-3 + ax).log_prob(k),
                "binomial": tfd.Binomial(total_count=60.0, probs=u).log_prob(k.clip(0, 60)),
                "laplace_cdf": tfd.Laplace(0.0, 1.0).log_cdf(x),
                "logistic_sf": tfd.Logistic(0.0, 1.0).log_survival_function(x)}

    x = jnp.asarray([-38.0, -4.0, 0.0, 0.7, 6.0, 38.0], jnp.float32)
    u = jnp.asarray([1e-7, 1e-3, 0.3, 0.9, 1.0 - 1e-7, 0.5], jnp.float32)
    k = jnp.asarray([0.0, 1.0, 1.0, 0.0, 5.0, 60.0], jnp.float32)
    return tails, (x, u, k)


@registry.program("tfp_bijectors_chain",
                  "tfb.Chain([Shift, Scale, Softplus]), Sigmoid, Exp, Tanh: forward, inverse and "
                  "forward/inverse_log_det_jacobian at extreme arguments")
def bijectors():
    tfb = _tfp().bijectors

    def transform(x, y):
        chain = tfb.Chain([tfb.Shift(1.5), tfb.Scale(0.3), tfb.Softplus()])
        out = {}
        for name, b in (("chain", chain), ("sigmoid", tfb.Sigmoid()), ("exp", tfb.Exp()), ("tanh", tfb.Tanh())):
            out[name] = (b.forward(x), b.forward_log_det_jacobian(x, event_ndims=0))
        out["chain_inv"] = (chain.inverse(y + 1.6), chain.inverse_log_det_jacobian(y + 1.6, event_ndims=0))
        out["sigmoid_inv"] = tfb.Sigmoid().inverse(jnp.clip(y, 1e-6, 1 - 1e-6))
        return out

    return transform, (jnp.asarray([-90.0, -20.0, -1.0, 0.0, 1e-4, 3.0, 20.0, 90.0], jnp.float32),
                       jnp.asarray([1e-7, 0.01, 0.3, 0.5, 0.9, 0.99, 0.999999, 1.0], jnp.float32))


@registry.program("tfp_bijector_transformed_distribution",
                  "tfd.TransformedDistribution(Normal, tfb.Exp()) and tfd.TruncatedNormal log_prob, "
                  "a reparameterised sample")
def transformed_distribution():
    tfp = _tfp()
    tfd, tfb = tfp.distributions, tfp.bijectors

    def run(x, key):
        lognormal = tfd.TransformedDistribution(tfd.Normal(0.2, 0.7), tfb.Exp())
        trunc = tfd.TruncatedNormal(loc=0.0, scale=1.0, low=2.0, high=6.0)
        return {"lognormal": lognormal.log_prob(x), "trunc": trunc.log_prob(x),
                "sample": lognormal.sample(4, seed=key)}

    return run, (jnp.asarray([1e-6, 0.5, 2.5, 5.9, 30.0], jnp.float32), jax.random.PRNGKey(3))


@registry.program("tfp_lambertw",
                  "tfp.math.lambertw (principal branch) from the branch point -1/e to 1e6, "
                  "and lambertw_winitzki_approx")
def lambertw():
    tfm = _tfp().math

    def w(z):
        return tfm.lambertw(z), tfm.lambertw_winitzki_approx(z)

    return w, (jnp.asarray([-0.36787944, -0.3, -0.1, 0.0, 1e-5, 0.5, 1.0, 2.718281828, 10.0, 1e3, 1e6],
                           jnp.float32),)


@registry.program("tfp_owens_t",
                  "tfp.math.owens_t(h, a) over its regions (small and large h, |a| < 1 and > 1, a = 1)")
def owens_t():
    tfm = _tfp().math

    h = jnp.asarray([0.0, 0.1, 0.5, 1.0, 2.0, 4.5, 7.0, -3.0, 10.0], jnp.float32)
    a = jnp.asarray([0.5, 0.99, 1.0, 2.0, 0.1, 5.0, 0.7, -0.4, 1e3], jnp.float32)
    return tfm.owens_t, (h, a)


@registry.program("tfp_owens_t_chebyshev_region",
                  "tfp.math.owens_t at (h, a) points its method T3 (a 31-term Chebyshev series with float64 "
                  "coefficients near +-1) evaluates", slow=True)
def owens_t_chebyshev():
    tfm = _tfp().math

    h = jnp.asarray([3.85, 5.8, 6.1, 6.95, 7.0], jnp.float32)
    a = jnp.asarray([0.71, 0.71, 0.58, 0.73, 0.59], jnp.float32)
    return tfm.owens_t, (h, a)


@registry.program("tfp_math_special_misc",
                  "tfp.math log1mexp, softplus_inverse, log_add_exp, bessel_ive, bessel_kve, lbeta, "
                  "log_gamma_difference, erfcx, logerfc, dawsn, log_cosh, igammainv", slow=True)
def special_misc():
    tfm = _tfp().math

    def special(x, v):
        ax = jnp.abs(x) + 1e-3
        return {"log1mexp": tfm.log1mexp(ax), "softplus_inverse": tfm.softplus_inverse(ax),
                "log_add_exp": tfm.log_add_exp(x, -x), "bessel_ive": tfm.bessel_ive(v, ax),
                "bessel_kve": tfm.bessel_kve(v, ax), "lbeta": tfm.lbeta(ax, v + 1.0),
                "log_gamma_difference": tfm.log_gamma_difference(v, ax + 1.0), "erfcx": tfm.erfcx(x),
                "logerfc": tfm.logerfc(x), "dawsn": tfm.dawsn(x), "log_cosh": tfm.log_cosh(x),
                "igammainv": tfm.igammainv(v + 0.5, jnp.clip(ax / 30.0, 1e-6, 1.0 - 1e-6))}

    return special, (jnp.asarray([-30.0, -2.0, -1e-4, 0.5, 3.0, 25.0], jnp.float32),
                     jnp.asarray([0.0, 0.5, 1.0, 2.5, 10.0, 40.0], jnp.float32))


def _banana_log_prob(xy):
    x, y = xy[..., 0], xy[..., 1]
    return -0.5 * (x ** 2 / 4.0 + (y - 0.5 * x ** 2) ** 2)


@registry.program("tfp_mcmc_random_walk_metropolis",
                  "tfp.mcmc.sample_chain with RandomWalkMetropolis, 8 results after 4 burn-in steps, "
                  "trace of is_accepted")
def mcmc_rwm():
    tfp = _tfp()

    def run(state, key):
        kernel = tfp.mcmc.RandomWalkMetropolis(_banana_log_prob,
                                               new_state_fn=tfp.mcmc.random_walk_normal_fn(scale=0.5))
        return tfp.mcmc.sample_chain(num_results=8, num_burnin_steps=4, current_state=state, kernel=kernel,
                                     trace_fn=lambda _, r: r.is_accepted, seed=key)

    return run, (jnp.asarray([0.3, -0.2], jnp.float32), jax.random.PRNGKey(0))


@registry.program("tfp_mcmc_hmc",
                  "tfp.mcmc.sample_chain with HamiltonianMonteCarlo(step_size=0.1, num_leapfrog_steps=3), "
                  "6 results after 2 burn-in steps, trace of log_accept_ratio")
def mcmc_hmc():
    tfp = _tfp()

    def run(state, key):
        kernel = tfp.mcmc.HamiltonianMonteCarlo(_banana_log_prob, step_size=0.1, num_leapfrog_steps=3)
        return tfp.mcmc.sample_chain(num_results=6, num_burnin_steps=2, current_state=state, kernel=kernel,
                                     trace_fn=lambda _, r: r.log_accept_ratio, seed=key)

    return run, (jnp.asarray([0.3, -0.2], jnp.float32), jax.random.PRNGKey(1))


def _gp_data():
    rng = np.random.default_rng(0)
    x = np.sort(rng.uniform(-3, 3, 15)).astype(np.float32)[:, None]
    y = (np.sin(2 * x[:, 0]) + 0.1 * rng.standard_normal(15)).astype(np.float32)
    return jnp.asarray(x), jnp.asarray(y)


def _gp_log_prob(params, x, y):
    tfp = _tfp()
    amplitude, length_scale, noise = jax.tree.map(jax.nn.softplus, params)
    kernel = tfp.math.psd_kernels.ExponentiatedQuadratic(amplitude, length_scale)
    gp = tfp.distributions.GaussianProcess(kernel, index_points=x, observation_noise_variance=noise)
    return gp.log_prob(y)


@registry.program("tfp_gp_log_prob",
                  "tfd.GaussianProcess(ExponentiatedQuadratic, observation_noise_variance).log_prob of 15 points")
def gp_log_prob():
    params = (jnp.asarray(0.5, jnp.float32), jnp.asarray(0.1, jnp.float32), jnp.asarray(-2.0, jnp.float32))
    return _gp_log_prob, (params, *_gp_data())


@registry.program("tfp_gp_hyperparameter_grad",
                  "GP regression: value_and_grad of the negative GaussianProcess log_prob w.r.t. softplus-"
                  "parameterised kernel hyperparameters, and the posterior predictive mean "
                  "(GaussianProcessRegressionModel)")
def gp_grad():
    tfp = _tfp()

    def step(params, x, y, x_new):
        nll, grads = jax.value_and_grad(lambda p: -_gp_log_prob(p, x, y))(params)
        amplitude, length_scale, noise = jax.tree.map(jax.nn.softplus, params)
        kernel = tfp.math.psd_kernels.ExponentiatedQuadratic(amplitude, length_scale)
        post = tfp.distributions.GaussianProcessRegressionModel(kernel, index_points=x_new, observation_index_points=x,
                                                                observations=y, observation_noise_variance=noise)
        return nll, grads, post.mean(), post.stddev()

    params = (jnp.asarray(0.5, jnp.float32), jnp.asarray(0.1, jnp.float32), jnp.asarray(-2.0, jnp.float32))
    return step, (params, *_gp_data(), jnp.linspace(-3.0, 3.0, 5, dtype=jnp.float32)[:, None])


@registry.program("tfp_mvn_tril_sample_log_prob",
                  "tfd.MultivariateNormalTriL sample(seed) and log_prob; tfd.Categorical and MixtureSameFamily "
                  "log_prob")
def mvn_tril():
    tfd = _tfp().distributions

    def run(loc, scale_tril, x, key):
        mvn = tfd.MultivariateNormalTriL(loc, scale_tril)
        mix = tfd.MixtureSameFamily(tfd.Categorical(logits=jnp.asarray([0.0, -1.0, 2.0], x.dtype)),
                                    tfd.Normal(jnp.asarray([-2.0, 0.0, 3.0], x.dtype),
                                               jnp.asarray([0.5, 1.0, 0.3], x.dtype)))
        return {"sample": mvn.sample(3, seed=key), "log_prob": mvn.log_prob(x), "mixture": mix.log_prob(x[:, 0] * 10)}

    loc = jnp.asarray([0.5, -1.0, 2.0], jnp.float32)
    tril = jnp.asarray([[1.0, 0.0, 0.0], [0.3, 0.8, 0.0], [-0.2, 0.1, 0.5]], jnp.float32)
    x = jnp.asarray([[0.0, 0.0, 0.0], [5.0, -5.0, 8.0]], jnp.float32)
    return run, (loc, tril, x, jax.random.PRNGKey(2))


PROGRAMS = registry.programs
