"""Corpus cases: library code whose constants are finfo expressions of the data's type.

Under x64 these constants are float64's (`1 - finfo(float64).eps`, `finfo(float64).tiny`,
`np.nextafter(-1., 0.)`, `rcond = max(M, N) * eps`, ...); JAX traced with x64 off holds
float32's. x64guard's dtype-constant rule (x64guard/passes/patterns/dtype_constants.py)
must make the narrowed program bit-identical to the x32 one. Inputs are chosen where the
difference shows: probabilities at 0 and 1, logits far beyond float32's saturation,
singular values between float32's and float64's cut-offs, zeros next to `tiny`.

Each case is data for the oracle (tests/corpus/oracle.py); `cases()` builds them lazily
so that tests/corpus/programs.py can append them to its CASES without an import cycle.
`slow_cases()` (a few seconds each) run in tests/corpus/test_library_constants.py, marked slow.
"""

from __future__ import annotations

import contextlib
from typing import Callable

import numpy as np

import jax
import jax.numpy as jnp

def _library(module: str):
    """`module`, imported outside any trace even when first asked for inside one: a library
    module's top-level jnp expressions (a `jnp.log(2.0)` constant) are otherwise staged into
    whichever trace imports it first (x64's or x32's), and the two modules differ by order
    of tests rather than by program."""
    import importlib

    with jax.ensure_compile_time_eval():
        return importlib.import_module(module)


# --------------------------------------------------------------------------------------
# inputs


def _near_singular(rows: int, cols: int, small: float = 1e-9) -> np.ndarray:
    """A rows x cols float64 matrix with singular values 1, 0.5, ..., and one `small`:
    below float32's default cut-off (~max(M, N) * 1.2e-7) and above float64's
    (~max(M, N) * 2.2e-16), so the default tolerance decides the rank."""
    rng = np.random.default_rng(rows * 100 + cols)
    u, _ = np.linalg.qr(rng.normal(size=(rows, rows)))
    v, _ = np.linalg.qr(rng.normal(size=(cols, cols)))
    s = np.zeros((rows, cols))
    singular = [1.0, 0.5, 0.25, 0.125][: min(rows, cols) - 1] + [small]
    s[np.arange(len(singular)), np.arange(len(singular))] = singular
    return u @ s @ v.T


