"""Input widths: float32/complex64 inputs are traced at their own width, integers and
float64 data at 64 bits (docs/jit.md, "Input widths"; the data: tests/jax/input_widths.py).
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import x64guard
from tests.corpus import oracle
from tests.jax import input_widths


@pytest.fixture(autouse=True)
def quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def identical(fn, *args32) -> bool:
    oracle._forget_traces()
    got = [np.asarray(x) for x in jax.tree_util.tree_leaves(x64guard.jit(fn)(*args32))]
    want = oracle.run_oracle(fn, list(args32))
    return len(got) == len(want) and all(oracle.bit_identical(g, w) for g, w in zip(got, want))


def test_dtype_following_code_takes_the_32_bit_path_for_float32_inputs():
    """blackjax writes normal(key, shape, dtype=p.dtype), numpyro finfo(x.dtype): with a
    float32 input they are float32 draws and float32 constants, as in x32 JAX."""
    def f(key, p):
        eps = jnp.finfo(p.dtype).eps
        return jax.random.normal(key, p.shape, dtype=p.dtype) * eps + p

    p = np.linspace(-1, 1, 5, dtype=np.float32)
    assert identical(f, jax.random.key(0), p)
    text = x64guard.jit(f).lower(jax.random.key(0), p).as_text()
    assert "1.1920929E-7" in text.upper() or "1.19209" in text  # float32's eps, traced as such


def test_blackjax_hmc_step_on_float32_positions():
    import blackjax

    def step(key, position):
        hmc = blackjax.hmc(lambda x: -0.5 * jnp.sum(x ** 2), step_size=0.1,
                           inverse_mass_matrix=jnp.ones_like(position), num_integration_steps=5)
        new, info = hmc.step(key, hmc.init(position))
        return new.position, info.acceptance_rate

    assert identical(step, jax.random.key(0), np.linspace(-1, 1, 3, dtype=np.float32))


def test_float64_numpy_data_is_traced_at_64_bits():
    """The same dtype-following code on float64 data traces the float64 program, whatever
    jax.jit's dispatch does with the data on the way in (with x64 off it is float32)."""
    fn = x64guard.jit(lambda p: p * p.dtype.itemsize)
    # The float64 program (8.0) is another program than x32 JAX's: the cross-check runs
    # x32 JAX's (issue 22) and says so.
    assert np.asarray(fn(np.ones(2))).tolist() == [4.0, 4.0]
    assert [f.kind for f in fn.lower(np.ones(2)).findings] == ["trace-differs"]
    assert np.asarray(fn(np.ones(2, np.float32))).tolist() == [4.0, 4.0]
    assert fn(np.ones(2)).dtype == np.float32


def test_code_written_for_64_bit_inputs_falls_back_to_a_64_bit_trace():
    clamp = lambda x: lax.clamp(-1.0, x, 1.0) * 2  # noqa: E731  (Python floats are float64 under x64)
    bitcast = lambda x: lax.bitcast_convert_type(x, jnp.int64) >> 3  # noqa: E731  (64-bit pairs)
    x = np.linspace(-2, 2, 5, dtype=np.float32)
    assert identical(clamp, x)
    assert identical(bitcast, x)


def test_fallback_widens_floats_before_raw_keys():
    """blackjax's Metropolis step mixes a float32 position with float64 values in lax.cond
    under x64 (it does with plain jax.jit too); the fallback trace widens the position but
    keeps the raw uint32[2] key beside it (a uint64 key is invalid key data)."""
    import blackjax

    def step(position, key):
        rw = blackjax.additive_step_random_walk.normal_random_walk(lambda x: -0.5 * jnp.sum(x ** 2), sigma=0.3)
        state, _ = rw.step(key, rw.init(position))
        return state.position

    position, key = np.linspace(-1, 1, 3, dtype=np.float32), jax.random.PRNGKey(3)
    with jax.enable_x64(True), pytest.raises(TypeError, match="cond branches"):
        jax.jit(step)(position, key)                  # JAX's own x64 trace at these widths
    assert identical(step, position, key)


def test_int32_inputs_are_widened_so_python_ints_are_never_wrapped():
    """x32 JAX raises for int32 + 2**40; traced at 32 bits with x64 on, JAX would wrap the
    constant silently (+ 0). Traced at 64 bits, the constant is visible and refused."""
    with pytest.raises(OverflowError):
        jax.jit(lambda n: n + 2**40)(np.arange(3, dtype=np.int32))
    with pytest.raises(x64guard.X64GuardError, match="constant-out-of-range"):
        x64guard.jit(lambda n: n + 2**40)(np.arange(3, dtype=np.int32))


@pytest.mark.slow
def test_corpus_and_fuzz_at_32_bit_inputs_never_differ_from_x32_jax():
    """The experiment behind the policy, for the policy in force: every corpus program and
    30 fuzz programs, called with 32-bit inputs: identical, refused, or failing where x32
    JAX fails too; never a different result, never a result where x32 JAX raises, never
    a foreign error."""
    from x64guard.jax import inputs as xjax_inputs

    table = input_widths.run(30, {"current": xjax_inputs.OWN_WIDTH})
    for source, by_policy in table.items():
        counts = by_policy["current"]
        bad = {k: counts[k] for k in ("wrong", "ran", "crash") if counts[k]}
        assert not bad, (source, bad, input_widths.run.examples)
    assert table["corpus"]["current"]["identical"] >= 317
