"""Device copies of small integer host tensors, shared by value.

A training step hands x64guard the same few index values afresh on every call: the CPU
tensors a graph makes for `qkv[..., [-2], :]` (Falcon, by `aten.lift_fresh_copy`) and the
index tables torch-xla uploads for a lazy graph. Uploading each again cost a transfer and
a note per tensor per call. x64guard's copy is only ever a program's input, never written,
so one copy per value serves every call that holds those values.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import torch

from x64guard.torch_xla import _private as _xc
from x64guard.torch_xla.magnitudes import MAGNITUDES

SHARED_ELEMENTS = 64    # larger tensors are uploaded each time (their bytes would be the key)


class SmallValues:
    """By (dtype, shape, bytes, device), least recently used first, bounded: the device copy
    (its magnitude noted, magnitudes.py). One per process, as the device it holds data on."""

    limit = 256

    def __init__(self) -> None:
        self._copies: "OrderedDict[tuple, torch.Tensor]" = OrderedDict()
        self._lock = threading.Lock()

    def device_copy(self, host: torch.Tensor, device: torch.device) -> torch.Tensor:
        """`host` (an int32 tensor checked on the host, or any other narrowed host tensor) as
        device data: a shared copy when it is small, else a fresh upload."""
        if host.numel() > SHARED_ELEMENTS:
            return upload(host, device)
        key = (host.dtype, tuple(host.shape), host.numpy().tobytes(), str(device))
        with self._lock:
            copy = self._copies.get(key)
            if copy is not None:
                self._copies.move_to_end(key)
        if copy is not None:
            # its magnitude may have left MAGNITUDES' recent names since it was uploaded (a
            # long lazy loop notes many): unknown, the checks it settles would be read back
            if host.dtype is torch.int32 and MAGNITUDES.of(copy) is None:
                MAGNITUDES.note_host(copy, host)
            return copy
        copy = upload(host, device)
        with self._lock:
            self._copies[key] = copy
            while len(self._copies) > self.limit:
                self._copies.popitem(last=False)
        return copy


def upload(host: torch.Tensor, device: torch.device) -> torch.Tensor:
    """`host` as device data of its own (a 0-dim value too, never a graph constant); an
    int32 tensor, which x64guard narrowed and range-checked on the host, with its magnitude
    noted (magnitudes.py)."""
    with _xc.device_data_transfers():
        moved = host.to(device)
    return MAGNITUDES.note_host(moved, host) if host.dtype is torch.int32 else moved


SMALL_VALUES = SmallValues()
