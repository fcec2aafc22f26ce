"""The boundary: 64-bit tensors cast to 32 bits on their way into a narrowed program.
Integers are cast on the host, range-checked there, never wrapped: no program x64guard
compiles reads a 64-bit integer. Floats from the host are cast on the host; floats that
live on the device are cast there, by a small program of their own, once per device buffer."""

from __future__ import annotations

import dataclasses
import functools
import threading
import weakref
from typing import Any

import torch

from x64guard.errors import X64GuardError
from x64guard.findings import Finding, Kind, Severity
from x64guard.torch_xla import _private as _xc
from x64guard.torch_xla import outside as _outside
from x64guard.torch_xla import reads as _reads
from x64guard.torch_xla.base import COUNTERS, INTEGER_NARROW, JAX_DTYPE_NAME, NARROW_DTYPE, xla_device
from x64guard.torch_xla.live import LIVE
from x64guard.torch_xla.small_values import SMALL_VALUES, upload
from x64guard.torch_xla.program import Program


@dataclasses.dataclass(slots=True)
class _BoundaryEntry:
    """One narrowed copy in the boundary cache."""

    ref: weakref.ref            # the source tensor, weakly
    data: str                   # its device data's id as last seen (`_private.data_id`)
    alias: Any                  # a clone sharing the source's buffer (keeps both ids from reuse), or None
    narrowed: torch.Tensor      # the 32-bit copy programs take
    buffer: Any                 # the buffer's own id, or ID_TENSOR for to_device's int64 ids


class BoundaryCache:
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
        self.entries: dict[int, _BoundaryEntry] = {}   # by id(source)
        self._lock = threading.Lock()

    def get(self, x: torch.Tensor, data: str):
        entry = self.entries.get(id(x))
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
        self._store(x, data, None, narrowed, ID_TENSOR)

    def _store(self, x: torch.Tensor, data: str, alias, narrowed: torch.Tensor, buffer) -> None:
        key = id(x)
        entries = self.entries

        def forget(ref, key=key) -> None:
            current = entries.get(key)
            if current is not None and current.ref is ref:
                entries.pop(key, None)

        with self._lock:
            entries[key] = _BoundaryEntry(_xc.TensorRef(x, forget), data, alias, narrowed, buffer)

    def clear(self) -> None:
        with self._lock:
            self.entries.clear()

    def id_tensors(self) -> list[torch.Tensor]:
        """`to_device`'s live int64 tensors that still hold their pending convert."""
        found = []
        for entry in list(self.entries.values()):
            tensor = entry.ref()
            if tensor is not None and entry.buffer == ID_TENSOR and entry.data == _xc.data_id(tensor):
                found.append(tensor)
        return found

    def drop(self, x: torch.Tensor, entry: _BoundaryEntry) -> None:
        """Forget `x`'s entry if it is still `entry`."""
        with self._lock:
            if self.entries.get(id(x)) is entry:
                del self.entries[id(x)]


BOUNDARY = BoundaryCache()


def narrow_alias(x: torch.Tensor) -> torch.Tensor | None:
    """The int32 device data behind an int64 tensor `to_device` made (int64 as PyTorch
    sees it, a pending convert of int32 device data as XLA holds it), while the tensor
    still holds exactly that; else None."""
    entry = BOUNDARY.entries.get(id(x))
    if entry is None or entry.ref() is not x or entry.buffer != ID_TENSOR or entry.data != _xc.data_id(x):
        return None
    return entry.narrowed


ID_TENSOR = "to_device"   # the buffer-id slot of the BOUNDARY entries `to_device` makes


def held_over(wide: torch.Tensor, narrowed: torch.Tensor) -> torch.Tensor:
    """`wide`, whose pending IR widens `narrowed` (int64 as PyTorch sees it over int32
    device data), kept as every such tensor of x64guard's is (`to_device`'s ids, what a
    sync without arguments kept int64): x64guard's programs read `narrowed` through it
    (`narrow_alias`), and it is a GuardedTensor, so that its reads, and those of what is
    computed from it, run narrowed."""
    BOUNDARY.put_alias(wide, _xc.data_id(wide), narrowed)
    LIVE.keep([wide])
    return _reads.guarded(wide)


def widened_ids() -> list[str]:
    """The int64 tensors `to_device` made (a pending convert of int32 device data) that
    torch-xla has since computed itself and now holds as 64-bit device data: its own
    sync (`torch_xla.sync()`, `xm.mark_step()`) materialized the convert. Each is named
    once: its entry is dropped (x64guard's programs cast such a tensor on the host)."""
    found = []
    for entry in list(BOUNDARY.entries.values()):
        x = entry.ref()
        if x is not None and (name := _take_widened_id(x)) is not None:
            found.append(name)
    return found


def _take_widened_id(x: torch.Tensor) -> str | None:
    """`x`'s shape and dtype if it is one of `widened_ids`' tensors (its entry dropped); else None."""
    entry = BOUNDARY.entries.get(id(x))
    if entry is None or entry.ref() is not x or entry.buffer != ID_TENSOR or x.dtype not in INTEGER_NARROW \
            or entry.data == _xc.data_id(x) or _xc.needs_materialization([x])[0]:
        return None
    BOUNDARY.drop(x, entry)
    return f"{str(x.dtype).removeprefix('torch.')}{list(x.shape)}"


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


