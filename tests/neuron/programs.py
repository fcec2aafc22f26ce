"""Neuron's documented triggers as JAX and torch-xla programs (issue 23), each beside a twin
the documentation says is fine. The error-code pages' own examples are used where they
have one (EVRF010/011/017/018/019: compiler/error-codes/<CODE>.rst of aws-neuron-sdk 2.32).

`TRIGGERS[code]` and `CLEAN[code]`: () -> StableHLO text. Int64 programs are traced with
x64 on (for that trace only), the others as 32-bit JAX traces them.
"""

from __future__ import annotations

import numpy as np
import jax
import jax.numpy as jnp
from jax import lax

from tests.corpus.oracle import x64

F32 = np.float32


def lower(fn, *args, wide: bool = False) -> str:
    with x64(wide):
        return jax.jit(fn).lower(*args).as_text(debug_info=True)


def lower_generic(fn, *args) -> str:
    """`fn` exported with XLA's generic lowering (a PJRT plugin's, as Neuron's: JAX's CPU
    lowering calls LAPACK for linear algebra)."""
    with x64(False):
        return jax.export.export(jax.jit(fn), platforms=["tpu"])(*args).mlir_module()


def lower_dynamic(fn, spec: str, dtype=np.float32) -> str:
    """`fn` exported with a symbolic (dynamic) shape."""
    with x64(False):
        shape = jax.export.symbolic_shape(spec)
        exported = jax.export.export(jax.jit(fn))(jax.ShapeDtypeStruct(shape, dtype))
        return exported.mlir_module()


def torch_xla_text(fn, *tensors) -> str:
    """StableHLO of a torch-xla computation on the XLA device (its int64 kept)."""
    import torch_xla

    from x64guard.torch_xla import _private as compat

    device = torch_xla.device()
    out = fn(*[t.to(device) for t in tensors])
    return compat.stablehlo_text([out], str(device))


_X = np.arange(8, dtype=np.int32)
_IDX = np.array([1, 3], np.int32)
_CONV_X = np.ones((1, 4, 4, 1), F32)
_CONV_K = np.ones((3, 3, 1, 1), F32)


def _conv(strides, lhs, rhs):
    return lambda x, k: lax.conv_general_dilated(x, k, window_strides=strides, padding=((2, 2), (2, 2)),
                                                 lhs_dilation=lhs, rhs_dilation=rhs,
                                                 dimension_numbers=("NHWC", "HWIO", "NHWC"))


def _pool(base=(1, 1, 1, 1), window=(1, 1, 1, 1)):
    return lambda x: lax.reduce_window(x, -jnp.inf, lax.max, window_dimensions=(1, 2, 2, 1),
                                       window_strides=(1, 1, 1, 1), padding="VALID",
                                       base_dilation=base, window_dilation=window)


def _psum(dtype, scatter=False):
    def f(x):
        body = (lambda y: lax.psum_scatter(y, "i", tiled=True)) if scatter else (lambda y: lax.psum(y, "i"))
        return jax.pmap(body, axis_name="i")(x)
    return lambda: lower(f, np.ones((1, 4), dtype))


