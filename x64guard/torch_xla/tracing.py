"""x64guard's torch-xla front end: torch-xla graphs narrowed at the StableHLO level.

    torch.compile(model, backend="x64guard")              # a dynamo backend (entry point)
    x64guard.torch_xla.compile(model, mode=None, overflow="error")
    x64guard.torch_xla.narrow_exported(exported_program)  # torch.export programs
    x64guard.torch_xla.to_device(model_or_batch)          # 64-bit data narrowed on the host, then moved
    x64guard.torch_xla.sync(model, optimizer, loss)       # a lazy-tensor step, narrowed

How a graph runs: torch-xla traces it lazily at full width and lowers it to StableHLO
(`_get_stablehlo`, the lowering itself, not a serialized portable artifact); this module
adapts torch-xla's spelling (erf, result dtypes), takes the random-number generators'
seed arithmetic out of the program (x64guard/_torch_xla_rng.py) and places every op at
its model line (x64guard/_torch_xla_source.py); `x64guard.narrow` narrows the module; the
narrowed module becomes an XlaComputation that torch-xla calls as one op of its lazy
graph (the route torch-xla's own `call_jax` takes), compiled once into torch-xla's
computation cache and run from there on every later call with the same input signature
(`_run_cached_graph`, what torch-xla's own dynamo backend does). Graphs that need
gradients or write to their inputs go through AOTAutograd first, as torch-xla's `openxla`
backend does; their forward and backward graphs are narrowed alike.

Inputs are cast to 32 bits on the way in (on the host when they come from the host,
integers range-checked); outputs are 32-bit XLA tensors, but for CPU tensors the graph
makes from constants and shapes: its CPU part runs on the CPU, as PyTorch runs it
(x64guard/_torch_xla_mixed.py).

Only adapts: the narrowing is `x64guard.narrow`'s. What this module adds is torch-xla
plumbing, the boundary, and repairs of torch-xla 2.9 gaps met on the way (reductions over
an empty dim list, FFTs, which torch-xla runs on the CPU, its `custom_call @mhlo.erf`
spelling of erf, native_dropout's scale). Every private torch-xla call is in
x64guard/_torch_xla_compat.py.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import itertools
import threading
import weakref
from typing import Any, Callable, Iterator, Sequence

try:
    import torch
    import torch_xla
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("x64guard.torch_xla needs torch and torch-xla: pip install 'x64guard[torch-xla]' "
                      f"(torch==2.9.0, torch-xla==2.9.0) ({exc})") from exc

from x64guard import _torch_xla_compat as _xc
from x64guard import _torch_xla_share as _share
from x64guard import _user_line

_xc.check_torch_xla_version()

import numpy as np  # noqa: E402
from torch.utils import _pytree as pytree  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from x64guard.io import modules as xmlir  # noqa: E402
from x64guard import _torch_xla_outside as _outside  # noqa: E402
from x64guard._torch_xla_overflow import OverflowChecks, describe, guard  # noqa: E402
from x64guard._torch_xla_rng import (STATE_LOCATION, RngStateError, RngStates, extract_rng_states,  # noqa: E402
                                     openxla_next_seed)  # noqa: E402
from x64guard import _torch_xla_mixed  # noqa: E402
from x64guard._torch_xla_source import SourceMap, StackSourceMap, locate_findings, run_node_by_node  # noqa: E402
from x64guard.api import NarrowResult, narrow  # noqa: E402
from x64guard.errors import X64GuardError, X64GuardWarning  # noqa: E402
from x64guard.findings import Finding, Severity, format_findings  # noqa: E402
from x64guard.modes import Mode, resolve_mode, resolve_overflow  # noqa: E402
from x64guard.passes.tables import NARROW_TORCH_DTYPE  # noqa: E402

__all__ = ["backend", "compile", "narrow_exported", "to_device", "sync", "step", "NarrowedProgram", "NARROW_DTYPE",
           "counters", "TorchXlaFailure"]

BACKEND_NAME = "x64guard"

# What a 64-bit dtype becomes: the core's type table, on the torch side.
NARROW_DTYPE: dict[torch.dtype, torch.dtype] = {
    getattr(torch, wide): getattr(torch, narrow) for wide, narrow in NARROW_TORCH_DTYPE.items()}
_INTEGER_NARROW = {wide for wide in NARROW_DTYPE if not (wide.is_floating_point or wide.is_complex)}

# How many times x64guard traced and narrowed a graph, built a program, and ran one.
_COUNTERS = {"traces": 0, "programs": 0, "programs_shared": 0, "calls": 0, "boundary_casts": 0}


def counters() -> dict[str, int]:
    """x64guard's own counts: graphs traced and narrowed (`traces`), programs compiled
    into torch-xla's cache (`programs`), traces whose narrowed module equalled a live
    program's but for locations and so reused it (`programs_shared`, e.g. after a dynamo
    recompile), narrowed calls (`calls`), and 64-bit tensors cast at the boundary
    (`boundary_casts`). A steady state moves only `calls`."""
    return dict(_COUNTERS)


def _device() -> torch.device:
    return torch_xla.device()


# ============================================================================ torch-xla repairs

_A = torch.ops.aten

# torch-xla 2.9 lowers these with an empty `dim` list as "reduce nothing"; PyTorch means
# "reduce over every dimension" (measured: sum, mean, amax, amin, var, std and
# linalg_vector_norm return their input, or NaN). torch.export decomposes a plain
# `x.sum()` into `sum.dim_IntList(x, [])`, so `x.sum() + 1` exported as `x + 1`.
_EMPTY_DIM_MEANS_ALL = frozenset({
    _A.sum.dim_IntList, _A.mean.dim, _A.amax.default, _A.amin.default,
    _A.var.correction, _A.std.correction, _A.var_mean.correction, _A.std_mean.correction,
    _A.linalg_vector_norm.default,
})
_FFT_OPS = frozenset({_A._fft_c2c.default, _A._fft_r2c.default, _A._fft_c2r.default})


def _is_xla(x) -> bool:
    return isinstance(x, torch.Tensor) and x.device.type == "xla"


class _TorchXlaRepairs(TorchDispatchMode):
    """Active while x64guard traces a graph with torch-xla (and in mode allow):

    * reductions over an empty dim list get the full list (torch-xla reduces nothing);
    * FFTs (`_fft_c2c`, `_fft_r2c`, `_fft_c2r`), which torch-xla 2.9 runs on the CPU,
      become XLA's `fft` op, lowered by JAX at full width inside the traced graph, so
      that the core pass narrows them with the rest (complex128 -> complex64).

    * `native_dropout` in training (what dropout becomes under AOTAutograd and
      torch.export) is computed as torch-xla's own eager `dropout` computes it: keep where
      a uniform draw is below 1 - p, scale by 1/(1-p), a bool mask. torch-xla 2.9 lowers
      native_dropout with the scale 1/p (p=0.1: kept values x10, not x1.11) and its mask
      as float32 holding that scale, so that openxla's compiled dropout is wrong for any
      p but 0.5 and its gradients do not match its forward. The draw is torch-xla's
      `rand` (the same rng_bit_generator words native_dropout draws).

    With `narrow_transfers` (an overflow policy, while x64guard traces a graph it will
    narrow), a 64-bit host tensor the graph moves to the device (`.to(device)`) is
    narrowed on the host and moved at 32 bits, then widened inside the graph, so that no
    64-bit data reaches the device.

    Anything that is not an XLA tensor (fake tensors of torch.export's own tracing) is
    passed through untouched.
    """

    def __init__(self, narrow_transfers: str | None = None):
        super().__init__()
        self._narrow_transfers = narrow_transfers

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self._narrow_transfers is not None and func is _A._to_copy.default:
            moved = self._narrowed_transfer(args[0], kwargs)
            if moved is not None:
                return moved
        if args and _is_xla(args[0]):
            if func is _A.native_dropout.default:
                return _native_dropout(*args, **kwargs)
            if func in _EMPTY_DIM_MEANS_ALL:
                args, kwargs = _full_dims(func, args, kwargs)
            elif func in _FFT_OPS:
                return _fft(func, *args, **kwargs)
        return func(*args, **kwargs)

    def _narrowed_transfer(self, source, kwargs: dict) -> torch.Tensor | None:
        target = kwargs.get("device")
        if not isinstance(source, torch.Tensor) or source.device.type != "cpu" or target is None or \
                torch.device(target).type != "xla":
            return None
        wide = kwargs.get("dtype") or source.dtype
        if wide not in NARROW_DTYPE:
            return None
        narrowed = _narrow_on_host(source.detach().to(wide), NARROW_DTYPE[wide], "a tensor the graph moves to the "
                                   "device", self._narrow_transfers)
        with _xc.device_data_transfers():
            moved = narrowed.to(target)
        return moved.to(wide)


def _native_dropout(x: torch.Tensor, p: float, train: bool | None) -> tuple[torch.Tensor, torch.Tensor]:
    """aten.native_dropout with PyTorch's meaning: (x * mask / (1 - p), mask)."""
    if not train or p == 0:
        return x.clone(), torch.ones_like(x, dtype=torch.bool)
    if p == 1:
        return torch.zeros_like(x), torch.zeros_like(x, dtype=torch.bool)
    keep = torch.rand_like(x) < (1 - p)
    return x * keep * (1.0 / (1 - p)), keep


def _full_dims(func, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """`dim=[]` -> every dimension, for the ops in _EMPTY_DIM_MEANS_ALL."""
    x = args[0]
    if x.dim() == 0:
        return args, kwargs
    names = [a.name for a in func._schema.arguments]
    index = names.index("dim")
    if "dim" in kwargs:
        value = kwargs["dim"]
    elif index < len(args):
        value = args[index]
    else:
        default = func._schema.arguments[index].default_value
        value = default if default is not None else None
    if value is None or len(value) != 0:
        return args, kwargs
    full = list(range(x.dim()))
    if "dim" in kwargs or index >= len(args):
        return args, {**kwargs, "dim": full}
    return args[:index] + (full,) + args[index + 1:], kwargs


_JAX_DTYPES: dict[torch.dtype, str] = {
    torch.float32: "float32", torch.float64: "float64", torch.complex64: "complex64",
    torch.complex128: "complex128", torch.bfloat16: "bfloat16", torch.float16: "float16",
}


@functools.lru_cache(maxsize=256)
def _fft_computation(kind: str, shape: tuple, dtype: str, dims: tuple, normalization: int, extra):
    """An XlaComputation computing one of torch's private FFT ops with XLA's fft, lowered
    by JAX with 64-bit types for this trace only (complex128 stays complex128: the core
    pass narrows it later, with the rest of the graph)."""
    import jax
    import jax.numpy as jnp

    from x64guard import _compat

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

    with _compat.x64_enabled():
        lowered = jax.jit(fn).lower(jax.ShapeDtypeStruct(shape, jnp.dtype(dtype)))
        proto = lowered.compiler_ir("hlo").as_serialized_hlo_module_proto()
    return _xc.computation_from_proto(f"x64guard_fft_{kind}", proto)


def _fft(func, x, dim, normalization, third):
    kind = {"_fft_c2c": "c2c", "_fft_r2c": "r2c", "_fft_c2r": "c2r"}[func.overloadpacket.__name__]
    dtype = _JAX_DTYPES.get(x.dtype)
    if dtype is None:
        raise TypeError(f"x64guard.torch_xla: {func} on {x.dtype} is not supported")
    dims = tuple(int(d) % max(x.dim(), 1) for d in dim)
    extra = bool(third) if kind != "c2r" else int(third)
    computation = _fft_computation(kind, tuple(int(s) for s in x.shape), dtype, dims, int(normalization), extra)
    (out,) = _xc.call_computation(f"xla::x64guard_fft_{kind}", [x], computation)
    return out


# ============================================================================ the boundary

class _BoundaryCache:
    """Narrowed copies of 64-bit tensors that live on the XLA device (parameters and
    buffers, mostly), so that each is cast once and not on every call.

    An entry is keyed by the source tensor (weakly) and valid while the tensor still
    holds the same device data. torch-xla names that data in two forms
    (`_unique_id_for_ir_and_data`: its IR node until some sync, its buffer after; any
    write gives a new one), so an entry keeps the form seen last, for the one-lookup
    fast path, and the buffer's own identity, to recognise the same data after the
    form changed. It keeps an alias of the data alive, so that neither identity can be
    reused by other data while the entry exists.
    """

    def __init__(self) -> None:
        # id(source) -> [weakref(source), data id as last seen, alias, narrowed, buffer id]
        self._entries: dict[int, list] = {}
        self._lock = threading.Lock()

    def get(self, x: torch.Tensor, data: str):
        entry = self._entries.get(id(x))
        if entry is None or entry[0]() is not x:
            return None
        if entry[1] == data:
            return entry[3]
        buffer = _xc.buffer_id(x)
        if buffer is not None and buffer == entry[4]:
            entry[1] = data           # the same buffer, named in its other form now
            return entry[3]
        return None

    def put(self, x: torch.Tensor, data: str, narrowed: torch.Tensor) -> None:
        self._store(x, data, x.detach().clone(), narrowed, _xc.buffer_id(x))

    def put_alias(self, x: torch.Tensor, data: str, narrowed: torch.Tensor) -> None:
        """`x` is `narrowed` widened by a pending convert (to_device's int64 ids)."""
        self._store(x, data, None, narrowed, _ID_TENSOR)

    def _store(self, x: torch.Tensor, data: str, alias, narrowed: torch.Tensor, buffer) -> None:
        key = id(x)
        entries = self._entries

        def forget(ref, key=key) -> None:
            current = entries.get(key)
            if current is not None and current[0] is ref:
                entries.pop(key, None)

        with self._lock:
            entries[key] = [weakref.ref(x, forget), data, alias, narrowed, buffer]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


_BOUNDARY = _BoundaryCache()


def _narrow_alias(x: torch.Tensor) -> torch.Tensor | None:
    """The int32 device data behind an int64 tensor `to_device` made (int64 as PyTorch
    sees it, a pending convert of int32 device data as XLA holds it), while the tensor
    still holds exactly that; else None."""
    entry = _BOUNDARY._entries.get(id(x))
    if entry is None or entry[0]() is not x or entry[4] != _ID_TENSOR or entry[1] != _xc.data_id(x):
        return None
    return entry[3]


_ID_TENSOR = "to_device"   # the buffer-id slot of the _BOUNDARY entries `to_device` makes


def _range_error(path: str, value: int, dtype: torch.dtype) -> X64GuardError:
    info = torch.iinfo(dtype)
    finding = Finding("input-out-of-range", Severity.ERROR, "argument", path,
                      f"value {value} does not fit in {str(dtype).removeprefix('torch.')}; x64guard never wraps "
                      f"inputs. Pass values in [{info.min}, {info.max}], or run this graph in 64 bits "
                      f"(mode='allow')")
    return X64GuardError(f"x64guard.torch_xla: input {path}: {finding.message}", [finding])


def _check_host_range(x: torch.Tensor, dtype: torch.dtype, path: str) -> None:
    if x.numel() == 0:
        return
    info = torch.iinfo(dtype)
    array = x.detach().numpy()
    lo, hi = int(array.min()), int(array.max())
    if lo < info.min or hi > info.max:
        raise _range_error(path, lo if lo < info.min else hi, dtype)


def _narrow_on_host(x: torch.Tensor, dtype: torch.dtype, path: str, overflow: str = "error") -> torch.Tensor:
    """A 64-bit host tensor as `dtype`, on the host. Integers that do not fit raise
    (overflow 'error', always for inputs: x64guard never wraps them), or saturate or wrap
    as asked (constants the graph makes, like the core pass's constants)."""
    if x.dtype in _INTEGER_NARROW and x.numel() > 0:
        if overflow == "saturate":
            info = torch.iinfo(dtype)
            x = x.clamp(info.min, info.max)
        elif overflow != "wrap":
            _check_host_range(x, dtype, path)
    return x.detach().to(dtype)


def _narrow_on_device(x: torch.Tensor, dtype: torch.dtype, path: str, device: str,
                      checks: list | None = None) -> torch.Tensor:
    """Cast a 64-bit XLA tensor at the boundary, once per device buffer: a small graph of
    its own (convert, and for integers min/max for the range check), so that the
    narrowed program never sees a 64-bit type.

    With `checks`, the range check is left to the caller (`_verify`), which reads the
    bounds after it has dispatched the program, so that the two overlap; the caller
    raises before it returns anything."""
    alias = _narrow_alias(x)
    if alias is not None:     # an id tensor made by to_device: its int32 data, no device cast
        return alias
    pending = _xc.needs_materialization([x])[0]
    data = None if pending else _xc.data_id(x)
    if data is not None:
        cached = _BOUNDARY.get(x, data)
        if cached is not None:
            return cached
    checked = x.dtype in _INTEGER_NARROW and x.numel() > 0
    outputs = _boundary_program(tuple(x.shape), x.dtype, dtype, checked).run([x.detach()])
    _COUNTERS["boundary_casts"] += 1
    narrowed = outputs[0]
    if checked:
        check = (outputs[1], dtype, path, x, data, narrowed)
        if checks is None:
            _verify([check])
        else:
            checks.append(check)
        return narrowed
    if data is not None:
        _BOUNDARY.put(x, data, narrowed)
    return narrowed


_TORCH_TO_JAX = {torch.int64: "int64", torch.uint64: "uint64", torch.float64: "float64",
                 torch.complex128: "complex128", torch.int32: "int32", torch.uint32: "uint32",
                 torch.float32: "float32", torch.complex64: "complex64"}


@functools.lru_cache(maxsize=512)
def _boundary_program(shape: tuple, wide: torch.dtype, narrow: torch.dtype, checked: bool) -> "_Program":
    """The boundary cast as a compiled program of its own, run from torch-xla's cache
    (building and hashing a lazy graph for it on every call cost ~0.5 ms): the input
    converted, and for integers its min and max, for the range check."""
    import jax
    import jax.numpy as jnp

    from x64guard import _compat

    target = jnp.dtype(_TORCH_TO_JAX[narrow])

    def cast(v):
        if checked:
            return v.astype(target), jnp.stack([v.min(), v.max()])
        return (v.astype(target),)

    with _compat.x64_enabled():
        text = jax.jit(cast).lower(jax.ShapeDtypeStruct(shape, jnp.dtype(_TORCH_TO_JAX[wide]))).as_text()
    return _Program(text, [(shape, wide)], _device(), counted=False)


def _verify(checks: list) -> None:
    """The range checks of integer inputs cast on the device: one read of all bounds."""
    with _xc.own_compiles():   # (stacking the bounds is a small graph of x64guard's own)
        bounds = checks[0][0] if len(checks) == 1 else torch.stack([c[0] for c in checks])
        values = bounds.cpu().reshape(-1, 2).tolist()
    for (lo, hi), (_, dtype, path, x, data, narrowed) in zip(values, checks):
        info = torch.iinfo(dtype)
        if lo < info.min or hi > info.max:
            raise _range_error(path, int(lo if lo < info.min else hi), dtype)
    for _, _, _, x, data, narrowed in checks:
        if data is not None:
            _BOUNDARY.put(x, data, narrowed)


def _to_program_input(x, dtype: torch.dtype, path: str, device: torch.device, device_str: str,
                      checks: list | None = None) -> torch.Tensor:
    """One input as the narrowed program takes it: an XLA tensor of `dtype`."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x64guard.torch_xla: input {path}: expected a tensor, got {type(x).__name__}")
    if x.device.type == "xla":
        if x.dtype is dtype:
            return x
        if NARROW_DTYPE.get(x.dtype) is not dtype:
            raise TypeError(f"x64guard.torch_xla: input {path} is {x.dtype}, the narrowed program takes {dtype}")
        return _narrow_on_device(x, dtype, path, device_str, checks)
    # On the host: range-checked and cast there, so that only 32-bit data is transferred.
    if x.dtype is not dtype:
        if NARROW_DTYPE.get(x.dtype) is not dtype:
            raise TypeError(f"x64guard.torch_xla: input {path} is {x.dtype}, the narrowed program takes {dtype}")
        if x.dtype in _INTEGER_NARROW:
            _check_host_range(x, dtype, path)
        x = x.detach().to(dtype)
    return x.detach().to(device)


# ============================================================================ a narrowed program

_PROGRAM_IDS = itertools.count()


class _Program:
    """A narrowed StableHLO module as one op of torch-xla's lazy graph, compiled into
    torch-xla's computation cache and run from there (`_run_cached_graph`).

    `in_types` are the module's parameters in order (shape, dtype); `run` takes XLA
    tensors of exactly those types in that order.
    """

    def __init__(self, module_text: str, in_types: Sequence[tuple[tuple[int, ...], torch.dtype]],
                 device: torch.device, counted: bool = True, checks: OverflowChecks | None = None,
                 share_key: str | None = None):
        # int64 arithmetic checked at run time (x64guard/_torch_xla_overflow.py): the module's
        # last result holds one flag per check, read after each call
        self.checks = checks if checks else None
        self.in_types = [(tuple(shape), dtype) for shape, dtype in in_types]
        self.device = device
        self.device_str = str(device)
        built = []

        def build() -> _share.Compiled:
            name = f"x64guard_{next(_PROGRAM_IDS)}"
            compiled = _share.Compiled(name, _xc.computation_from_proto(name, _xc.stablehlo_to_hlo_proto(module_text)))
            self._compile(compiled)
            built.append(compiled)
            return compiled

        # a module identical to a live program's but for locations (`share_key`, x64guard/
        # _torch_xla_share.py): that program, compiled once
        self._compiled = _share.shared(share_key, build)
        if counted:
            _COUNTERS["programs" if built else "programs_shared"] += 1

    name = property(lambda self: self._compiled.name)
    order = property(lambda self: self._compiled.order)
    out_dtypes = property(lambda self: self._compiled.out_dtypes)
    hlo = property(lambda self: self._compiled.hlo)
    graph = property(lambda self: self._compiled.graph)

    def _compile(self, compiled: _share.Compiled) -> None:
        placeholders = [_xc.placeholder(shape, dtype) for shape, dtype in self.in_types]
        outputs = _xc.call_computation("xla::" + compiled.name, placeholders, compiled.computation)
        order_ids, _ = _xc.graph_inputs(outputs)
        index = {_xc.tensor_id(p): k for k, p in enumerate(placeholders)}
        compiled.order = [index[i] for i in order_ids]
        compiled.out_dtypes = [o.dtype for o in outputs]
        compiled.hlo = _xc.hlo_text(outputs)
        compiled.graph = _xc.graph_hash(outputs)
        _xc.warm_up(outputs)

    def run(self, ordered: list[torch.Tensor], before_checks: Callable[[], None] | None = None) -> list[torch.Tensor]:
        """Run on XLA tensors given in the graph's parameter order (`self.order[j]` is the
        module parameter that graph parameter j takes). `before_checks` runs after the
        program is dispatched and before its overflow flags are read (the range checks of
        its inputs: an input out of range is the first thing to report)."""
        pending = _xc.needs_materialization(ordered)
        if True in pending:  # lazy inputs: execute their own graphs first, as torch-xla's dynamo backend does
            _xc.materialize([t for t, p in zip(ordered, pending) if p], self.device_str)
        try:
            results = _xc.run_cached(self.graph, ordered)
        except RuntimeError as exc:  # evicted from torch-xla's computation cache: compile again
            if "cache" not in str(exc).lower() and "not found" not in str(exc).lower():
                raise
            self._compile(self._compiled)
            results = _xc.run_cached(self.graph, ordered)
        if before_checks is not None:
            before_checks()
        if self.checks is not None:
            _raise_on_overflow(self.checks, results.pop())
        return results


def _raise_on_overflow(checks: OverflowChecks, flags: torch.Tensor) -> None:
    """Raise, before any result is returned, when a checked int64 op of the program left
    int32's range on this call (eager PyTorch would have computed it at int64)."""
    with _xc.own_compiles():
        hit = flags.cpu().reshape(-1).tolist()
    if not any(hit):
        return
    places = [describe(checks.locations[k]) for k, flag in enumerate(hit) if flag]
    message = (f"int64 arithmetic at {places[0]}" + (f" (and {len(places) - 1} more place(s))" if len(places) > 1
                                                     else "") +
               " produced a value int32 cannot hold on this call; eager PyTorch computes it at int64, and the "
               "narrowed program would have wrapped. x64guard refuses rather than return a different answer. "
               "Keep the values in int32's range (a hash: reduce the operands modulo the table size first), "
               "compute this in a float dtype, or run the graph in 64 bits (mode='allow')")
    findings = [Finding("integer-overflow", Severity.ERROR, "arithmetic", place, message) for place in places[:1]]
    raise X64GuardError(f"x64guard.torch_xla: {message}", findings)


# ============================================================================ torch-xla's spelling

def _adapt_spelling(module) -> None:
    """torch-xla's StableHLO (HLO converted by XLA) spells HLO's `erf` as
    `stablehlo.custom_call @mhlo.erf`, which the core refuses as an unknown kernel with
    64-bit operands. It is CHLO's `erf`: written as `chlo.erf`, the core narrows it like
    any op and it expands for float32 when compiled (JAX's x32 erf). GELU needs it.
    Rewrites `module` in place."""
    from jax.extend.mlir import ir

    found: list = []
    folds: list = []

    def visit(op):
        if op.name == "stablehlo.custom_call" and "call_target_name" in op.attributes and \
                ir.StringAttr(op.attributes["call_target_name"]).value == "mhlo.erf" and len(op.operands) == 1:
            found.append(op)
        elif op.name == "stablehlo.compare":
            folds.append(op)
        return ir.WalkResult.ADVANCE

    with module.context:
        module.operation.walk(visit)
        for op in found:
            with ir.InsertionPoint(op), op.location:
                erf = ir.Operation.create("chlo.erf", results=[op.results[0].type], operands=[op.operands[0]])
            op.results[0].replace_all_uses_with(erf.results[0])
            op.erase()
        for op in folds:
            _fold_scalar_compare(op)


def _owner(value):
    owner = value.owner
    return owner.operation if hasattr(owner, "operation") else owner


def _fold_scalar_compare(op) -> None:
    """torch-xla compares a float32 tensor with a Python float (`torch.rand_like(x) < 0.9`,
    x64guard's dropout mask) in float64: the tensor converted to f64 against an f64 splat.
    Eager PyTorch compares in the tensor's dtype (a wrapped scalar takes it: measured,
    `float32(0.9) < 0.9` is False in eager, True in f64). The compare becomes the float32
    compare eager computes (the splat rounded as XLA's convert rounds it), so that a
    float32 model holds no 64-bit type and mode='error' does not refuse it."""
    from jax.extend.mlir import ir

    operands = list(op.operands)
    if len(operands) != 2 or str(ir.RankedTensorType(operands[0].type).element_type) != "f64":
        return
    narrowed = []
    for value in operands:
        source = _owner(value)
        name = getattr(source, "name", None)
        if name == "stablehlo.convert" and \
                str(ir.RankedTensorType(source.operands[0].type).element_type) == "f32":
            narrowed.append(source.operands[0])
        elif name == "stablehlo.constant":
            try:
                dense = ir.DenseFPElementsAttr(source.attributes["value"])
            except ValueError:
                return
            if not dense.is_splat:
                return
            narrowed.append(float(np.float32(dense.get_splat_value().value)))
        else:
            return
    if all(isinstance(v, float) for v in narrowed):
        return
    with ir.InsertionPoint(op), op.location:
        f32 = ir.RankedTensorType.get(ir.RankedTensorType(operands[0].type).shape, ir.F32Type.get())
        values = [v if not isinstance(v, float) else ir.Operation.create(
            "stablehlo.constant", results=[f32],
            attributes={"value": ir.DenseElementsAttr.get_splat(f32, ir.FloatAttr.get(ir.F32Type.get(), v))}).result
            for v in narrowed]
    for k, value in enumerate(values):
        old = _owner(op.operands[k])
        op.operands[k] = value
        if not list(old.results[0].uses):
            old.erase()


_MLIR_ELEMENT = {torch.bool: "i1", torch.int8: "i8", torch.uint8: "ui8", torch.int16: "i16", torch.int32: "i32",
                 torch.int64: "i64", torch.uint32: "ui32", torch.uint64: "ui64", torch.float16: "f16",
                 torch.bfloat16: "bf16", torch.float32: "f32", torch.float64: "f64", torch.complex64: "complex<f32>",
                 torch.complex128: "complex<f64>"}


def _match_result_dtypes(module, dtypes: Sequence[torch.dtype]) -> int:
    """Make each result of the main function the element type of the tensor it computes.

    torch-xla's lowering may compute a tensor in another element type than the tensor's
    own and convert when it is read: native_dropout's mask, a bool tensor, is lowered as
    float32 holding 0 and 1/(1-p). Returned as it is, the mask reaches AOTAutograd's
    backward graph as float32 and scales the gradient twice (openxla does exactly that:
    its dropout gradients are 1/(1-p) too large). Here the result is converted as
    torch-xla converts it on reading (to bool: `!= 0`). Returns how many results changed."""
    from jax.extend.mlir import ir

    main = next(op.operation for op in module.body.operations if op.operation.name == "func.func"
                and ir.StringAttr(op.operation.attributes["sym_name"]).value == "main")
    block = main.regions[0].blocks[0]
    terminator = block.operations[len(block.operations) - 1]
    changed = 0
    with module.context, terminator.location:
        for k, (value, dtype) in enumerate(zip(list(terminator.operands), dtypes)):
            want = _MLIR_ELEMENT.get(dtype)
            shaped = ir.RankedTensorType(value.type)
            if want is None or str(shaped.element_type) == want:
                continue
            target = ir.RankedTensorType.get(shaped.shape, ir.Type.parse(want))
            with ir.InsertionPoint(terminator):
                if dtype is torch.bool:
                    zero = ir.Operation.create("stablehlo.constant", results=[value.type], attributes={
                        "value": ir.DenseElementsAttr.get_splat(value.type, _zero_attr(shaped.element_type))})
                    converted = ir.Operation.create(
                        "stablehlo.compare", results=[target], operands=[value, zero.result],
                        attributes={"comparison_direction": ir.Attribute.parse("#stablehlo<comparison_direction NE>")})
                else:
                    converted = ir.Operation.create("stablehlo.convert", results=[target], operands=[value])
            terminator.operands[k] = converted.result
            changed += 1
        if changed:
            function_type = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
            results = [v.type for v in terminator.operands]
            main.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(function_type.inputs, results))
    return changed


