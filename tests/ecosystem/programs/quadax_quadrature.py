"""quadax, as its users write it: adaptive quadrature (quadgk, quadcc, quadts, romberg) with
the default tolerances (epsabs = epsrel = None: the integrand's dtype decides), infinite
intervals, endpoint singularities, full_output's error estimates and gradients through an
integral."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from tests.ecosystem.programs.base import Registry

registry = Registry("quadax")


@registry.program("quadax_quadgk_infinite_interval",
                  "quadgk of a Gaussian over (-inf, inf) and of 1/(1+x^2) over (0, inf), default tolerances, "
                  "full_output (error estimate, evaluation count, status)", slow=True)
def quadgk_infinite():
    import quadax

    def integrate(s):
        y1, info1 = quadax.quadgk(lambda x, s: jnp.exp(-(x / s) ** 2), jnp.asarray([-jnp.inf, jnp.inf]), (s,),
                                  full_output=True)
        y2, info2 = quadax.quadgk(lambda x: 1.0 / (1.0 + x ** 2), jnp.asarray([0.0, jnp.inf]), full_output=True)
        return y1, info1.err, info1.neval, info1.status, y2, info2.err

    return integrate, (jnp.asarray(1.7, jnp.float32),)


@registry.program("quadax_quadcc_oscillatory",
                  "quadcc (Clenshaw-Curtis) of an oscillatory integrand on [0, pi], default tolerances", slow=True)
def quadcc_oscillatory():
    import quadax

    def integrate(w):
        y, info = quadax.quadcc(lambda x, w: jnp.sin(w * x) * jnp.exp(-0.3 * x), jnp.asarray([0.0, jnp.pi]), (w,),
                                full_output=True)
        return y, info.err, info.status

    return integrate, (jnp.asarray(12.5, jnp.float32),)


@registry.program("quadax_quadts_endpoint_singularity",
                  "quadts (tanh-sinh) of log(x)/sqrt(x) and of 1/sqrt(1-x^2) on [0, 1]: integrable endpoint "
                  "singularities, default tolerances", slow=True)
def quadts_endpoint():
    import quadax

    def integrate(lo, hi):
        interval = jnp.stack([lo, hi])
        y1, info1 = quadax.quadts(lambda x: jnp.log(x) / jnp.sqrt(x), interval, full_output=True)
        y2, info2 = quadax.quadts(lambda x: 1.0 / jnp.sqrt(1.0 - x ** 2), interval, full_output=True)
        return y1, info1.err, info1.status, y2, info2.err, info2.status

    return integrate, (jnp.asarray(0.0, jnp.float32), jnp.asarray(1.0, jnp.float32))


@registry.program("quadax_romberg",
                  "romberg of a smooth integrand on [0, 2], default tolerances, full_output", slow=True)
def romberg():
    import quadax

    def integrate(a):
        y, info = quadax.romberg(lambda x, a: jnp.exp(-a * x) * jnp.cos(x), jnp.asarray([0.0, 2.0]), (a,),
                                 full_output=True)
        return y, info.err, info.neval, info.status

    return integrate, (jnp.asarray(0.8, jnp.float32),)


@registry.program("quadax_grad_through_quadgk",
                  "jax.value_and_grad of a quadgk integral w.r.t. the integrand's parameters and the upper limit",
                  slow=True)
def grad_quadgk():
    import quadax

    def loss(params, upper):
        a, b = params
        y, _ = quadax.quadgk(lambda x, a, b: jnp.exp(-a * x ** 2) * jnp.sin(b * x) ** 2,
                             jnp.stack([jnp.zeros_like(upper), upper]), (a, b))
        return y

    return jax.value_and_grad(loss, argnums=(0, 1)), ((jnp.asarray(0.5, jnp.float32), jnp.asarray(2.0, jnp.float32)),
                                                      jnp.asarray(3.0, jnp.float32))


@registry.program("quadax_quadgk_vmap_breakpoints",
                  "quadgk over [0, 1, 2] (an interior breakpoint at a kink), vmapped over a parameter", slow=True)
def quadgk_vmap():
    import quadax

    def integrate(cs):
        f = lambda x, c: jnp.abs(x - 1.0) ** c
        return jax.vmap(lambda c: quadax.quadgk(f, jnp.asarray([0.0, 1.0, 2.0]), (c,))[0])(cs)

    return integrate, (jnp.asarray([0.3, 1.0, 2.5], jnp.float32),)


PROGRAMS = registry.programs