def _ffi(target):
    def f(x):
        return jax.ffi.ffi_call(target, jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
    return lambda: lower(f, np.ones(4, F32))


def _torch_pow(dtype_name):
    def program():
        import torch
        dtype = getattr(torch, dtype_name)
        a = torch.arange(1, 5, dtype=dtype)
        return torch_xla_text(lambda x, y: torch.pow(x, y), a, a)
    return program


TRIGGERS = {
    "NCC_ESFH002": lambda: lower(lambda x: x + jnp.uint64(2**40), np.arange(4, dtype=np.uint64), wide=True),
    "NCC_EVRF035": lambda: lower(jnp.dot, np.ones((2, 2), np.int32), np.ones((2, 2), np.int32)),
    "NCC_EVRF060": lambda: lower(lambda x, v: x.at[_IDX].add(v), _X, np.ones(2, np.int32)),
    "NCC_EVRF016": lambda: lower(lambda x, v: x.at[_IDX].max(v), np.zeros(8, bool), np.ones(2, bool)),
    "NCC_EVRF061": _psum(np.int32),
    "NCC_EVRF063": _psum(np.int32, scatter=True),
    "NCC_EVRF062": _torch_pow("int64"),
    "NCC_EVRF022": lambda: lower(lambda x: x >> 3, np.arange(4, dtype=np.int64), wide=True),
    "NCC_EVRF013": lambda: lower(lambda x: lax.top_k(x, 3), _X),
    "NCC_EVRF014": lambda: lower(lambda x: lax.top_k(x, 16385), np.ones(20000, F32)),
    "NCC_EVRF004": lambda: lower(lambda a, b: a / b, np.ones(2, np.complex64), np.ones(2, np.complex64)),
    "NCC_EVRF006": lambda: lower(lambda k: lax.rng_bit_generator(k, (4,), algorithm=lax.RandomAlgorithm.RNG_THREE_FRY),
                                 np.zeros(4, np.uint32)),
    "NCC_EHCA005": _ffi("my_kernel"),
    "NCC_EUOC002": lambda: lower_generic(lambda a, b: lax.linalg.triangular_solve(a, b, left_side=True),
                                 np.eye(3, dtype=F32), np.ones((3, 2), F32)),
    "NCC_EMOD025": lambda: lower_dynamic(lambda x: jnp.sin(x) * 2.0, "b, 4"),
    "NCC_EVRF010": lambda: lower(_conv((1, 1), (2, 2), (2, 2)), _CONV_X, _CONV_K),
    "NCC_EVRF011": lambda: lower(_conv((2, 2), (2, 2), (1, 1)), _CONV_X, _CONV_K),
    "NCC_EVRF017": lambda: lower(_pool(base=(1, 2, 1, 1)), _CONV_X),
    "NCC_EVRF018": lambda: lower(_pool(window=(1, 2, 2, 1)), _CONV_X),
    "NCC_EVRF019": lambda: lower(lambda x: lax.reduce_window(
        (x, x), (-jnp.inf, jnp.inf), lambda a, b: (jnp.maximum(a[0], b[0]), jnp.minimum(a[1], b[1])),
        window_dimensions=(1, 2, 2, 1), window_strides=(1, 2, 2, 1), padding="VALID"), _CONV_X),
    "neuron-cond": lambda: lower(lambda p, x: lax.cond(p, jnp.sin, jnp.cos, x), True, F32(1)),
    "neuron-dynamic-while": lambda: lower(lambda x: lax.while_loop(lambda v: v < 100.0, lambda v: v * 2.0, x), F32(1)),
    "neuron-host-callback": lambda: lower(lambda x: jax.pure_callback(np.sin, jax.ShapeDtypeStruct((2,), F32), x),
                                          np.ones(2, F32)),
    "neuron-sort-comparator": lambda: lower(lambda a, b: lax.sort((a, b), num_keys=2), np.ones(4, F32), np.ones(4, F32)),
    "neuron-reduce-precision": lambda: lower(lambda x: lax.reduce_precision(x, 5, 10), np.ones(2, F32)),
    "neuron-variadic-reduce": lambda: lower(jnp.argmax, np.ones(4, F32)),
    "neuron-threefry": lambda: lower(lambda k: jax.random.uniform(k, (3,)), jax.random.key(0)),
}

CLEAN = {
    "NCC_ESFH002": lambda: lower(lambda x: x + jnp.uint64(7), np.arange(4, dtype=np.uint64), wide=True),
    "NCC_EVRF035": lambda: lower(jnp.dot, np.ones((2, 2), F32), np.ones((2, 2), F32)),
    "NCC_EVRF060": lambda: lower(lambda x, v: x.at[_IDX].set(v), _X, np.ones(2, np.int32)),
    "NCC_EVRF016": lambda: lower(lambda x, v: x.at[_IDX].set(v), np.zeros(8, bool), np.ones(2, bool)),
    "NCC_EVRF061": _psum(F32),
    "NCC_EVRF063": _psum(F32, scatter=True),
    "NCC_EVRF062": _torch_pow("float32"),
    "NCC_EVRF022": lambda: lower(lambda x: x >> 3, _X),
    "NCC_EVRF013": lambda: lower(lambda x: lax.top_k(x, 3), np.ones(8, F32)),
    "NCC_EVRF014": lambda: lower(lambda x: lax.top_k(x, 16384), np.ones(20000, F32)),
    "NCC_EVRF004": lambda: lower(lambda a, b: jnp.exp(a) * b + a, np.ones(2, np.complex64), np.ones(2, np.complex64)),
    "NCC_EVRF006": lambda: lower(lambda k: jax.random.uniform(k, (3,)), jax.random.key(0, impl="rbg")),
    "NCC_EHCA005": _ffi("AwsNeuronGelu"),
    "NCC_EUOC002": lambda: lower_generic(lambda a_inv, b: a_inv @ b, np.eye(3, dtype=F32), np.ones((3, 2), F32)),
    "NCC_EMOD025": lambda: lower(lambda x: jnp.sin(x) * 2.0, np.ones((3, 4), F32)),
    "NCC_EVRF010": lambda: lower(_conv((1, 1), (1, 1), (2, 2)), _CONV_X, _CONV_K),
    "NCC_EVRF011": lambda: lower(_conv((2, 2), (1, 1), (1, 1)), _CONV_X, _CONV_K),
    "NCC_EVRF017": lambda: lower(_pool(), _CONV_X),
    "NCC_EVRF018": lambda: lower(_pool(), _CONV_X),
    "NCC_EVRF019": lambda: lower(lambda x: lax.reduce_window(
        x, -jnp.inf, lax.max, window_dimensions=(1, 2, 2, 1), window_strides=(1, 2, 2, 1), padding="VALID"), _CONV_X),
    "neuron-cond": lambda: lower(lambda p, x: jnp.where(p, jnp.sin(x), jnp.cos(x)), True, F32(1)),
    "neuron-dynamic-while": lambda: lower(lambda x: lax.fori_loop(0, 5, lambda i, v: v * 2.0, x), F32(1)),
    "neuron-host-callback": lambda: lower(jnp.sin, np.ones(2, F32)),
    "neuron-sort-comparator": lambda: lower(lambda a: (jnp.sort(a), jnp.argsort(a)), np.ones(4, F32)),
    "neuron-reduce-precision": lambda: lower(lambda x: x.astype(jnp.bfloat16).astype(F32), np.ones(2, F32)),
    "neuron-variadic-reduce": lambda: lower(jnp.max, np.ones(4, F32)),
    "neuron-threefry": lambda: lower(lambda k: jax.random.uniform(k, (3,)), jax.random.key(0, impl="rbg")),
}
