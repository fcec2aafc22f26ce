"""numpyro, as its users write it: models with numpyro.sample, NUTS/HMC steps through the
functional `hmc` API's sample_kernel, Predictive, an SVI step with an autoguide, log
densities, and distributions' log_prob where library clamps matter (probabilities near 0
and 1, support edges, huge and tiny rates)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from tests.ecosystem.programs.base import Refusal, Registry

registry = Registry("numpyro")


def _logistic_data(seed=0, n=12):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 2)).astype(np.float32)
    y = (x @ np.array([1.0, -1.5], np.float32) + 0.2 * rng.standard_normal(n) > 0).astype(np.float32)
    return jnp.asarray(x), jnp.asarray(y)


def _logistic_model(x, y=None):
    import numpyro
    import numpyro.distributions as dist

    w = numpyro.sample("w", dist.Normal(jnp.zeros(2), 1.0).to_event(1))
    b = numpyro.sample("b", dist.Normal(0.0, 1.0))
    numpyro.sample("obs", dist.Bernoulli(logits=x @ w + b), obs=y)


def _hierarchical_model(group, y=None):
    import numpyro
    import numpyro.distributions as dist

    mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
    tau = numpyro.sample("tau", dist.HalfCauchy(2.0))
    with numpyro.plate("groups", 3):
        theta = numpyro.sample("theta", dist.Normal(mu, tau))
    sigma = numpyro.sample("sigma", dist.Exponential(1.0))
    with numpyro.plate("data", group.shape[0]):
        numpyro.sample("y", dist.Normal(theta[group], sigma), obs=y)


def _hierarchical_data():
    group = jnp.asarray([0, 0, 1, 1, 2, 2, 2], jnp.int32)
    y = jnp.asarray([1.2, 0.8, -0.3, 0.1, 2.5, 2.2, 2.9], jnp.float32)
    return group, y


def _kernel(model, model_args, algo):
    from numpyro.infer.hmc import hmc
    from numpyro.infer.util import initialize_model

    init_params, potential_fn, _, _ = initialize_model(jax.random.PRNGKey(0), model, model_args=model_args)
    init_kernel, sample_kernel = hmc(potential_fn, algo=algo)
    return init_params, init_kernel, sample_kernel


@registry.program("numpyro_nuts_sample_kernel",
                  "NUTS on a logistic regression through the functional hmc API: init_kernel outside, two "
                  "sample_kernel steps (warmup adaptation on) inside jit", slow=True)
def nuts_sample_kernel():
    x, y = _logistic_data()
    init_params, init_kernel, sample_kernel = _kernel(_logistic_model, (x, y), "NUTS")
    state = init_kernel(init_params.z, num_warmup=10, rng_key=jax.random.PRNGKey(1))

    def steps(state):
        for _ in range(2):
            state = sample_kernel(state)
        return state

    return steps, (state,)


@registry.program("numpyro_hmc_sample_kernel",
                  "HMC (fixed num_steps) on a hierarchical model (HalfCauchy, Exponential, plates): two "
                  "sample_kernel steps", slow=True)
def hmc_sample_kernel():
    group, y = _hierarchical_data()
    init_params, init_kernel, sample_kernel = _kernel(_hierarchical_model, (group, y), "HMC")
    state = init_kernel(init_params.z, num_warmup=5, num_steps=4, step_size=0.1, rng_key=jax.random.PRNGKey(2))

    def steps(state):
        for _ in range(2):
            state = sample_kernel(state)
        return state

    return steps, (state,)


@registry.program("numpyro_nuts_init_kernel_in_jit",
                  "NUTS init_kernel (find_heuristic_step_size, dense mass) inside jit from a key", slow=True)
def nuts_init_in_jit():
    group, y = _hierarchical_data()
    init_params, init_kernel, _ = _kernel(_hierarchical_model, (group, y), "NUTS")

    def init(z, key):
        return init_kernel(z, num_warmup=20, dense_mass=True, find_heuristic_step_size=True, rng_key=key)

    return init, (init_params.z, jax.random.PRNGKey(3))


@registry.program("numpyro_predictive_prior",
                  "Predictive(model, num_samples=4): prior predictive draws of the hierarchical model")
def predictive_prior():
    from numpyro.infer import Predictive

    group, _ = _hierarchical_data()
    predictive = Predictive(_hierarchical_model, num_samples=4)

    def draw(key, group):
        return predictive(key, group)

    return draw, (jax.random.PRNGKey(4), group)


@registry.program("numpyro_predictive_posterior",
                  "Predictive with posterior samples: posterior predictive of the logistic regression")
def predictive_posterior():
    from numpyro.infer import Predictive

    x, _ = _logistic_data()
    samples = {"w": jnp.asarray([[1.0, -1.0], [0.5, -2.0], [1.2, -1.1]], jnp.float32),
               "b": jnp.asarray([0.0, 0.1, -0.2], jnp.float32)}

    def draw(samples, key, x):
        return Predictive(_logistic_model, posterior_samples=samples, return_sites=["obs"])(key, x)

    return draw, (samples, jax.random.PRNGKey(5), x)


@registry.program("numpyro_svi_step_autonormal",
                  "SVI(model, AutoNormal, numpyro.optim.Adam, Trace_ELBO): two svi.update steps", slow=True)
def svi_step():
    from numpyro.infer import SVI, Trace_ELBO
    from numpyro.infer.autoguide import AutoNormal
    from numpyro.optim import Adam

    x, y = _logistic_data(seed=1)
    svi = SVI(_logistic_model, AutoNormal(_logistic_model), Adam(0.05), Trace_ELBO())
    svi_state = svi.init(jax.random.PRNGKey(6), x, y)

    def steps(svi_state, x, y):
        losses = []
        for _ in range(2):
            svi_state, loss = svi.update(svi_state, x, y)
            losses.append(loss)
        return svi_state, jnp.stack(losses)

    return steps, (svi_state, x, y)


@registry.program("numpyro_log_density_hierarchical",
                  "numpyro.infer.util.log_density of the hierarchical model at given parameters, and its gradient")
def log_density():
    from numpyro.infer.util import log_density

    group, y = _hierarchical_data()
    params = {"mu": jnp.asarray(1.0, jnp.float32), "tau": jnp.asarray(0.5, jnp.float32),
              "theta": jnp.asarray([1.0, 0.0, 2.5], jnp.float32), "sigma": jnp.asarray(0.3, jnp.float32)}

    def value_and_grad(params, group, y):
        return jax.value_and_grad(lambda p: log_density(_hierarchical_model, (group, y), {}, p)[0])(params)

    return value_and_grad, (params, group, y)


@registry.program("numpyro_bernoulli_confident_miss",
                  "logistic regression log likelihood dist.Bernoulli(probs=sigmoid(x @ w)) with one confident miss "
                  "(logit 20, label 0): numpyro clamps probs to [tiny, 1 - eps]")
def bernoulli_confident_miss():
    import numpyro.distributions as dist

    x = jnp.asarray([[2.0, 0.0], [-1.0, 1.0], [0.5, 0.5]], jnp.float32)
    w = jnp.asarray([10.0, -3.0], jnp.float32)
    y = jnp.asarray([0.0, 0.0, 1.0], jnp.float32)

    def log_likelihood(w, x, y):
        probs = jax.nn.sigmoid(x @ w)
        return dist.Bernoulli(probs=probs).log_prob(y), dist.Binomial(5, probs=probs).log_prob(5 * y)

    return log_likelihood, (w, x, y)


@registry.program("numpyro_log_prob_support_edges",
                  "log_prob near support edges: Beta at 1e-7 and 1 - 1e-7, Kumaraswamy, Gamma at 1e-30 and 1e4, "
                  "Dirichlet at a simplex corner, LogNormal at tiny x")
def log_prob_edges():
    import numpyro.distributions as dist

    u = jnp.asarray([1e-7, 0.5, 1.0 - 1e-7], jnp.float32)
    g = jnp.asarray([1e-30, 1.0, 1e4], jnp.float32)
    simplex = jnp.asarray([1.0 - 2e-7, 1e-7, 1e-7], jnp.float32)

    def log_probs(u, g, simplex):
        return {
            "beta": dist.Beta(0.5, 0.5).log_prob(u),
            "beta_skew": dist.Beta(2.0, 30.0).log_prob(u),
            "kumaraswamy": dist.Kumaraswamy(2.0, 3.0).log_prob(u),
            "gamma": dist.Gamma(0.3, 2.0).log_prob(g),
            "lognormal": dist.LogNormal(0.0, 1.0).log_prob(g),
            "dirichlet": dist.Dirichlet(jnp.asarray([0.5, 0.5, 2.0])).log_prob(simplex),
        }

    return log_probs, (u, g, simplex)


@registry.program("numpyro_log_prob_counts_and_categories",
                  "Poisson with rates near 0, NegativeBinomial2, Categorical with masked (-1e9) logits and with "
                  "zero probabilities, Multinomial")
def log_prob_discrete():
    import numpyro.distributions as dist

    counts = jnp.asarray([0, 1, 3, 40], jnp.int32)
    rates = jnp.asarray([1e-20, 1e-3, 2.0, 35.0], jnp.float32)
    logits = jnp.asarray([[0.0, -1e9, 3.0], [50.0, -50.0, 0.0]], jnp.float32)
    probs = jnp.asarray([[0.0, 0.3, 0.7], [1.0, 0.0, 0.0]], jnp.float32)

    def log_probs(counts, rates, logits, probs):
        return {
            "poisson": dist.Poisson(rates).log_prob(counts),
            "negbin": dist.NegativeBinomial2(rates + 1.0, 0.5).log_prob(counts),
            "categorical_logits": dist.Categorical(logits=logits).log_prob(jnp.asarray([1, 2], jnp.int32)),
            "categorical_probs": dist.Categorical(probs=probs).log_prob(jnp.asarray([2, 0], jnp.int32)),
            "multinomial": dist.Multinomial(4, probs=probs[0]).log_prob(jnp.asarray([0, 1, 3], jnp.int32)),
        }

    return log_probs, (counts, rates, logits, probs)


@registry.program("numpyro_log_prob_continuous_tails",
                  "TruncatedNormal, StudentT, Laplace, Cauchy, HalfNormal log_prob and Normal cdf/icdf far in "
                  "the tails")
def log_prob_tails():
    import numpyro.distributions as dist

    x = jnp.asarray([-30.0, -5.0, 0.0, 0.3, 8.0, 40.0], jnp.float32)
    q = jnp.asarray([1e-7, 0.001, 0.5, 0.999, 1.0 - 1e-7], jnp.float32)

    def log_probs(x, q):
        return {
            "truncnorm": dist.TruncatedNormal(0.0, 1.0, low=-1.0, high=50.0).log_prob(jnp.clip(x, -0.99, 45.0)),
            "truncnorm_tail": dist.TruncatedNormal(0.0, 1.0, low=6.0).log_prob(jnp.abs(x) + 6.0),
            "studentt": dist.StudentT(3.0, 0.0, 2.0).log_prob(x),
            "laplace": dist.Laplace(0.5, 2.0).log_prob(x),
            "cauchy": dist.Cauchy(0.0, 1.0).log_prob(x),
            "halfnormal": dist.HalfNormal(2.0).log_prob(jnp.abs(x)),
            "normal_cdf": dist.Normal(0.0, 1.0).cdf(x),
            "normal_icdf": dist.Normal(0.0, 1.0).icdf(q),
        }

    return log_probs, (x, q)


@registry.program("numpyro_transforms_extreme",
                  "biject_to(constraint) forward maps and log|det J| at unconstrained values up to +-40: simplex "
                  "(stick-breaking), unit_interval, positive, ordered_vector, corr_cholesky")
def transforms_extreme():
    from numpyro.distributions import constraints
    from numpyro.distributions.transforms import biject_to

    z = jnp.asarray([-40.0, -3.0, 0.0, 3.0, 40.0, 12.0], jnp.float32)
    sites = {"simplex": (constraints.simplex, z[:5]), "unit": (constraints.unit_interval, z),
             "positive": (constraints.positive, z), "ordered": (constraints.ordered_vector, z),
             "corr": (constraints.corr_cholesky, z[:3] / 10)}

    def transform(z):
        out = {}
        for name, (constraint, _) in sites.items():
            value = z[:5] if name == "simplex" else (z[:3] / 10 if name == "corr" else z)
            t = biject_to(constraint)
            y = t(value)
            out[name] = (y, t.log_abs_det_jacobian(value, y))
        return out

    return transform, (z,)


@registry.program("numpyro_distribution_samples",
                  "dist.<D>.sample(key) for Normal, Gamma, Beta, Dirichlet, Poisson, Categorical, "
                  "MultivariateNormal, Bernoulli", slow=True)
def distribution_samples():
    import numpyro.distributions as dist

    def sample(key, loc):
        keys = jax.random.split(key, 8)
        return {
            "normal": dist.Normal(loc, 1.0).sample(keys[0], (2,)),
            "gamma": dist.Gamma(2.0, 1.0).sample(keys[1], (3,)),
            "beta": dist.Beta(0.5, 2.0).sample(keys[2], (3,)),
            "dirichlet": dist.Dirichlet(jnp.ones(3)).sample(keys[3]),
            "poisson": dist.Poisson(3.0).sample(keys[4], (4,)),
            "categorical": dist.Categorical(logits=jnp.asarray([0.0, 1.0, 2.0])).sample(keys[5], (4,)),
            "mvn": dist.MultivariateNormal(jnp.zeros(2), jnp.eye(2) * 2.0).sample(keys[6]),
            "bernoulli": dist.Bernoulli(probs=0.3).sample(keys[7], (5,)),
        }

    return sample, (jax.random.PRNGKey(8), jnp.asarray([0.0, 1.0, -1.0], jnp.float32))


@registry.program("numpyro_event_times_int64_ns",
                  "an Exponential inter-arrival log likelihood on event times given as int64 nanosecond timestamps "
                  "(as loaded from a log), converted to seconds inside the function",
                  refusal=Refusal(("input-out-of-range",),
                                  "the int64 nanosecond timestamps (~1.7e18) do not fit int32: JAX with x64 off wraps "
                                  "them on input, so no 32-bit program computes this likelihood"))
def event_times_int64_ns():
    import numpyro.distributions as dist

    start = 1_700_000_000_000_000_000
    timestamps = np.asarray([start, start + 1_500_000_000, start + 2_000_000_000, start + 4_250_000_000], np.int64)

    def log_likelihood(timestamps, rate):
        seconds = (timestamps - timestamps[0]).astype(jnp.float32) / 1e9
        intervals = jnp.diff(seconds)
        return jnp.sum(dist.Exponential(rate).log_prob(intervals))

    return log_likelihood, (timestamps, jnp.asarray(0.8, jnp.float32))


PROGRAMS = registry.programs
