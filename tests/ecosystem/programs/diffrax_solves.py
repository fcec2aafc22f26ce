"""diffrax, as its users write it: diffeqsolve with its defaults (throw=True: equinox's
error_if, a host callback unless EQX_ON_ERROR says otherwise), adaptive step sizes,
saving at times, gradients through solves, SDEs driven by a VirtualBrownianTree."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from tests.ecosystem.programs.base import Registry

registry = Registry("diffrax")


def _lotka_volterra(t, y, args):
    alpha, beta, gamma, delta = args
    prey, predator = y
    return jnp.stack([alpha * prey - beta * prey * predator, delta * prey * predator - gamma * predator])


_LV_Y0 = jnp.asarray([10.0, 5.0], jnp.float32)
_LV_ARGS = jnp.asarray([1.1, 0.4, 0.4, 0.1], jnp.float32)


@registry.program("diffrax_tsit5_pid_saveat",
                  "Lotka-Volterra with Tsit5 + PIDController(rtol=atol=1e-5), SaveAt(ts=...), default throw; "
                  "solution and step statistics")
def tsit5_pid():
    import diffrax

    ts = jnp.linspace(0.0, 5.0, 6)

    def solve(y0, args):
        sol = diffrax.diffeqsolve(diffrax.ODETerm(_lotka_volterra), diffrax.Tsit5(), t0=0.0, t1=5.0, dt0=0.1,
                                  y0=y0, args=args, saveat=diffrax.SaveAt(ts=ts),
                                  stepsize_controller=diffrax.PIDController(rtol=1e-5, atol=1e-5))
        return sol.ys, sol.stats["num_steps"], sol.stats["num_rejected_steps"]

    return solve, (_LV_Y0, _LV_ARGS)


@registry.program("diffrax_dopri5_pid_dense",
                  "exponential decay with Dopri5 + PIDController (pcoeff/icoeff set, dtmax), dense output "
                  "evaluated at interior times")
def dopri5_dense():
    import diffrax

    def solve(y0, rate, t_query):
        sol = diffrax.diffeqsolve(diffrax.ODETerm(lambda t, y, k: -k * y + jnp.sin(t)), diffrax.Dopri5(), t0=0.0,
                                  t1=3.0, dt0=None, y0=y0, args=rate, saveat=diffrax.SaveAt(dense=True, t1=True),
                                  stepsize_controller=diffrax.PIDController(rtol=1e-4, atol=1e-6, pcoeff=0.2,
                                                                            icoeff=0.4, dtmax=0.5))
        return sol.ys, jax.vmap(sol.evaluate)(t_query)

    return solve, (jnp.asarray([1.0, -2.0, 0.5], jnp.float32), jnp.asarray(0.7, jnp.float32),
                   jnp.asarray([0.1, 1.234, 2.9], jnp.float32))


@registry.program("diffrax_grad_through_solve",
                  "jax.grad of a loss on the final state with respect to the ODE parameters (Tsit5, PIDController, "
                  "RecursiveCheckpointAdjoint by default)", slow=True)
def grad_through_solve():
    import diffrax

    def loss(args, y0):
        sol = diffrax.diffeqsolve(diffrax.ODETerm(_lotka_volterra), diffrax.Tsit5(), t0=0.0, t1=2.0, dt0=0.1,
                                  y0=y0, args=args, stepsize_controller=diffrax.PIDController(rtol=1e-4, atol=1e-4))
        return jnp.sum((sol.ys[-1] - jnp.asarray([5.0, 5.0])) ** 2)

    def value_and_grad(args, y0):
        return jax.value_and_grad(loss)(args, y0)

    return value_and_grad, (_LV_ARGS, _LV_Y0)


@registry.program("diffrax_backsolve_adjoint_grad",
                  "gradient with BacksolveAdjoint (the continuous adjoint solved backwards) through a Dopri5 solve",
                  slow=True)
def backsolve_adjoint():
    import diffrax

    def loss(theta, y0):
        sol = diffrax.diffeqsolve(diffrax.ODETerm(lambda t, y, a: -a * y ** 3 + jnp.cos(t)), diffrax.Dopri5(),
                                  t0=0.0, t1=1.0, dt0=0.05, y0=y0, args=theta,
                                  stepsize_controller=diffrax.PIDController(rtol=1e-4, atol=1e-4),
                                  adjoint=diffrax.BacksolveAdjoint())
        return jnp.sum(sol.ys ** 2)

    def grads(theta, y0):
        return jax.grad(loss, argnums=(0, 1))(theta, y0)

    return grads, (jnp.asarray(1.3, jnp.float32), jnp.asarray([0.5, 1.0], jnp.float32))


@registry.program("diffrax_kvaerno5_stiff",
                  "a stiff Robertson-type system with the implicit Kvaerno5 + PIDController (optimistix Newton, "
                  "lineax LU inside)", slow=True)
def kvaerno5_stiff():
    import diffrax

    def robertson(t, y, args):
        k1, k2, k3 = args
        y1, y2, y3 = y
        return jnp.stack([-k1 * y1 + k3 * y2 * y3, k1 * y1 - k2 * y2 ** 2 - k3 * y2 * y3, k2 * y2 ** 2])

    def solve(y0, rates):
        sol = diffrax.diffeqsolve(diffrax.ODETerm(robertson), diffrax.Kvaerno5(), t0=0.0, t1=10.0, dt0=1e-3,
                                  y0=y0, args=rates, stepsize_controller=diffrax.PIDController(rtol=1e-4, atol=1e-7))
        return sol.ys, sol.stats["num_steps"]

    return solve, (jnp.asarray([1.0, 0.0, 0.0], jnp.float32), jnp.asarray([0.04, 3e7, 1e4], jnp.float32))


@registry.program("diffrax_throw_false_max_steps",
                  "throw=False with too small max_steps: the solve stops and reports its RESULTS code instead of "
                  "raising")
def throw_false():
    import diffrax

    def solve(y0, args):
        sol = diffrax.diffeqsolve(diffrax.ODETerm(_lotka_volterra), diffrax.Tsit5(), t0=0.0, t1=20.0, dt0=0.01,
                                  y0=y0, args=args, max_steps=8, throw=False,
                                  stepsize_controller=diffrax.PIDController(rtol=1e-8, atol=1e-8))
        return sol.ys, sol.result == diffrax.RESULTS.successful, sol.result == diffrax.RESULTS.max_steps_reached

    return solve, (_LV_Y0, _LV_ARGS)


def _ou_terms(key, shape=(2,)):
    import diffrax

    brownian = diffrax.VirtualBrownianTree(0.0, 1.0, tol=1e-3, shape=shape, key=key)
    drift = diffrax.ODETerm(lambda t, y, theta: -theta * y)
    diffusion = diffrax.ControlTerm(lambda t, y, theta: jnp.diag(0.3 + 0.1 * jnp.tanh(y)), brownian)
    return diffrax.MultiTerm(drift, diffusion)


@registry.program("diffrax_euler_sde_virtual_brownian_tree",
                  "Ornstein-Uhlenbeck SDE with Euler, constant steps, a VirtualBrownianTree(tol=1e-3) from a raw key")
def euler_sde():
    import diffrax

    def solve(y0, theta, key):
        sol = diffrax.diffeqsolve(_ou_terms(key), diffrax.Euler(), t0=0.0, t1=1.0, dt0=0.05, y0=y0, args=theta,
                                  saveat=diffrax.SaveAt(ts=jnp.linspace(0.0, 1.0, 5)))
        return sol.ys

    return solve, (jnp.asarray([1.0, -1.0], jnp.float32), jnp.asarray(0.8, jnp.float32), jax.random.PRNGKey(3))


@registry.program("diffrax_heun_sde_virtual_brownian_tree",
                  "the same SDE, Stratonovich, with Heun and a VirtualBrownianTree from a typed key, t1 saved")
def heun_sde():
    import diffrax

    def solve(y0, theta, key):
        sol = diffrax.diffeqsolve(_ou_terms(key), diffrax.Heun(), t0=0.0, t1=1.0, dt0=0.1, y0=y0, args=theta)
        return sol.ys

    return solve, (jnp.asarray([0.5, 2.0], jnp.float32), jnp.asarray(1.2, jnp.float32), jax.random.key(4))


PROGRAMS = registry.programs
