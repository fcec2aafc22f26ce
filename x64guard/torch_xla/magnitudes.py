"""The largest magnitude of the values in int32 device data that x64guard made itself from
values it range-checked on the host (ids moved with `to_device` or the narrowing loader,
int64 data the boundary cast, index constants and scalars of a lazy graph).

A narrowed program's overflow checks (x64guard/passes/overflow_checks.py) are read back
after each call, and that readback waits for the device. Where the range analysis proves a
check cannot fire for inputs as small as these (`overflow_settling`: `ids + vocab`, an
index constant plus a dimension), program.py does not read it: the step no longer waits.

An entry is valid while its tensor holds the very device data it was made with: torch-xla
names device data by its buffer, or by its IR node once it has one (an upload until a sync;
asking for its buffer gives it one), and gives any write a new name (`_private.data_id`), so
every name is kept and anything else reads as unknown.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import torch

from x64guard.torch_xla import _private as _xc


def host_magnitude(host: torch.Tensor) -> int:
    """max |value| of an integer host tensor (0 when empty)."""
    if host.numel() == 0:
        return 0
    array = host.detach().numpy()
    return max(abs(int(array.min())), abs(int(array.max())))


class KnownMagnitudes:
    """By the name of the device data (either of its two names): the largest magnitude of
    its values, and the tensor it was noted on. A lookup holds while that tensor still
    holds the data: the buffer then cannot have been freed and its name reused, and any
    tensor sharing it (the wrappers of a lazy graph's inputs) shares the magnitude.

    The `keep` most recently noted or read names are kept, each holding its tensor strongly
    (one of more than `strong_elements` elements weakly), so that data the caller dropped
    while a pending graph still reads it (`(to_device(ids) * 31) % 4093`, then `sync()`)
    keeps its magnitude for that sync; older names are forgotten (their data reads as
    unknown, and its checks are read). One per process, as the device data it describes."""

    keep = 256
    strong_elements = 1 << 16

    def __init__(self) -> None:
        self._by_name: "OrderedDict[str, tuple]" = OrderedDict()
        self._lock = threading.Lock()

    def note(self, device_tensor: torch.Tensor, magnitude: int) -> torch.Tensor:
        """Record that `device_tensor`, integer device data x64guard just uploaded, holds
        values of magnitude at most `magnitude`; returns it."""
        names = (_xc.data_id(device_tensor),)
        if not _xc.needs_materialization([device_tensor])[0]:
            # device data: its buffer's name too (of pending IR, buffer_id names an input's),
            # and the name it has after buffer_id gave it an IR node
            buffer = _xc.buffer_id(device_tensor)
            names = tuple(dict.fromkeys(names + (buffer, _xc.data_id(device_tensor)) if buffer is not None
                                        else names))
        by_name = self._by_name

        def forget(ref, names=names) -> None:
            for name in names:
                current = by_name.get(name)
                if current is not None and current[0] is ref:
                    by_name.pop(name, None)

        ref = _xc.TensorRef(device_tensor, forget)
        strong = device_tensor if device_tensor.numel() <= self.strong_elements else None
        entry = (ref, names, magnitude, strong)
        with self._lock:
            for name in names:
                by_name[name] = entry
                by_name.move_to_end(name)
            while len(by_name) > self.keep:
                by_name.popitem(last=False)
        return device_tensor

    def note_host(self, device_tensor: torch.Tensor, host: torch.Tensor) -> torch.Tensor:
        """`note` with the magnitude of `host`, the values `device_tensor` was uploaded from."""
        return self.note(device_tensor, host_magnitude(host))

    def of(self, tensor: torch.Tensor) -> "int | None":
        """The magnitude noted for the device data `tensor` holds, or None."""
        entry = self._by_name.get(_xc.data_id(tensor))
        if entry is None:
            return None
        noted = entry[3] if entry[3] is not None else entry[0]()
        if noted is None or (noted is not tensor and _xc.data_id(noted) not in entry[1]):
            return None
        with self._lock:      # least recently used goes first: data read on every step stays
            for name in entry[1]:
                if name in self._by_name:
                    self._by_name.move_to_end(name)
        return entry[2]


MAGNITUDES = KnownMagnitudes()
