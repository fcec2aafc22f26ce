"""Input widths: how each input of an x64guard.jit function is traced, keyed and converted.

float32/complex64 data is traced at its own width (as x32 JAX traces it), integers and
64-bit data at 64 bits (docs/jit.md, "Input widths", gives the data). The narrowed program
takes 32-bit inputs: 64-bit ones are converted before it (integers range-checked, never
wrapped). `StaticArgs` splits a call into static and dynamic arguments as jax.jit does.
"""

from __future__ import annotations

import functools
import inspect
from typing import Callable, NamedTuple, Sequence

import jax
import numpy as np
from jax import lax

from x64guard.errors import X64GuardError
from x64guard.findings import Finding, Kind
from x64guard.jax import _private
from x64guard.passes.tables import NARROW_NUMPY_DTYPE

# The numpy side of the type map (the core's type table): what an input or output dtype becomes.
NARROW_DTYPE: dict[np.dtype, np.dtype] = NARROW_NUMPY_DTYPE

WIDE_INTEGERS = frozenset(wide for wide in NARROW_DTYPE if wide.kind in "iu")
ARRAY_TYPE = _private.array_impl_type()  # jax.Array's concrete class (no array made at import)


# ----------------------------------------------------------------------------- statics

class StaticKey(NamedTuple):
    """The static arguments of one call, hashable (part of the program cache key)."""

    positional: tuple  # (index, value) pairs
    keywords: tuple    # (name, value) pairs, sorted


class SplitCall(NamedTuple):
    args: tuple        # the dynamic positional arguments
    kwargs: dict       # the dynamic keyword arguments
    static: "StaticKey | tuple"  # () when the function has no static arguments


