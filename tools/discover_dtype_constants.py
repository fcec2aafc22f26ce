"""Which 64-bit constants in x64 lowerings are artefacts of `finfo`/`iinfo` of the 64-bit type?

Lowers library code twice, with x64 on (float64/int64 inputs) and off (float32/int32
inputs), aligns the two modules op by op, and lists every constant whose float64 (int64)
value narrowed by plain rounding is NOT the constant x32 JAX holds at the same position.
Each such pair is then explained, if it can be, as one expression of `numpy.finfo` /
`numpy.iinfo` evaluated for both types (x64guard's table, `DTYPE_CONSTANT_FAMILIES`, is
the candidate list; a pair no family explains is printed as unexplained).

Run from the repository root:

    PYTHONPATH=$PWD .venv/bin/python tools/discover_dtype_constants.py            # summary
    PYTHONPATH=$PWD .venv/bin/python tools/discover_dtype_constants.py -v         # every pair
    PYTHONPATH=$PWD .venv/bin/python tools/discover_dtype_constants.py -k numpyro  # a subset

It only lowers (nothing is compiled or run), restores JAX's x64 setting after each
lowering, and needs the `ecosystem` extra (numpyro, optax, equinox, diffrax, blackjax).
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import os
import sys
import warnings
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax.extend.mlir import ir  # noqa: E402

from x64guard.io import modules as x64mlir  # noqa: E402
from x64guard.passes.constant_io import UnreadableConstant, read_constant  # noqa: E402
from x64guard.passes.locations import parse_location  # noqa: E402
from x64guard.passes.tables import dtype_constant  # noqa: E402
from x64guard.passes.values import narrow_values  # noqa: E402

WIDE = {"f64": "f32", "complex<f64>": "complex<f32>", "i64": "i32", "ui64": "ui32"}


# --------------------------------------------------------------------------------------
# the programs, written as the libraries' users and the libraries themselves write them

@dataclass(frozen=True)
class Program:
    library: str
    name: str
    fn: Callable[..., Any]
    # (dtype of floats, dtype of ints) -> the inputs
    args: Callable[[np.dtype, np.dtype], tuple]


def _f(*values):
    return lambda fd, _id: tuple(np.asarray(v, fd) for v in values)


def _key(fd, _id):
    return (np.array([0, 42], np.uint32),)


_X = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75], [-2.0, 1.0, 0.5], [0.3, 0.7, -0.2]])
_W = np.array([1.0, 2.0, 10.0])


def _numpyro_programs() -> list[Program]:
    import numpyro.distributions as dist
    from numpyro.distributions import transforms as T
    from numpyro.distributions.util import clamp_probs, log1mexp
    from numpyro.distributions.transforms import _clipped_expit

    def logreg(x, w, y):
        return dist.Bernoulli(probs=jax.nn.sigmoid(x @ w)).log_prob(y).sum()

    def logreg_args(fd, _id):
        return np.asarray(_X, fd), np.asarray(_W, fd), np.array([1.0, 0.0, 1.0, 0.0], fd)

    p = [0.0, 1e-30, 0.5, 1.0 - 1e-9, 1.0]
    return [
        Program("numpyro", "clamp_probs", clamp_probs, _f(p)),
        Program("numpyro", "_clipped_expit", _clipped_expit, _f([-800.0, -40.0, 0.0, 40.0])),
        Program("numpyro", "bernoulli_logreg", logreg, logreg_args),
        Program("numpyro", "bernoulli_logits", lambda l, v: dist.Bernoulli(logits=l).log_prob(v),
                _f([-50.0, 0.0, 50.0], [1.0, 0.0, 0.0])),
        Program("numpyro", "binomial_probs", lambda q, v: dist.Binomial(10, probs=q).log_prob(v),
                _f([0.0, 0.3, 1.0], [0.0, 3.0, 10.0])),
        Program("numpyro", "categorical_probs", lambda q: dist.Categorical(probs=q).log_prob(jnp.arange(3)),
                _f([0.0, 0.25, 0.75])),
        Program("numpyro", "geometric_probs", lambda q, v: dist.Geometric(probs=q).log_prob(v),
                _f([1e-12, 0.5, 1.0], [0.0, 2.0, 0.0])),
        Program("numpyro", "beta_edges", lambda v: dist.Beta(2.0, 3.0).log_prob(v), _f([0.0, 0.5, 1.0])),
        Program("numpyro", "kumaraswamy", lambda v: dist.Kumaraswamy(2.0, 3.0).log_prob(v), _f([1e-6, 0.5, 0.999])),
        Program("numpyro", "dirichlet", lambda v: dist.Dirichlet(jnp.ones(3)).log_prob(v), _f([0.2, 0.3, 0.5])),
        Program("numpyro", "gamma", lambda v: dist.Gamma(2.0, 1.0).log_prob(v), _f([1e-30, 1.0, 1e3])),
        Program("numpyro", "normal_cdf_icdf", lambda v: (dist.Normal(0.0, 1.0).cdf(v), dist.Normal(0.0, 1.0).icdf(
            jnp.clip(v, 0.01, 0.99))), _f([-40.0, 0.0, 40.0])),
        Program("numpyro", "truncated_normal", lambda v: dist.TruncatedNormal(0.0, 1.0, low=0.0).log_prob(v),
                _f([0.1, 1.0, 5.0])),
        Program("numpyro", "normal_log_cdf", lambda v: dist.Normal(0.0, 1.0).log_cdf(v), _f([-40.0, 0.0, 3.0])),
        Program("numpyro", "left_censored", lambda v: dist.LeftCensoredDistribution(
            dist.Normal(0.0, 1.0), jnp.array([True, False, True])).log_prob(v), _f([-40.0, 0.0, 3.0])),
        Program("numpyro", "right_censored", lambda v: dist.RightCensoredDistribution(
            dist.Normal(0.0, 1.0), jnp.array([True, False, True])).log_prob(v), _f([40.0, 0.0, 3.0])),
        Program("numpyro", "interval_censored", lambda v: dist.IntervalCensoredDistribution(
            dist.Normal(0.0, 1.0), jnp.array([False, True]), jnp.array([False, False])).log_prob(v),
                _f([[-1.0, 1.0], [-50.0, -40.0]])),
        Program("numpyro", "truncated_cauchy_icdf", lambda q: dist.TruncatedCauchy(0.0, 1.0, low=0.0).icdf(q),
                _f([0.0, 0.5, 1.0])),
        Program("numpyro", "multinomial_probs", lambda q: dist.Multinomial(5, probs=q).log_prob(
            jnp.array([0, 2, 3])), _f([0.0, 0.4, 0.6])),
        Program("numpyro", "relaxed_bernoulli", lambda v: dist.RelaxedBernoulliLogits(0.5, 1.0).log_prob(v),
                _f([1e-20, 0.5, 1.0 - 1e-12])),
        Program("numpyro", "sine_bivariate_von_mises_norm", lambda v: dist.SineBivariateVonMises(
            0.0, 0.0, 1.0, 1.0, 0.5).log_prob(v), _f([0.1, 0.2])),
        Program("numpyro", "sigmoid_transform", lambda v: (T.SigmoidTransform()(v),
                                                           T.SigmoidTransform().log_abs_det_jacobian(v, None)),
                _f([-50.0, 0.0, 50.0])),
        Program("numpyro", "stick_breaking", lambda v: T.StickBreakingTransform()(v), _f([-30.0, 0.0, 30.0])),
        Program("numpyro", "corr_cholesky", lambda v: T.CorrCholeskyTransform()(v), _f([0.5, -20.0, 20.0])),
        Program("numpyro", "corr_cholesky_inv", lambda v: T.CorrCholeskyTransform().inv(
            T.CorrCholeskyTransform()(v)), _f([0.5, -2.0, 2.0])),
        Program("numpyro", "log1mexp", log1mexp, _f([-1e-20, -1.0, -50.0])),
        Program("numpyro", "poisson", lambda r, v: dist.Poisson(r).log_prob(v), _f([0.0, 2.0, 1e3], [0.0, 1.0, 5.0])),
        Program("numpyro", "beta_binomial", lambda v: dist.BetaBinomial(2.0, 3.0, 10).log_prob(v), _f([0.0, 4.0, 10.0])),
        Program("numpyro", "von_mises", lambda v: dist.VonMises(0.0, 2.0).log_prob(v), _f([0.0, 1.0, 3.0])),
        Program("numpyro", "zero_inflated_poisson", lambda v: dist.ZeroInflatedPoisson(0.3, 2.0).log_prob(v),
                _f([0.0, 1.0, 3.0])),
        Program("numpyro", "lkj_cholesky", lambda v: dist.LKJCholesky(3, 2.0).log_prob(
            T.CorrCholeskyTransform()(v)), _f([0.5, -1.0, 1.0])),
    ]


def _scipy_programs() -> list[Program]:
    sp = jax.scipy.special
    st = jax.scipy.stats
    x = [0.1, 0.5, 2.0, 7.0]
    return [
        Program("jax.scipy", f"special.{name}", fn, args) for name, fn, args in [
            ("gammainc", sp.gammainc, _f(x, x[::-1])),
            ("gammaincc", sp.gammaincc, _f(x, x[::-1])),
            ("betainc", sp.betainc, _f([1.0, 2.0], [3.0, 0.5], [0.3, 0.9])),
            ("erfinv", sp.erfinv, _f([-0.99, 0.0, 0.5])),
            ("ndtri", sp.ndtri, _f([1e-10, 0.5, 0.9])),
            ("log_ndtr", sp.log_ndtr, _f([-40.0, 0.0, 5.0])),
            ("ndtr", sp.ndtr, _f([-40.0, 0.0, 5.0])),
            ("erfcx", sp.erfcx, _f([-1.0, 5.0, 30.0])),
            ("zeta", sp.zeta, _f([2.0, 3.5], [1.0, 2.0])),
            ("polygamma", lambda v: sp.polygamma(1, v), _f(x)),
            ("digamma", sp.digamma, _f(x)),
            ("i0e_i1e", lambda v: (sp.i0e(v), sp.i1e(v)), _f(x)),
            ("i1e_grad", jax.grad(lambda v: sp.i1e(v).sum()), _f(x)),
            ("logit_expit", lambda v: (sp.logit(v), sp.expit(v)), _f([0.1, 0.5, 0.9])),
            ("xlogy_xlog1py", lambda v: (sp.xlogy(v, v), sp.xlog1py(v, v)), _f(x)),
            ("entr", sp.entr, _f(x)),
            ("spence", sp.spence, _f(x)),
            ("expi_exp1", lambda v: (sp.expi(v), sp.exp1(v)), _f(x)),
            ("expn", lambda v: sp.expn(2, v), _f(x)),
            ("hyp1f1", sp.hyp1f1, _f([1.0, 2.0], [3.0, 4.0], [0.5, -0.5])),
            ("hyp2f1", sp.hyp2f1, _f([1.0, 0.5], [2.0, 1.0], [3.0, 1.5], [0.3, -0.4])),
            ("bessel_jn", lambda v: sp.bessel_jn(v, v=2), _f(x)),
            ("gammaln_betaln", lambda v: (sp.gammaln(v), sp.betaln(v, v)), _f(x)),
            ("logsumexp", sp.logsumexp, _f(x)),
            ("kl_div_rel_entr", lambda v: (sp.kl_div(v, v[::-1]), sp.rel_entr(v, v[::-1])), _f(x)),
            ("lpmn", lambda v: sp.lpmn_values(2, 2, v, False), _f([0.1, 0.5])),
            ("factorial", sp.factorial, _f(x)),
            ("gamma_sign", lambda v: (sp.gamma(v), sp.gammasgn(v)), _f(x)),
        ]
    ] + [
        Program("jax.scipy", f"stats.{name}", fn, args) for name, fn, args in [
            ("norm", lambda v: (st.norm.logcdf(v), st.norm.ppf(jnp.clip(v, 0.01, 0.99)), st.norm.logsf(v)),
             _f([-40.0, 0.0, 5.0])),
            ("t_logpdf", lambda v: st.t.logpdf(v, 3.0), _f(x)),
            ("beta_logpdf", lambda v: st.beta.logpdf(v, 2.0, 3.0), _f([0.0, 0.5, 1.0])),
            ("gamma_cdf", lambda v: st.gamma.cdf(v, 2.0), _f(x)),
            ("poisson_logpmf", lambda v: st.poisson.logpmf(v, 2.0), _f([0.0, 1.0, 3.0])),
            ("truncnorm", lambda v: st.truncnorm.logpdf(v, -1.0, 2.0), _f([-0.5, 0.0, 1.0])),
            ("vonmises", lambda v: st.vonmises.logpdf(v, 2.0), _f([0.0, 1.0, 3.0])),
            ("gennorm", lambda v: st.gennorm.logpdf(v, 1.5), _f(x)),
            ("chi2", lambda v: st.chi2.logcdf(v, 3.0), _f(x)),
        ]
    ]


def _linalg_programs() -> list[Program]:
    A = np.array([[2.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 1.0], [0.1, 0.4, 0.3]])
    S = A.T @ A
    la = jnp.linalg
    sla = jax.scipy.linalg
    return [
        Program("jnp.linalg", name, fn, args) for name, fn, args in [
            ("pinv", la.pinv, _f(A)),
            ("pinv_hermitian", lambda m: la.pinv(m, hermitian=True), _f(S)),
            ("lstsq", lambda a, b: la.lstsq(a, b)[0], _f(A, [1.0, 2.0, 3.0, 4.0])),
            ("matrix_rank", la.matrix_rank, _f(A)),
            ("norm", lambda m: (la.norm(m), la.norm(m, 2), la.norm(m, "nuc"), la.norm(m[0])), _f(A)),
            ("cond", la.cond, _f(S)),
            ("svd_eigh", lambda m: (la.svd(m)[1], la.eigh(m)[0]), _f(S)),
            ("inv_solve_det", lambda m: (la.inv(m), la.solve(m, m[0]), la.det(m), la.slogdet(m)[1]), _f(S)),
            ("qr_cholesky", lambda m: (la.qr(m)[1], la.cholesky(m)), _f(S)),
            ("expm", sla.expm, _f(S * 0.1)),
            ("eigh_tridiagonal", lambda d, e: sla.eigh_tridiagonal(d, e, eigvals_only=True),
             _f([2.0, 3.0, 1.0], [0.5, 0.2])),
            ("polyfit", lambda x, y: jnp.polyfit(x, y, 2), _f([0.0, 1.0, 2.0, 3.0], [1.0, 0.0, 2.0, 5.0])),
            ("roots", lambda c: jnp.roots(c, strip_zeros=False), _f([1.0, -3.0, 2.0])),
            ("interp", lambda x: jnp.interp(x, jnp.array([0.0, 1.0, 2.0], x.dtype), jnp.array([1.0, 3.0, 2.0], x.dtype)),
             _f([0.5, 1.5])),
            ("spacing_nextafter", lambda v: (jnp.spacing(v), jnp.nextafter(v, jnp.zeros_like(v))), _f([1.0, 0.0, -3.0])),
            ("round", lambda v: jnp.round(v, 3), _f([1.23456, -2.5])),
            ("pinv_complex", lambda m: la.pinv(m * (1 + 0.5j)), _f(A)),
            ("lstsq_complex", lambda a, b: la.lstsq(a * (1 - 1j), b)[0], _f(A, [1.0, 2.0, 3.0, 4.0])),
            ("spacing_complex", lambda v: jnp.spacing(v) * (1 + 1j), _f([1.0, 0.0])),
            ("nextafter_complex_parts", lambda v: jnp.nextafter(v, 0.0) + 1j * jnp.finfo(v.dtype).eps, _f([1.0])),
        ]
    ]


def _nn_programs() -> list[Program]:
    return [
        Program("jax.nn", name, fn, args) for name, fn, args in [
            ("softmax_log_softmax", lambda v: (jax.nn.softmax(v), jax.nn.log_softmax(v)), _f([1.0, 2.0, -1e3])),
            ("log_sigmoid_softplus", lambda v: (jax.nn.log_sigmoid(v), jax.nn.softplus(v)), _f([-50.0, 0.0, 50.0])),
            ("dot_product_attention", lambda q: jax.nn.dot_product_attention(q, q, q, is_causal=True),
             lambda fd, _id: (np.linspace(-1, 1, 2 * 4 * 2 * 8).reshape(2, 4, 2, 8).astype(fd),)),
            ("standardize", lambda v: jax.nn.standardize(v), _f([1.0, 2.0, 4.0])),
        ]
    ]


def _optax_programs() -> list[Program]:
    import optax

    def step(make, needs_value=False):
        def run(p, g):
            opt = make()
            state = opt.init(p)
            extra = {"value": jnp.sum(p ** 2)} if needs_value else {}
            updates, state = opt.update(g, state, p, **extra)
            updates, _ = opt.update(g, state, p, **extra)
            return optax.apply_updates(p, updates)
        return run

    args = _f([1.0, -2.0, 0.5], [0.1, 0.0, -0.3])
    from optax import contrib
    return [
        Program("optax", name, step(make), args) for name, make in [
            ("adam", lambda: optax.adam(1e-3)),
            ("adamw", lambda: optax.adamw(1e-3)),
            ("rmsprop", lambda: optax.rmsprop(1e-3)),
            ("adagrad", lambda: optax.adagrad(1e-2)),
            ("lamb", lambda: optax.lamb(1e-3)),
            ("lion", lambda: optax.lion(1e-4)),
            ("adafactor", lambda: optax.adafactor(1e-3)),
            ("clip_global_norm_sgd", lambda: optax.chain(optax.clip_by_global_norm(1.0), optax.sgd(0.1))),
            ("schedule_free_adamw", lambda: contrib.schedule_free_adamw(1e-3)),
            ("cosine_schedule_adam", lambda: optax.adam(optax.cosine_decay_schedule(1e-3, 100))),
        ]
    ] + [
        Program("optax", name, step(make, needs_value=True), args) for name, make in [
            ("polyak_sgd", lambda: optax.polyak_sgd(1.0)),
            ("momo", lambda: contrib.momo(1.0)),
        ]
    ] + [
        Program("optax", "safe_norm", lambda v, _g: optax.safe_norm(v, 1e-6), args),
        Program("optax", "ntxent", lambda e: optax.losses.ntxent(e, jnp.array([0, 0, 1, 1])),
                lambda fd, _id: (np.linspace(-1, 1, 12).reshape(4, 3).astype(fd),)),
    ]


def _equinox_programs() -> list[Program]:
    import equinox as eqx
    import equinox.internal as eqxi

    def mha(q):
        layer = eqx.nn.MultiheadAttention(2, 4, key=jax.random.PRNGKey(0), dtype=q.dtype)
        mask = jnp.tril(jnp.ones((3, 3), bool))
        return layer(q, q, q, mask=mask)

    def layer_norm(v):
        return eqx.nn.LayerNorm(3, dtype=v.dtype)(v)

    return [
        Program("equinox", "nextafter_prevbefore", lambda v: (eqxi.nextafter(v), eqxi.prevbefore(v)),
                _f([0.0, 1.0, -2.0])),
        Program("equinox", "layer_norm", layer_norm, _f([1.0, 2.0, 4.0])),
        Program("equinox", "mha_mask", mha, lambda fd, _id: (np.linspace(-1, 1, 12).reshape(3, 4).astype(fd),)),
    ]


def _diffrax_programs() -> list[Program]:
    import diffrax

    def solve(y0, make):
        term = diffrax.ODETerm(lambda t, y, a: -a * y)
        solver, controller = make()
        sol = diffrax.diffeqsolve(term, solver, 0.0, 1.0, 0.1, y0, args=0.5, stepsize_controller=controller,
                                  saveat=diffrax.SaveAt(t1=True))
        return sol.ys

    cases = {
        "tsit5_pid": lambda: (diffrax.Tsit5(), diffrax.PIDController(rtol=1e-5, atol=1e-5)),
        "dopri5_pid_jump_ts": lambda: (diffrax.Dopri5(), diffrax.ClipStepSizeController(
            diffrax.PIDController(rtol=1e-4, atol=1e-4), jump_ts=[0.5])),
        "euler_constant": lambda: (diffrax.Euler(), diffrax.ConstantStepSize()),
        "kvaerno5_pid": lambda: (diffrax.Kvaerno5(), diffrax.PIDController(rtol=1e-4, atol=1e-4)),
    }
    return [Program("diffrax", name, (lambda make: lambda y0: solve(y0, make))(make), _f([1.0, 2.0]))
            for name, make in cases.items()]


def _random_programs() -> list[Program]:
    r = jax.random

    def sampler(name, draw):
        return Program("jax.random", name, lambda k: draw(k, jnp.result_type(float)), _key)

    return [sampler(name, draw) for name, draw in [
        ("uniform", lambda k, d: r.uniform(k, (3,), d)),
        ("uniform_bounds", lambda k, d: r.uniform(k, (3,), d, -2.0, 5.0)),
        ("normal", lambda k, d: r.normal(k, (3,), d)),
        ("truncated_normal", lambda k, d: r.truncated_normal(k, -1.0, 2.0, (3,), d)),
        ("gumbel", lambda k, d: r.gumbel(k, (3,), d)),
        ("gumbel_high", lambda k, d: r.gumbel(k, (3,), d, mode="high")),
        ("categorical", lambda k, d: r.categorical(k, jnp.log(jnp.array([0.2, 0.3, 0.5], d)))),
        ("exponential", lambda k, d: r.exponential(k, (3,), d)),
        ("laplace", lambda k, d: r.laplace(k, (3,), d)),
        ("logistic", lambda k, d: r.logistic(k, (3,), d)),
        ("cauchy", lambda k, d: r.cauchy(k, (3,), d)),
        ("bernoulli_high", lambda k, d: r.bernoulli(k, jnp.array([0.2, 0.5], d), mode="high")),
        ("gamma", lambda k, d: r.gamma(k, jnp.array([0.5, 2.0], d))),
        ("loggamma", lambda k, d: r.loggamma(k, jnp.array([0.5, 2.0], d))),
        ("beta", lambda k, d: r.beta(k, jnp.array([0.5, 2.0], d), jnp.array([2.0, 0.5], d))),
        ("dirichlet", lambda k, d: r.dirichlet(k, jnp.array([0.5, 2.0, 1.0], d))),
        ("t", lambda k, d: r.t(k, 3.0, (3,), d)),
        ("chisquare_f", lambda k, d: (r.chisquare(k, 3.0, (3,), d), r.f(k, 3.0, 4.0, (3,), d))),
        ("poisson", lambda k, d: r.poisson(k, jnp.array([0.5, 20.0], d))),
        ("multivariate_normal", lambda k, d: r.multivariate_normal(k, jnp.zeros(2, d), jnp.eye(2, dtype=d))),
        ("rayleigh_weibull_pareto", lambda k, d: (r.rayleigh(k, 1.0, (3,), d), r.weibull_min(k, 1.0, 2.0, (3,), d),
                                                  r.pareto(k, 2.0, (3,), d))),
        ("triangular_wald", lambda k, d: (r.triangular(k, 0.0, 0.5, 1.0, (3,), d), r.wald(k, 1.0, (3,), d))),
        ("randint", lambda k, d: r.randint(k, (3,), 0, 10)),
        ("choice_permutation", lambda k, d: (r.choice(k, 5, (3,)), r.permutation(k, 5))),
        ("ball_orthogonal", lambda k, d: (r.ball(k, 2, dtype=d), r.orthogonal(k, 2, dtype=d))),
        ("normal_complex", lambda k, d: r.normal(k, (3,), jnp.result_type(complex))),
        ("gamma_grad", lambda k, d: jax.grad(lambda a: r.gamma(k, a).sum())(jnp.array([0.5, 2.0], d))),
    ]]


def _integer_programs() -> list[Program]:
    """int64 code: iinfo bounds, shifts, reductions' init values, integer special cases."""
    def ints(*values):
        return lambda _fd, idt: tuple(np.asarray(v, idt) for v in values)

    n = [-7, 0, 3, 1000, 12]
    return [
        Program("jnp.int", name, fn, args) for name, fn, args in [
            ("argmax_argmin_max", lambda v: (jnp.argmax(v), jnp.argmin(v), jnp.max(v), jnp.min(v)), ints(n)),
            ("cumsum_cumprod_sort", lambda v: (jnp.cumsum(v), jnp.cumprod(v), jnp.sort(v)), ints(n)),
            ("floor_divide_mod", lambda v: (v // 3, v % 3, jnp.floor_divide(v, -2)), ints(n)),
            ("shifts_bits", lambda v: (v << 3, v >> 2, jnp.bitwise_count(v), jnp.right_shift(v, 63)), ints(n)),
            ("gcd_lcm", lambda v: (jnp.gcd(v, 12), jnp.lcm(v, 4)), ints(n)),
            ("iinfo_clip", lambda v: jnp.clip(v, jnp.iinfo(v.dtype).min + 1, jnp.iinfo(v.dtype).max - 1), ints(n)),
            ("searchsorted_bincount", lambda v: (jnp.searchsorted(jnp.sort(v), v), jnp.bincount(jnp.abs(v) % 5,
                                                                                               length=5)), ints(n)),
            ("int_pow_abs_sign", lambda v: (v ** 2, jnp.abs(v), jnp.sign(v)), ints(n)),
            ("astype_float_and_back", lambda v: (v.astype(jnp.result_type(float)) * 0.5).astype(v.dtype), ints(n)),
            ("equinox_checkpointed_while", lambda v: __import__("equinox").internal.while_loop(
                lambda c: c[0] < 10, lambda c: (c[0] + 1, c[1] * 2), (0, v), max_steps=16, kind="checkpointed")[1],
             ints(n)),
            ("optax_safe_increment", lambda v: __import__("optax").safe_increment(v), ints(3)),
            ("numpyro_poisson_int", lambda v: __import__("numpyro").distributions.Poisson(3.0).log_prob(v), ints(n[1:])),
        ]
    ]


def _flax_programs() -> list[Program]:
    import flax.linen as nn

    def attention(q):
        layer = nn.MultiHeadDotProductAttention(num_heads=2, qkv_features=4, dtype=q.dtype, param_dtype=q.dtype)
        mask = nn.make_causal_mask(jnp.ones((1, 3)))
        params = layer.init(jax.random.PRNGKey(0), q, q, mask=mask)
        return layer.apply(params, q, q, mask=mask)

    def norms(v):
        layer = nn.LayerNorm(dtype=v.dtype, param_dtype=v.dtype)
        return layer.apply(layer.init(jax.random.PRNGKey(0), v), v)

    three = lambda fd, _id: (np.linspace(-1, 1, 12).reshape(1, 3, 4).astype(fd),)
    return [Program("flax", "attention_causal_mask", attention, three),
            Program("flax", "layer_norm", norms, three)]


def _blackjax_programs() -> list[Program]:
    import blackjax

    def ns_log(v):
        from blackjax.ns import utils
        return jnp.minimum(v, -jnp.finfo(v.dtype).eps) if not hasattr(utils, "log1mexp") else utils.log1mexp(v)

    return [
        Program("blackjax", "ns_log1mexp", ns_log, _f([-1e-30, -1.0])),
        Program("blackjax", "lbfgs", lambda x0: blackjax.optimizers.lbfgs.minimize_lbfgs(
            lambda v: jnp.sum((v - 1.0) ** 2), x0, maxiter=3)[0].params, _f([0.0, 2.0])),
    ]


def all_programs() -> list[Program]:
    programs = []
    for group in (_numpyro_programs, _scipy_programs, _linalg_programs, _nn_programs, _optax_programs,
                  _equinox_programs, _diffrax_programs, _random_programs, _integer_programs, _flax_programs,
                  _blackjax_programs):
        programs.extend(group())
    return programs


# --------------------------------------------------------------------------------------
# lowering both ways, reading constants


@contextlib.contextmanager
def x64_enabled(enabled: bool):
    old = bool(jax.config.jax_enable_x64)
    jax.config.update("jax_enable_x64", enabled)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", old)


def lower(program: Program, x64: bool) -> str:
    jax.clear_caches()  # closed-over arrays keep the dtype of the first trace (see tests/corpus/oracle.py)
    fd, idt = (np.float64, np.int64) if x64 else (np.float32, np.int32)
    with x64_enabled(x64), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        args = program.args(np.dtype(fd), np.dtype(idt))
        return jax.jit(program.fn).lower(*args).as_text(debug_info=True)


@dataclass
class Op:
    name: str
    element: str | None = None       # constants: element type spelling
    values: np.ndarray | None = None  # constants: values (0-d for a splat)
    where: str = ""


def ops_of(text: str) -> list[Op]:
    with x64mlir.make_context():
        module = ir.Module.parse(text)
        out: list[Op] = []

        def visit(op):
            name = op.name
            entry = Op(name)
            if name == "stablehlo.constant":
                t = op.results[0].type
                entry.element = str(t.element_type) if isinstance(t, ir.ShapedType) else str(t)
                try:
                    entry.values, _ = read_constant(op, t)
                except (UnreadableConstant, KeyError):
                    entry.values = None
                where, jax_name = parse_location(str(op.location.attr))
                entry.where = " ".join(s for s in (jax_name, str(where) if where is not None else None) if s)
            out.append(entry)
            return ir.WalkResult.ADVANCE

        module.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
        return out


@dataclass
class Difference:
    program: Program
    where: str
    element: str
    wide: np.ndarray     # the x64 constant
    x32: np.ndarray      # x32 JAX's constant at the same position
    rounded: np.ndarray  # the x64 constant narrowed by plain rounding


def differences(program: Program) -> tuple[list[Difference], bool, list[tuple[float, bool]], int]:
    """(constants that plain rounding gets wrong or the table would change, whether the two
    modules have the same ops, every float64 element that rounding collapses onto 0 or +-1
    with whether x32 JAX holds that same rounded value there, how many 64-bit constants
    were compared)."""
    wide_ops, narrow_ops = ops_of(lower(program, True)), ops_of(lower(program, False))
    matcher = difflib.SequenceMatcher(None, [o.name for o in wide_ops], [o.name for o in narrow_ops],
                                      autojunk=False)
    same_structure = matcher.ratio() == 1.0
    found, collapses, compared = [], [], 0
    for block in matcher.get_matching_blocks():
        for i in range(block.size):
            w, n = wide_ops[block.a + i], narrow_ops[block.b + i]
            if w.values is None or n.values is None or w.element not in WIDE or WIDE[w.element] != n.element:
                continue
            if w.values.shape != n.values.shape:
                continue
            compared += 1
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                rounded = narrow_values(w.values, w.element, n.element, "wrap").values
            same = rounded.astype(n.values.dtype).ravel() == n.values.ravel()
            if w.element in ("f64", "complex<f64>"):
                for part in (np.real, np.imag) if w.element == "complex<f64>" else (np.real,):
                    wide_part, rounded_part = part(w.values).ravel(), part(rounded).ravel()
                    collapsed = np.isin(rounded_part, [0.0, 1.0, -1.0]) & (wide_part != rounded_part)
                    collapses += [(float(v), bool(ok)) for v, ok in zip(wide_part[collapsed], same[collapsed])]
            if rounded.tobytes() != n.values.astype(rounded.dtype).tobytes() or _in_table(w):
                found.append(Difference(program, w.where, w.element, w.values, n.values, rounded))
    return found, same_structure, collapses, compared


def _in_table(op: Op) -> bool:
    """Does x64guard's table match some element of this 64-bit float constant?"""
    if op.element not in ("f64", "complex<f64>") or op.values.size > 4096:
        return False
    parts = (op.values.real, op.values.imag) if op.element == "complex<f64>" else (op.values,)
    return any(dtype_constant(float(v)) is not None for part in parts for v in part.ravel())


# --------------------------------------------------------------------------------------
# explaining a difference with finfo/iinfo


def explain(element: str, wide: np.ndarray, x32: np.ndarray) -> list[str]:
    """Per element: the finfo expression of x64guard's table (tables.dtype_constant) that
    maps this 64-bit value to x32's value, '=' if rounding gives x32's value, else '?'."""
    names = []
    for w, n in zip(wide.ravel(), x32.ravel()):
        parts = [(w.real, n.real), (w.imag, n.imag)] if element == "complex<f64>" else [(w, n)]
        labels = []
        for pw, pn in parts:
            if element in ("i64", "ui64"):
                labels.append("=" if int(pw) == int(pn) else "?")
                continue
            row = dtype_constant(float(pw))
            if row is not None and np.float32(row.narrow) == np.float32(pn):
                labels.append(row.named("T"))
            elif np.float32(pw).tobytes() == np.float32(pn).tobytes():
                labels.append("=" if row is None else f"FALSE POSITIVE {row.named('T')}")
            else:
                labels.append("?")
        names.append(" + ".join(labels) if len(labels) > 1 else labels[0])
    return names


def _fmt(a: np.ndarray, limit: int = 4) -> str:
    flat = a.ravel()
    items = ", ".join(repr(x.item()) for x in flat[:limit])
    return f"[{items}{', ...' if flat.size > limit else ''}]" if a.ndim else items


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-k", default="", help="only programs whose library/name contains this")
    parser.add_argument("-v", action="store_true", help="print every differing constant")
    ns = parser.parse_args(argv)

    programs = [p for p in all_programs() if ns.k in f"{p.library}/{p.name}"]
    per_value: dict[tuple, set[str]] = defaultdict(set)
    unexplained: list[Difference] = []
    restructured, failed = [], []
    collapses: dict[tuple[float, bool], set[str]] = defaultdict(set)
    total_compared = 0
    for program in programs:
        try:
            found, same, program_collapses, compared = differences(program)
            total_compared += compared
        except Exception as exc:  # noqa: BLE001  (a program JAX cannot lower both ways)
            failed.append(f"{program.library}/{program.name}: {type(exc).__name__}: {str(exc)[:120]}")
            continue
        for value, x32_agrees in program_collapses:
            collapses[(value, x32_agrees)].add(f"{program.library}/{program.name}")
        if not same:
            restructured.append(f"{program.library}/{program.name}")
        for d in found:
            labels = explain(d.element, d.wide, d.x32)
            if all(label == "=" for label in labels):
                continue
            tag = f"{program.library}/{program.name}"
            if d.wide.size <= 8:
                for w, n, label in zip(d.wide.ravel(), d.x32.ravel(), labels):
                    if label != "=":
                        per_value[(label, d.element, repr(w.item()), repr(n.item()))].add(tag)
            if any("?" in label or "FALSE" in label for label in labels):
                unexplained.append(d)
                if d.wide.size > 8:
                    per_value[("? (array)", d.element, _fmt(d.wide), _fmt(d.x32))].add(tag)
            if ns.v:
                print(f"{tag}: {d.element} {_fmt(d.wide)} -> x32 {_fmt(d.x32)} (rounded {_fmt(d.rounded)}) "
                      f"{labels[:4]} at {d.where}")

    print(f"{len(programs)} programs lowered with x64 on and off; "
          f"{len(restructured)} lower to different op sequences; {len(failed)} failed to lower; "
          f"{total_compared} 64-bit constants aligned with x32's\n")
    print("| finfo expression (T: the type), or ? | element | float64/int64 value | x32 JAX value | programs |")
    print("|---|---|---|---|---|")
    for (label, element, wide, narrow), tags in sorted(per_value.items(), key=lambda kv: ("?" in kv[0][0] or "FALSE" in kv[0][0], kv[0])):
        shown = ", ".join(sorted(tags)) if ns.v else \
            ", ".join(sorted(tags)[:6]) + (f" (+{len(tags) - 6})" if len(tags) > 6 else "")
        print(f"| {label} | {element} | {wide} | {narrow} | {shown} |")
    agreeing = sorted({v for (v, ok) in collapses if ok})
    collapsing = {v for v, _ in collapses}
    print(f"\nfloat64 constants that plain rounding collapses onto 0 or +-1: {len(collapsing)} distinct values, "
          f"{sum(dtype_constant(v) is not None for v in collapsing)} of them in x64guard's table; x32 JAX holds the "
          f"same rounded value for {len(agreeing)} of them (a literal, not a dtype-derived constant)"
          + (":" if agreeing else "."))
    for value in agreeing:
        print(f"  {value!r} in {', '.join(sorted(collapses[(value, True)])[:6])}")
    if restructured:
        print("\nDifferent op sequences (aligned by longest common subsequence):", ", ".join(restructured))
    for line in failed:
        print("FAILED", line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