def _logistic_data() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A logistic regression batch with one confident miss (logit 20, label 0)."""
    x = np.array([[1.0, 0.5], [10.0, 0.0], [0.0, 1.0], [1.0, 1.0], [-3.0, 2.0]])
    w = np.array([2.0, -1.0])
    y = np.array([1.0, 0.0, 0.0, 1.0, 0.0])
    return x, w, y


# Probabilities and logits at the edges, where clamping to [tiny, 1 - eps] is what matters.
_PROBS = np.array([0.0, 1e-45, 1e-30, 0.25, 1.0 - 1e-9, 1.0])
_LOGITS = np.array([-800.0, -90.0, -20.0, 0.0, 17.0, 20.0, 40.0, 800.0])


@contextlib.contextmanager
def _equinox_errors_as_nan():
    """equinox's runtime checks as `EQX_ON_ERROR=nan` would set them, for this trace only:
    the default (`raise`) is a host callback, another x64guard feature than these constants."""
    errors = _library("equinox._errors")

    old = errors.EQX_ON_ERROR
    errors.EQX_ON_ERROR = "nan"
    try:
        yield
    finally:
        errors.EQX_ON_ERROR = old


# --------------------------------------------------------------------------------------
# programs, written as the libraries' users write them


def _numpyro_logistic_regression(x, w, y):
    dist = _library("numpyro.distributions")
    return dist.Bernoulli(probs=jax.nn.sigmoid(x @ w)).log_prob(y).sum()


def _numpyro_logistic_regression_grad(x, w, y):
    return jax.grad(_numpyro_logistic_regression, argnums=1)(x, w, y)


def _numpyro_clamp_probs(p):
    clamp_probs = _library("numpyro.distributions.util").clamp_probs
    return clamp_probs(p)


def _numpyro_binomial(p):
    dist = _library("numpyro.distributions")
    counts = jnp.array([0.0, 1.0, 2.0, 5.0, 9.0, 10.0], p.dtype)
    return dist.Binomial(10, probs=p).log_prob(counts)


def _numpyro_categorical(p):
    dist = _library("numpyro.distributions")
    probs = jnp.stack([p, 1 - p])
    return dist.Categorical(probs=probs.T).log_prob(jnp.ones(p.shape, jnp.int32))


def _numpyro_geometric(p):
    dist = _library("numpyro.distributions")
    return dist.Geometric(probs=p).log_prob(jnp.full(p.shape, 3.0, p.dtype))


def _numpyro_sigmoid_transform(v):
    transforms = _library("numpyro.distributions").transforms
    t = transforms.SigmoidTransform()
    return t(v), t.log_abs_det_jacobian(v, t(v))


def _numpyro_stick_breaking(v):
    transforms = _library("numpyro.distributions").transforms
    t = transforms.StickBreakingTransform()
    y = t(v)
    return y, t.log_abs_det_jacobian(v, y)


def _numpyro_corr_cholesky(v):
    transforms = _library("numpyro.distributions").transforms
    t = transforms.CorrCholeskyTransform()
    return t.inv(t(v))


def _numpyro_censored(v):
    dist = _library("numpyro.distributions")
    base = dist.Normal(0.0, 1.0)
    censored = jnp.array([True, True, False, True, False, True])
    left = dist.LeftCensoredDistribution(base, censored).log_prob(v)
    right = dist.RightCensoredDistribution(base, censored).log_prob(-v)
    return left, right


def _numpyro_interval_censored(bounds):
    dist = _library("numpyro.distributions")
    left = jnp.array([False, True, False])
    right = jnp.array([False, False, True])
    return dist.IntervalCensoredDistribution(dist.Normal(0.0, 1.0), left, right).log_prob(bounds)


def _numpyro_kumaraswamy(v):
    dist = _library("numpyro.distributions")
    return dist.Kumaraswamy(2.0, 3.0).log_prob(v)


def _numpyro_lkj_cholesky(v):
    dist = _library("numpyro.distributions")
    transforms = _library("numpyro.distributions").transforms
    return dist.LKJCholesky(3, 2.0).log_prob(transforms.CorrCholeskyTransform()(v))


def _equinox_nextafter(v):
    eqxi = _library("equinox.internal")
    return eqxi.nextafter(v), eqxi.prevbefore(v)


def _blackjax_log1mexp(v):
    log1mexp = _library("blackjax.ns.utils").log1mexp
    return log1mexp(v)


def _diffrax_jump_at_zero(y0):
    """An adaptive solve across a discontinuity at t = 0, declared in `jump_ts`: diffrax
    steps to prevbefore(0) = -tiny, then past the jump (equinox's nextafter/prevbefore)."""
    diffrax = _library("diffrax")
    with _equinox_errors_as_nan():
        term = diffrax.ODETerm(lambda t, y, a: jnp.where(t < 0, -a * y, a * y))
        controller = diffrax.ClipStepSizeController(diffrax.PIDController(rtol=1e-4, atol=1e-4), jump_ts=[0.0])
        sol = diffrax.diffeqsolve(term, diffrax.Dopri5(), -1.0, 1.0, 0.1, y0, args=0.5,
                                  stepsize_controller=controller, saveat=diffrax.SaveAt(t1=True))
        return sol.ys, sol.stats["num_steps"]


def _pinv(a):
    return jnp.linalg.pinv(a)


def _lstsq(a, b):
    return jnp.linalg.lstsq(a, b)[0]


def _interp(x):
    # Steps of 1e-20: above float64's eps**2 (treated as a step) and below float32's (a repeated point).
    xp = jnp.array([0.0, 1e-20, 2e-20, 1.0], x.dtype)
    fp = jnp.array([1.0, 3.0, 5.0, 2.0], x.dtype)
    return jnp.interp(x, xp, fp)


def _spacing(v):
    return jnp.spacing(v)


def _polyfit(x, y):
    return jnp.polyfit(x, y, 2)


def _eigh_tridiagonal(d, e):
    import jax.scipy.linalg as sla
    return sla.eigh_tridiagonal(d, e, eigvals_only=True)


def _user_nextafter_bounds(x):
    """Library-style clipping to the open interval (-1, 1), as jax.random.normal builds it."""
    lo = np.nextafter(np.array(-1.0, x.dtype), np.array(0.0, x.dtype))
    return jax.scipy.special.erfinv(jnp.clip(x, lo, 1.0 - jnp.finfo(x.dtype).epsneg))


def _complex_eps(z):
    """finfo(z.real.dtype).eps as the imaginary part of a complex constant."""
    return z + jnp.asarray(1.0 + 1j * jnp.finfo(z.real.dtype).eps, z.dtype) * jnp.asarray(
        [1.0, 1e-7], z.dtype)


def _array_of_finfo_values(x):
    """A non-splat constant mixing finfo expressions with ordinary values."""
    fi = jnp.finfo(x.dtype)
    table = np.array([fi.tiny, 0.5, 1.0 - fi.eps, -fi.eps, 3.0, 100.0 * fi.tiny], x.dtype)
    return jnp.maximum(x, table), x * table


def cases() -> list:
    from tests.corpus import programs as p
    sp = jax.scipy.special
    Case = p.Case
    F = np.float64

    def fixed(*arrays) -> Callable[[], tuple]:
        return lambda: tuple(np.asarray(a, F) for a in arrays)

    return [
        # ---- numpyro: probabilities clamped to [tiny, 1 - eps] --------------------------
        Case("lib_numpyro_bernoulli_logreg_confident_miss", _numpyro_logistic_regression, fixed(*_logistic_data()),
             note="issue 11: -inf through x64guard before dtype constants (1 - eps64 rounded to 1.0)"),
        Case("lib_numpyro_bernoulli_logreg_grad", _numpyro_logistic_regression_grad, fixed(*_logistic_data())),
        Case("lib_numpyro_clamp_probs", _numpyro_clamp_probs, fixed(_PROBS)),
        Case("lib_numpyro_binomial_edges", _numpyro_binomial, fixed(_PROBS), lowering_differs=('lgamma',)),
        Case("lib_numpyro_sigmoid_transform", _numpyro_sigmoid_transform, fixed(_LOGITS)),
        Case("lib_numpyro_stick_breaking", _numpyro_stick_breaking, fixed([-40.0, 0.0, 40.0, 5.0])),
        Case("lib_numpyro_corr_cholesky_roundtrip", _numpyro_corr_cholesky, fixed([0.5, -30.0, 30.0])),
        Case("lib_numpyro_censored_tails", _numpyro_censored, fixed([-40.0, -9.0, 0.0, 3.0, 9.0, 40.0])),
        Case("lib_numpyro_interval_censored", _numpyro_interval_censored,
             fixed([[-1.0, 1.0], [-50.0, -40.0], [40.0, 50.0]])),
        Case("lib_numpyro_kumaraswamy_near_one", _numpyro_kumaraswamy, fixed([1e-6, 0.5, 0.999999, 1.0 - 1e-12])),
        Case("lib_numpyro_lkj_cholesky", _numpyro_lkj_cholesky, fixed([0.5, -40.0, 40.0]), lowering_differs=('lgamma',)),
        # ---- jax.scipy.special: loops that stop on finfo(dtype).eps ---------------------
        Case("lib_special_gammainc", sp.gammainc, fixed([0.1, 0.5, 2.0, 7.0, 30.0], [0.05, 0.5, 1.0, 9.0, 20.0]), lowering_differs=('lgamma',)),
        Case("lib_special_erfcx", sp.erfcx, fixed([-1.0, 0.5, 5.0, 9.0, 12.0, 30.0]),
             note="switches to the asymptotic series at sqrt(log(finfo.max))", lowering_differs=('split_square',)),
        # ---- jnp.linalg / jnp defaults built from finfo(dtype) --------------------------
        Case("lib_linalg_pinv_default_rtol", _pinv, fixed(_near_singular(4, 3)),
             note="a singular value between float32's and float64's default cut-off"),
        Case("lib_linalg_matrix_rank_default_tol", jnp.linalg.matrix_rank, fixed(_near_singular(4, 4)),
             note="rank 3 with x64guard's table, 4 with float64's eps"),
        Case("lib_linalg_lstsq_default_rcond", _lstsq, fixed(_near_singular(6, 3), [1.0, 2.0, 3.0, 4.0, 5.0, 6.0])),
        Case("lib_polyfit_default_rcond", _polyfit,
             fixed([1.0, 1.0001, 1.0002, 1.0003, 1.0004], [1.0, 0.0, 2.0, 5.0, 11.0]),
             note="clustered abscissae: the Vandermonde matrix's smallest singular value is between the cut-offs"),
        Case("lib_interp_close_points", _interp, fixed([5e-21, 1.5e-20, 0.5])),
        Case("lib_spacing", _spacing, fixed([1.0, 0.0, -0.0, -3.0, 1e-40])),
        Case("lib_eigh_tridiagonal", _eigh_tridiagonal, fixed([2.0, 3.0, 1.0, 4.0], [0.5, 0.2, 1e-3])),
        # ---- equinox / diffrax / blackjax ----------------------------------------------
        Case("lib_equinox_nextafter_prevbefore", _equinox_nextafter, fixed([0.0, -0.0, 1.0, -2.0, 1e-30])),
        Case("lib_blackjax_ns_log1mexp", _blackjax_log1mexp, fixed([-1e-30, -1e-10, -1.0, -40.0])),
        # ---- finfo expressions as users write them -------------------------------------
        Case("lib_user_nextafter_bounds", _user_nextafter_bounds, fixed([-1.0, -0.9999999, 0.0, 0.99999999, 1.0])),
        Case("lib_user_complex_eps", _complex_eps, lambda: (p.c128(2),)),
        Case("lib_user_array_of_finfo_values", _array_of_finfo_values, fixed([0.0, -1.0, 1.0, 0.5, 1e-40, -3.0])),
    ]


def slow_cases() -> list:
    """Cases that take more than ~5 s (compiling an adaptive ODE solve, or hyp2f1's loops, twice)."""
    from tests.corpus import programs as p
    Case = p.Case

    def fixed(*arrays) -> Callable[[], tuple]:
        return lambda: tuple(np.asarray(a, np.float64) for a in arrays)

    return [
        Case("lib_special_hyp2f1", jax.scipy.special.hyp2f1, fixed([0.5], [1.0], [1.5], [-0.4]),
             note="50 * finfo.eps is the series' tolerance"),
        Case("lib_diffrax_jump_at_zero", _diffrax_jump_at_zero, fixed([1.0, 2.0]),
             note="ClipStepSizeController steps to prevbefore/nextafter the jump: finfo.tiny at 0. x32 JAX "
                  "itself reaches max_steps here (NaN, 4096 steps; so does x64), while float64's tiny rounded "
                  "to 0 gave a different, finished solve. equinox errors as EQX_ON_ERROR=nan (host callbacks "
                  "are another feature)"),
    ]
