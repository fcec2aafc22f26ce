"""Where the running JAX lowers an op differently at 32 and at 64 bits: then the x64 trace
is another program than the x32 one, and narrowing it cannot give x32 JAX's bits (only a
correct float32 result). Each probe lowers one op the way JAX does, with x64 off, and
looks at the module; corpus cases name the probes that concern them
(`Case.lowering_differs`). Found by running the corpus on each JAX of the matrix:

* `lgamma`: jax 0.12 lowers float64 `lgamma` to `chlo.lgamma` but float32 to its own
  expansion (`lgamma_impl`): gammaln, gammainc, betainc, random.gamma and their gradients;
* `split_square`: jax 0.12 splits `x**2` by masking mantissa bits (`_split_square`), 27 for
  float64 and 12 for float32 (x64guard makes the first mask the second: `HalfSignificandMask`),
  inside code whose polynomials and bounds also follow the dtype: in the derivative of
  erf/erfc (`exp_neg_sq`), erfcx, ndtri and erfcinv's far tail;
* `sinc`: jax 0.12 evaluates `jnp.sinc` with a Taylor polynomial of a dtype-dependent degree.
"""

from __future__ import annotations

import functools

import jax
import numpy as np

from tests.corpus.oracle import x64


def _x32_module(fn, *args) -> str:
    with x64(False):
        return jax.jit(fn).lower(*args).as_text()


def lgamma() -> bool:
    # The probe narrow's x32-lowering warning and x64guard.jit's cross-check use: one place decides.
    from x64guard.x32_lowerings import expands_at_float32

    return expands_at_float32("chlo.lgamma")


@functools.cache
def split_square() -> bool:  # probed on erf's derivative, the simplest program holding it
    return "bitcast_convert" in _x32_module(jax.grad(jax.lax.erf), np.float32(0.5))


@functools.cache
def sinc() -> bool:
    """jax 0.12 evaluates sinc by a Taylor polynomial whose degree follows the dtype."""
    import jax.numpy as jnp

    with x64(True):
        wide = jax.jit(jnp.sinc).lower(np.float64(0.5)).as_text()
    return _x32_module(jnp.sinc, np.float32(0.5)).count("multiply") != wide.count("multiply")


PROBES = {"lgamma": lgamma, "split_square": split_square, "sinc": sinc}


def differs(case) -> list[str]:
    """The probes of `case` that hold on the running JAX."""
    return [name for name in case.lowering_differs if PROBES[name]()]
