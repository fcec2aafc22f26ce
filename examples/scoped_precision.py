"""Scoped precision: a float64 scientific program that narrows only the step it would
send to an accelerator without 64-bit types.

The program runs with jax_enable_x64=True globally (it needs float64 for the
least-squares fit and its diagnostics), and wraps only the expensive inner step, an
explicit ODE integration of a damped oscillator, in `x64guard.jit`. It prints the error
the narrowed (float32) step makes against the float64 reference, and what x64guard changed.

Run with `make demo` (after examples/demo.py) or `python examples/scoped_precision.py`.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np

import x64guard


def integrate(params, y0, steps):
    """RK4 on y'' = -k y - c y' for `steps` steps of dt (the accelerator-bound step)."""
    k, c, dt = params["k"], params["c"], params["dt"]

    def rhs(y):
        return jnp.stack([y[1], -k * y[0] - c * y[1]])

    def step(i, y):
        a = rhs(y)
        b = rhs(y + 0.5 * dt * a)
        d = rhs(y + 0.5 * dt * b)
        e = rhs(y + dt * d)
        return y + dt / 6.0 * (a + 2 * b + 2 * d + e)

    return jax.lax.fori_loop(0, steps, step, y0)


def fit_decay(times, amplitudes):
    """Host-side float64 least squares: log-amplitude against time."""
    design = jnp.stack([jnp.ones_like(times), times], axis=1)
    coef, *_ = jnp.linalg.lstsq(design, jnp.log(amplitudes))
    return -coef[1]


def main() -> None:
    jax.config.update("jax_enable_x64", True)
    try:
        run()
    finally:
        jax.config.update("jax_enable_x64", False)


def run() -> None:
    params = {"k": jnp.float64(4.0), "c": jnp.float64(0.3), "dt": jnp.float64(1e-3)}
    y0 = jnp.array([1.0, 0.0])
    steps = jnp.int64(2000)

    reference = jax.jit(integrate)
    narrowed = x64guard.jit(integrate)

    times, amplitudes, errors = [], [], []
    y_ref, y_narrow = y0, y0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", x64guard.X64GuardWarning)
        for window in range(1, 11):
            y_ref = reference(params, y_ref, steps)           # float64
            # float64 in, cast to float32 on the way in; float32 out, kept as float64 on the host
            y_narrow = narrowed(params, y_narrow, steps).astype(jnp.float64)
            times.append(window * 2.0)
            amplitudes.append(float(jnp.hypot(y_ref[0], y_ref[1] / 2.0)))
            errors.append(float(jnp.max(jnp.abs(y_narrow.astype(jnp.float64) - y_ref))))

    print(f"global jax_enable_x64 = {jax.config.jax_enable_x64} (the rest of the program stays float64)")
    print(f"reference step returns {reference(params, y0, steps).dtype}, "
          f"narrowed step returns {narrowed(params, y0, steps).dtype}")
    print("max |narrowed - float64| after each window of 2000 RK4 steps:")
    print("   " + "  ".join(f"{e:.1e}" for e in errors))
    print(f"fitted decay rate (float64): {float(fit_decay(jnp.array(times), jnp.array(amplitudes))):.6f}"
          f"  (c/2 = {float(params['c']) / 2:.6f})")
    lowered = narrowed.lower(params, y0, steps)
    print(f"x64guard narrowed {sum(lowered.changes.values())} types: {lowered.changes}")
    print(f"warnings: {len(caught)} (one per narrowed signature, none per element)")
    for w in caught[:1]:
        print(f"   {w.message}")


if __name__ == "__main__":
    main()
