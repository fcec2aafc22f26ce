"""interpax, as its users write it: `interp1d`/`interp2d` with the methods users pick
(cubic, cubic2, monotonic, linear), an `Interpolator1D` object closed over, extrapolation
off (NaN outside) and periodic data, and gradients through an interpolant."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from tests.ecosystem.programs.base import Registry

registry = Registry("interpax")


def _grid(n=12):
    x = np.linspace(0, 2 * np.pi, n).astype(np.float32)
    return jnp.asarray(x), jnp.asarray(np.sin(x).astype(np.float32))


@registry.program("interpax_interp1d_methods",
                  "interpax.interp1d at query points with method cubic, cubic2, monotonic and linear "
                  "(extrap=False: NaN outside)")
def interp1d_methods():
    import interpax

    def interpolate(xq, x, f):
        return tuple(interpax.interp1d(xq, x, f, method=m) for m in ("cubic", "cubic2", "monotonic", "linear"))

    x, f = _grid()
    return interpolate, (jnp.asarray([-0.5, 0.3, 1.7, 3.1, 6.0, 7.0], jnp.float32), x, f)


@registry.program("interpax_interp2d_periodic",
                  "interpax.interp2d, method cubic, periodic in both axes (period=2*pi)", slow=True)
def interp2d_periodic():
    import interpax

    x = jnp.linspace(0, 2 * np.pi, 10, endpoint=False, dtype=jnp.float32)
    y = jnp.linspace(0, 2 * np.pi, 8, endpoint=False, dtype=jnp.float32)
    f = jnp.sin(x)[:, None] * jnp.cos(y)[None, :]

    def interpolate(xq, yq, x, y, f):
        return interpax.interp2d(xq, yq, x, y, f, method="cubic", period=(2 * np.pi, 2 * np.pi))

    return interpolate, (jnp.asarray([0.1, 2.0, 7.0], jnp.float32), jnp.asarray([0.5, 3.3, -1.0], jnp.float32),
                         x, y, f)


@registry.program("interpax_interpolator1d_grad",
                  "jax.grad through an Interpolator1D (method cubic2) closed over: d/dx of the interpolant")
def interpolator1d_grad():
    import interpax

    x, f = _grid(16)
    spline = interpax.Interpolator1D(x, f, method="cubic2")

    def slope(xq):
        return jax.vmap(jax.grad(lambda q: spline(q)))(xq)

    return slope, (jnp.asarray([0.2, 1.0, 2.5, 4.0], jnp.float32),)


PROGRAMS = registry.programs