def _zero_attr(element):
    from jax.extend.mlir import ir

    if isinstance(element, ir.IntegerType):
        return ir.IntegerAttr.get(element, 0)
    return ir.FloatAttr.get(element, 0.0)


# ============================================================================ refusals and failures

class TorchXlaFailure(RuntimeError):
    """torch-xla itself failed on a graph x64guard handed it (while tracing, lowering or
    compiling it). The message names x64guard's path and a workaround; torch-xla's own
    exception is the `__cause__`."""


_WORKAROUNDS = {
    "backend": "check that the model runs with torch-xla's own backend (torch.compile(model, backend='openxla')); "
               "if it does, please report this to x64guard; meanwhile keep the failing code out of the compiled "
               "function (torch._dynamo.disable)",
    "narrow_exported": "compile the model with torch.compile(model, backend='x64guard') instead (dynamo traces it "
                       "without torch.export's decompositions), or export it without the failing op",
    "sync": "run the step with torch.compile(step, backend='x64guard'), or let torch-xla run it (torch_xla.sync())",
}


@contextlib.contextmanager
def _torch_xla_failures(path: str, doing: str) -> Iterator[None]:
    """torch-xla's own exceptions, as one line that says which x64guard path met them
    and what to try (x64guard's refusals pass through)."""
    try:
        yield
    except (X64GuardError, TorchXlaFailure):
        raise
    except Exception as exc:  # noqa: BLE001 - re-raised with its cause
        lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
        first = lines[0] if lines else ""
        if len(first) > 240:
            first = first[:237] + "..."
        raise TorchXlaFailure(f"x64guard.torch_xla ({path}): torch-xla failed {doing} ({type(exc).__name__}: "
                              f"{first}). Workaround: {_WORKAROUNDS[path]}") from exc


