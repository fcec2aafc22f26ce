"""jaxopt, as its users write it: a solver object built once, `solver.run(init, *args)`
inside the jitted function, default tolerances and iteration caps (LBFGS, GradientDescent
with its backtracking line search, ProjectedGradient, Bisection under `vmap`, Broyden), and
gradients through a solution by implicit differentiation (`implicit_diff=True`, jaxopt's
default)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from tests.ecosystem.programs.base import Registry

registry = Registry("jaxopt")


def _regression(seed=0, n=12, d=4):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d)).astype(np.float32)
    y = (x @ rng.standard_normal(d) + 0.1 * rng.standard_normal(n)).astype(np.float32)
    return jnp.asarray(x), jnp.asarray(y)


@registry.program("jaxopt_lbfgs_rosenbrock",
                  "jaxopt.LBFGS(fun=rosenbrock, maxiter=50).run(x0): params, value and the iteration count", slow=True)
def lbfgs_rosenbrock():
    import jaxopt

    def rosenbrock(x):
        return jnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)

    solver = jaxopt.LBFGS(fun=rosenbrock, maxiter=50)

    def solve(x0):
        params, state = solver.run(x0)
        return params, state.value, state.iter_num

    return solve, (jnp.asarray([-1.2, 1.0, 0.5], jnp.float32),)


@registry.program("jaxopt_gradient_descent_backtracking",
                  "jaxopt.GradientDescent(ridge loss, stepsize=0: backtracking line search, maxiter=30)")
def gradient_descent_backtracking():
    import jaxopt

    def ridge(w, x, y, lam):
        return jnp.mean((x @ w - y) ** 2) + lam * jnp.sum(w ** 2)

    solver = jaxopt.GradientDescent(fun=ridge, stepsize=0.0, maxiter=30)

    def solve(w0, x, y):
        params, state = solver.run(w0, x, y, 0.1)
        return params, state.error

    x, y = _regression()
    return solve, (jnp.zeros(4, jnp.float32), x, y)


@registry.program("jaxopt_projected_gradient_nnls",
                  "jaxopt.ProjectedGradient with projection_non_negative: non-negative least squares")
def projected_gradient_nnls():
    import jaxopt
    from jaxopt.projection import projection_non_negative

    def least_squares(w, x, y):
        return 0.5 * jnp.sum((x @ w - y) ** 2)

    solver = jaxopt.ProjectedGradient(fun=least_squares, projection=projection_non_negative, maxiter=40)

    def solve(w0, x, y):
        return solver.run(w0, x=x, y=y).params

    x, y = _regression(1)
    return solve, (jnp.ones(4, jnp.float32), x, y)


@registry.program("jaxopt_bisection_vmap",
                  "jaxopt.Bisection(optimality_fun=x**3 - c, lower=0, upper=3) under jax.vmap over c")
def bisection_vmap():
    import jaxopt

    def cube_root(c):
        bisect = jaxopt.Bisection(optimality_fun=lambda x, c: x ** 3 - c, lower=0.0, upper=3.0,
                                  check_bracket=False)
        return bisect.run(c=c).params

    return jax.vmap(cube_root), (jnp.asarray([0.5, 1.0, 2.0, 8.0], jnp.float32),)


@registry.program("jaxopt_implicit_diff_ridge",
                  "jax.grad of a validation loss through jaxopt.LBFGS's ridge solution w.r.t. the "
                  "regularisation (implicit differentiation, jaxopt's default)", slow=True)
def implicit_diff_ridge():
    import jaxopt

    def ridge(w, lam, x, y):
        return jnp.mean((x @ w - y) ** 2) + lam * jnp.sum(w ** 2)

    solver = jaxopt.LBFGS(fun=ridge, maxiter=40)
    x, y = _regression(2)
    xv, yv = _regression(3)

    def validation(lam, x, y, xv, yv):
        w = solver.run(jnp.zeros(x.shape[1], x.dtype), lam, x, y).params
        return jnp.mean((xv @ w - yv) ** 2)

    return jax.grad(validation), (jnp.float32(0.3), x, y, xv, yv)


PROGRAMS = registry.programs
