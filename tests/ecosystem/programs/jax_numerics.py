"""JAX's own numerical library code, as users call it: jax.scipy.special and stats at
extreme arguments, jnp.linalg and jax.scipy.linalg with their default tolerances, jax.nn,
and jax.random samplers at their default dtypes (raw, typed and rbg keys)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy as jsp
import numpy as np

from tests.ecosystem.programs.base import Registry

registry = Registry("jax")

# ----------------------------------------------------------------------------- special, stats


@registry.program("jsp_special_gamma_family",
                  "gammaln, digamma, polygamma, betaln, gammainc, gammaincc, multigammaln from 1e-30 to 1e6", slow=True)
def special_gamma():
    x = jnp.asarray([1e-30, 1e-6, 0.5, 1.0, 3.3, 40.0, 1e6], jnp.float32)

    def special(x):
        s = jsp.special
        return {"gammaln": s.gammaln(x), "digamma": s.digamma(x), "polygamma": s.polygamma(1, x),
                "betaln": s.betaln(x, 2.5), "gammainc": s.gammainc(2.0, x), "gammaincc": s.gammaincc(0.7, x),
                "multigammaln": s.multigammaln(x[2:] + 1.0, 3)}

    return special, (x,)


@registry.program("jsp_special_erf_ndtri",
                  "erf, erfc, erfinv, ndtr, ndtri, log_ndtr at the tails (-40 .. 40, probabilities 1e-30 .. 1-1e-7)")
def special_erf():
    x = jnp.asarray([-40.0, -12.0, -3.0, 0.0, 1e-8, 2.5, 9.0, 40.0], jnp.float32)
    p = jnp.asarray([1e-30, 1e-10, 0.01, 0.5, 0.975, 1.0 - 1e-7], jnp.float32)

    def special(x, p):
        s = jsp.special
        return {"erf": s.erf(x), "erfc": s.erfc(x), "erfinv": s.erfinv(2 * p - 1), "ndtr": s.ndtr(x),
                "ndtri": s.ndtri(p), "log_ndtr": s.log_ndtr(x)}

    return special, (x, p)


@registry.program("jsp_special_betainc_misc",
                  "betainc (continued fraction), logsumexp with -inf and weights, xlogy, xlog1py, entr, logit, "
                  "expit, i0e, i1e, zeta, kl_div")
def special_misc():
    a = jnp.asarray([0.1, 0.5, 2.0, 30.0], jnp.float32)
    x = jnp.asarray([1e-6, 0.3, 0.999, 0.5], jnp.float32)
    v = jnp.asarray([-jnp.inf, 0.0, 3.0, -1e30], jnp.float32)

    def special(a, x, v):
        s = jsp.special
        return {"betainc": s.betainc(a, a[::-1], x), "logsumexp": s.logsumexp(v, b=jnp.asarray([1.0, 2.0, 0.5, 1.0])),
                "logsumexp_all_neg_inf": s.logsumexp(jnp.full(3, -jnp.inf, v.dtype)), "xlogy": s.xlogy(x, a),
                "xlog1py": s.xlog1py(x, -x), "entr": s.entr(x), "logit": s.logit(x), "expit": s.expit(v),
                "i0e": s.i0e(a * 10), "i1e": s.i1e(a * 10), "zeta": s.zeta(a + 1.5, 1.0), "kl_div": s.kl_div(x, a)}

    return special, (a, x, v)


@registry.program("jsp_stats_logpdf_tails",
                  "jax.scipy.stats norm logpdf/logcdf/logsf/ppf, t, gamma, beta at its edges, poisson, bernoulli with "
                  "p in {0, 1}, multivariate_normal")
def stats_tails():
    x = jnp.asarray([-38.0, -4.0, 0.0, 0.7, 6.0, 38.0], jnp.float32)
    u = jnp.asarray([0.0, 1e-7, 0.3, 0.9, 1.0 - 1e-7, 1.0], jnp.float32)
    k = jnp.asarray([0, 1, 1, 0, 5, 60], jnp.int32)

    def stats(x, u, k):
        st = jsp.stats
        return {"norm_logpdf": st.norm.logpdf(x), "norm_logcdf": st.norm.logcdf(x), "norm_logsf": st.norm.logsf(x),
                "norm_ppf": st.norm.ppf(u), "t_logpdf": st.t.logpdf(x, 2.5),
                "gamma_logpdf": st.gamma.logpdf(jnp.abs(x), 0.5),
                "beta_logpdf": st.beta.logpdf(u, 0.5, 3.0), "poisson_logpmf": st.poisson.logpmf(k, 1e-3 + jnp.abs(x)),
                "bernoulli_logpmf": st.bernoulli.logpmf(k.clip(0, 1), u),
                "mvn_logpdf": st.multivariate_normal.logpdf(x.reshape(3, 2), jnp.zeros(2),
                                                            jnp.asarray([[2.0, 0.3], [0.3, 0.5]]))}

    return stats, (x, u, k)


@registry.program("jax_nn_functions",
                  "jax.nn: log_softmax and softmax with -inf, softplus, gelu (exact and tanh), celu, glu, "
                  "logsumexp, one_hot, standardize")
def nn_functions():
    x = jnp.asarray([[-jnp.inf, 0.0, 80.0, -90.0], [1.0, 2.0, 3.0, 4.0]], jnp.float32)
    labels = jnp.asarray([3, 0], jnp.int32)

    def functions(x, labels):
        finite = jnp.where(jnp.isinf(x), -50.0, x)
        return {"log_softmax": jax.nn.log_softmax(x), "softmax": jax.nn.softmax(x), "softplus": jax.nn.softplus(finite),
                "gelu": jax.nn.gelu(finite, approximate=False), "gelu_tanh": jax.nn.gelu(finite),
                "celu": jax.nn.celu(finite), "glu": jax.nn.glu(finite), "logsumexp": jax.nn.logsumexp(x, axis=-1),
                "one_hot": jax.nn.one_hot(labels, 4), "standardize": jax.nn.standardize(finite, axis=-1)}

    return functions, (x, labels)


# ----------------------------------------------------------------------------- linear algebra

def _rank_deficient(seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((5, 2)) @ rng.standard_normal((2, 4))  # rank 2
    return jnp.asarray(a.astype(np.float32))


@registry.program("linalg_pinv_default_rcond",
                  "jnp.linalg.pinv of a rank-deficient 5x4 matrix with the default rcond (10 * max(M, N) * eps)")
def pinv_default():
    def pinv(a):
        return jnp.linalg.pinv(a), jnp.linalg.pinv(a, hermitian=False) @ a

    return pinv, (_rank_deficient(),)


@registry.program("linalg_lstsq_default_rcond",
                  "jnp.linalg.lstsq(a, b) with rcond=None on a rank-deficient system: solution, residuals, rank, "
                  "singular values")
def lstsq_default():
    b = jnp.asarray(np.random.default_rng(1).standard_normal((5, 2)).astype(np.float32))

    def lstsq(a, b):
        return jnp.linalg.lstsq(a, b)

    return lstsq, (_rank_deficient(), b)


@registry.program("linalg_matrix_rank_default_tol",
                  "jnp.linalg.matrix_rank with its default tolerance on full-rank, rank-deficient and nearly "
                  "singular (1e-6 perturbed) matrices")
def matrix_rank_default():
    a = _rank_deficient(2)
    near = jnp.asarray(np.diag([1.0, 1e-3, 1e-6, 1e-9]).astype(np.float32))

    def rank(a, near):
        return jnp.linalg.matrix_rank(a), jnp.linalg.matrix_rank(near), jnp.linalg.matrix_rank(a.T @ a + near)

    return rank, (a, near)


@registry.program("linalg_solve_inv_det",
                  "jnp.linalg.solve, inv, det, slogdet, cond, norm (several ords) on a small well-posed system")
def solve_inv_det():
    rng = np.random.default_rng(3)
    a = jnp.asarray((rng.standard_normal((4, 4)) + 4 * np.eye(4)).astype(np.float32))
    b = jnp.asarray(rng.standard_normal((4, 2)).astype(np.float32))

    def linalg(a, b):
        la = jnp.linalg
        return {"solve": la.solve(a, b), "inv": la.inv(a), "det": la.det(a), "slogdet": la.slogdet(a),
                "cond": la.cond(a), "norms": [la.norm(a, o) for o in (None, 1, 2, "nuc", -2)]}

    return linalg, (a, b)


@registry.program("linalg_decompositions",
                  "jnp.linalg.eigh, svd, qr, cholesky, eigvalsh and jax.scipy.linalg.lu of small matrices")
def decompositions():
    rng = np.random.default_rng(4)
    m = rng.standard_normal((4, 3)).astype(np.float32)
    spd = jnp.asarray((m.T @ m + np.eye(3)).astype(np.float32))

    def decompose(m, spd):
        la = jnp.linalg
        return {"eigh": la.eigh(spd), "svd": la.svd(m, full_matrices=False), "qr": la.qr(m),
                "cholesky": la.cholesky(spd), "eigvalsh": la.eigvalsh(spd), "lu": jsp.linalg.lu(m)}

    return decompose, (jnp.asarray(m), spd)


@registry.program("jsp_linalg_expm_triangular_cho",
                  "jax.scipy.linalg.expm, solve_triangular, cho_factor/cho_solve, lu_factor/lu_solve")
def scipy_linalg():
    rng = np.random.default_rng(5)
    a = jnp.asarray((rng.standard_normal((3, 3)) * 0.5).astype(np.float32))
    b = jnp.asarray(rng.standard_normal(3).astype(np.float32))

    def linalg(a, b):
        spd = a @ a.T + jnp.eye(3)
        return {"expm": jsp.linalg.expm(a),
                "triangular": jsp.linalg.solve_triangular(jnp.tril(a) + 2 * jnp.eye(3), b, lower=True),
                "cho": jsp.linalg.cho_solve(jsp.linalg.cho_factor(spd), b),
                "lu": jsp.linalg.lu_solve(jsp.linalg.lu_factor(a + 2 * jnp.eye(3)), b)}

    return linalg, (a, b)


# ----------------------------------------------------------------------------- jax.random

@registry.program("random_samplers_default_dtypes",
                  "jax.random at default dtypes from a raw key: uniform, normal, bernoulli, randint, categorical, "
                  "gumbel, truncated_normal, exponential, choice, permutation")
def samplers():
    def draw(key, logits):
        ks = jax.random.split(key, 10)
        r = jax.random
        return {"uniform": r.uniform(ks[0], (3,)), "normal": r.normal(ks[1], (3,)),
                "bernoulli": r.bernoulli(ks[2], 0.3, (4,)), "randint": r.randint(ks[3], (4,), 0, 10),
                "categorical": r.categorical(ks[4], logits, shape=(4,)), "gumbel": r.gumbel(ks[5], (3,)),
                "truncated_normal": r.truncated_normal(ks[6], -1.0, 2.0, (3,)),
                "exponential": r.exponential(ks[7], (3,)), "choice": r.choice(ks[8], 10, (3,), replace=False),
                "permutation": r.permutation(ks[9], 6)}

    return draw, (jax.random.PRNGKey(0), jnp.asarray([0.0, 1.0, -2.0], jnp.float32))


@registry.program("random_gamma_family_typed_key",
                  "jax.random from a typed key (jax.random.key): gamma, beta, dirichlet, poisson, t, laplace, "
                  "multivariate_normal", slow=True)
def gamma_family():
    def draw(key, alpha):
        ks = jax.random.split(key, 7)
        r = jax.random
        return {"gamma": r.gamma(ks[0], alpha), "beta": r.beta(ks[1], alpha, 2.0),
                "dirichlet": r.dirichlet(ks[2], alpha), "poisson": r.poisson(ks[3], 3.5, (4,)),
                "t": r.t(ks[4], 4.0, (3,)), "laplace": r.laplace(ks[5], (3,)),
                "mvn": r.multivariate_normal(ks[6], jnp.zeros(2), jnp.asarray([[1.0, 0.4], [0.4, 2.0]]))}

    return draw, (jax.random.key(1), jnp.asarray([0.5, 1.0, 4.0], jnp.float32))


@registry.program("random_rbg_key_uniform_normal",
                  "jax.random.key(0, impl='rbg') (as used for faster RNG on accelerators): split, uniform, normal")
def rbg_key():
    def draw(key):
        k1, k2 = jax.random.split(key)
        return jax.random.uniform(k1, (4,)), jax.random.normal(k2, (3,)), k2

    return draw, (jax.random.key(0, impl="rbg"),)


@registry.program("random_key_from_seed_in_jit",
                  "keys made inside the function from a seed: jax.random.PRNGKey(seed) of an int32 argument and "
                  "jax.random.key(0) of a Python int, then 32-bit draws (bits as uint32, uniform as float32)")
def key_from_seed():
    def draw(seed):
        k1 = jax.random.PRNGKey(seed)
        k2 = jax.random.key(0)
        return (jax.random.bits(k1, (3,), jnp.uint32), jax.random.uniform(k2, (2,), jnp.float32),
                jax.random.key_data(k2))

    return draw, (jnp.asarray(12345, jnp.int32),)


@registry.program("random_bits_fold_in_uint32",
                  "the 32-bit jax.random building blocks: fold_in, split, bits(dtype=uint32), uniform(dtype=float32)")
def bits_uint32():
    def draw(key, step):
        key = jax.random.fold_in(key, step)
        k1, k2 = jax.random.split(key)
        return jax.random.bits(k1, (4,), jnp.uint32), jax.random.uniform(k2, (3,), jnp.float32), key

    return draw, (jax.random.PRNGKey(5), jnp.asarray(7, jnp.int32))


PROGRAMS = registry.programs
