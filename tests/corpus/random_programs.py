"""jax.random programs of the differential corpus, kept as data (appended to CASES).

Every sampler at its default (64-bit under x64) dtypes, drawn the ways users draw:
raw uint32[2] keys, typed keys (`jax.random.key`, `wrap_key_data`, also with the rbg
and unsafe_rbg implementations), with jax_threefry_partitionable on (the default) and
off, under jit (the oracle jits every case), vmap, grad and scan. The oracle is JAX's own
x32 program: the same function traced with x64 off, compared bit for bit.

`X32_PROGRAMS` lists (name, function, 32-bit inputs) for the other direction: JAX's x32
programs of the same samplers, which `x64guard check --target x32` must accept
(tests/passes/test_x32_programs.py).

Samplers built on normal (gamma, beta, dirichlet, t, multivariate_normal), laplace and
gumbel also need the float32 counterparts of their finfo(float64) constants (normal's lower
bound `nextafter(-1, 0)`, laplace's `-1 + epsneg`, gumbel's `tiny`): the dtype-constant rule
(patterns/dtype_constants.py) supplies them, so these cases test both rules together.
"""

from __future__ import annotations

import contextlib
from typing import Callable

import numpy as np

import jax
import jax.numpy as jnp
from jax import lax

from .programs import Case

R = jax.random


def _raw_key():
    return np.array([0, 1234], dtype=np.uint32)


def _rbg_key():
    return np.array([7, 11, 13, 1234], dtype=np.uint32)


# name -> sampler of one key. Shapes are small; parameters are Python numbers or float64
# arrays built inside (the default dtypes under x64 are float64 and int64).
SAMPLERS: dict[str, Callable] = {
    "bits": lambda k: R.bits(k, (5,), jnp.uint64),
    "uniform": lambda k: R.uniform(k, (2, 3), minval=-1.5, maxval=4.0),
    "normal": lambda k: R.normal(k, (5,)),
    "bernoulli": lambda k: R.bernoulli(k, 0.3, (7,)),
    "randint": lambda k: R.randint(k, (6,), -3, 1000),
    "categorical": lambda k: R.categorical(k, jnp.log(jnp.array([0.1, 0.2, 0.3, 0.4])), shape=(6,)),
    "gumbel": lambda k: R.gumbel(k, (4,)),
    "gamma": lambda k: R.gamma(k, jnp.array([0.5, 1.0, 3.0])),
    "beta": lambda k: R.beta(k, 2.0, 3.0, (3,)),
    "dirichlet": lambda k: R.dirichlet(k, jnp.array([1.0, 2.0, 0.5])),
    "truncated_normal": lambda k: R.truncated_normal(k, -1.0, 2.0, (4,)),
    "exponential": lambda k: R.exponential(k, (4,)),
    "choice": lambda k: R.choice(k, 10, (4,)),
    "choice_p": lambda k: R.choice(k, 5, (3,), p=jnp.array([0.1, 0.2, 0.3, 0.2, 0.2])),
    "choice_no_replace": lambda k: R.choice(k, jnp.arange(8), (3,), replace=False),
    "permutation": lambda k: R.permutation(k, 8),
    "poisson": lambda k: R.poisson(k, jnp.array([0.5, 4.0, 20.0])),
    "t": lambda k: R.t(k, 3.0, (4,)),
    "laplace": lambda k: R.laplace(k, (4,)),
    "multivariate_normal": lambda k: R.multivariate_normal(
        k, jnp.array([0.5, -1.0]), jnp.array([[2.0, 0.5], [0.5, 1.0]]), (3,)),
}

# The rbg implementations have no poisson (JAX raises NotImplementedError).
_THREEFRY_ONLY = frozenset({"poisson"})


@contextlib.contextmanager
def _partitionable(on: bool):
    """jax_threefry_partitionable for the duration of a trace (restored after)."""
    with jax.threefry_partitionable(on):
        yield


def _with_key(sampler: Callable, make_key: Callable, *, partitionable: bool = True) -> Callable:
    def fn(key_data):
        with _partitionable(partitionable):
            return sampler(make_key(key_data))
    return fn


def _raw(k):
    return k


def _typed(k):
    return R.wrap_key_data(k)


def _rbg(k):
    return R.wrap_key_data(k, impl="rbg")


def _unsafe_rbg(k):
    return R.wrap_key_data(k, impl="unsafe_rbg")


def _vmapped(sampler: Callable) -> Callable:
    return lambda k: jax.vmap(sampler)(R.split(k, 3))


def _scanned(sampler: Callable) -> Callable:
    def body(key, _):
        key, sub = R.split(key)
        return key, sampler(sub)
    return lambda k: lax.scan(body, k, None, length=3)[1]