def _rng_refusal(error: X64GuardError) -> X64GuardError:
    """The core's RNG findings, with what a torch-xla user can do."""
    return X64GuardError(
        "x64guard.torch_xla: this graph draws random numbers (torch.randn, torch.randint, dropout, ...); "
        "torch-xla generates them with rng_bit_generator, whose state is XLA's 2 x uint64 (x64guard passes it "
        "in as 32-bit words, computed on the host from torch-xla's seed), and this x64guard's core pass does not "
        "keep that state 64-bit; a 32-bit state would be a different generator, so x64guard refuses rather than "
        "return numbers of another stream. Draw them outside the compiled function (on the CPU, or eagerly) and "
        "pass them in, or keep this graph in 64 bits (mode='allow').\n" + str(error), error.findings)


# The target profile graphs are narrowed for (`target=` of the backend, compile and
# narrow_exported), set around their trace.
_TARGET = contextvars.ContextVar("x64guard_torch_xla_target", default="x32")


@contextlib.contextmanager
def _narrowing_for(target: str) -> Iterator[None]:
    token = _TARGET.set(target)
    try:
        yield
    finally:
        _TARGET.reset(token)


def _narrow_module(module, mode: Mode, overflow: str, sources: SourceMap | None) -> NarrowResult:
    """The core pass on torch-xla's module, findings placed at the model's lines."""
    try:
        # Its summary warning points at the user's line that made dynamo compile, not here.
        result = _user_line.call_at_user_line(narrow, (module,), dict(mode=mode, overflow=overflow,
                                                                      target=_TARGET.get()),
                                              _xc.excluded_source_dirs())
    except X64GuardError as exc:
        findings = locate_findings(exc.findings, sources)
        head = str(exc).split("\n", 1)[0]
        located = X64GuardError(head + ("\n" + format_findings(findings) if findings else ""), findings)
        if any(f.kind in ("rng-state", "rng-bits") for f in exc.findings):
            # Findings at the ops x64guard added to make the states are its own, not the user's.
            own = [f for f in findings if f.location.file == STATE_LOCATION]
            if own:
                findings = [f for f in findings if f not in own]
                located = X64GuardError(head + "\n" + format_findings(findings), findings)
            raise _rng_refusal(located) from exc
        raise located from exc
    result.findings = locate_findings(result.findings, sources)
    return result


def _refusal(kind: str, op: str, message: str) -> X64GuardError:
    finding = Finding(kind, Severity.ERROR, op, "the traced graph", message)
    return X64GuardError(f"x64guard.torch_xla: {message}", [finding])


