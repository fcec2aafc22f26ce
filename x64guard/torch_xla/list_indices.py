"""Python-list indices of an XLA tensor as shared 32-bit device tables.

`qkv[..., [-2], :]` (Falcon's multi-query split, on every step) makes torch-xla upload the
list as fresh int64 device data on every call. A lazy graph that takes it has x64guard read
it back to narrow it (constants.py): a transfer per step. Given the same list as an int32
tensor, torch-xla indexes the same elements (negative values wrap, out-of-range ones clamp,
as for the list) and the graph takes 32-bit data that x64guard shares by value
(small_values.py): nothing to read back, nothing to upload again.

Only an index whose advanced parts are all such lists is rewritten: torch-xla refuses to
mix int32 and int64 index tensors in one index ("Cannot concatenate arrays with different
element types"), so an index that also holds a tensor, a bool, a nested list or anything
else is left as it is.
"""

from __future__ import annotations

import torch

from x64guard.torch_xla.small_values import SHARED_ELEMENTS, SMALL_VALUES

_INT32_MIN, _INT32_MAX = -2 ** 31, 2 ** 31 - 1
# ops whose second argument is an index, as `Tensor.__getitem__`/`__setitem__` are called
INDEXING = frozenset({torch.Tensor.__getitem__, torch.Tensor.__setitem__})
_BASIC = (slice, type(Ellipsis), type(None))


def _int_list(part) -> bool:
    """A non-empty flat list of Python ints (no bools) that int32 holds, short enough to share."""
    if type(part) is not list or not 0 < len(part) <= SHARED_ELEMENTS:
        return False
    for value in part:
        if type(value) is not int or not _INT32_MIN <= value <= _INT32_MAX:
            return False
    return True


def _table(values: list, device: torch.device) -> torch.Tensor:
    return SMALL_VALUES.device_copy(torch.tensor(values, dtype=torch.int32), device)


def int32_index(index, device: torch.device):
    """`index` with each Python-list part an int32 device table on `device`, or None where
    it holds no such list or holds something that must stay as it is (the module says why)."""
    if _int_list(index):
        return _table(index, device)
    if type(index) is not tuple:
        return None
    rewritten, changed = [], False
    for part in index:
        if _int_list(part):
            rewritten.append(_table(part, device))
            changed = True
        elif isinstance(part, _BASIC) or type(part) is int:
            rewritten.append(part)
        else:
            return None
    return tuple(rewritten) if changed else None


def with_int32_index(args: tuple) -> tuple:
    """The arguments of an indexing op on an XLA tensor, its list index as int32 device tables
    (`int32_index`); the arguments as they are otherwise."""
    if len(args) < 2 or not isinstance(args[0], torch.Tensor) or not args[0].is_xla:
        return args
    index = int32_index(args[1], args[0].device)
    return args if index is None else (args[0], index, *args[2:])
