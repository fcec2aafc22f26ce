"""The dtypes a default may be, their bounds, and the checks that refuse what does not fit."""

from __future__ import annotations

from typing import Any, Callable

import torch

from x64guard.errors import X64GuardError
from x64guard.torch.calls import display_name

ALLOWED_DTYPES = (torch.int8, torch.int16, torch.int32, torch.int64)
_BOUNDS = {d: (int(torch.iinfo(d).min), int(torch.iinfo(d).max)) for d in ALLOWED_DTYPES}
NARROW_DTYPES = frozenset({torch.int8, torch.int16, torch.int32})
INT32_MAX = _BOUNDS[torch.int32][1]
# Devices whose eager ops run at once: an int64 intermediate there is never seen by a
# compiler, so PyTorch's own (faster) index ops are used and their results converted.
_EAGER_DEVICES = frozenset({"cpu", "cuda", "mps"})


class DefaultIntOverflowError(X64GuardError, OverflowError):
    """A value, an index or a count cannot be held by the default integer dtype: x64guard
    refuses rather than wrap. An explicit `dtype=torch.int64` keeps 64 bits there."""


def _overflow(func: Callable, what: str, d: torch.dtype) -> DefaultIntOverflowError:
    lo, hi = _BOUNDS[d]
    return DefaultIntOverflowError(
        f"x64guard.torch: {display_name(func)}: {what} does not fit in the default integer dtype {d} "
        f"({lo}..{hi}); x64guard refuses rather than wrap. Pass dtype=torch.int64 to keep 64 bits "
        f"here, or run this code under x64guard.torch.default_int_dtype(torch.int64).")


def check_values(func: Callable, lo: Any, hi: Any, d: torch.dtype) -> None:
    """Raise unless the concrete values lo..hi fit d (symbolic ones are not checked)."""
    low, high = _BOUNDS[d]
    if type(lo) is int and lo < low:
        raise _overflow(func, f"the value {lo}", d)
    if type(hi) is int and hi > high:
        raise _overflow(func, f"the value {hi}", d)


def check_extent(func: Callable, n: Any, d: torch.dtype, what: str = "an index or count") -> None:
    """Indices below n and counts up to n must fit d: refuse a size above d's maximum."""
    if type(n) is int and n > _BOUNDS[d][1]:
        raise _overflow(func, f"{what} up to {n} (from the tensor's shape)", d)


def extent(x: torch.Tensor, dim: Any) -> Any:
    if dim is None:
        return x.numel()
    return x.size(dim) if x.dim() else 1


def reduced_extent(x: torch.Tensor, dim: Any) -> Any:
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return x.numel()
    if isinstance(dim, (list, tuple)):
        n = 1
        for k in dim:
            n = n * extent(x, k)
        return n
    return extent(x, dim)


def is_traced(x: torch.Tensor) -> bool:
    """True while torch.compile/torch.export trace, or for a device that builds graphs (XLA)."""
    if torch.compiler.is_compiling():
        return True
    return not (x.is_cpu or x.is_cuda) and x.device.type not in _EAGER_DEVICES
