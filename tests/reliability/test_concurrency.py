"""Concurrency: x64guard.narrow on different modules from 8 threads, and x64guard.jit
functions called from 8 threads, give exactly what serial runs give.

Inputs come in every form `narrow` takes: text, bytecode, an `ir.Module` that JAX lowered
(its own context), and `ir.Module`s that share one context (parsed by the main thread),
which is the case MLIR's Python bindings do not make safe by themselves.
"""

from __future__ import annotations

import threading
import warnings
from concurrent.futures import ThreadPoolExecutor

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.extend.mlir import ir

import x64guard
from tests.corpus.oracle import lower_x64, x64
from x64guard.io import modules

THREADS = 8
pytestmark = pytest.mark.filterwarnings("ignore::x64guard.X64GuardWarning")
ROUNDS = int(__import__("os").environ.get("X64GUARD_THREAD_ROUNDS", "4"))


def _programs():
    """Eight different x64 programs (and their inputs): narrowing, refusals, warnings."""
    f = np.linspace(-2, 2, 6)
    n = np.arange(6, dtype=np.int64)
    c = (np.arange(4) + 1j * np.arange(4)).astype(np.complex128)
    return [
        (lambda x: jnp.sin(x) * 2.5 + 1e-3, (f,)),
        (lambda x, k: jnp.cumsum(x * k) + jnp.argmax(x), (f, n)),
        (lambda k: lax.fori_loop(0, 5, lambda i, v: v * 3 + i, k), (n,)),
        (lambda z: jnp.fft.fft(z) * (1 - 2j), (c,)),
        (lambda x: jnp.linalg.inv(x.reshape(2, 3) @ x.reshape(3, 2) + 5 * jnp.eye(2)), (f,)),
        (lambda k: k + np.int64(2**40), (n,)),                      # refused: out of range
        (lambda x: lax.cond(jnp.sum(x) > 0, jnp.exp, jnp.tanh, x) + 1e-320, (f,)),   # underflow warning
        (lambda x, k: jnp.zeros(8, jnp.float64).at[k % 8].add(x).astype(jnp.uint64) >> 3, (f, n)),
    ]


def _outcome(module):
    """Everything `narrow` returns, as plain data (or the refusal)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            result = x64guard.narrow(module)
        except x64guard.X64GuardError as err:
            return ("refused", str(err), tuple(f.to_dict().items().__repr__() for f in err.findings))
    return ("narrowed", result.text, tuple(sorted(result.changes.items())),
            tuple(str(f) for f in result.findings), result.bytecode())


@pytest.fixture(scope="module")
def texts():
    return [lower_x64(fn, args) for fn, args in _programs()]


def _run_threads(work, n_jobs):
    barrier = threading.Barrier(THREADS)

    def job(i):
        if i < THREADS:
            barrier.wait()  # start the first wave together
        return work(i)

    with ThreadPoolExecutor(THREADS) as pool:
        return list(pool.map(job, range(n_jobs)))


def test_narrow_text_and_bytecode_from_8_threads_matches_serial(texts):
    inputs = texts + [modules.to_bytecode(modules.load(t)[0]) for t in texts]
    serial = [_outcome(m) for m in inputs]
    n = len(inputs)
    got = _run_threads(lambda i: (i % n, _outcome(inputs[i % n])), n * ROUNDS)
    for index, outcome in got:
        assert outcome == serial[index], f"input {index} narrowed differently in a thread"


def test_narrow_jax_modules_from_8_threads_matches_serial():
    """ir.Modules straight from JAX's lowering (each in JAX's context for that lowering)."""
    modules = []
    for fn, args in _programs():
        with x64(True):
            modules.append(jax.jit(fn).lower(*args).compiler_ir("stablehlo"))
    serial = [_outcome(m) for m in modules]
    got = _run_threads(lambda i: (i % len(modules), _outcome(modules[i % len(modules)])), len(modules) * ROUNDS)
    for index, outcome in got:
        assert outcome == serial[index], f"module {index} narrowed differently in a thread"


def test_narrow_modules_sharing_one_context_from_8_threads(texts):
    """Eight modules parsed in one MLIR context (as a caller's own code may), narrowed at once from
    eight threads: the case where the bindings' context is shared across threads."""
    with modules.make_context() as context:  # x64guard's own loads give each module its own context
        parsed = [ir.Module.parse(t) for t in texts]
    assert all(m.context == context for m in parsed)
    before = [m.operation.get_asm(enable_debug_info=True) for m in parsed]
    serial = [_outcome(m) for m in parsed]
    got = _run_threads(lambda i: (i % len(parsed), _outcome(parsed[i % len(parsed)])), len(parsed) * ROUNDS)
    for index, outcome in got:
        assert outcome == serial[index], f"module {index} narrowed differently in a thread"
    assert [m.operation.get_asm(enable_debug_info=True) for m in parsed] == before


def test_check_from_8_threads_matches_serial(texts):
    def report(text):
        r = x64guard.check(text, target="neuron")
        return r.ok, tuple(str(f) for f in r.findings)

    serial = [report(t) for t in texts]
    got = _run_threads(lambda i: (i % len(texts), report(texts[i % len(texts)])), len(texts) * ROUNDS)
    for index, outcome in got:
        assert outcome == serial[index]


# --------------------------------------------------------------------------- x64guard.jit

def _leaves(tree):
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(tree)]


