"""`NarrowingDeviceLoader`: torch-xla's background batch upload (`ParallelLoader`, what
`MpDeviceLoader` wraps) with each batch narrowed on the host, in the loader thread, so that
fresh int64 batches reach the device as int32 data without a device readback per step."""

from __future__ import annotations

from typing import Any, Iterable, Iterator

import torch

from x64guard.errors import X64GuardError
from x64guard.torch_xla import _private as _xc
from x64guard.torch_xla.base import INTEGER_NARROW, NARROW_DTYPE, xla_device
from x64guard.torch_xla.boundary import narrow_on_host, held_over
from x64guard.torch_xla.magnitudes import MAGNITUDES, host_magnitude


class _Refusal:
    """What the loader thread hands on in place of a batch it could not narrow (a value out
    of range) or read (the data loader raised): raised again in the training thread.
    (Slots, no __dict__: torch-xla's upload passes such an object through untouched.)"""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


class _Layout:
    """A batch's structure without its tensors, each tensor's wide integer dtype (None if
    it was not a 64-bit integer) and the largest magnitude of its narrowed values (None if
    not an integer narrowed here): what the training thread rebuilds the batch from.
    torch-xla's upload walks only the flat list of tensors (it turns tuples into lists)."""

    __slots__ = ("spec", "wide", "magnitudes")

    def __init__(self, spec: Any, wide: list, magnitudes: list) -> None:
        self.spec, self.wide, self.magnitudes = spec, wide, magnitudes


def _flatten(obj: Any, path: str, leaves: list, paths: list) -> Any:
    """`obj`'s structure (dicts, lists, tuples, named tuples; a mapping such as Hugging
    Face's `BatchEncoding` becomes a dict, as with `to_device`), its tensors appended to
    `leaves` and their paths to `paths`."""
    if isinstance(obj, torch.Tensor):
        leaves.append(obj)
        paths.append(path)
        return _TENSOR
    if isinstance(obj, dict) or (hasattr(obj, "keys") and hasattr(obj, "__getitem__") and not isinstance(obj, type)):
        return (dict, [(k, _flatten(obj[k], f"{path}[{k!r}]", leaves, paths)) for k in obj.keys()])
    if isinstance(obj, (list, tuple)):
        return (type(obj), [_flatten(v, f"{path}[{i}]", leaves, paths) for i, v in enumerate(obj)])
    return (None, obj)


_TENSOR = "tensor"


def _rebuilt(spec: Any, leaves: Iterator) -> Any:
    """The batch `_flatten` described, its tensors taken from `leaves` in order."""
    if spec is _TENSOR:
        return next(leaves)
    kind, content = spec
    if kind is None:
        return content
    if kind is dict:
        return {k: _rebuilt(v, leaves) for k, v in content}
    items = [_rebuilt(v, leaves) for v in content]
    return kind(*items) if hasattr(kind, "_fields") else kind(items)


def _narrowed_batch(batch: Any, index: int) -> list:
    """[the batch's tensors, each 64-bit one narrowed on the host (integers range-checked,
    never wrapped), and its `_Layout`]."""
    leaves: list = []
    paths: list = []
    spec = _flatten(batch, f"batch {index}", leaves, paths)
    wide, narrowed, magnitudes = [], [], []
    for x, path in zip(leaves, paths):
        target = NARROW_DTYPE.get(x.dtype) if x.device.type == "cpu" else None
        integer = target is not None and x.dtype in INTEGER_NARROW
        wide.append(x.dtype if integer else None)
        narrowed.append(x if target is None else narrow_on_host(x, target, path))
        magnitudes.append(host_magnitude(narrowed[-1]) if integer and target is torch.int32 else None)
    return [narrowed, _Layout(spec, wide, magnitudes)]


class _NarrowingSource:
    """The data loader as ParallelLoader's loader thread iterates it: each batch narrowed
    there; a failure ends the stream as a `_Refusal`."""

    def __init__(self, loader: Iterable) -> None:
        self._loader = loader

    def __len__(self) -> int:
        return len(self._loader)

    def __iter__(self) -> Iterator:
        try:
            for index, batch in enumerate(self._loader):
                yield _narrowed_batch(batch, index)
        except Exception as error:   # noqa: BLE001 - handed to the training thread, raised there
            yield _Refusal(error)


class NarrowingDeviceLoader:
    """`torch_xla.distributed.parallel_loader.MpDeviceLoader`, narrowing: each batch of
    `loader` (a `DataLoader` or any iterable of tensors, dicts, lists, tuples) is narrowed on
    the host in torch-xla's loader thread, as `x64guard.torch_xla.to_device` narrows it
    (int64 -> int32 and uint64 -> uint32, range-checked: a value that does not fit raises
    X64GuardError naming the batch and key, never wraps; float64 -> float32, complex128 ->
    complex64), then uploaded by torch-xla's transfer threads. The training thread gets what
    `to_device` gives: an int64 tensor stays int64 as PyTorch sees it, over int32 device
    data, as a `GuardedTensor`. No 64-bit data reaches the device.

    Unlike `MpDeviceLoader`, fetching a batch does not call `torch_xla.sync()` (that would
    compute the previous batch's int64 views at 64 bits on the device): mark each step
    yourself, `x64guard.torch_xla.sync()` in the lazy loop or `torch_xla.sync()` after a
    compiled step. `kwargs` go to `ParallelLoader` (`loader_prefetch_size`, ...)::

        for batch in x64guard.torch_xla.NarrowingDeviceLoader(train_loader):
            loss = compiled(**batch).loss
            ...
    """

    def __init__(self, loader: Iterable, device: "torch.device | str | None" = None, **kwargs) -> None:
        self._loader = loader
        self._device = torch.device(device) if device is not None else xla_device()
        self._kwargs = kwargs
        self._parallel = None

    def __len__(self) -> int:
        return len(self._loader)

    def __iter__(self) -> Iterator:
        from torch_xla.distributed.parallel_loader import ParallelLoader

        self.close()
        self._parallel = ParallelLoader(_NarrowingSource(self._loader), [self._device], **self._kwargs)
        return self._batches(self._parallel)

    def close(self) -> None:
        """Stop the loader threads of the current pass (a new `iter()` does so too)."""
        if self._parallel is not None:
            self._parallel.close()
            self._parallel = None

    def _batches(self, parallel) -> Iterator:
        while True:
            item = parallel.next_item(self._device)
            if item is None:
                error = _xc.parallel_loader_error(parallel)
                if error is not None:
                    raise error
                return
            if isinstance(item, _Refusal):
                self.close()
                if isinstance(item.error, X64GuardError):
                    raise item.error
                raise RuntimeError("x64guard.torch_xla.NarrowingDeviceLoader: the data loader raised in its "
                                   f"thread: {item.error!r}") from item.error
            tensors, layout = item
            yield _widened(tensors, layout)


def _widened(tensors: list, layout: _Layout) -> Any:
    """The uploaded batch as `to_device` gives it: each integer tensor that was 64-bit is
    its int32 device data behind a pending widening convert (`held_over`)."""
    for x, magnitude in zip(tensors, layout.magnitudes):
        if magnitude is not None:
            MAGNITUDES.note(x, magnitude)
    moved = [x if dtype is None else held_over(x.to(dtype), x) for x, dtype in zip(tensors, layout.wide)]
    return _rebuilt(layout.spec, iter(moved))