class _TraceWatch:
    """Fails a trace that executed something: a torch-xla CPU fallback (an op it cannot
    lower) or a read of a value; either would bake first-call values into the program."""

    def __enter__(self):
        # Executions dispatched before the trace (earlier calls) finish asynchronously and
        # count when they finish: wait for them, so that the count moves only for the trace.
        _xc.wait_device_ops()
        self._executions = _xc.execution_count()
        self._fallbacks = _xc.fallback_counts()
        return self

    def __exit__(self, kind, value, traceback) -> None:
        if kind is not None:
            return
        fallbacks = sorted(name for name, n in _xc.fallback_counts().items() if n > self._fallbacks.get(name, 0))
        if fallbacks:
            raise _refusal("torch-xla-fallback", fallbacks[0],
                           f"torch-xla has no XLA lowering for {', '.join(fallbacks)}: it runs on the CPU while the "
                           "graph is traced, and its result would be frozen into the program. Move that op out of "
                           "the compiled function")
        _xc.wait_device_ops()
        if _xc.execution_count() != self._executions:
            raise _refusal("torch-xla-execution", "graph", "tracing the graph executed part of it on the device "
                           "(a value was read while tracing); its result would be frozen into the program. Move "
                           "data-dependent code out of the compiled function")


# ============================================================================ tracing

@dataclasses.dataclass
class _Source:
    """Where one parameter of the narrowed program comes from on each call."""

    kind: str            # "arg" (the graph's i-th input), "attr" (a tensor attribute of the graph), "const",
    #                      "rng" (the generators' states, from torch-xla's seed)
    index: int = -1
    name: str = ""
    value: Any = None    # "const": the narrowed constant, on the device; "rng": the RngStates
    path: str = ""


@dataclasses.dataclass
class _Specialization:
    """One traced, narrowed and compiled graph, and how to call it."""

    program: _Program | None       # None when the graph returns no tensor
    sources: list[_Source]
    dtypes: list[torch.dtype]       # what each program parameter takes
    out_spec: Any
    out_leaves: list[tuple[str, Any]]   # ("tensor", k) or ("value", v)
    result: NarrowResult | None     # the core's NarrowResult: .text, .findings, .changes
    stablehlo: str = ""             # torch-xla's StableHLO of the graph, before narrowing
    plan: list = dataclasses.field(default_factory=list)   # per graph parameter: (kind, payload, dtype, path)
    flat_tuple: bool = False        # the outputs are a flat tuple of the program's tensors, in order
    rng: RngStates | None = None    # the random-number generators' states, when the graph draws any

    def prepare(self) -> "_Specialization":
        """The steady-state form of `sources`: one tuple per parameter of the compiled
        graph, in the graph's order; and whether outputs need no unflattening."""
        order = self.program.order if self.program is not None else range(len(self.sources))
        kinds = {"arg": _ARG, "const": _CONST, "attr": _ATTR, "rng": _RNG}
        self.plan = []
        for k in order:
            source, dtype = self.sources[k], self.dtypes[k]
            payload = {"arg": source.index, "const": source.value, "attr": source.name,
                       "rng": source.value}[source.kind]
            self.plan.append((kinds[source.kind], payload, dtype, source.path))
        spec = self.out_spec
        self.flat_tuple = (spec is not None and spec.type is tuple and all(c.is_leaf() for c in spec.children_specs)
                           and [v for _, v in self.out_leaves] == list(range(len(self.out_leaves)))
                           and all(kind == "tensor" for kind, _ in self.out_leaves))
        return self


_ARG, _CONST, _ATTR, _RNG = 0, 1, 2, 3


_TRACE_LOCK = threading.RLock()   # torch-xla's tracing state (and its process-wide flags) is process-wide


def _trace(run: Callable[[list], Any], args: Sequence, paths: Sequence[str], attrs: dict[str, torch.Tensor],
           mode: Mode, overflow: str, device: torch.device, *, expected: Sequence | None = None,
           nodes: Sequence[torch.fx.Node] | None = None, path: str = "backend") -> _Specialization:
    with _TRACE_LOCK, _torch_xla_failures(path, "handling the graph's inputs or outputs"):
        # (torch-xla's own exceptions outside the trace and the lowering, e.g. its replacement
        # GRU's inputs that are no XLA tensors, come as TorchXlaFailure too)
        return _trace_locked(run, args, paths, attrs, mode, overflow, device, expected, nodes, path)


def _trace_locked(run: Callable[[list], Any], args: Sequence, paths: Sequence[str], attrs: dict[str, torch.Tensor],
                  mode: Mode, overflow: str, device: torch.device, expected: Sequence | None,
                  nodes: Sequence[torch.fx.Node] | None, path: str) -> _Specialization:
    """Trace `run(args)` with torch-xla at full width, narrow its StableHLO, compile it.

    Tensor inputs are traced on device data of their own: an XLA tensor on an alias of
    its buffer (a clone shares it, so writes during the trace stay on the clone); a host
    tensor transferred once, narrowed on the host first when it is 64-bit (the trace
    widens it again inside the graph, a convert the core pass removes), so that no 64-bit
    data reaches the device. `expected[i]`, the dtype the graph was traced for, widens an
    input that arrives narrowed (AOTAutograd's saved tensors are our own 32-bit outputs).
    Each parameter of the lowered module is then matched to its owner by device buffer: a
    graph input, a tensor attribute of the graph (read again on every call), a constant
    the graph created (narrowed once), or torch-xla's RNG seed (whose arithmetic is taken
    out of the program: x64guard/_torch_xla_rng.py). `nodes`, when the graph is run node
    by node from trampoline frames, places findings at the model's lines.
    """
    device_str = str(device)
    keep_wide = mode is Mode.ALLOW
    trace_args = list(args)
    owners: dict[str, tuple[str, Any]] = {}
    positions = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]

    def path_of(i: int) -> str:
        return paths[i] if i < len(paths) else f"input {i}"

    aliases = {i: _narrow_alias(args[i]) for i in positions if args[i].device.type == "xla"} if not keep_wide \
        else {}
    lazy = [args[i] for i in positions if args[i].device.type == "xla" and aliases.get(i) is None]
    if lazy:
        flags = _xc.needs_materialization(lazy)
        _xc.materialize([t for t, pending in zip(lazy, flags) if pending], device_str)
    bases: dict[int, torch.Tensor] = {}
    with _xc.device_data_transfers():
        for i in positions:
            a = args[i].detach()
            if aliases.get(i) is not None:
                base = aliases[i].clone()     # traced widened below, like a host input
            elif a.device.type == "xla":
                base = a.clone()
            elif not keep_wide and a.dtype in NARROW_DTYPE:
                base = _narrow_on_host(a, NARROW_DTYPE[a.dtype], path_of(i), overflow).to(device)
            else:
                base = a.to(device)
            bases[i] = base
            buffer = _xc.buffer_id(base)
            if buffer is not None:
                owners.setdefault(buffer, ("arg", i))
            want = a.dtype if a.device.type != "xla" or aliases.get(i) is not None else (
                expected[i] if expected and i < len(expected) else None)
            if want is not None and want is not base.dtype and NARROW_DTYPE.get(want) is base.dtype:
                trace_args[i] = base.to(want)     # a convert in the graph, removed by the core pass
            else:
                trace_args[i] = base
    for name, value in attrs.items():
        if value.device.type == "xla" and not _xc.needs_materialization([value])[0]:
            buffer = _xc.buffer_id(value)
            if buffer is not None:
                owners.setdefault(buffer, ("attr", name))
    before = {i: (_xc.data_id(bases[i]), _xc.data_id(trace_args[i])) for i in positions}

    _COUNTERS["traces"] += 1
    seed_before = _xc.rng_seed(device_str)
    try:
        with _torch_xla_failures(path, "tracing the graph"), torch.no_grad(), _xc.inline_scalars(), \
                _xc.python_frames_recorded(), _TorchXlaRepairs(narrow_transfers=None if keep_wide else overflow), \
                _TraceWatch():
            outputs = run(trace_args)
    finally:
        if _xc.rng_seed(device_str) != seed_before:   # the trace drew: leave the user's generator as it was
            _xc.set_rng_seed(seed_before, device_str)
    leaves, out_spec = pytree.tree_flatten(outputs)
    out_tensors: list[torch.Tensor] = []
    out_leaves: list[tuple[str, Any]] = []
    for position, leaf in enumerate(leaves):
        if isinstance(leaf, torch.Tensor):
            if leaf.device.type != "xla":
                # (a graph's CPU part runs on the CPU, x64guard/_torch_xla_mixed.py: this one's
                # nodes carried no device in their metadata, so it was not recognised)
                raise _refusal("cpu-output", "output", f"the graph returns a {leaf.device.type} tensor "
                               f"({_output_origin(nodes, position, leaf)}) that x64guard could not place in the "
                               "graph's CPU part. Make that tensor on the device (device=x.device), or keep the "
                               "code that makes it out of the compiled function")
            out_leaves.append(("tensor", len(out_tensors)))
            out_tensors.append(leaf)
        else:
            out_leaves.append(("value", leaf))
    mutated = [path_of(i) for i in positions
               if (_xc.data_id(bases[i]), _xc.data_id(trace_args[i])) != before[i]]
    if mutated:
        raise _refusal("input-mutation", "graph", f"the graph writes to {', '.join(mutated)} in place (a buffer "
                       "update, e.g. BatchNorm in training mode, or a cache); x64guard does not write narrowed "
                       "results back into 64-bit tensors. Call model.eval() or keep the update outside the graph")
    if not out_tensors:
        return _Specialization(None, [], [], out_spec, out_leaves, None).prepare()

    with _torch_xla_failures(path, "lowering the graph"), _xc.python_frames_recorded():  # (read when lowering too)
        bytecode = _xc.stablehlo_bytecode(out_tensors, device_str)
    ids, values = _xc.graph_inputs(out_tensors)
    module, text, seed_index, rng = _read_lowering(
        bytecode, ids, [t.dtype for t in out_tensors],
        ". Draw the random numbers outside the compiled function and pass them in")
    if seed_index is not None:
        if rng is None:
            raise _refusal("rng-state-source", "graph", "torch-xla's RNG seed is an input of this graph but feeds no "
                           "random-number generator; x64guard would freeze its value. Please report this")
        del ids[seed_index], values[seed_index]
    sources_map = SourceMap(nodes) if nodes is not None else None
    if sources_map is not None:
        sources_map.relocate(module)
    checks = guard(module) if not keep_wide else None
    result = _narrow_module(module, mode, overflow, sources_map)

    input_ids = {_xc.tensor_id(t) for i in positions for t in (args[i], bases[i], trace_args[i])
                 if t.device.type == "xla"}
    sources, dtypes, in_types = [], [], []
    for tensor_id, value in zip(ids, values):
        owner = owners.get(_xc.data_id(value))
        dtype = value.dtype if keep_wide else NARROW_DTYPE.get(value.dtype, value.dtype)
        if owner is None and tensor_id in input_ids:  # never freeze an input's value into the program
            raise _refusal("internal", "graph", "x64guard could not tell which input feeds a parameter of the "
                           "lowered graph; refusing rather than freezing its first value. Please report this")
        if owner is None:
            where = "a constant of the graph"
            source = _Source("const", value=_constant_input(value, dtype, where, device, overflow), path=where)
        elif owner[0] == "arg":
            source = _Source("arg", index=owner[1], path=path_of(owner[1]))
        else:
            source = _Source("attr", name=owner[1], path=owner[1])
        sources.append(source)
        dtypes.append(dtype)
        in_types.append((tuple(value.shape), dtype))
    if rng is not None:   # the module's last parameter: every generator's state, as int32 words
        sources.append(_Source("rng", value=rng, path="the random-number generators' states"))
        dtypes.append(torch.int32)
        in_types.append((rng.input_shape(), torch.int32))
    del outputs, leaves, out_tensors, values, trace_args, bases
    with _torch_xla_failures(path, "compiling the narrowed program"):
        program = _Program(result.text, in_types, device, checks=checks,
                           share_key=_share.fingerprint(result.module, in_types, device_str))
    return _Specialization(program, sources, dtypes, out_spec, out_leaves, result, text, rng=rng).prepare()


