"""optimistix, as its users write it: root_find, minimise, least_squares and fixed_point
with the solvers' usual tolerances and optimistix's defaults (max_steps=256, throw=True:
equinox's error_if, ImplicitAdjoint), and gradients through solves (the implicit function
theorem via lineax)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from tests.ecosystem.programs.base import Registry

registry = Registry("optimistix")


def _cubic(y, args):
    # A small nonlinear system: x^3 + x - a = 0 componentwise, coupled through a shift.
    return y ** 3 + y - args + 0.1 * jnp.roll(y, 1)


_A = jnp.asarray([0.5, 2.0, -3.0, 10.0], jnp.float32)
_Y0 = jnp.zeros(4, jnp.float32)


def _rosenbrock(y, args):
    return jnp.sum(args * (y[1:] - y[:-1] ** 2) ** 2 + (1.0 - y[:-1]) ** 2)


def _fit_data():
    t = np.linspace(0.0, 3.0, 12, dtype=np.float32)
    y = (2.5 * np.exp(-1.3 * t) + 0.4 + 0.01 * np.sin(7 * t)).astype(np.float32)
    return jnp.asarray(t), jnp.asarray(y)


def _residuals(p, data):
    t, y = data
    return p[0] * jnp.exp(-p[1] * t) + p[2] - y


@registry.program("optx_newton_root",
                  "optx.root_find with optx.Newton(rtol=1e-6, atol=1e-6): solution, result code, step count")
def newton_root():
    import optimistix as optx

    def solve(y0, a):
        sol = optx.root_find(_cubic, optx.Newton(rtol=1e-6, atol=1e-6), y0, a)
        return sol.value, sol.result._value, sol.stats["num_steps"]

    return solve, (_Y0, _A)


@registry.program("optx_chord_root",
                  "optx.root_find with optx.Chord(rtol=1e-5, atol=1e-5) (Jacobian factorised once at y0)")
def chord_root():
    import optimistix as optx

    def solve(y0, a):
        sol = optx.root_find(_cubic, optx.Chord(rtol=1e-5, atol=1e-5), y0 + 0.5, a * 0.1)
        return sol.value, sol.stats["num_steps"]

    return solve, (_Y0, _A)


@registry.program("optx_bisection_root",
                  "optx.root_find with optx.Bisection(rtol=1e-6, atol=1e-6) on a scalar equation, "
                  "options lower/upper")
def bisection_root():
    import optimistix as optx

    def solve(c):
        fn = lambda x, c: jnp.cos(x) - c * x
        sol = optx.root_find(fn, optx.Bisection(rtol=1e-6, atol=1e-6), jnp.asarray(0.5, c.dtype), c,
                             options={"lower": 0.0, "upper": 2.0})
        return sol.value, sol.stats["num_steps"]

    return solve, (jnp.asarray(0.7, jnp.float32),)


@registry.program("optx_bfgs_rosenbrock",
                  "optx.minimise of a 4-d Rosenbrock with optx.BFGS(rtol=1e-6, atol=1e-6): minimiser, step count")
def bfgs_rosenbrock():
    import optimistix as optx

    def solve(y0, k):
        sol = optx.minimise(_rosenbrock, optx.BFGS(rtol=1e-6, atol=1e-6), y0, k)
        return sol.value, sol.stats["num_steps"]

    return solve, (jnp.asarray([-1.2, 1.0, -0.5, 0.3], jnp.float32), jnp.asarray(10.0, jnp.float32))


@registry.program("optx_levenberg_marquardt_fit",
                  "optx.least_squares of an exponential-decay fit with optx.LevenbergMarquardt(rtol=1e-6, atol=1e-6)")
def levenberg_marquardt():
    import optimistix as optx

    def solve(p0, t, y):
        sol = optx.least_squares(_residuals, optx.LevenbergMarquardt(rtol=1e-6, atol=1e-6), p0, (t, y))
        return sol.value, sol.stats["num_steps"]

    return solve, (jnp.asarray([1.0, 1.0, 0.0], jnp.float32), *_fit_data())


@registry.program("optx_gauss_newton_fit",
                  "optx.least_squares of an exponential-decay fit with optx.GaussNewton(rtol=1e-6, atol=1e-6)")
def gauss_newton():
    import optimistix as optx

    def solve(p0, t, y):
        sol = optx.least_squares(_residuals, optx.GaussNewton(rtol=1e-6, atol=1e-6), p0, (t, y))
        return sol.value, sol.stats["num_steps"]

    return solve, (jnp.asarray([2.0, 1.0, 0.3], jnp.float32), *_fit_data())


@registry.program("optx_implicit_grad_root",
                  "jax.grad through optx.root_find (Newton) w.r.t. the equation's parameters (ImplicitAdjoint)",
                  slow=True)
def implicit_grad_root():
    import optimistix as optx

    def loss(a, y0):
        sol = optx.root_find(_cubic, optx.Newton(rtol=1e-6, atol=1e-6), y0, a)
        return jnp.sum(sol.value ** 2)

    return jax.value_and_grad(loss), (_A, _Y0)


@registry.program("optx_implicit_grad_minimise",
                  "jax.grad through optx.minimise (BFGS) of a ridge objective w.r.t. the regularisation weight",
                  slow=True)
def implicit_grad_minimise():
    import optimistix as optx

    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((10, 3)).astype(np.float32))
    y = jnp.asarray(rng.standard_normal(10).astype(np.float32))

    def objective(w, args):
        lam, x, y = args
        return jnp.mean((x @ w - y) ** 2) + lam * jnp.sum(w ** 2)

    def outer(lam, x, y):
        w = optx.minimise(objective, optx.BFGS(rtol=1e-6, atol=1e-6), jnp.zeros(3, x.dtype), (lam, x, y)).value
        return jnp.sum(w)

    return jax.value_and_grad(outer), (jnp.asarray(0.1, jnp.float32), x, y)


@registry.program("optx_fixed_point_iteration",
                  "optx.fixed_point with optx.FixedPointIteration(rtol=1e-6, atol=1e-6) of x = cos(a x)")
def fixed_point():
    import optimistix as optx

    def solve(y0, a):
        sol = optx.fixed_point(lambda y, a: jnp.cos(a * y), optx.FixedPointIteration(rtol=1e-6, atol=1e-6), y0, a)
        return sol.value, sol.stats["num_steps"]

    return solve, (jnp.zeros(3, jnp.float32), jnp.asarray([0.5, 0.8, 1.0], jnp.float32))


PROGRAMS = registry.programs