def narrow_on_host(x: torch.Tensor, dtype: torch.dtype, path: str, overflow: str = "error") -> torch.Tensor:
    """A 64-bit host tensor as `dtype`, on the host. Integers that do not fit raise
    (overflow 'error', always for inputs: x64guard never wraps them), or saturate or wrap
    as asked (constants the graph makes, like the core pass's constants)."""
    if x.dtype in INTEGER_NARROW and x.numel() > 0:
        if overflow == "saturate":
            info = torch.iinfo(dtype)
            x = x.clamp(info.min, info.max)
        elif overflow != "wrap":
            _check_host_range(x, dtype, path)
    return x.detach().to(dtype)


def narrow_through_host(x: torch.Tensor, dtype: torch.dtype, path: str, device: torch.device,
                        overflow: str = "error") -> torch.Tensor:
    """A 64-bit tensor (host, or device data read back) as `dtype` data on `device`,
    narrowed on the host (`narrow_on_host`: range-checked, or saturated or wrapped as
    asked), so that no 64-bit program runs on the device; a 0-dim value is sent as
    device data, never frozen into a graph as a constant."""
    return upload(narrow_on_host(x.detach().cpu(), dtype, path, overflow), device)


def _narrow_on_device(x: torch.Tensor, dtype: torch.dtype, path: str, device: str) -> torch.Tensor:
    """Cast a 64-bit XLA tensor at the boundary, once per device buffer, so that the
    narrowed program never sees a 64-bit type. An integer tensor is read back, checked
    and cast on the host and sent again: the range check needs the values on the host
    anyway, and no 64-bit integer program runs on the device (ids and indices, what
    int64 device data mostly is, are small). A float tensor (a float64 parameter, often
    large) is cast on the device by a program of its own."""
    alias = narrow_alias(x)
    if alias is not None:     # an id tensor made by to_device: its int32 data, no device cast
        return alias
    widened = _take_widened_id(x)
    if widened is not None:   # one torch-xla's own sync computed at 64 bits: said, then cast as any other
        _outside.check_widened_ids([widened])
    pending = _xc.needs_materialization([x])[0]
    data = None if pending else _xc.data_id(x)
    if data is not None:
        cached = BOUNDARY.get(x, data)
        if cached is not None:
            return cached
    if x.dtype in INTEGER_NARROW:
        if pending:   # torch-xla's own graph computes it first, as for any input of a program
            _xc.materialize([x], device)
        narrowed = narrow_through_host(x, dtype, path, x.device)
    else:
        narrowed = _boundary_program(tuple(x.shape), x.dtype, dtype).run([x.detach()])[0]
    COUNTERS["boundary_casts"] += 1
    if data is not None:
        BOUNDARY.put(x, data, narrowed)
    return narrowed


@functools.lru_cache(maxsize=512)
def _boundary_program(shape: tuple, wide: torch.dtype, narrow: torch.dtype) -> "Program":
    """The boundary cast of a float tensor as a compiled program of its own, run from
    torch-xla's cache (building and hashing a lazy graph for it on every call cost ~0.5 ms)."""
    import jax
    import jax.numpy as jnp

    target = jnp.dtype(JAX_DTYPE_NAME[narrow])

    def cast(v):
        return (v.astype(target),)

    with jax.enable_x64(True):  # this thread only, restored on exit
        text = jax.jit(cast).lower(jax.ShapeDtypeStruct(shape, jnp.dtype(JAX_DTYPE_NAME[wide]))).as_text()
    return Program(text, [(shape, wide)], xla_device(), counted=False)


def to_program_input(x, dtype: torch.dtype, path: str, device: torch.device, device_str: str) -> torch.Tensor:
    """One input as the narrowed program takes it: an XLA tensor of `dtype`."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x64guard.torch_xla: input {path}: expected a tensor, got {type(x).__name__}")
    if x.device.type == "xla":
        if x.dtype is dtype:
            return x
        if NARROW_DTYPE.get(x.dtype) is not dtype:
            raise TypeError(f"x64guard.torch_xla: input {path} is {x.dtype}, the narrowed program takes {dtype}")
        return _narrow_on_device(x, dtype, path, device_str)
    # On the host: range-checked and cast there, so that only 32-bit data is transferred.
    if x.dtype is not dtype:
        if NARROW_DTYPE.get(x.dtype) is not dtype:
            raise TypeError(f"x64guard.torch_xla: input {path} is {x.dtype}, the narrowed program takes {dtype}")
        if x.dtype in INTEGER_NARROW:
            _check_host_range(x, dtype, path)
        x = x.detach().to(dtype)
        if dtype is torch.int32:   # (ids and index tables made afresh each call: one copy per value)
            return SMALL_VALUES.device_copy(x, device)
    return x.detach().to(device)