def _output_origin(nodes: Sequence[torch.fx.Node] | None, position: int, leaf: torch.Tensor) -> str:
    """Which output a graph returns and the model line that made it, for messages."""
    what = f"output {position}, {str(leaf.dtype).removeprefix('torch.')}{list(leaf.shape)}"
    output = next((node for node in (nodes or ()) if node.op == "output"), None)
    if output is None:
        return what
    made = pytree.tree_leaves(output.args[0]) if output.args else []
    node = made[position] if position < len(made) else None
    if not isinstance(node, torch.fx.Node):
        return what
    from x64guard._torch_xla_source import node_source

    source = node_source(node)
    return f"{what}, made at {source.describe()} by {source.target}"


def _constant_input(value: torch.Tensor, dtype: torch.dtype, where: str, device: torch.device,
                    overflow: str) -> torch.Tensor:
    """Device data the traced graph made itself, as the program takes it. torch-xla
    uploads some constants while it traces (the int64 index tables of its `as_strided`
    lowering, for one); a 64-bit one is read back once and narrowed on the host (with the
    overflow policy of constants), never cast by a 64-bit graph on the device."""
    if value.dtype is dtype:
        return value
    with _xc.device_data_transfers():
        return _narrow_on_host(value.cpu(), dtype, where, overflow).to(device)


def _rng_words(rng: RngStates, device: torch.device, device_str: str) -> torch.Tensor:
    """The generators' states for this call, from torch-xla's running seed (a host value),
    then the seed advanced as torch-xla's own dynamo bridge advances it after a call."""
    seed = _xc.rng_seed(device_str)
    words = torch.from_numpy(rng.words(seed)).to(device)
    _xc.set_rng_seed(openxla_next_seed(seed), device_str)
    return words


def _program_inputs(spec: _Specialization, args: Sequence, attr: Callable[[str], torch.Tensor] | None,
                    device: torch.device, device_str: str, checks: list) -> list[torch.Tensor]:
    """The program's inputs for one call, in the compiled graph's order. The steady state
    takes two fast paths: an XLA tensor already of the program's dtype goes through as
    it is, and a 64-bit XLA tensor whose narrowed copy is cached for its current device
    data (a parameter) costs one identity lookup."""
    inputs = []
    append = inputs.append
    entries = _BOUNDARY._entries
    data_id = _xc.data_id_function()
    for kind, payload, dtype, path in spec.plan:
        if kind == _CONST:
            append(payload)
            continue
        if kind == _RNG:
            append(_rng_words(payload, device, device_str))
            continue
        x = args[payload] if kind == _ARG else attr(payload)
        if isinstance(x, torch.Tensor) and x.is_xla:
            if x.dtype is dtype:
                append(x)
                continue
            entry = entries.get(id(x))
            if entry is not None and entry[0]() is x and entry[1] == data_id(x):
                append(entry[3])
                continue
        append(_to_program_input(x, dtype, path, device, device_str, checks))
    return inputs


def _outputs(spec: _Specialization, tensors: list[torch.Tensor]):
    if spec.flat_tuple:
        return tuple(tensors)
    leaves = [tensors[v] if kind == "tensor" else v for kind, v in spec.out_leaves]
    return pytree.tree_unflatten(leaves, spec.out_spec)


# ============================================================================ the dynamo backend

class _InferenceOnly(torch.autograd.Function):
    """Outputs of a graph compiled for inference, called with inputs that require grad
    (dynamo recompiles when grad mode or requires_grad change, so this is a safety net):
    their backward raises instead of silently giving no gradient."""

    @staticmethod
    def forward(ctx, anchor, *outputs):
        ctx.mark_non_differentiable(*[o for o in outputs if not (o.is_floating_point() or o.is_complex())])
        return tuple(o.detach() for o in outputs)

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError("x64guard.torch_xla: this graph was compiled for inference and cannot be differentiated; "
                           "call the compiled model with gradients enabled from the first call on")


def _placeholder_paths(gm: torch.fx.GraphModule) -> list[str]:
    """What to call each input in messages: dynamo's source (L['idx'],
    L['self']._modules['emb']._parameters['weight']) where known."""
    paths = []
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        source = getattr(node.meta.get("grapharg"), "source", None)
        try:
            paths.append(source.name() if source is not None else str(node.target))
        except Exception:  # noqa: BLE001 - a name is only for messages
            paths.append(str(node.target))
    return paths


def _placeholder_examples(gm: torch.fx.GraphModule) -> list:
    """Each input's example value: dynamo's `example_value`, AOTAutograd's `val`."""
    return [node.meta.get("example_value", node.meta.get("val")) for node in gm.graph.nodes
            if node.op == "placeholder"]


def _graph_attributes(gm: torch.fx.GraphModule) -> dict[str, torch.Tensor]:
    """Tensors the graph reads with get_attr (read again on every call, never frozen)."""
    found = {}
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            try:
                value = _get_attr(gm, str(node.target))
            except AttributeError:
                continue
            if isinstance(value, torch.Tensor):
                found[str(node.target)] = value
    return found


def _key_positions(gm: torch.fx.GraphModule, args: tuple) -> list[int]:
    """Which inputs the cache key must look at: every non-tensor input, and every tensor
    whose example value in the graph has a symbolic (or unknown) shape."""
    examples = _placeholder_examples(gm)
    positions = []
    for i, a in enumerate(args):
        if not isinstance(a, torch.Tensor):
            positions.append(i)
            continue
        example = examples[i] if i < len(examples) else None
        shape = getattr(example, "shape", None)
        if shape is None or len(shape) != a.dim() or not all(isinstance(d, int) for d in shape):
            positions.append(i)
    return positions


def _get_attr(gm: torch.fx.GraphModule, name: str) -> torch.Tensor:
    value = gm
    for part in name.split("."):
        value = getattr(value, part)
    return value


def _run_located(gm: torch.fx.GraphModule) -> tuple[Callable[[list], Any], list[torch.fx.Node]]:
    """A function running `gm` node by node, each node from its own trampoline frame
    (x64guard/_torch_xla_source.py), and the nodes in that order."""
    nodes = list(gm.graph.nodes)

    def run(args):
        interpreter = torch.fx.Interpreter(gm)
        run_node_by_node(interpreter, nodes)
        try:
            return interpreter.run(*args)
        finally:
            interpreter.env.clear()    # the trace's lazy tensors go now, not at the next collection

    return run, nodes


class _CompiledGraph:
    """What the backend runs for one FX graph (dynamo's, or one of AOTAutograd's forward
    and backward graphs): cached per input signature and mode; a call after the first
    with the same signature neither traces nor compiles.

    `role` says which graph it is ("graph", "forward", "backward", "inference");
    `paths`, what to call its inputs in messages (dynamo's sources by default)."""

    def __init__(self, gm: torch.fx.GraphModule, mode: Mode | None, overflow: str, *, role: str = "graph",
                 paths: Sequence[str] | None = None, target: str = "x32", findings: Sequence[Finding] = ()):
        self._gm = gm
        self._findings = list(findings)   # the graph's own (its CPU part's), before the narrowing's
        self._target = target
        self._mode = mode
        self._overflow = overflow
        self.role = role
        self._cache: dict[tuple, _Specialization] = {}
        self._lock = threading.Lock()
        self._paths = list(paths) if paths is not None else _placeholder_paths(gm)
        self._attr = functools.partial(_get_attr, gm)
        # The dtype each input was traced for: AOTAutograd's graphs may get our narrowed outputs.
        self._expected = [getattr(e, "dtype", None) for e in _placeholder_examples(gm)]
        self.device = _device()
        self._device_str = str(self.device)
        self._key_positions: list[int] | None = None
        self._arity = -1

    def __call__(self, *args):
        mode = self._mode or resolve_mode(None)
        if mode is Mode.ALLOW:  # full width, as torch-xla runs it (with its repairs)
            with _TorchXlaRepairs():
                return self._gm(*args)
        key = self._key(mode, args)
        spec = self._cache.get(key)
        if spec is None:
            with self._lock:
                spec = self._cache.get(key)
                if spec is None:
                    _outside.note_pending_inputs(args, self._paths, _is_alias)
                    run, nodes = _run_located(self._gm)
                    with _narrowing_for(self._target):
                        spec = _trace(run, args, self._paths, _graph_attributes(self._gm), mode, self._overflow,
                                      self.device, expected=self._expected, nodes=nodes, path="backend")
                        if spec.result is not None and self._findings:
                            spec.result.findings = self._findings + list(spec.result.findings)
                        self._cache[key] = spec
        if spec.program is None:
            return _outputs(spec, [])
        checks: list = []
        inputs = _program_inputs(spec, args, self._attr, self.device, self._device_str, checks)
        # integer inputs cast on the device: raise before returning anything
        tensors = spec.program.run(inputs, before_checks=functools.partial(_verify, checks) if checks else None)
        _COUNTERS["calls"] += 1
        if self.role == "graph" and torch.is_grad_enabled():
            anchor = next((a for a in args if isinstance(a, torch.Tensor) and a.requires_grad), None)
            if anchor is not None:
                tensors = list(_InferenceOnly.apply(anchor, *tensors))
        return _outputs(spec, tensors)

    def _key(self, mode: Mode, args: tuple) -> tuple:
        """The cache key: the mode, the values of non-tensor inputs (SymInts arrive as
        ints), and the shapes of the tensors whose shapes dynamo left symbolic (dynamo's
        guards already pin every tensor's dtype and device, and its static shapes); in
        AOTAutograd's graphs, also each tensor's dtype (a saved tensor may arrive narrowed)."""
        positions = self._key_positions
        if positions is None or len(args) != self._arity:
            positions = self._key_positions = _key_positions(self._gm, args)
            self._arity = len(args)
        key = (mode, *[a.shape if isinstance(a, torch.Tensor) else (type(a), a) for a in map(args.__getitem__,
                                                                                           positions)])
        if self.role != "graph":
            key += tuple(a.dtype for a in args if isinstance(a, torch.Tensor))
        return key

    def specializations(self) -> list[_Specialization]:
        """One per input signature and mode seen so far (`.program.hlo`, `.result`)."""
        return list(self._cache.values())


class _MixedDeviceGraph:
    """A graph with a CPU part (x64guard/_torch_xla_mixed.py): the CPU part runs eagerly
    on the CPU, the XLA part narrowed (`xla`, a _CompiledGraph taking the CPU values it
    uses as inputs); or, when the CPU part reads an XLA value, its refusal, raised on
    every call (mode allow runs the graph as torch-xla would)."""

    def __init__(self, gm: torch.fx.GraphModule, role: str, mode: Mode | None, part=None,
                 xla: _CompiledGraph | None = None, refusal: X64GuardError | None = None):
        self._gm, self.role, self._mode = gm, role, mode
        self._part, self.xla, self._refusal = part, xla, refusal
        self.findings = list(part.findings) if part is not None else list(refusal.findings)

    def __call__(self, *args):
        if self._refusal is not None:
            if (self._mode or resolve_mode(None)) is Mode.ALLOW:
                with _TorchXlaRepairs():
                    return self._gm(*args)
            raise self._refusal
        return self._part.run(self.xla, args)

    def specializations(self) -> list[_Specialization]:
        return self.xla.specializations() if self.xla is not None else []


