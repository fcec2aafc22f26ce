"""torch's private FFT ops, which torch-xla 2.9 runs on the CPU, as XLA's `fft` op lowered
by JAX at full width inside the traced graph (the core pass narrows them with the rest)."""

from __future__ import annotations

import functools

import numpy as np
import torch

from x64guard.torch_xla import _private as _xc
from x64guard.torch_xla.base import JAX_DTYPE_NAME

_A = torch.ops.aten
_FFT_OPS = frozenset({_A._fft_c2c.default, _A._fft_r2c.default, _A._fft_c2r.default})


# The dtypes XLA's fft takes (what torch's FFT ops accept on XLA).
_FFT_DTYPES = frozenset({torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64,
                         torch.complex128})


@functools.lru_cache(maxsize=256)
def _fft_computation(kind: str, shape: tuple, dtype: str, dims: tuple, normalization: int, extra):
    """An XlaComputation computing one of torch's private FFT ops with XLA's fft, lowered
    by JAX with 64-bit types for this trace only (complex128 stays complex128: the core
    pass narrows it later, with the rest of the graph)."""
    import jax
    import jax.numpy as jnp

    def signal_size(sizes) -> int:
        return int(np.prod([sizes[d] for d in dims])) if dims else 1

    if kind == "c2c":
        n = signal_size(shape)
        forward = extra
        scale = (1.0, n ** -0.5, 1.0 / n)[normalization] * (1.0 if forward else n)
        transform = (lambda v: jnp.fft.fftn(v, axes=dims)) if forward else (lambda v: jnp.fft.ifftn(v, axes=dims))
    elif kind == "r2c":
        n = signal_size(shape)
        scale = (1.0, n ** -0.5, 1.0 / n)[normalization]
        onesided = extra
        transform = (lambda v: jnp.fft.rfftn(v, axes=dims)) if onesided else (
            lambda v: jnp.fft.fftn(v.astype(jnp.result_type(v.dtype, jnp.complex64)), axes=dims))
    else:  # c2r
        sizes = list(shape)
        sizes[dims[-1]] = extra  # last_dim_size
        n = signal_size(sizes)
        scale = (1.0, n ** -0.5, 1.0 / n)[normalization] * n
        s = tuple(sizes[d] for d in dims)
        transform = lambda v: jnp.fft.irfftn(v, s=s, axes=dims)  # noqa: E731

    def fn(v):
        out = transform(v)
        return out if scale == 1.0 else out * scale

    with jax.enable_x64(True):  # this thread only, restored on exit
        lowered = jax.jit(fn).lower(jax.ShapeDtypeStruct(shape, jnp.dtype(dtype)))
        proto = lowered.compiler_ir("hlo").as_serialized_hlo_module_proto()
    return _xc.computation_from_proto(f"x64guard_fft_{kind}", proto)


def _fft(func, x, dim, normalization, third):
    kind = {"_fft_c2c": "c2c", "_fft_r2c": "r2c", "_fft_c2r": "c2r"}[func.overloadpacket.__name__]
    dtype = JAX_DTYPE_NAME.get(x.dtype) if x.dtype in _FFT_DTYPES else None
    if dtype is None:
        raise TypeError(f"x64guard.torch_xla: {func} on {x.dtype} is not supported")
    dims = tuple(int(d) % max(x.dim(), 1) for d in dim)
    extra = bool(third) if kind != "c2r" else int(third)
    computation = _fft_computation(kind, tuple(int(s) for s in x.shape), dtype, dims, int(normalization), extra)
    (out,) = _xc.call_computation(f"xla::x64guard_fft_{kind}", [x], computation)
    return out