# Reparameterized draws: gradients of a sampled loss with respect to the parameters.
GRADIENTS: dict[str, tuple[Callable, Callable]] = {
    "uniform": (lambda k, lo, hi: jnp.sum(R.uniform(k, (4,), minval=lo, maxval=hi) ** 2),
                lambda: (np.float64(-1.0), np.float64(2.5))),
    "normal": (lambda k, mu, sigma: jnp.sum(jnp.sin(mu + sigma * R.normal(k, (4,)))),
               lambda: (np.float64(0.3), np.float64(1.7))),
    "gamma": (lambda k, a: jnp.sum(R.gamma(k, a)), lambda: (np.array([0.7, 2.0, 5.0]),)),
    "beta": (lambda k, a, b: jnp.sum(R.beta(k, a, b)), lambda: (np.array([2.0, 0.5]), np.array([3.0, 1.5]))),
    "dirichlet": (lambda k, alpha: jnp.sum(R.dirichlet(k, alpha) ** 2), lambda: (np.array([1.0, 2.0, 0.5]),)),
    "truncated_normal": (lambda k, lo, hi: jnp.sum(R.truncated_normal(k, lo, hi, (4,))),
                         lambda: (np.float64(-1.0), np.float64(2.0))),
    "exponential": (lambda k, rate: jnp.sum(R.exponential(k, (4,)) / rate), lambda: (np.float64(2.0),)),
    "laplace": (lambda k, scale: jnp.sum(jnp.abs(scale * R.laplace(k, (4,)))), lambda: (np.float64(1.5),)),
    "t": (lambda k, df: jnp.sum(R.t(k, df, (3,))), lambda: (np.float64(4.0),)),
    "multivariate_normal": (lambda k, mean, cov: jnp.sum(R.multivariate_normal(k, mean, cov) ** 2),
                            lambda: (np.array([0.5, -1.0]), np.array([[2.0, 0.5], [0.5, 1.0]]))),
}


# Gradients whose lowering depends on the dtype on some JAX releases (lowering_probes).
GRADIENT_LOWERING_DIFFERS: dict[str, tuple[str, ...]] = {
    "gamma": ("lgamma",), "beta": ("lgamma",), "dirichlet": ("lgamma",), "t": ("lgamma",),
    "truncated_normal": ("split_square",),
}


def _gradient_case(name: str) -> Case:
    loss, params = GRADIENTS[name]
    argnums = tuple(range(1, 1 + len(params())))
    return Case(f"random_grad_{name}", lambda k, *p: jax.grad(loss, argnums=argnums)(k, *p),
                lambda: (_raw_key(), *params()), lowering_differs=GRADIENT_LOWERING_DIFFERS.get(name, ()))


def _cases() -> list[Case]:
    cases: list[Case] = []
    for name, sampler in SAMPLERS.items():
        cases.append(Case(f"random_{name}", _with_key(sampler, _raw), lambda: (_raw_key(),)))
        cases.append(Case(f"random_{name}_typed_key", _with_key(sampler, _typed), lambda: (_raw_key(),)))
        cases.append(Case(f"random_{name}_not_partitionable", _with_key(sampler, _raw, partitionable=False),
                          lambda: (_raw_key(),),
                          note="jax_threefry_partitionable=False: x32 JAX draws from other counters"))
        if name not in _THREEFRY_ONLY:
            cases.append(Case(f"random_{name}_rbg", _with_key(sampler, _rbg), lambda: (_rbg_key(),),
                              note="the u64[2] RngBitGenerator state stays 64-bit on the x32 target"))
            cases.append(Case(f"random_{name}_unsafe_rbg", _with_key(sampler, _unsafe_rbg), lambda: (_rbg_key(),)))
    for name in ("uniform", "normal", "bernoulli", "randint", "categorical", "gamma", "permutation", "bits"):
        sampler = SAMPLERS[name]
        cases.append(Case(f"random_{name}_vmap", _with_key(_vmapped(sampler), _raw), lambda: (_raw_key(),)))
        cases.append(Case(f"random_{name}_scan", _with_key(_scanned(sampler), _raw), lambda: (_raw_key(),)))
        cases.append(Case(f"random_{name}_vmap_rbg", _with_key(_vmapped(sampler), _rbg), lambda: (_rbg_key(),)))
        cases.append(Case(f"random_{name}_scan_not_partitionable",
                          _with_key(_scanned(sampler), _raw, partitionable=False), lambda: (_raw_key(),)))
    cases.extend(_gradient_case(name) for name in GRADIENTS)
    cases += [
        Case("random_key_from_int64_seed", lambda s: (R.uniform(R.key(s), (3,)), R.key_data(R.key(s))),
             lambda: (np.int64(42),), note="threefry_seed: seed >> 32 and seed & 0xFFFFFFFF on int64"),
        Case("random_key_from_negative_seed", lambda s: R.key_data(R.key(s)), lambda: (np.int64(-5),),
             note="x32 JAX's key of -5 has high word 0; the x64 program's has 0xFFFFFFFF"),
        Case("random_rbg_key_from_seed", lambda s: R.normal(R.key(s, impl="rbg"), (4,)), lambda: (np.int64(3),)),
        Case("random_split_fold_in_draws", lambda k, i: R.uniform(R.fold_in(R.split(R.wrap_key_data(k))[1], i), (4,)),
             lambda: (_raw_key(), np.int64(17))),
        Case("random_bits_large_not_partitionable",
             _with_key(lambda k: R.bits(k, (3, 5), jnp.uint64), _raw, partitionable=False), lambda: (_raw_key(),)),
        Case("random_uniform_float32_and_float64", lambda k: (R.uniform(k, (3,), jnp.float32), R.uniform(k, (3,))),
             lambda: (_raw_key(),)),
        Case("random_bernoulli_high_mode", lambda k: R.bernoulli(k, 0.25, (5,), mode="high"),
             lambda: (_raw_key(),), note="u2 * 2**-nmant: finfo(float64).eps"),
        Case("random_gumbel_high_mode", lambda k: R.gumbel(k, (5,), mode="high"), lambda: (_raw_key(),)),
        Case("random_dropout", lambda k, x: jnp.where(R.bernoulli(k, 0.9, x.shape), x / 0.9, 0.0),
             lambda: (_raw_key(), np.linspace(-1.0, 1.0, 12).reshape(3, 4))),
        Case("random_init_and_noise", lambda k, x: x @ (R.normal(R.split(k)[0], (3, 2)) * 0.1)
             + 0.01 * R.normal(R.split(k)[1], (4, 2)),
             lambda: (_raw_key(), np.linspace(0.0, 1.0, 12).reshape(4, 3))),
    ]
    return cases


