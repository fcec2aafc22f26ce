"""lineax, as its users write it: linear_solve with its default throw=True (equinox's
error_if) through the direct solvers (LU, QR, Cholesky, SVD, Tridiagonal) and the iterative
ones (CG, GMRES, BiCGStab) at the tolerances users pass, the default AutoLinearSolver, and
gradients through a solve (lineax's implicit linear_solve_p transpose)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from tests.ecosystem.programs.base import Registry

registry = Registry("lineax")


def _system(seed=0, n=6, spd=False):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, n)).astype(np.float32)
    a = a @ a.T + n * np.eye(n, dtype=np.float32) if spd else a + n * np.eye(n, dtype=np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    return jnp.asarray(a), jnp.asarray(b)


@registry.program("lineax_lu_default_throw",
                  "lx.linear_solve(lx.MatrixLinearOperator(A), b, lx.LU()).value with the default throw=True")
def lu_default_throw():
    import lineax as lx

    def solve(a, b):
        return lx.linear_solve(lx.MatrixLinearOperator(a), b, lx.LU()).value

    return solve, _system()


@registry.program("lineax_qr_least_squares",
                  "lx.QR on a tall 8x3 MatrixLinearOperator (least-squares solution) and its result code")
def qr_least_squares():
    import lineax as lx

    rng = np.random.default_rng(1)
    a = jnp.asarray(rng.standard_normal((8, 3)).astype(np.float32))
    b = jnp.asarray(rng.standard_normal(8).astype(np.float32))

    def solve(a, b):
        sol = lx.linear_solve(lx.MatrixLinearOperator(a), b, lx.QR())
        return sol.value, sol.result._value

    return solve, (a, b)


@registry.program("lineax_cholesky_psd_tag",
                  "lx.Cholesky on a MatrixLinearOperator tagged positive_semidefinite_tag")
def cholesky_psd():
    import lineax as lx

    def solve(a, b):
        op = lx.MatrixLinearOperator(a, lx.positive_semidefinite_tag)
        return lx.linear_solve(op, b, lx.Cholesky()).value

    return solve, _system(2, spd=True)


@registry.program("lineax_svd_rank_deficient",
                  "lx.SVD (default rcond: the dtype's eps times the size) on a rank-deficient matrix: pseudo-inverse")
def svd_rank_deficient():
    import lineax as lx

    rng = np.random.default_rng(3)
    u = rng.standard_normal((5, 2)).astype(np.float32)
    a = jnp.asarray(u @ u.T)
    b = jnp.asarray(rng.standard_normal(5).astype(np.float32))

    def solve(a, b):
        return lx.linear_solve(lx.MatrixLinearOperator(a), b, lx.SVD()).value

    return solve, (a, b)


@registry.program("lineax_tridiagonal",
                  "lx.TridiagonalLinearOperator solved with lx.Tridiagonal (Thomas algorithm)")
def tridiagonal():
    import lineax as lx

    n = 7
    diag = jnp.full((n,), 4.0, jnp.float32) + jnp.arange(n, dtype=jnp.float32) * 0.1
    lower = jnp.full((n - 1,), -1.0, jnp.float32)
    upper = jnp.full((n - 1,), -1.3, jnp.float32)
    b = jnp.sin(jnp.arange(n, dtype=jnp.float32))

    def solve(diag, lower, upper, b):
        op = lx.TridiagonalLinearOperator(diag, lower, upper)
        return lx.linear_solve(op, b, lx.Tridiagonal()).value

    return solve, (diag, lower, upper, b)


@registry.program("lineax_cg_spd",
                  "lx.CG(rtol=1e-5, atol=1e-5) on a positive-definite MatrixLinearOperator: solution and step count")
def cg_spd():
    import lineax as lx

    def solve(a, b):
        op = lx.MatrixLinearOperator(a, lx.positive_semidefinite_tag)
        sol = lx.linear_solve(op, b, lx.CG(rtol=1e-5, atol=1e-5))
        return sol.value, sol.stats["num_steps"]

    return solve, _system(4, n=12, spd=True)


@registry.program("lineax_gmres",
                  "lx.GMRES(rtol=1e-5, atol=1e-5, restart=5) on a nonsymmetric system: solution and step count")
def gmres():
    import lineax as lx

    def solve(a, b):
        sol = lx.linear_solve(lx.MatrixLinearOperator(a), b, lx.GMRES(rtol=1e-5, atol=1e-5, restart=5))
        return sol.value, sol.stats["num_steps"]

    return solve, _system(5, n=10)


@registry.program("lineax_bicgstab",
                  "lx.BiCGStab(rtol=1e-5, atol=1e-5) with the default throw=True on a positive-definite system (its "
                  "breakdown test is omega == 0 under x64, omega < 1e-16 otherwise): solution and step count")
def bicgstab():
    import lineax as lx

    def solve(a, b):
        sol = lx.linear_solve(lx.MatrixLinearOperator(a), b, lx.BiCGStab(rtol=1e-5, atol=1e-5))
        return sol.value, sol.stats["num_steps"]

    return solve, _system(3, n=8, spd=True)


@registry.program("lineax_bicgstab_nonsymmetric_throw_false",
                  "lx.BiCGStab(rtol=1e-5, atol=1e-5), throw=False, on a nonsymmetric system: x32 lineax reports "
                  "breakdown (a negative omega/alpha/rho is < 1e-16) where the x64 test (== 0) iterates on; "
                  "solution, result code, step count")
def bicgstab_nonsymmetric():
    import lineax as lx

    def solve(a, b):
        sol = lx.linear_solve(lx.MatrixLinearOperator(a), b, lx.BiCGStab(rtol=1e-5, atol=1e-5), throw=False)
        return sol.value, sol.result._value, sol.stats["num_steps"]

    return solve, _system(6, n=10)


@registry.program("lineax_auto_solver_grad",
                  "jax.value_and_grad through lx.linear_solve with the default AutoLinearSolver, w.r.t. the "
                  "matrix and the right-hand side (the implicit transpose solve)")
def auto_solver_grad():
    import lineax as lx

    def loss(a, b):
        x = lx.linear_solve(lx.MatrixLinearOperator(a), b).value
        return jnp.sum(x ** 2)

    return jax.value_and_grad(loss, argnums=(0, 1)), _system(7)


@registry.program("lineax_function_operator_vmap",
                  "lx.FunctionLinearOperator (a stencil as a function) with lx.GMRES, vmapped over right-hand sides")
def function_operator_vmap():
    import lineax as lx

    n = 8

    def solve(bs, c):
        def matvec(x):
            return (2.0 + c) * x - 0.5 * jnp.roll(x, 1) - 0.7 * jnp.roll(x, -1)

        op = lx.FunctionLinearOperator(matvec, jax.eval_shape(lambda: bs[0]))
        return jax.vmap(lambda b: lx.linear_solve(op, b, lx.GMRES(rtol=1e-6, atol=1e-6)).value)(bs)

    rng = np.random.default_rng(8)
    return solve, (jnp.asarray(rng.standard_normal((3, n)).astype(np.float32)), jnp.asarray(0.25, jnp.float32))


PROGRAMS = registry.programs
