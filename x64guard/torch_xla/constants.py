"""64-bit device data a lazy graph takes (the small int64 index tables some of torch-xla's
lowerings upload, int64 data moved with `.to(device)`; sentinel scalars have their own rule,
lowering.scalar_input), narrowed on the host for every call of a lazy program: read back in
one transfer, not one per tensor, and a narrowed copy kept per device buffer, so that data
held across steps is read back once."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Sequence

import torch

from x64guard.torch_xla import _private as _xc
from x64guard.torch_xla.boundary import narrow_on_host
from x64guard.torch_xla.lowering import scalar_input
from x64guard.torch_xla.small_values import SMALL_VALUES

class NarrowedConstants:
    """Narrowed copies of 64-bit device data, by the data's identity (`_private.data_id`),
    least recently used first. Entries hold the device data they narrowed, so that its
    buffer, whose address is the key, cannot be freed and reused by other data while the
    entry lives. Bounded: the index tables torch-xla uploads afresh on every step pass
    through without piling up. One per process, as the device buffers it is keyed by."""

    limit = 256

    def __init__(self) -> None:
        self.entries: "OrderedDict[str, tuple[torch.Tensor, torch.Tensor]]" = OrderedDict()
        self._lock = threading.Lock()

    def narrowed(self, values: Sequence[torch.Tensor], dtypes: Sequence[torch.dtype], where: str,
                 device: torch.device) -> list[torch.Tensor]:
        """`values` (XLA device data) as `dtypes`: each 64-bit one narrowed on the host, range-
        checked (a value that does not fit raises, never wraps), then sent back as device data."""
        results: list = list(values)
        missing = []
        with self._lock:
            for k, (value, dtype) in enumerate(zip(values, dtypes)):
                if value.dtype is dtype:
                    continue
                key = _xc.data_id(value)
                entry = self.entries.get(key)
                if entry is not None and entry[1].dtype is dtype:
                    self.entries.move_to_end(key)
                    results[k] = entry[1]
                else:
                    missing.append((k, key, value, dtype))
        if not missing:
            return results
        hosted = _xc.cpu_tensors([value for _, _, value, _ in missing])
        narrowed = [SMALL_VALUES.device_copy(narrow_on_host(host, dtype, where), device)
                    for host, (_, _, _, dtype) in zip(hosted, missing)]
        self._store([(key, value, moved) for (k, key, value, _), moved in zip(missing, narrowed)])
        for (k, _, _, _), moved in zip(missing, narrowed):
            results[k] = moved
        return results

    def scalars(self, values: dict[int, torch.Tensor], dtypes: dict[int, torch.dtype], uses: dict,
                device: torch.device) -> dict[int, torch.Tensor]:
        """The lazy graph's 64-bit scalars (`lowering.scalar_input`: sentinels by their uses'
        rule), by position: those not seen before read back in one transfer. torch-xla keeps
        one device buffer per Python number it uploads, so a step's scalars are seen again."""
        results, missing = {}, []
        with self._lock:
            for k, value in values.items():
                key = (_xc.data_id(value), dtypes[k], uses[k].sentinels)
                entry = self.entries.get(key)
                if entry is not None:
                    self.entries.move_to_end(key)
                    results[k] = entry[1]
                else:
                    missing.append((k, key, value))
        if missing:
            hosted = _xc.cpu_tensors([value for _, _, value in missing])
            made = [(key, value, scalar_input(host, dtypes[k], uses[k], device))
                    for (k, key, value), host in zip(missing, hosted)]
            self._store(made)
            results.update((k, moved) for (k, _, _), (_, _, moved) in zip(missing, made))
        return results

    def _store(self, made: list) -> None:
        with self._lock:
            for key, value, moved in made:
                self.entries[key] = (value, moved)
            while len(self.entries) > self.limit:
                self.entries.popitem(last=False)


CONSTANTS = NarrowedConstants()
narrowed_constants = CONSTANTS.narrowed
narrowed_scalars = CONSTANTS.scalars