def _graph_for(gm: torch.fx.GraphModule, mode: Mode | None, overflow: str, *, role: str = "graph",
               paths: Sequence[str] | None = None, target: str = "x32"):
    """What the backend runs for one FX graph: a _CompiledGraph, or, when the graph
    computes on the CPU too, a _MixedDeviceGraph around one (both registered)."""
    try:
        part = _torch_xla_mixed.split(gm)
    except X64GuardError as refusal:
        return _MixedDeviceGraph(gm, role, mode, refusal=refusal)
    if part is None:
        graph = _CompiledGraph(gm, mode, overflow, role=role, paths=paths, target=target)
        _register_graph(graph)
        return graph
    paths = list(paths if paths is not None else _placeholder_paths(gm)) + part.feed_paths
    xla = _CompiledGraph(part.xla_gm, mode, overflow, role=role, paths=paths, target=target, findings=part.findings)
    _register_graph(xla)
    return _MixedDeviceGraph(gm, role, mode, part, xla)


_COMPILED_GRAPHS: list[weakref.ref] = []   # in the order the backend compiled them


def _is_alias(x: torch.Tensor) -> bool:
    return _narrow_alias(x) is not None


def _register_graph(graph: _CompiledGraph) -> None:
    _COMPILED_GRAPHS[:] = [ref for ref in _COMPILED_GRAPHS if ref() is not None] + [weakref.ref(graph)]


_MUTATING_NAMES = frozenset({"setitem", "__setitem__", "set_", "copy_", "resize_", "index_put_"})


def _mutates(gm: torch.fx.GraphModule) -> bool:
    """Whether dynamo's graph may write to a tensor in place (an in-place method or
    function, `inplace=True`, item assignment). Conservative: a graph that mutates only
    its own intermediates also goes the AOTAutograd way, which handles both."""
    for node in gm.graph.nodes:
        if node.op not in ("call_method", "call_function"):
            continue
        name = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", "")
        if (name.endswith("_") and not name.endswith("__")) or name in _MUTATING_NAMES or \
                node.kwargs.get("inplace") is True:
            return True
    return False


def _autograd_backend(gm: torch.fx.GraphModule, example_inputs: Sequence, mode: Mode | None, overflow: str,
                      target: str = "x32"):
    """The graph through AOTAutograd, as torch-xla's own `openxla` backend goes (its
    forward, backward and inference graphs each narrowed like any graph): what training
    needs, and what applies in-place updates of inputs (optimizer steps, BatchNorm's
    running statistics) by writing the graph's results back into them."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    dynamo_paths = _placeholder_paths(gm)

    def paths_for(fx: torch.fx.GraphModule, role: str) -> list[str]:
        names = [str(node.target) for node in fx.graph.nodes if node.op == "placeholder"]
        out = []
        for name in names:
            if name.startswith("primals_") and name[8:].isdigit() and int(name[8:]) <= len(dynamo_paths):
                out.append(dynamo_paths[int(name[8:]) - 1])
            elif name.startswith("arg") and "_" in name and role == "inference":
                position = name[3:].split("_", 1)[0]
                out.append(dynamo_paths[int(position)] if position.isdigit() and int(position) < len(dynamo_paths)
                           else name)
            else:
                out.append(f"{name} (an input of the {role} graph)")
        return out

    def compiler(role: str):
        def compile_graph(fx: torch.fx.GraphModule, examples: Sequence):
            return make_boxed_func(_graph_for(fx, mode, overflow, role=role, paths=paths_for(fx, role),
                                              target=target))

        return compile_graph

    return aot_autograd(fw_compiler=compiler("forward"), bw_compiler=compiler("backward"),
                        inference_compiler=compiler("inference"))(gm, example_inputs)


def backend(gm: torch.fx.GraphModule, example_inputs: Sequence, *, mode: "Mode | str | None" = None,
            overflow: str = "error", options: dict | None = None, target: str = "x32") -> Callable:
    """The dynamo backend `x64guard`: `torch.compile(model, backend="x64guard")`.

    mode: allow (run the graph at full width, as torch-xla does), warn (narrow; one
    X64GuardWarning per graph), error (refuse any 64-bit use). None: the mode in force
    at each call (x64guard.mode / set_mode / $X64GUARD_MODE, else warn).
    `torch.compile(..., backend="x64guard", options={"mode": "error", "overflow": "saturate"})`
    passes them through torch.compile. target: the profile narrowed for (`x64guard.narrow`'s;
    "neuron-trn2" reports what neuronx-cc would still reject), an option too.

    Graphs that need gradients (an input requires grad and grad mode is on) or write to
    their inputs in place (an optimizer step) go through AOTAutograd, as torch-xla's
    `openxla` backend does; its forward and backward graphs are each narrowed. Other
    graphs run as dynamo captured them.
    """
    options = dict(options or {})
    mode = options.pop("mode", mode)
    overflow = options.pop("overflow", overflow)
    target = options.pop("target", target)
    if options:
        raise TypeError(f"x64guard backend: unknown option(s) {sorted(options)}; it takes 'mode', 'overflow' "
                        "and 'target'")
    _outside.arm()
    _outside.note_graph()
    resolved = None if mode is None else resolve_mode(mode)
    policy = resolve_overflow(overflow).value
    needs_grad = torch.is_grad_enabled() and any(isinstance(x, torch.Tensor) and x.requires_grad
                                                 for x in example_inputs)
    if needs_grad or _mutates(gm):
        return _autograd_backend(gm, example_inputs, resolved, policy, target)
    return _graph_for(gm, resolved, policy, target=target)


# dynamo's compile callbacks recognise frames compiled for it: RNN modules are traced there,
# and 64-bit work dynamo leaves outside the graphs is reported (_torch_xla_outside)
backend._x64guard_backend = True


def compile(model: Callable, *, mode: "Mode | str | None" = None, overflow: str = "error", target: str = "x32",
            **compile_kwargs):
    """`torch.compile(model, backend="x64guard")` with x64guard's mode and overflow policy:
    the graphs dynamo captures run narrowed on the XLA device.

    Extra keyword arguments go to torch.compile (`fullgraph=True`, `dynamic=...`).
    """
    resolved = None if mode is None else resolve_mode(mode)
    policy = resolve_overflow(overflow).value

    def x64guard_backend(gm, example_inputs, **kwargs):
        return backend(gm, example_inputs, mode=resolved, overflow=policy, target=target, **kwargs)

    x64guard_backend._x64guard_backend = True
    _outside.arm()

    compiled = torch.compile(model, backend=x64guard_backend, **compile_kwargs)

    @functools.wraps(model if not isinstance(model, torch.nn.Module) else model.forward)
    def with_rnns(*args, **kwargs):
        # dynamo does not trace nn.RNN/LSTM/GRU by default: it runs them eagerly, at full
        # width, narrowed by nobody (an LSTM tagger: 0 graphs). Traced, they are narrowed.
        with torch._dynamo.config.patch(allow_rnn=True):
            return compiled(*args, **kwargs)

    with_rnns.compiled = compiled
    return with_rnns


def compiled_graphs() -> list[_CompiledGraph]:
    """The live graphs the backend compiled (for inspection: `.specializations()`,
    each with its `.program.hlo` and narrowing `.result`)."""
    return [graph for graph in (ref() for ref in _COMPILED_GRAPHS) if graph is not None]


def _register_backend() -> None:
    """`torch.compile(..., backend="x64guard")` works without importing x64guard when
    x64guard is installed (entry point `torch_dynamo_backends`); from a source tree
    without the entry point, importing this module registers it."""
    import importlib.metadata

    from torch._dynamo.backends import registry

    try:
        names = importlib.metadata.entry_points(group="torch_dynamo_backends").names
    except Exception:  # noqa: BLE001
        names = ()
    if BACKEND_NAME in names or BACKEND_NAME in registry._COMPILER_FNS:
        return
    registry.register_backend(compiler_fn=backend, name=BACKEND_NAME)


_register_backend()
_outside.start_lazy_count()
_outside.arm()


# ============================================================================ exported programs

class NarrowedProgram:
    """What `narrow_exported` returns: callable like the exported program's module
    (its user inputs in, its output structure out), running the narrowed StableHLO on
    the XLA device. Inputs may be CPU or XLA tensors (64-bit ones are cast, integers
    range-checked); outputs are 32-bit XLA tensors (mode allow: full width)."""

    def __init__(self, spec: _Specialization, in_spec, examples: list, device: torch.device):
        self._spec = spec
        self._in_spec = in_spec
        self._n_inputs = len(examples)
        # What each user input must be: the program was traced for these shapes and dtypes.
        self._expected = [(tuple(e.shape), e.dtype) if isinstance(e, torch.Tensor) else None for e in examples]
        self._device = device
        self._device_str = str(device)

    @property
    def original_text(self) -> str:
        """torch-xla's StableHLO of the program, before narrowing."""
        return self._spec.stablehlo

    @property
    def result(self) -> NarrowResult | None:
        return self._spec.result

    @property
    def text(self) -> str:
        """The narrowed StableHLO module (text, with locations)."""
        return self._spec.result.text if self._spec.result is not None else ""

    @property
    def hlo(self) -> str:
        """The HLO torch-xla compiles and runs for each call."""
        return self._spec.program.hlo if self._spec.program is not None else ""

    @property
    def findings(self) -> list[Finding]:
        return self._spec.result.findings if self._spec.result is not None else []

    @property
    def changes(self) -> dict[str, int]:
        return self._spec.result.changes if self._spec.result is not None else {}

    def __call__(self, *args, **kwargs):
        flat = pytree.tree_flatten((args, kwargs))[0]
        if len(flat) != self._n_inputs:
            raise TypeError(f"x64guard.torch_xla: the exported program takes {self._n_inputs} input(s), got {len(flat)}")
        flat = [x if isinstance(x, torch.Tensor) else torch.as_tensor(x) for x in flat]
        for i, (x, expected) in enumerate(zip(flat, self._expected)):
            if expected is not None and (tuple(x.shape) != expected[0] or x.dtype not in (
                    expected[1], NARROW_DTYPE.get(expected[1], expected[1]))):
                raise ValueError(f"x64guard.torch_xla: input {i} is {x.dtype}{list(x.shape)}; the program was "
                                 f"exported and narrowed for {expected[1]}{list(expected[0])}")
        spec = self._spec
        if spec.program is None:
            return _outputs(spec, [])
        checks: list = []
        inputs = _program_inputs(spec, flat, None, self._device, self._device_str, checks)
        tensors = spec.program.run(inputs, before_checks=functools.partial(_verify, checks) if checks else None)
        _COUNTERS["calls"] += 1
        return _outputs(spec, tensors)


