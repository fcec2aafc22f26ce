"""The boundary: 64-bit tensors cast to 32 bits on their way into a narrowed program, on
the host when they come from the host, on the device (once per device buffer) when they
live there; integers range-checked, never wrapped."""

from __future__ import annotations

import dataclasses
import functools
import threading
import weakref
from typing import Any, NamedTuple

import torch

from x64guard.errors import X64GuardError
from x64guard.findings import Finding, Kind, Severity
from x64guard.torch_xla import _private as _xc
from x64guard.torch_xla.base import _COUNTERS, _INTEGER_NARROW, JAX_DTYPE_NAME, NARROW_DTYPE, _device
from x64guard.torch_xla.program import _Program


@dataclasses.dataclass(slots=True)
class _BoundaryEntry:
    """One narrowed copy in the boundary cache."""

    ref: weakref.ref            # the source tensor, weakly
    data: str                   # its device data's id as last seen (`_private.data_id`)
    alias: Any                  # a clone sharing the source's buffer (keeps both ids from reuse), or None
    narrowed: torch.Tensor      # the 32-bit copy programs take
    buffer: Any                 # the buffer's own id, or _ID_TENSOR for to_device's int64 ids


class _RangeCheck(NamedTuple):
    """An integer input cast on the device whose bounds are read after the program is
    dispatched (`_verify`)."""

    bounds: torch.Tensor        # [min, max] of the wide input, on the device
    dtype: torch.dtype          # what it was narrowed to
    path: str                   # the input's name, for messages
    source: torch.Tensor        # the wide input
    data: str | None            # its device data's id, None when it was pending
    narrowed: torch.Tensor


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
        self._entries: dict[int, _BoundaryEntry] = {}   # by id(source)
        self._lock = threading.Lock()

    def get(self, x: torch.Tensor, data: str):
        entry = self._entries.get(id(x))
        if entry is None or entry.ref() is not x:
            return None
        if entry.data == data:
            return entry.narrowed
        buffer = _xc.buffer_id(x)
        if buffer is not None and buffer == entry.buffer:
            entry.data = data           # the same buffer, named in its other form now
            return entry.narrowed
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
            if current is not None and current.ref is ref:
                entries.pop(key, None)

        with self._lock:
            entries[key] = _BoundaryEntry(weakref.ref(x, forget), data, alias, narrowed, buffer)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


_BOUNDARY = _BoundaryCache()


def _narrow_alias(x: torch.Tensor) -> torch.Tensor | None:
    """The int32 device data behind an int64 tensor `to_device` made (int64 as PyTorch
    sees it, a pending convert of int32 device data as XLA holds it), while the tensor
    still holds exactly that; else None."""
    entry = _BOUNDARY._entries.get(id(x))
    if entry is None or entry.ref() is not x or entry.buffer != _ID_TENSOR or entry.data != _xc.data_id(x):
        return None
    return entry.narrowed


_ID_TENSOR = "to_device"   # the buffer-id slot of the _BOUNDARY entries `to_device` makes


def _range_error(path: str, value: int, dtype: torch.dtype) -> X64GuardError:
    info = torch.iinfo(dtype)
    finding = Finding(Kind.INPUT_OUT_OF_RANGE, Severity.ERROR, "argument", path,
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
                      checks: list[_RangeCheck] | None = None) -> torch.Tensor:
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
        check = _RangeCheck(outputs[1], dtype, path, x, data, narrowed)
        if checks is None:
            _verify([check])
        else:
            checks.append(check)
        return narrowed
    if data is not None:
        _BOUNDARY.put(x, data, narrowed)
    return narrowed



@functools.lru_cache(maxsize=512)
def _boundary_program(shape: tuple, wide: torch.dtype, narrow: torch.dtype, checked: bool) -> "_Program":
    """The boundary cast as a compiled program of its own, run from torch-xla's cache
    (building and hashing a lazy graph for it on every call cost ~0.5 ms): the input
    converted, and for integers its min and max, for the range check."""
    import jax
    import jax.numpy as jnp

    from x64guard.jax import _private as jax_private

    target = jnp.dtype(JAX_DTYPE_NAME[narrow])

    def cast(v):
        if checked:
            return v.astype(target), jnp.stack([v.min(), v.max()])
        return (v.astype(target),)

    with jax_private.x64_enabled():
        text = jax.jit(cast).lower(jax.ShapeDtypeStruct(shape, jnp.dtype(JAX_DTYPE_NAME[wide]))).as_text()
    return _Program(text, [(shape, wide)], _device(), counted=False)


def _verify(checks: list[_RangeCheck]) -> None:
    """The range checks of integer inputs cast on the device: one read of all bounds."""
    with _xc.own_compiles():   # (stacking the bounds is a small graph of x64guard's own)
        bounds = checks[0].bounds if len(checks) == 1 else torch.stack([c.bounds for c in checks])
        values = bounds.cpu().reshape(-1, 2).tolist()
    for (lo, hi), check in zip(values, checks):
        info = torch.iinfo(check.dtype)
        if lo < info.min or hi > info.max:
            raise _range_error(check.path, int(lo if lo < info.min else hi), check.dtype)
    for check in checks:
        if check.data is not None:
            _BOUNDARY.put(check.source, check.data, check.narrowed)


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
