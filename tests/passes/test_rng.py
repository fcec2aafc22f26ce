"""RNG: never garbage. The 64-bit idioms are refused, naming the op, the line, the fix."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.conftest import refusal
from tests.runner import lower_x64

KEY = np.array([0, 42], dtype=np.uint32)


@pytest.mark.parametrize("sampler", [
    lambda k: jax.random.uniform(k, (3,), dtype=jnp.float64),
    lambda k: jax.random.normal(k, (3,), dtype=jnp.float64),
    lambda k: jax.random.exponential(k, (3,), dtype=jnp.float64),
])
def test_float64_random_bits_are_refused(sampler):
    error = refusal(lower_x64(sampler, KEY))
    finding = next(f for f in error.findings if f.kind == "rng-bits")
    assert finding.op == "stablehlo.bitcast_convert"
    assert "test_rng.py" in finding.location
    assert "dtype=jnp.float32" in finding.message
    # The 1.0 bit pattern constant is explained by the rng finding, not reported again.
    assert not [f for f in error.findings if f.kind == "constant-out-of-range"]


def test_rng_bit_generator_state_is_refused():
    error = refusal(lower_x64(lambda k: jax.lax.rng_bit_generator(k, (3,), dtype=jnp.uint32)[1],
                              np.zeros(4, np.uint32)))
    finding = next(f for f in error.findings if f.kind == "rng-state")
    assert finding.op == "stablehlo.rng_bit_generator" and "test_rng.py" in finding.location


def test_randint_int64_is_refused():
    error = refusal(lower_x64(lambda k: jax.random.randint(k, (3,), 0, 10, dtype=jnp.int64), KEY))
    assert {"constant-out-of-range"} & {f.kind for f in error.findings}


def test_float32_sampling_under_x64_narrows():
    from tests.conftest import narrow_quietly
    result = narrow_quietly(lower_x64(lambda k: jax.random.uniform(k, (3,), dtype=jnp.float32), KEY))
    assert result.module.operation.verify()


def test_uint64_random_bits_are_refused_but_user_shifts_only_warn():
    from tests.conftest import narrow_quietly
    error = refusal(lower_x64(lambda k: jax.random.bits(k, (3,), dtype=jnp.uint64), KEY))
    (finding,) = [f for f in error.findings if f.kind == "rng-bits"]
    assert finding.op == "stablehlo.shift_left" and "@threefry2x32" in finding.message
    result = narrow_quietly(lower_x64(lambda hi, lo: (hi.astype(jnp.uint64) << 32) | lo.astype(jnp.uint64),
                                      np.arange(3, dtype=np.uint32), np.arange(3, dtype=np.uint32)))
    assert "shift-by-width" in {f.kind for f in result.findings}