def _jit_programs():
    return [(fn, args) for fn, args in _programs() if fn.__code__.co_consts != (2**40,)
            and "2**40" not in repr(fn.__code__.co_consts)][:5] + [
        (lambda x, k: {"y": jnp.sort(x)[::-1], "k": k.sum()}, (np.linspace(3, -3, 7), np.arange(7, dtype=np.int64))),
        (lambda x: jnp.tanh(x @ x.T).astype(jnp.float64).mean(), (np.ones((4, 4)) * 0.1,)),
        (lambda k: jnp.where(k > 2, k * 7, -k), (np.arange(9, dtype=np.int64),)),
    ]


def _serial_results(programs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [_leaves(x64guard.jit(fn)(*args)) for fn, args in programs]


def _same(a, b):
    return len(a) == len(b) and all(x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()
                                    for x, y in zip(a, b))


def test_jit_first_calls_from_8_threads_match_serial():
    """Fresh x64guard.jit functions, first called (traced, narrowed, compiled) from 8 threads
    at once; the global x64 flag must not leak between the threads' traces."""
    programs = _jit_programs()
    assert len(programs) == THREADS
    serial = _serial_results(programs)
    x64_before = jax.config.jax_enable_x64

    def work(i):
        fn, args = programs[i % THREADS]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return i % THREADS, _leaves(x64guard.jit(fn)(*args))

    for index, got in _run_threads(work, THREADS * ROUNDS):
        assert _same(got, serial[index]), f"program {index}: {got} != {serial[index]}"
    assert jax.config.jax_enable_x64 == x64_before


def test_shared_jit_functions_called_from_8_threads_match_serial():
    """The same x64guard.jit objects, shared by 8 threads, on inputs of several signatures
    (so threads race to add cache entries) and with plain jax.jit x64-off calls interleaved."""
    shared = x64guard.jit(lambda x, k: (jnp.cos(x) * k, jnp.argsort(x)))
    plain = jax.jit(lambda x: x * 2)
    signatures = [(np.linspace(-1, 1, n), np.arange(n, dtype=np.int64)) for n in (3, 4, 5, 6)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        serial = [_leaves(x64guard.jit(lambda x, k: (jnp.cos(x) * k, jnp.argsort(x)))(*a)) for a in signatures]

    def work(i):
        args = signatures[i % len(signatures)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = _leaves(shared(*args))
        assert np.asarray(plain(np.float32(1.5))).dtype == np.float32  # x64 stays off here
        return i % len(signatures), out

    for index, got in _run_threads(work, THREADS * ROUNDS * 2):
        assert _same(got, serial[index])
