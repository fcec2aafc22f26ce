"""(5) Ops that require int64 or at least int32 index arguments get them widened, so that
indices made under a narrow default keep working."""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import torch
import torch.nn.functional as F

from x64guard.torch.bounds import NARROW_DTYPES
from x64guard.torch.calls import argument, both, call, with_argument
from x64guard.torch.indices import INDEX_RESULTS


def widen_rule(d: torch.dtype, func: Callable, args: tuple, kwargs: dict) -> Any:
    """Ops that require int64 (INT64_ARGUMENTS) or at least int32 (INT32_ARGUMENTS) index
    arguments get them, so that the narrow defaults keep working; values are unchanged."""
    if func in INT64_ARGUMENTS:
        places, target, accept = INT64_ARGUMENTS[func], torch.int64, NARROW_DTYPES
    else:
        places, target, accept = INT32_ARGUMENTS[func], torch.int32, _NARROW_INDEX_8_16
    for pos, name in places:  # Argument(position, keyword)
        value = argument(args, kwargs, pos, name)
        if isinstance(value, torch.Tensor):
            if value.dtype in accept:
                args, kwargs = with_argument(args, kwargs, pos, name, value.to(target))
        elif isinstance(value, (tuple, list)) and any(isinstance(v, torch.Tensor) and v.dtype in accept for v in value):
            widened = type(value)(v.to(target) if isinstance(v, torch.Tensor) and v.dtype in accept else v for v in value)
            args, kwargs = with_argument(args, kwargs, pos, name, widened)
    if func in INDEX_RESULTS:
        return INDEX_RESULTS[func].rule(d, func, args, kwargs)
    return call(func, args, kwargs)



class Argument(NamedTuple):
    """Where an index argument is: its position among the positional arguments, its keyword."""

    position: int
    keyword: str


# (5) ops PyTorch 2.9 refuses to run on int32 indices ("expected scalar type Long"): their
# index arguments (position, keyword) are converted to int64 first.
INT64_ARGUMENTS: dict[Callable, list[Argument]] = {
    F.one_hot: [Argument(0, "tensor")],
    F.nll_loss: [Argument(1, "target")],
    F.cross_entropy: [Argument(1, "target")],   # class indices; probability targets are floats
    F.multi_margin_loss: [Argument(1, "target")],
    F.multilabel_margin_loss: [Argument(1, "target")],
    F.max_unpool1d: [Argument(1, "indices")],
    F.max_unpool2d: [Argument(1, "indices")],
    F.max_unpool3d: [Argument(1, "indices")],
}
for _f in both("take", "put", "put_"):
    INT64_ARGUMENTS[_f] = [Argument(1, "index")]
for _f in both("take_along_dim"):
    INT64_ARGUMENTS[_f] = [Argument(1, "indices")]
for _f in both("index_copy", "index_copy_", "index_fill", "index_fill_"):
    INT64_ARGUMENTS[_f] = [Argument(2, "index")]

# Ops that take int32 or int64 indices but not int8/int16: widened to int32 under the
# int8 and int16 defaults (untouched under int32).
INT32_ARGUMENTS: dict[Callable, list[Argument]] = {
    F.embedding: [Argument(0, "input")],
    F.embedding_bag: [Argument(0, "input"), Argument(2, "offsets")],
    torch.Tensor.__getitem__: [Argument(1, "indices")],
    torch.Tensor.__setitem__: [Argument(1, "indices")],
}
for _f in both("gather", "scatter", "scatter_", "scatter_add", "scatter_add_", "scatter_reduce", "scatter_reduce_",
               "index_select", "index_add", "index_add_", "index_reduce", "index_reduce_"):
    INT32_ARGUMENTS[_f] = [Argument(2, "index")]
for _f in both("index_put", "index_put_"):
    INT32_ARGUMENTS[_f] = [Argument(1, "indices")]
for _f in both("repeat_interleave"):
    INT32_ARGUMENTS[_f] = [Argument(1, "repeats")]
_NARROW_INDEX_8_16 = frozenset({torch.int8, torch.int16})