def narrow_exported(exported_program, *, mode: "Mode | str | None" = None, overflow: str = "error",
                    target: str = "x32") -> NarrowedProgram:
    """Narrow a `torch.export` program lowered by torch-xla, and return a callable that
    runs it on the XLA device (`.text`: the narrowed StableHLO; `.findings`, `.changes`).

    The program is decomposed as torch-xla's StableHLO export decomposes it, traced on
    the XLA device at full width (with its example inputs' shapes) and lowered, without
    serialization; its parameters, buffers and constants are narrowed once, on the host,
    and kept on the device. mode: allow (keep 64-bit types), warn (narrow, one
    X64GuardWarning), error (refuse any 64-bit use); default: x64guard's current mode.
    """
    from torch.export.graph_signature import InputKind

    resolved = resolve_mode(mode)
    policy = resolve_overflow(overflow).value
    with _torch_xla_failures("narrow_exported", "decomposing the exported program"):
        decomposed = _xc.decompose_exported(exported_program)   # functional: writes become outputs
    signature = decomposed.graph_signature
    mutated = list(signature.buffers_to_mutate.values()) + list(signature.user_inputs_to_mutate.values())
    if mutated:
        raise _refusal("input-mutation", "graph", f"the exported program writes to {', '.join(map(str, mutated))} "
                       "in place; x64guard does not write narrowed results back into 64-bit tensors. Export the "
                       "model in eval mode or without the in-place update")
    device = _device()
    state = {**decomposed.state_dict, **decomposed.constants}
    example_args, example_kwargs = decomposed.example_inputs or ((), {})
    user_inputs = pytree.tree_flatten((example_args, example_kwargs))[0]

    flat, paths, state_positions, user_positions = [], [], {}, {}
    for spec_in in decomposed.graph_signature.input_specs:
        if spec_in.kind == InputKind.USER_INPUT:
            user_positions[len(flat)] = len(user_positions)
            paths.append(f"input {len(user_positions) - 1} ({spec_in.arg.name})")
            flat.append(user_inputs[len(user_positions) - 1])
        elif spec_in.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
            value = state[spec_in.target]
            state_positions[len(flat)] = value
            paths.append(spec_in.target)
            flat.append(value.detach())
        else:
            raise _refusal("export-input", str(spec_in.kind), f"the exported program takes a {spec_in.kind.name} "
                           "input, which x64guard does not pass")

    graph_module = decomposed.graph_module
    nodes = list(graph_module.graph.nodes)

    def run(args):
        interpreter = _xc.export_interpreter(graph_module, device)
        run_node_by_node(interpreter, nodes)   # findings at the model's lines
        try:
            return interpreter.run(*args, enable_io_processing=False)
        finally:
            interpreter.env.clear()

    with _narrowing_for(target):
        spec = _trace(run, flat, paths, {}, resolved, policy, device, nodes=nodes, path="narrow_exported")
    # Parameters, buffers and constants are narrowed once, from the host copies.
    for k, source in enumerate(spec.sources):
        if source.kind == "arg":
            if source.index in state_positions:
                spec.sources[k] = _Source("const", value=_to_program_input(
                    state_positions[source.index], spec.dtypes[k], source.path, device, str(device)), path=source.path)
            else:
                source.index = user_positions[source.index]
    spec.out_spec = _exported_out_spec(exported_program, spec)
    spec.prepare()
    return NarrowedProgram(spec, exported_program.call_spec.in_spec, user_inputs, device)


def _exported_out_spec(exported_program, spec: _Specialization):
    """The program's own output structure (the graph returns a flat tuple)."""
    out_spec = exported_program.call_spec.out_spec
    if out_spec is None or out_spec.num_leaves != len(spec.out_leaves):
        return spec.out_spec
    return out_spec


# ============================================================================ moving data to the device

def to_device(obj: Any, device: "torch.device | str | None" = None):
    """`obj` on the XLA device with every 64-bit tensor narrowed on the host first, so
    that no 64-bit data reaches the device: int64 -> int32 and uint64 -> uint32 (range-
    checked on the host: a value that does not fit raises X64GuardError, never wraps),
    float64 -> float32, complex128 -> complex64; other tensors move as they are.

    `obj`: an `nn.Module` (a copy is returned, with its parameters and buffers moved and
    shared ones still shared; the module given is not changed), a tensor, or a dict,
    list or tuple of them (a Hugging Face `BatchEncoding` comes back as a dict). Tensors
    already on the device at 64 bits are read back and narrowed on the host.

        model = x64guard.torch_xla.to_device(model)       # float64 model -> float32 on xla
        batch = x64guard.torch_xla.to_device(tokenizer_output)
        compiled = torch.compile(model, backend="x64guard")
        compiled(**batch)
    """
    _outside.arm()   # what usually precedes torch.compile(..., backend="x64guard"), after any dynamo reset
    target = torch.device(device) if device is not None else _device()
    if isinstance(obj, torch.nn.Module):
        return _module_to_device(obj, target)
    if isinstance(obj, torch.Tensor):
        return _tensor_to_device(obj, target, "tensor")
    if isinstance(obj, dict) or (hasattr(obj, "keys") and hasattr(obj, "__getitem__") and not isinstance(obj, type)):
        return {k: _value_to_device(obj[k], target, str(k)) for k in obj.keys()}
    if isinstance(obj, (list, tuple)):
        moved = [_value_to_device(v, target, f"item {i}") for i, v in enumerate(obj)]
        return type(obj)(moved) if not hasattr(obj, "_fields") else type(obj)(*moved)
    raise TypeError(f"x64guard.torch_xla.to_device: expected a module, a tensor or a dict/list/tuple of tensors, "
                    f"got {type(obj).__name__}")


def _value_to_device(value: Any, target: torch.device, path: str):
    if isinstance(value, torch.Tensor):
        return _tensor_to_device(value, target, path)
    if isinstance(value, (dict, list, tuple)):
        return to_device(value, target)
    return value


def _tensor_to_device(x: torch.Tensor, target: torch.device, path: str, keep_integer_dtype: bool = True
                      ) -> torch.Tensor:
    x = x.detach()
    narrow = NARROW_DTYPE.get(x.dtype)
    if narrow is None:
        return x.to(target)
    wide = x.dtype
    if x.device.type != "cpu":
        x = x.cpu()   # already on a device at 64 bits: narrowed on the host, not by a 64-bit device graph
    with _xc.device_data_transfers():
        moved = _narrow_on_host(x, narrow, path).to(target)
    if not keep_integer_dtype or wide not in _INTEGER_NARROW:
        return moved
    # int64 data stays int64 as PyTorch sees it (one_hot, cross_entropy's targets, int64
    # arithmetic: eager's semantics), while XLA holds the int32 data: a pending convert
    # that x64guard's programs read through (_narrow_alias), never executed by them.
    widened = moved.to(wide)
    _BOUNDARY.put_alias(widened, _xc.data_id(widened), moved)
    return widened


def _module_to_device(module: torch.nn.Module, target: torch.device) -> torch.nn.Module:
    import copy

    memo: dict[int, Any] = {}
    for name, parameter in module.named_parameters(remove_duplicate=False):
        if id(parameter) not in memo:
            moved = _tensor_to_device(parameter, target, f"parameter {name}", keep_integer_dtype=False)
            memo[id(parameter)] = torch.nn.Parameter(moved, requires_grad=parameter.requires_grad)
    for name, buffer in module.named_buffers(remove_duplicate=False):
        if id(buffer) not in memo:
            memo[id(buffer)] = _tensor_to_device(buffer, target, f"buffer {name}", keep_integer_dtype=False)
    return copy.deepcopy(module, memo)


# ============================================================================ the lazy-tensor loop

@dataclasses.dataclass
class _LazyProgram:
    """A lazy graph (by torch-xla's graph hash) narrowed and compiled, for `sync`."""

    program: _Program
    dtypes: list[torch.dtype]          # per module parameter, what the program takes
    seed_index: int | None             # the position of torch-xla's seed among the graph's inputs
    rng: RngStates | None
    result: NarrowResult
    stablehlo: str


_LAZY_PROGRAMS: dict[tuple, _LazyProgram] = {}


def sync(*keep: Any, mode: "Mode | str | None" = None, overflow: str = "error") -> None:
    """Run the pending lazy computation of the tensors in `keep` narrowed, in place of
    `torch_xla.sync()` at the end of a lazy-tensor training step:

        model = x64guard.torch_xla.to_device(model)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for batch in batches:
            loss = model(**x64guard.torch_xla.to_device(batch)).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            x64guard.torch_xla.sync(model, optimizer, loss)

    torch-xla lowers and compiles its lazy graph inside `torch_xla.sync()` (C++
    `_xla_step_marker`) with no Python hook between the two, so x64guard cannot narrow
    the graph `torch_xla.sync()` runs. This is the closest equivalent: `keep` names what
    the step must compute (modules: parameters, their gradients, buffers; optimizers:
    their state; tensors; dicts, lists and tuples of these). Their joint pending graph is
    lowered, narrowed (once per graph: torch-xla's graph hash is the key), run as one
    program, and each tensor takes its result. Pending tensors not named in `keep` stay
    pending (torch-xla computes them, unnarrowed, when something reads them).

    Tensors named directly (a loss, a greedy token) come back narrowed, as the backend's
    outputs do (an int64 argmax becomes int32). Parameters, buffers and optimizer state
    must already be 32-bit (move models with `to_device`): a 64-bit one is refused, not
    narrowed behind the model's back.
    """
    _outside.check_lazy_reads()      # torch-xla's own compiles since the previous sync: said, never silent
    _outside.arm()
    resolved = resolve_mode(mode)
    policy = resolve_overflow(overflow).value
    device = _device()
    if keep:
        _sync_tensors(_pending_tensors(keep), resolved, policy, device)
        return
    # No arguments, the drop-in for torch_xla.sync(): every pending XLA tensor.
    _sync_refusing(_live_pending_tensors(young_only=True), resolved, policy, device)
    left = _left_pending(str(device))
    if left:    # something older than the last collections, or never seen: look everywhere
        _sync_refusing(_live_pending_tensors(young_only=False, wanted=set(left)), resolved, policy, device)
        left = _left_pending(str(device))
    if left:
        shapes = ", ".join(shape for shape in list(left.values())[:6]) + (", ..." if len(left) > 6 else "")
        finding = Finding("sync-pending", Severity.WARNING, "sync", "the lazy step",
                          f"{len(left)} XLA tensor(s) with pending computations ({shapes}) have no Python object "
                          "x64guard.torch_xla.sync can find (autograd's internals, a tensor held only by C++); "
                          "torch-xla will compute them at full width, unnarrowed, when they are read or at its own "
                          "next sync. Name what the step must keep: x64guard.torch_xla.sync(model, optimizer, loss)")
        import warnings

        warnings.warn(X64GuardWarning(f"x64guard.torch_xla.sync: {finding.message}"), stacklevel=2)


@contextlib.contextmanager
def step(*, mode: "Mode | str | None" = None, overflow: str = "error") -> Iterator[None]:
    """A lazy step whose mid-step reads run narrowed:

        for batch in batches:
            with x64guard.torch_xla.step():
                loss = model(**batch).loss     # Hugging Face's masks read `padding_mask.all()`
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
            x64guard.torch_xla.sync(model, optimizer, loss)

    A read of a pending XLA tensor (`.item()`, `bool(t)` / `if t:`, `int(t)`, `float(t)`,
    `.tolist()`, `.cpu()`, `.to("cpu")`, and `nonzero()`, whose shape needs the values) makes
    torch-xla compile and run that tensor's graph
    itself, at full width; inside `step()` x64guard runs it instead, narrowed as `sync`
    runs a step (once per graph, cached), and the read returns the narrowed value (an int64
    tensor's `.cpu()` is widened back to int64 on the host). The tensor keeps its dtype.
    Printing a pending tensor is not intercepted (torch-xla computes it; the next sync
    warns). Inside the scope torch-xla also records each op's Python stack, so that the
    findings of `sync` name the model's lines. The scope is a torch function mode: every
    torch op in it pays a small Python call; do not wrap compiled functions in it."""
    resolved, policy = (None if mode is None else resolve_mode(mode)), resolve_overflow(overflow).value
    # torch-xla records each op's Python stack meanwhile: findings of the step's graphs name its lines
    with _outside.NarrowedReads(functools.partial(_read_narrowed, mode=resolved, policy=policy)), \
            _xc.python_frames_recorded():
        yield