class StaticArgs:
    """Splits a call into static and dynamic arguments the way jax.jit does."""

    def __init__(self, fun: Callable, argnums, argnames):
        self.argnums = as_tuple(argnums)
        self.argnames = as_tuple(argnames)
        try:
            self.signature = inspect.signature(fun)
        except (TypeError, ValueError):
            self.signature = None
        if self.signature is not None:
            positional = [p.name for p in self.signature.parameters.values()
                          if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
            self.argnums += tuple(positional.index(n) for n in self.argnames if n in positional)
            self.argnames += tuple(positional[i] for i in self.argnums if 0 <= i < len(positional))

    def split(self, args: tuple, kwargs: dict) -> SplitCall:
        if not self.argnums and not self.argnames:
            return SplitCall(args, kwargs, ())
        static_pos = {i % len(args) for i in self.argnums if -len(args) <= i < len(args)}
        dyn_args = tuple(a for i, a in enumerate(args) if i not in static_pos)
        dyn_kwargs = {k: v for k, v in kwargs.items() if k not in self.argnames}
        static = StaticKey(tuple((i, args[i]) for i in sorted(static_pos)),
                           tuple(sorted((k, v) for k, v in kwargs.items() if k in self.argnames)))
        return SplitCall(dyn_args, dyn_kwargs, static)

    def merge(self, dyn_args: Sequence, dyn_kwargs: dict, static: "StaticKey | tuple") -> tuple[list, dict]:
        static_pos, static_kw = static if static else ((), ())
        args = list(dyn_args)
        for i, value in static_pos:
            args.insert(i, value)
        return args, {**dyn_kwargs, **dict(static_kw)}


def as_tuple(value) -> tuple:
    if value is None:
        return ()
    if isinstance(value, (int, str)):
        return (value,)
    return tuple(value)


# ----------------------------------------------------------------------------- inputs

def is_python_scalar(x) -> bool:
    return isinstance(x, (bool, int, float, complex)) and not isinstance(x, np.generic)


# The width an input is traced at. Integer inputs are traced at 64 bits whatever width
# they arrive in: JAX with x64 on silently wraps a weakly typed Python int that an int32
# cannot hold (int32 + 2**40 gives + 0) where JAX with x64 off raises; traced at 64 bits
# the constant is visible in the module and refused. uint32 stays: it is what PRNG keys
# and bit manipulation use in x64 programs too. Floating inputs: see OWN_WIDTH.
WIDEN_FOR_TRACE = {narrow: wide for wide, narrow in NARROW_DTYPE.items() if narrow != np.dtype(np.uint32)}
# float32 and complex64 inputs are traced at their own width, as x32 JAX traces them:
# dtype-dependent library code (normal(key, shape, dtype=x.dtype), finfo(x.dtype)) then
# takes its 32-bit path. Measured on the corpus and the fuzz grammar (docs/jit.md, "Input
# widths"): never a different result, 5 fewer refusals; int32 at own width ran 3 programs
# that x32 JAX refuses (silently wrapped constants).
OWN_WIDTH: frozenset = frozenset(narrow for narrow in NARROW_DTYPE.values() if narrow.kind in "fc")


def trace_dtype(dtype, weak: bool):
    """The dtype an input of `dtype` is traced at."""
    if _private.is_extended_dtype(dtype):
        return dtype  # typed PRNG keys pass through unchanged
    dtype = np.dtype(dtype)
    if dtype in OWN_WIDTH and not weak:
        return dtype
    return WIDEN_FOR_TRACE.get(dtype, dtype)


def trace_spec(x, dtype=None) -> jax.ShapeDtypeStruct:
    """How the 64-bit trace sees an input: its shape, the dtype it is traced at (`dtype`
    when given), weakly typed for Python scalars, with the sharding a JAX array carries."""
    if isinstance(x, (jax.Array, jax.core.Tracer)):
        aval = jax.typeof(x)
        # A sharding in the spec is an explicit one for the lowering (annotations that
        # slow XLA's compile down by ~15%): only for arrays spread over several devices.
        sharding = None if isinstance(x, jax.core.Tracer) or len(x.sharding.device_set) == 1 else x.sharding
        shape, own, weak = aval.shape, aval.dtype, aval.weak_type
    else:
        array = np.asarray(x)
        shape, own, weak, sharding = array.shape, array.dtype, is_python_scalar(x), None
    return jax.ShapeDtypeStruct(shape, trace_dtype(own, weak) if dtype is None else dtype,
                                weak_type=weak, sharding=sharding)


WIDEST = {narrow: wide for wide, narrow in NARROW_DTYPE.items()}
# 64-bit numpy data traced at another width than its 32-bit counterpart (int64 and int32
# are both traced at 64 bits).
WIDE_NUMPY = frozenset(wide for wide, narrow in NARROW_DTYPE.items() if trace_dtype(narrow, weak=False) != wide)


def wide_numpy_leaves(leaves: Sequence) -> tuple[int, ...]:
    """Indices of float64/complex128/uint64 numpy inputs: JAX's C++ dispatch keys them as
    their 32-bit counterparts when x64 is off, but they are traced at 64 bits."""
    wide = []
    for i, leaf in enumerate(leaves):
        kind = type(leaf)
        if (kind is np.ndarray or isinstance(leaf, np.generic)) and leaf.dtype in WIDE_NUMPY:
            wide.append(i)
    return tuple(wide)


WIDE_FLOATS = frozenset(wide for wide in NARROW_DTYPE if wide.kind in "fc")


def wide_array_leaves(leaves: Sequence) -> tuple[int, ...]:
    """Indices of strongly typed float64/complex128 JAX arrays (a caller with x64 on): they
    are traced at 64 bits and converted before the program, as float64 numpy data is. A
    weakly typed one stays as it is (its trace differs)."""
    return tuple(i for i, leaf in enumerate(leaves)
                 if type(leaf) is ARRAY_TYPE and leaf.dtype in WIDE_FLOATS and not leaf.weak_type)


def dispatch_dtype(x):
    """The dtype JAX's dispatch gives an input in the calling thread (numpy float64 is
    float32 with x64 off)."""
    return jax.typeof(x).dtype


def widened_spec(spec: jax.ShapeDtypeStruct, uint32: bool = True) -> jax.ShapeDtypeStruct:
    """`spec` at 64 bits (uint32 too unless `uint32` is false): the fallback traces of code
    written for 64-bit inputs."""
    if _private.is_extended_dtype(spec.dtype):
        return spec
    dtype = np.dtype(spec.dtype)
    if dtype not in WIDEST or (dtype == np.uint32 and not uint32):
        return spec
    return jax.ShapeDtypeStruct(spec.shape, WIDEST[dtype], weak_type=spec.weak_type, sharding=spec.sharding)


def narrowed_spec(spec: jax.ShapeDtypeStruct) -> jax.ShapeDtypeStruct:
    """`spec` at its 32-bit width (x32 JAX's trace of the input)."""
    dtype = narrow_dtype(spec.dtype)
    if dtype is None:
        return spec
    return jax.ShapeDtypeStruct(spec.shape, dtype, weak_type=spec.weak_type, sharding=spec.sharding)


def narrow_dtype(dtype):
    """The 32-bit dtype for a 64-bit one, else None (typed keys included)."""
    if _private.is_extended_dtype(dtype):
        return None
    return NARROW_DTYPE.get(np.dtype(dtype))


def signature(x) -> tuple:
    """What the cache key needs of one input, cheaply (this runs on every call)."""
    if isinstance(x, jax.core.Tracer):  # before jax.Array: tracers are jax.Arrays too
        aval = jax.typeof(x)
        return (aval.shape, aval.dtype, aval.weak_type)
    if isinstance(x, jax.Array):
        return (x.shape, x.dtype, getattr(x, "weak_type", False), x.sharding)  # typed keys: no weak_type
    if isinstance(x, np.ndarray):
        return (x.shape, x.dtype)
    if is_python_scalar(x):
        return (type(x),)
    return (np.shape(x), np.result_type(x))


def to_narrow(x, dtype, path: str):
    """Cast one input to its narrowed dtype; concrete integers are range-checked."""
    if isinstance(x, jax.core.Tracer):
        return x if x.dtype == dtype else lax.convert_element_type(x, dtype)
    if isinstance(x, jax.Array):
        if x.dtype == dtype:
            return x
        check_range(x, dtype, path)
        return converted_outside(x, dtype)
    array = np.asarray(x)
    if array.dtype != dtype:
        check_range(array, dtype, path)
        array = host_cast(array, dtype)
    return array


def converted_outside(x, dtype):
    """A 64-bit input converted to the program's 32-bit dtype before the program, never
    inside it: a conversion fused into the compiled program changes XLA's code (FMA
    contraction: different bits from x32 JAX). numpy data is cast on the host, as JAX
    with x64 off casts it. A JAX array in host memory (the CPU backend) is cast there too
    (no XLA compile per input shape, unlike `x.astype`) and put back in its own sharding;
    one on an accelerator is converted there, by its own small XLA program (compiled once
    per shape and dtype, cached by JAX), not through the host: that would cost a
    device-to-host round trip on every call. Integers must have been range-checked."""
    if isinstance(x, jax.Array) and not converts_on_host(x):
        devices = x.sharding.device_set
        if on_accelerator(devices):
            with _private.x64_enabled():
                return lax.convert_element_type(x, dtype)
        return jax.device_put(host_cast(np.asarray(x), dtype), x.sharding)
    return host_cast(np.asarray(x), dtype)  # one device: the executable places it, without a copy


# XLA's CPU client takes a numpy array without a copy when its data is aligned to this
# (zero-copy device_put); numpy aligns to 16 bytes only. Below _ALIGNED_FROM elements the
# copy costs less than aligning (a 128-element cast: 0.6 us with astype, 5 us aligned).
_HOST_ALIGNMENT = 64
_ALIGNED_FROM = 1 << 14


def host_cast(array: np.ndarray, dtype) -> np.ndarray:
    """`array.astype(dtype)`; from 16,384 elements, its data aligned so that a CPU device
    can use it in place (a first call's converted inputs then cost no copy and no fresh
    device pages)."""
    if array.size < _ALIGNED_FROM:
        return array.astype(dtype)
    dtype = np.dtype(dtype)
    raw = np.empty(array.size * dtype.itemsize + _HOST_ALIGNMENT, np.uint8)
    start = -raw.ctypes.data % _HOST_ALIGNMENT
    out = raw[start:start + array.size * dtype.itemsize].view(dtype).reshape(array.shape)
    np.copyto(out, array, casting="unsafe")
    return out


def converts_on_host(x) -> bool:
    """Whether `converted_outside` makes numpy data of JAX array `x`: one host device."""
    devices = x.sharding.device_set
    return len(devices) == 1 and not on_accelerator(devices)


def convert_leaves_outside(flat: list, indices: Sequence[int], dtypes: Sequence) -> None:
    """`converted_outside` for `flat[i]`, i in `indices`, in place. The arrays on one set of
    accelerator devices are converted by one small program together: one dispatch per call
    for all of them, where one per array cost more than the step (an H200 MLP step with ten
    float64 leaves: 1.4 ms of converts on a 1.4 ms step). Each convert is its own output,
    rounded exactly as alone; nothing is fused into the user's program."""
    together = [(i, d) for i, d in zip(indices, dtypes)
                if isinstance(flat[i], jax.Array) and on_accelerator(flat[i].sharding.device_set)]
    if len(together) < 2 or len({frozenset(flat[i].sharding.device_set) for i, _ in together}) > 1:
        together = []
    for i, dtype in zip(indices, dtypes):
        if (i, dtype) not in together:
            flat[i] = converted_outside(flat[i], dtype)
    if together:
        with _private.x64_enabled():
            converted = _converter(tuple(np.dtype(d) for _, d in together))(*(flat[i] for i, _ in together))
        for (i, _), x in zip(together, converted):
            flat[i] = x


@functools.lru_cache(maxsize=256)
def _converter(dtypes: tuple) -> Callable:
    def convert_inputs(*xs):
        return tuple(lax.convert_element_type(x, d) for x, d in zip(xs, dtypes))

    return jax.jit(convert_inputs)


def on_accelerator(devices) -> bool:
    return any(d.platform != "cpu" for d in devices)


def host_cast_leaves(leaves: list, wide: tuple) -> list:
    """`leaves` with the 64-bit numpy data at `wide` cast to its 32-bit dtype on the host."""
    leaves = list(leaves)
    for i in wide:
        leaves[i] = host_cast(leaves[i], NARROW_DTYPE[leaves[i].dtype])
    return leaves


def check_range(x, dtype, path: str) -> None:
    if _private.is_extended_dtype(dtype) or np.dtype(dtype).kind not in "iu" or np.size(x) == 0:
        return
    info = np.iinfo(dtype)
    with _private.x64_enabled():
        lo, hi = int(np.min(x) if isinstance(x, np.ndarray) else jax.numpy.min(x)), \
            int(np.max(x) if isinstance(x, np.ndarray) else jax.numpy.max(x))
    if lo < info.min or hi > info.max:
        bad = lo if lo < info.min else hi
        finding = Finding(Kind.INPUT_OUT_OF_RANGE, "error", "argument", path,
                          f"value {bad} does not fit in {np.dtype(dtype)}; x64guard never wraps inputs. Pass values in "
                          f"[{info.min}, {info.max}], or keep this function in 64 bits (mode='allow')")
        raise X64GuardError(f"x64guard.jit: argument {path}: {finding.message}", [finding])


def keystr(path) -> str:
    """'args[1]["scale"]' / 'kwargs["n"]' for a leaf of the (dynamic args, kwargs) tree."""
    head, rest = path[0], path[1:]
    return ("args" if getattr(head, "idx", 0) == 0 else "kwargs") + jax.tree_util.keystr(rest)


def narrow_aval(aval):
    dtype = narrow_dtype(aval.dtype)
    return aval if dtype is None else aval.update(dtype=dtype)

