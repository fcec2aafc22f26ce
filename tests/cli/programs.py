"""The JAX functions the command-line tests lower. Lines marked `# at:NAME` are the source
lines the tests expect findings at (found by marker, so editing this file is safe)."""

import jax.numpy as jnp


def clean(x):
    return jnp.sin(x) * 2.0


def f64_model(x):
    y = jnp.cos(x) * 3.0  # at:f64-model
    return y + 1.0


def complex_model(x):
    z = jnp.exp(x.astype(jnp.complex64) * 1j)  # at:complex
    return jnp.real(z)


def big_constant(x):
    return x + jnp.int64(2**40)  # at:big-constant


def marker_line(name: str) -> int:
    """The 1-based line of `# at:NAME` in this file."""
    with open(__file__) as source:
        for number, line in enumerate(source, start=1):
            if line.rstrip().endswith(f"# at:{name}"):
                return number
    raise LookupError(name)
