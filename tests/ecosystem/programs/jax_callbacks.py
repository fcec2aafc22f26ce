"""Host callbacks as users put them in training and numerical code: jax.debug.print in a
train step (unordered and ordered), jax.debug.callback collecting metrics, pure_callback to a
host-side scipy routine, io_callback fetching data by index. A callback must see the values
x32 JAX gives it (so a host routine computes in float32), and results declared from an
input's dtype come back at x32's width."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from tests.ecosystem.programs.base import Registry

registry = Registry("jax")


def _sgd_step(w, x, y):
    loss, grad = jax.value_and_grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)
    return w - 0.1 * grad, loss


def _regression():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 3)).astype(np.float32)
    return (jnp.zeros(3, jnp.float32), jnp.asarray(x),
            jnp.asarray(x @ np.array([1.0, -1.0, 2.0], np.float32)))


@registry.program("debug_print_train_step",
                  "jax.debug.print of the loss and step inside a train step (unordered, the default)")
def debug_print():
    def step(w, x, y, i):
        w, loss = _sgd_step(w, x, y)
        jax.debug.print("step {i}: loss {loss:.4f} w {w}", i=i, loss=loss, w=w)
        return w, loss

    w, x, y = _regression()
    return step, (w, x, y, jnp.asarray(3, jnp.int32))


@registry.program("debug_print_ordered",
                  "jax.debug.print(..., ordered=True) before and after an update, as used to follow a loop")
def debug_print_ordered():
    def step(w, x, y):
        jax.debug.print("before: {w}", w=w, ordered=True)
        w, loss = _sgd_step(w, x, y)
        jax.debug.print("after: {w} loss {loss}", w=w, loss=loss, ordered=True)
        return w, loss

    return step, _regression()


@registry.program("debug_callback_metrics",
                  "jax.debug.callback sending the loss and gradient norm to a host-side metrics logger")
def debug_callback():
    logged: list = []

    def step(w, x, y):
        w2, loss = _sgd_step(w, x, y)
        jax.debug.callback(lambda l, n: logged.append((float(l), float(n))), loss, jnp.linalg.norm(w2 - w))
        return w2, loss

    return step, _regression()


@registry.program("pure_callback_scipy_lfilter",
                  "jax.pure_callback to scipy.signal.lfilter (a Butterworth low-pass, computed in the precision of "
                  "the values the host receives), result declared with the input's shape and dtype, vmapped")
def pure_callback_lfilter():
    from scipy import signal

    b, a = signal.butter(2, 0.2)

    def host_lowpass(v):
        v = np.asarray(v)
        return signal.lfilter(b.astype(v.dtype), a.astype(v.dtype), v, axis=-1).astype(v.dtype)

    def smooth(v):
        out = jax.ShapeDtypeStruct(v.shape, v.dtype)
        smoothed = jax.pure_callback(host_lowpass, out, v, vmap_method="sequential")
        return smoothed, jnp.mean((smoothed - v) ** 2)

    v = jnp.asarray(np.random.default_rng(1).standard_normal((2, 48)).astype(np.float32))
    return jax.vmap(smooth), (v,)


@registry.program("io_callback_fetch_by_index",
                  "jax.experimental.io_callback fetching a row of a host-side table by index (declared with the "
                  "index's and the data's dtypes) inside a scan")
def io_callback_fetch():
    from jax.experimental import io_callback

    table = np.arange(12, dtype=np.float64).reshape(4, 3) / 7.0
    counts = np.asarray([5, 2, 9, 1], dtype=np.int64)

    def run(start, w):
        def body(carry, _):
            i, acc = carry
            row = io_callback(lambda j: table[int(j)].astype(w.dtype), jax.ShapeDtypeStruct((3,), w.dtype), i)
            n = io_callback(lambda j: counts[int(j)].astype(i.dtype), jax.ShapeDtypeStruct((), i.dtype), i)
            return ((i + 1) % 4, acc + row @ w * n), n

        return jax.lax.scan(body, (start, jnp.zeros((), w.dtype)), length=3)

    return run, (jnp.asarray(1, jnp.int32), jnp.asarray([0.5, -1.0, 2.0], jnp.float32))


PROGRAMS = registry.programs
