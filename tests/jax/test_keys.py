"""Typed PRNG keys under x64guard.jit: as inputs, outputs and pytree leaves (threefry,
rbg, unsafe_rbg) they pass through unchanged; key plumbing (split, fold_in, key_data,
wrap_key_data) and 32-bit draws give x32 JAX's bits; flax.nnx `Rngs` state goes through
`nnx.split`/`nnx.merge` and nnx train steps.

Draws at JAX's 64-bit default dtypes (and rbg draws, whose rng_bit_generator state is
64-bit words) are refused on this branch with an RNG finding until the pass rewrites
jax.random's 64-bit idioms; those cases accept "bit-identical, or refused with an RNG
finding", so that they hold before and after that rewrite.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import x64guard
from tests.corpus import oracle

IMPLS = ("threefry2x32", "rbg", "unsafe_rbg")
# What a 64-bit random idiom is refused with: float64/uint64 bits, rbg's 64-bit state (and
# the bitcasts to it), randint(int64)'s 2**32 multiplier.
RNG_KINDS = {"rng-bits", "rng-state", "bitcast-width", "constant-out-of-range"}


@pytest.fixture(autouse=True)
def quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", x64guard.X64GuardWarning)
        yield


def is_key(x) -> bool:
    return jax.dtypes.issubdtype(getattr(x, "dtype", np.float32), jax.dtypes.prng_key)


def same(got, want) -> bool:
    """Same pytree, same dtypes (key<impl> included), same bits."""
    g, gt = jax.tree_util.tree_flatten(got)
    w, wt = jax.tree_util.tree_flatten(want)
    if gt != wt:
        return False
    for a, b in zip(g, w):
        if is_key(a) or is_key(b):
            if not (is_key(a) and is_key(b) and a.dtype == b.dtype):
                return False
            a, b = jax.random.key_data(a), jax.random.key_data(b)
        if not oracle.bit_identical(np.asarray(a), np.asarray(b)):
            return False
    return True


def x32(fn: Callable, *args):
    oracle._forget_traces()
    with oracle.x64(False):
        return jax.jit(fn)(*jax.tree_util.tree_map(lambda a: oracle.to32(a) if not is_key(a) else a, args))


def narrowed(fn: Callable, *args):
    oracle._forget_traces()
    return x64guard.jit(fn)(*args)


# --------------------------------------------------------------------------- pass-through

@pytest.mark.parametrize("impl", IMPLS)
def test_typed_keys_pass_through_as_inputs_outputs_and_leaves(impl):
    key = jax.random.key(3, impl=impl)
    keys = jax.random.split(jax.random.key(5, impl="threefry2x32"), 2)  # a batch of keys
    keys = jax.random.wrap_key_data(jnp.stack([jax.random.key_data(jax.random.key(i, impl=impl)) for i in (5, 6)]),
                                    impl=impl)

    def f(state, scale):
        return {"key": state["key"], "keys": state["keys"], "step": state["step"] + 1,
                "both": (state["keys"][::-1], state["key"])}, scale * 2.0

    state = {"key": key, "keys": keys, "step": np.int64(4)}
    got = narrowed(f, state, np.float64(1.5))
    assert same(got, x32(f, state, np.float64(1.5)))
    assert same(got[0]["key"], key) and same(got[0]["keys"], keys)
    assert got[0]["step"].dtype == np.int32 and got[1].dtype == np.float32
    lowered = x64guard.jit(f).lower(state, np.float64(1.5))
    assert "i64" not in lowered.as_text().split("func.func")[1].split("{")[0]


@pytest.mark.parametrize("impl", IMPLS)
def test_key_data_round_trip(impl):
    def f(key):
        data = jax.random.key_data(key)
        return jax.random.wrap_key_data(data, impl=impl), data

    key = jax.random.key(11, impl=impl)
    got = narrowed(f, key)
    assert same(got, x32(f, key))
    assert same(got[0], key)


# --------------------------------------------------------------------------- plumbing and draws

@dataclass(frozen=True)
class KeyCase:
    name: str
    fn: Callable
    uses_64bit_draws: bool = False   # True: bit-identical, or refused with an RNG finding

    def __repr__(self) -> str:
        return self.name


def _plumbing(key, x):
    k1, k2 = jax.random.split(key)
    k3 = jax.random.fold_in(k2, 7)
    k4 = jax.random.wrap_key_data(jax.random.key_data(k3), impl=jax.random.key_impl(key))
    return {"keys": jax.random.split(k4, 3), "data": jax.random.key_data(k1), "x": x * 2}


def _float32_draws(key, x):
    k1, k2, k3 = jax.random.split(key, 3)
    return (jax.random.uniform(k1, x.shape, dtype=jnp.float32) * x,
            jax.random.normal(k2, (4,), dtype=jnp.float32),
            jax.random.bits(k3, (3,), dtype=jnp.uint32))


def _draws_at_the_inputs_dtype(key, x):
    # blackjax style: normal(key, shape, dtype=p.dtype); the dtype follows the input's
    return jax.random.normal(key, x.shape, dtype=x.dtype) + x


def _draws_at_default_dtypes(key, x):
    k1, k2 = jax.random.split(key)
    return jax.random.uniform(k1, x.shape) + x, jax.random.randint(k2, (3,), 0, 10)


def _scan_over_keys(key, x):
    def body(carry, k):
        return carry + jax.random.uniform(k, carry.shape, dtype=jnp.float32), jax.random.key_data(k)
    return jax.lax.scan(body, x.astype(jnp.float32), jax.random.split(key, 4))


KEY_CASES = [
    KeyCase("plumbing", _plumbing),
    KeyCase("float32_draws", _float32_draws),
    KeyCase("draws_at_the_inputs_dtype", _draws_at_the_inputs_dtype, uses_64bit_draws=True),
    KeyCase("draws_at_default_dtypes", _draws_at_default_dtypes, uses_64bit_draws=True),
    KeyCase("scan_over_keys", _scan_over_keys),
]


def _check_case(case: KeyCase, key, x, refusal_allowed: bool) -> str:
    want = x32(case.fn, key, x)
    try:
        got = narrowed(case.fn, key, x)
    except x64guard.X64GuardError as exc:
        kinds = {f.kind for f in exc.findings}
        assert refusal_allowed and kinds <= RNG_KINDS, f"{case.name}: refused with {kinds}: {exc}"
        return "refused"
    assert same(got, want), case.name
    return "identical"


@pytest.mark.parametrize("case", KEY_CASES, ids=lambda c: c.name)
def test_threefry_keys_with_float64_inputs(case):
    outcome = _check_case(case, jax.random.key(0), np.linspace(0, 1, 4), case.uses_64bit_draws)
    if not case.uses_64bit_draws:
        assert outcome == "identical"


@pytest.mark.parametrize("case", KEY_CASES, ids=lambda c: c.name)
def test_threefry_keys_with_float32_inputs(case):
    # Float32 inputs are traced at their own width: draws whose dtype follows the input
    # are float32 draws, as in x32 JAX.
    allowed = case.name == "draws_at_default_dtypes"
    outcome = _check_case(case, jax.random.key(0), np.linspace(0, 1, 4, dtype=np.float32), allowed)
    if not allowed:
        assert outcome == "identical"


@pytest.mark.parametrize("impl", ("rbg", "unsafe_rbg"))
@pytest.mark.parametrize("case", KEY_CASES, ids=lambda c: c.name)
def test_rbg_keys(case, impl):
    # rbg draws (and unsafe_rbg's split) run rng_bit_generator on a 64-bit state.
    _check_case(case, jax.random.key(0, impl=impl), np.linspace(0, 1, 4), refusal_allowed=True)


def test_raw_uint32_keys_still_work():
    key = jax.random.PRNGKey(1)
    f = lambda k, x: jax.random.uniform(jax.random.split(k)[0], x.shape, dtype=jnp.float32) * x  # noqa: E731
    assert same(narrowed(f, key, np.ones(3)), x32(f, key, np.ones(3)))


# --------------------------------------------------------------------------- flax.nnx

from flax import nnx  # noqa: E402  (installed by make test: the ecosystem extra)


class NoisyMLP(nnx.Module):
    """Keeps its Rngs as state and draws from a named stream on every call."""

    def __init__(self, rngs, dropout: float = 0.0):
        self.l1 = nnx.Linear(3, 8, rngs=rngs)
        self.l2 = nnx.Linear(8, 1, rngs=rngs)
        self.drop = nnx.Dropout(dropout, rngs=rngs) if dropout else None
        self.rngs = rngs

    def __call__(self, x):
        noise = jax.random.normal(self.rngs.noise(), x.shape, dtype=jnp.float32) * 0.01
        h = jax.nn.relu(self.l1(x + noise))
        if self.drop is not None:
            h = self.drop(h)
        return self.l2(h)


def _train_step(graphdef, state, x, y):
    model = nnx.merge(graphdef, state)
    loss, grads = nnx.value_and_grad(lambda m: jnp.mean((m(x) - y) ** 2))(model)
    params = nnx.state(model, nnx.Param)
    nnx.update(model, jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads))
    return loss, nnx.split(model)[1]


def _data():
    rng = np.random.default_rng(0)
    return rng.standard_normal((5, 3)).astype(np.float32), rng.standard_normal((5, 1)).astype(np.float32)


def test_nnx_rngs_state_through_split_and_merge():
    graphdef, state = nnx.split(NoisyMLP(nnx.Rngs(0, noise=1)))
    assert any(is_key(leaf) for leaf in jax.tree_util.tree_leaves(state))

    def roundtrip(state):
        model = nnx.merge(graphdef, state)
        model.rngs.noise()  # advances the stream's counter
        return nnx.split(model)[1]

    got = narrowed(roundtrip, state)
    assert same(got, x32(roundtrip, state))


def test_nnx_train_step_split_merge_style():
    x, y = _data()
    graphdef, state = nnx.split(NoisyMLP(nnx.Rngs(0, noise=1)))
    step = x64guard.jit(_train_step, static_argnums=0)
    reference = jax.jit(_train_step, static_argnums=0)
    s_got, s_want = state, state
    for _ in range(3):
        l_got, s_got = step(graphdef, s_got, x, y)
        l_want, s_want = reference(graphdef, s_want, x, y)
        assert same(l_got, l_want)
    assert same(s_got, s_want)


def test_nnx_modules_as_pytrees_and_inside_nnx_jit():
    x, y = _data()

    def step(model, x, y):
        loss, grads = nnx.value_and_grad(lambda m: jnp.mean((m(x) - y) ** 2))(model)
        nnx.update(model, jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, nnx.state(model, nnx.Param), grads))
        return loss, model

    m_got, m_want = NoisyMLP(nnx.Rngs(0, noise=1)), NoisyMLP(nnx.Rngs(0, noise=1))
    for _ in range(2):
        l_got, m_got = x64guard.jit(step)(m_got, x, y)
        l_want, m_want = jax.jit(step)(m_want, x, y)
        assert same(l_got, l_want)

    @nnx.jit
    def train(model, x, y):  # nnx.jit outside, x64guard.jit inside
        graphdef, state = nnx.split(model)
        loss, state = x64guard.jit(_train_step, static_argnums=0)(graphdef, state, x, y)
        nnx.update(model, state)
        return loss

    @nnx.jit
    def train_reference(model, x, y):
        graphdef, state = nnx.split(model)
        loss, state = _train_step(graphdef, state, x, y)
        nnx.update(model, state)
        return loss

    a, b = NoisyMLP(nnx.Rngs(0, noise=1)), NoisyMLP(nnx.Rngs(0, noise=1))
    for _ in range(2):
        assert same(train(a, x, y), train_reference(b, x, y))
    assert same(nnx.state(a), nnx.state(b))


def test_nnx_dropout_train_step_identical_or_waits_for_the_rng_rewrite():
    """nnx.Dropout draws its mask at the default float dtype (float64 under x64)."""
    x, y = _data()
    graphdef, state = nnx.split(NoisyMLP(nnx.Rngs(0, noise=1, dropout=2), dropout=0.3))
    want = jax.jit(_train_step, static_argnums=0)(graphdef, state, x, y)
    try:
        got = x64guard.jit(_train_step, static_argnums=0)(graphdef, state, x, y)
    except x64guard.X64GuardError as exc:
        assert {f.kind for f in exc.findings} <= RNG_KINDS
        return
    assert same(got, want)
