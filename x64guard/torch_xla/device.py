"""`to_device`: models and batches moved to the XLA device with every 64-bit tensor
narrowed on the host first."""

from __future__ import annotations

from typing import Any

import torch

from x64guard.torch_xla import outside as _outside
from x64guard.torch_xla.base import INTEGER_NARROW, NARROW_DTYPE, xla_device
from x64guard.torch_xla.boundary import held_over, narrow_through_host, widened_ids
from x64guard.torch_xla.live import LIVE


def to_device(obj: Any, device: "torch.device | str | None" = None):
    """`obj` on the XLA device with every 64-bit tensor narrowed on the host first, so
    that no 64-bit data reaches the device: int64 -> int32 and uint64 -> uint32 (range-
    checked on the host: a value that does not fit raises X64GuardError, never wraps),
    float64 -> float32, complex128 -> complex64; other tensors move as they are.

    `obj`: an `nn.Module` (a copy is returned, with its parameters and buffers moved and
    shared ones still shared; the module given is not changed), a tensor, or a dict,
    list or tuple of them (a Hugging Face `BatchEncoding` comes back as a dict). Tensors
    already on the device at 64 bits are read back and narrowed on the host.

    An int64 tensor stays int64 as PyTorch sees it (`one_hot`, `cross_entropy`'s targets)
    over int32 device data, and comes back as a `GuardedTensor`: the reads of what is
    computed from it in a lazy step (`if mask.all():`, `.item()`) run narrowed, with no
    `x64guard.torch_xla.step()` around the step::

        model = x64guard.torch_xla.to_device(model)       # float64 model -> float32 on xla
        batch = x64guard.torch_xla.to_device(tokenizer_output)
        compiled = torch.compile(model, backend="x64guard")
        compiled(**batch)
    """
    _outside.arm()   # what usually precedes torch.compile(..., backend="x64guard"), after any dynamo reset
    _outside.check_widened_ids(widened_ids())   # the previous step's ids, if torch-xla's own sync widened them
    return _moved(obj, torch.device(device) if device is not None else xla_device())


def _moved(obj: Any, target: torch.device):
    """`to_device`'s work on `obj` and, recursively, on what it holds."""
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
        return _moved(value, target)
    return value


def _tensor_to_device(x: torch.Tensor, target: torch.device, path: str, keep_integer_dtype: bool = True
                      ) -> torch.Tensor:
    x = x.detach()
    narrow = NARROW_DTYPE.get(x.dtype)
    if narrow is None:
        moved = x.to(target)
        LIVE.keep([moved])     # what a sync without arguments computes (live.py)
        return moved
    wide = x.dtype
    # already on a device at 64 bits: narrowed on the host, not by a 64-bit device graph
    moved = narrow_through_host(x, narrow, path, target)
    if not keep_integer_dtype or wide not in INTEGER_NARROW:
        LIVE.keep([moved])
        return moved
    # int64 data stays int64 as PyTorch sees it (one_hot, cross_entropy's targets, int64
    # arithmetic: eager's semantics), while XLA holds the int32 data: a pending convert
    # that x64guard's programs read through (narrow_alias), never executed by them.
    return held_over(moved.to(wide), moved)


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
    LIVE.keep(list(memo.values()))   # parameters and buffers: what a sync without arguments computes
    return copy.deepcopy(module, memo)