RANDOM_CASES: list[Case] = _cases()


def _of_samplers(names: frozenset[str]) -> frozenset[str]:
    """Names of the cases that draw from these samplers (every key kind and transformation)."""
    return frozenset(c.name for c in RANDOM_CASES for s in names
                     if c.name in (f"random_{s}", f"random_grad_{s}") or c.name.startswith(f"random_{s}_"))


# x64 programs that `check --target x32` accepts: their only 64-bit value is the RNG state
# (lax.rng_bit_generator on a uint32[4] key draws uint32: the x64 and x32 programs are the same).
X32_COMPATIBLE: frozenset[str] = frozenset({"rng_bit_generator_state_kept"})

# Cases that take more than ~5 s (rejection sampling loops compile slowly): marked slow.
SLOW_CASES: frozenset[str] = _of_samplers(frozenset({"gamma", "beta", "dirichlet", "t"}))


# ---- JAX's x32 programs, for `check --target x32` --------------------------------------

def x32_programs() -> list[tuple[str, Callable, tuple]]:
    """(name, function, 32-bit inputs): every sampler with every key kind, threefry
    partitionable on and off, under jit, vmap, grad and scan, to be lowered with x64 off."""
    out = []
    keys = {"raw": (_raw, _raw_key), "typed": (_typed, _raw_key), "rbg": (_rbg, _rbg_key),
            "unsafe_rbg": (_unsafe_rbg, _rbg_key)}
    for partitionable in (True, False):
        tag = "" if partitionable else "_not_partitionable"
        for key_name, (make_key, key_data) in keys.items():
            for name, sampler in SAMPLERS.items():
                if key_name in ("rbg", "unsafe_rbg") and name in _THREEFRY_ONLY:
                    continue
                out.append((f"{name}_{key_name}{tag}", _with_key(sampler, make_key, partitionable=partitionable),
                            (key_data(),)))
            for name in ("uniform", "normal", "randint", "gamma", "categorical"):
                sampler = SAMPLERS[name]
                out.append((f"{name}_{key_name}_vmap{tag}",
                            _with_key(_vmapped(sampler), make_key, partitionable=partitionable), (key_data(),)))
                out.append((f"{name}_{key_name}_scan{tag}",
                            _with_key(_scanned(sampler), make_key, partitionable=partitionable), (key_data(),)))
        for name, (loss, params) in GRADIENTS.items():
            argnums = tuple(range(1, 1 + len(params())))

            def grad_fn(k, *p, loss=loss, argnums=argnums, partitionable=partitionable):
                with _partitionable(partitionable):
                    return jax.grad(loss, argnums=argnums)(k, *p)
            out.append((f"grad_{name}{tag}", grad_fn,
                        (_raw_key(), *(np.asarray(p, np.float32) for p in params()))))
    return out