def _read_narrowed(tensor: torch.Tensor, *, mode: Mode | None, policy: str) -> torch.Tensor:
    """Run `tensor`'s pending graph narrowed; return its narrowed device data. A tensor
    narrowed to another dtype becomes a pending convert of that data (`_narrow_alias`),
    so that PyTorch still sees its dtype."""
    alias = _narrow_alias(tensor)
    if alias is not None:
        return alias
    resolved = mode or resolve_mode(None)
    wide = tensor.dtype
    _sync_tensors([("a tensor read in the step", tensor, False)], resolved, policy, _device())
    narrowed = tensor.detach()
    if narrowed.dtype is wide:
        return narrowed
    _xc.replace_data(tensor, narrowed.to(wide))
    _BOUNDARY.put_alias(tensor, _xc.data_id(tensor), narrowed)
    return narrowed


_REFUSED: dict[int, tuple] = {}   # tensors a no-argument sync refused (ref, data id): not taken again


def _sync_refusing(tensors: list[tuple[str, torch.Tensor, bool]], resolved: Mode, policy: str,
                   device: torch.device) -> None:
    """_sync_tensors for a sync without arguments: tensors it refused (an overflow, a
    64-bit parameter) stay pending, as torch-xla left them, and later syncs without
    arguments leave them alone instead of refusing again for an earlier step."""
    for key, (ref, _) in list(_REFUSED.items()):
        if ref() is None:
            _REFUSED.pop(key, None)
    tensors = [item for item in tensors if not _refused_before(item[1])]
    try:
        _sync_tensors(tensors, resolved, policy, device)
    except X64GuardError:
        for _, tensor, _ in tensors:
            _REFUSED[id(tensor)] = (weakref.ref(tensor), _xc.data_id(tensor))
        raise


def _refused_before(tensor: torch.Tensor) -> bool:
    """Whether `tensor` holds exactly the computation a sync without arguments refused."""
    entry = _REFUSED.get(id(tensor))
    return entry is not None and entry[0]() is tensor and entry[1] == _xc.data_id(tensor)


def _sync_tensors(tensors: list[tuple[str, torch.Tensor, bool]], resolved: Mode, policy: str,
                  device: torch.device) -> None:
    device_str = str(device)
    if not tensors:
        return
    wide = [f"{path} ({t.dtype})" for path, t, state in tensors if state and t.dtype in NARROW_DTYPE]
    if wide and resolved is not Mode.ALLOW:
        raise _refusal("sync-64bit-tensor", "sync", f"{', '.join(wide[:5])} would take a narrowed result in place; "
                       "x64guard does not narrow the parameters, buffers or optimizer state of a model behind its "
                       "back. Move the model and its inputs with x64guard.torch_xla.to_device")
    pending = [t for _, t, _ in tensors]
    key = (resolved, policy, _xc.graph_hash(pending))
    lazy = _LAZY_PROGRAMS.get(key)
    with _TRACE_LOCK:
        ids, values = _xc.graph_inputs(pending)
        if lazy is None:
            lazy = _LAZY_PROGRAMS[key] = _compile_lazy(pending, ids, values, resolved, policy, device)
        inputs = []
        for k, value in enumerate(values):
            if k == lazy.seed_index:
                continue
            dtype = lazy.dtypes[len(inputs)]
            inputs.append(value if value.dtype is dtype else _constant_input(value, dtype, "an input of the lazy "
                                                                             "graph", device, "error"))
        if lazy.rng is not None:
            inputs.append(_rng_words(lazy.rng, device, device_str))
        ordered = [inputs[k] for k in lazy.program.order]
        results = lazy.program.run(ordered)
    for tensor, result in zip(pending, results):
        _xc.replace_data(tensor, result)
    _COUNTERS["calls"] += 1


def _pending_tensors(keep: Sequence[Any]) -> list[tuple[str, torch.Tensor, bool]]:
    """The XLA tensors with pending IR among `keep` (each once): (a name for messages,
    the tensor, whether it is state of a module or an optimizer)."""
    found: dict[int, tuple[str, torch.Tensor, bool]] = {}

    def add(path: str, value: Any, state: bool = False) -> None:
        if isinstance(value, torch.Tensor):
            if value.device.type == "xla" and id(value) not in found:
                found[id(value)] = (path, value, state)
        elif isinstance(value, torch.nn.Module):
            for name, parameter in value.named_parameters():
                add(f"parameter {name}", parameter, True)
                if parameter.grad is not None:
                    add(f"gradient of {name}", parameter.grad, True)
            for name, buffer in value.named_buffers():
                add(f"buffer {name}", buffer, True)
        elif isinstance(value, torch.optim.Optimizer):
            for group in value.param_groups:
                for parameter in group["params"]:
                    add("an optimized parameter", parameter, True)
                    for name, state_value in value.state.get(parameter, {}).items():
                        add(f"optimizer state {name!r}", state_value, True)
        elif isinstance(value, dict):
            for k, v in value.items():
                add(str(k), v)
        elif isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                add(f"item {i}", v)

    for k, value in enumerate(keep):
        add(f"argument {k}", value)
    items = [item for item in found.values() if _narrow_alias(item[1]) is None]   # to_device's ids stay as they are
    flags = _xc.needs_materialization([t for _, t, _ in items]) if items else []
    return [item for item, pending in zip(items, flags) if pending]


_LONG_LIVED: dict[int, weakref.ref] = {}   # XLA tensors scans found, in the order first found


def _live_pending_tensors(young_only: bool, wanted: set[int] | None = None) -> list[tuple[str, torch.Tensor, bool]]:
    """Every live XLA tensor with pending IR that Python holds: the tensors scans found
    before (parameters, optimizer state: long-lived; first, in a stable order, so that
    each step lowers the same graph), those of the garbage
    collector's young generations (what the step made), and the gradients of parameters;
    with `young_only=False`, every object the collector tracks (slow: about 0.3 s with
    transformers loaded; done when torch-xla's report says something stayed pending).
    `wanted`: torch-xla tensor ids to look for."""
    import gc

    candidates: dict[int, torch.Tensor] = {}
    for key, ref in list(_LONG_LIVED.items()):
        tensor = ref()
        if tensor is None:
            _LONG_LIVED.pop(key, None)
        else:
            candidates[key] = tensor
    generations = (0, 1) if young_only else (None,)
    for generation in generations:
        objects = gc.get_objects() if generation is None else gc.get_objects(generation)
        for obj in objects:
            try:
                found = isinstance(obj, torch.Tensor) and obj.device.type == "xla" and id(obj) not in candidates
            except ReferenceError:  # a weakref.proxy whose referent died: the collector still lists it
                continue
            found = found and _xc.is_xla_tensor(obj)      # not a fake tensor dynamo's caches hold
            if found:
                candidates[id(obj)] = obj
                _LONG_LIVED[id(obj)] = weakref.ref(obj)   # seen once: found again when older
        del objects
    for tensor in list(candidates.values()):
        try:
            grad = tensor.grad if isinstance(tensor, torch.nn.Parameter) or tensor.is_leaf else None
        except RuntimeError:    # a no_grad view whose base changed in place: autograd refuses to say
            continue
        if isinstance(grad, torch.Tensor) and grad.device.type == "xla":
            candidates.setdefault(id(grad), grad)
    aliases = _alias_data_ids()
    tensors = []
    for t in candidates.values():
        if _narrow_alias(t) is not None:
            continue
        if _xc.data_id(t) in aliases:      # a copy of to_device's ids (dynamo's detached input): its convert too
            _ALIAS_COPIES[_xc.tensor_id(t)] = weakref.ref(t)
            continue
        tensors.append(t)
    if wanted is not None:
        tensors = [t for t in tensors if _xc.tensor_id(t) in wanted]
    if not tensors:
        return []
    flags = _xc.needs_materialization(tensors)
    # a tensor whose data cannot be replaced by a plain XLA tensor's is left pending (and
    # reported with the rest of what stayed pending) rather than failing the sync
    return [(_live_name(t), t, isinstance(t, torch.nn.Parameter)) for t, pending in zip(tensors, flags)
            if pending and _xc.takes_device_data(t)]


def _live_name(tensor: torch.Tensor) -> str:
    kind = "a parameter" if isinstance(tensor, torch.nn.Parameter) else "a tensor"
    return f"{kind} {str(tensor.dtype).removeprefix('torch.')}{list(tensor.shape)}"


_ALIAS_COPIES: dict[int, weakref.ref] = {}   # torch-xla tensor id -> a copy of to_device's ids a scan found


def _alias_data_ids() -> set[str]:
    """The pending converts to_device's live int64 ids hold (`data_id`)."""
    found = set()
    for entry in list(_BOUNDARY._entries.values()):
        tensor = entry[0]()
        if tensor is not None and entry[4] == _ID_TENSOR and entry[1] == _xc.data_id(tensor):
            found.add(entry[1])
    return found


def _left_pending(device: str) -> dict[int, str]:
    """torch-xla tensor id -> shape of every XLA tensor still pending, but to_device's ids
    (and the copies of them scans found)."""
    aliases = set()
    for entry in list(_BOUNDARY._entries.values()):
        tensor = entry[0]()
        if tensor is not None and entry[4] == _ID_TENSOR and entry[1] == _xc.data_id(tensor):
            aliases.add(_xc.tensor_id(tensor))
    for key, ref in list(_ALIAS_COPIES.items()):
        if ref() is None:
            _ALIAS_COPIES.pop(key, None)
        else:
            aliases.add(key)
    for ref, _ in list(_REFUSED.values()):
        tensor = ref()
        if tensor is not None and _refused_before(tensor):
            aliases.add(_xc.tensor_id(tensor))
    return {tensor_id: shape for tensor_id, shape in _xc.pending_tensor_report(device) if tensor_id not in aliases}


def _read_lowering(bytecode: bytes, ids: list, out_dtypes: list, advice: str = ""):
    """torch-xla's own lowering of a graph, read in this process and prepared for the pass:
    (module, its original text, the index of torch-xla's seed among the inputs or None, the
    generator states x64guard computes on the host or None)."""
    module, _ = xmlir.load(bytecode, trusted=True)
    text = xmlir.to_text(module)
    _adapt_spelling(module)
    _match_result_dtypes(module, out_dtypes)
    seed_id = _xc.seed_id()
    seed_index = ids.index(seed_id) if seed_id in ids else None
    try:
        rng = extract_rng_states(module, seed_index)
    except RngStateError as exc:
        raise _refusal("rng-state-source", exc.op, f"{exc}; x64guard computes torch-xla's generator states on the "
                       f"host and cannot here{advice}") from None
    return module, text, seed_index, rng


def _compile_lazy(pending: list[torch.Tensor], ids: list, values: list, mode: Mode, overflow: str,
                  device: torch.device) -> _LazyProgram:
    device_str = str(device)
    _COUNTERS["traces"] += 1
    # the Python lines torch-xla recorded for the step's ops (inside xt.step()) reach the locations
    with _torch_xla_failures("sync", "lowering the lazy graph"), _xc.python_frames_recorded():
        bytecode = _xc.stablehlo_bytecode(pending, device_str)
    module, text, seed_index, rng = _read_lowering(bytecode, ids, [t.dtype for t in pending])
    sources = StackSourceMap(_xc.excluded_source_dirs())
    sources.relocate(module)
    keep_wide = mode is Mode.ALLOW
    checks = guard(module) if not keep_wide else None
    result = _narrow_module(module, mode, overflow, sources)
    dtypes, in_types = [], []
    for k, value in enumerate(values):
        if k == seed_index:
            continue
        dtype = value.dtype if keep_wide else NARROW_DTYPE.get(value.dtype, value.dtype)
        dtypes.append(dtype)
        in_types.append((tuple(value.shape), dtype))
    if rng is not None:
        in_types.append((rng.input_shape(), torch.int32))
    with _torch_xla_failures("sync", "compiling the narrowed program"):
        program = _Program(result.text, in_types, device, checks=checks,
                           share_key=_share.fingerprint(result.module, in_types, device_str))
    return _LazyProgram(program, dtypes, seed_index, rng, result, text)
