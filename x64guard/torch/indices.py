"""(4) Ops whose results hold indices or counts (argmax, max(dim), sort, nonzero, unique,
max pooling, ...): the indices come out in the default integer dtype."""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import torch
import torch.nn.functional as F

from x64guard.torch.bounds import INT32_MAX, check_extent, check_values, extent, is_traced, reduced_extent
from x64guard.torch.calls import argument, both, call


def _to(t: torch.Tensor, d: torch.dtype) -> torch.Tensor:
    return t if t.dtype is d else t.to(d)


def _from_native(t: torch.Tensor, d: torch.dtype, xla_add: bool = False) -> torch.Tensor:
    """Convert the int64 indices a PyTorch op returned. While tracing, always with a copy:
    the fake (meta) implementations of some ops report their int64 outputs with the input's
    dtype (bincount and unique of int32 in torch 2.9), and a conversion that looks like a
    no-op would be dropped from the graph while the real kernel still returns int64."""
    if torch.compiler.is_compiling():
        return t.to(d, copy=True)
    if t.dtype is d:
        return t
    if xla_add and t.device.type == "xla":
        # torch-xla 2.9 holds cummax's and max pooling's int64 indices as s32 and fails
        # to lower a direct cast of them ("narrow_size <= size"); an add first lowers.
        t = t + 0
    return t.to(d)


def _arg_extreme(x: torch.Tensor, dim: Any, keepdim: bool, largest: bool) -> torch.Tensor:
    """argmax/argmin without int64: the first position holding the extreme (or a NaN, which
    PyTorch treats as the extreme), as int32."""
    if dim is None:
        flat = _arg_extreme(x.reshape(-1), 0, False, largest)
        return flat.reshape([1] * x.dim()) if keepdim else flat
    if x.dim() == 0:
        return torch.zeros((), dtype=torch.int32, device=x.device)
    dim = dim % x.dim()
    n = x.size(dim)
    best = torch.amax(x, dim, keepdim=True) if largest else torch.amin(x, dim, keepdim=True)
    hit = x == best
    if x.is_floating_point():
        hit = hit | torch.isnan(x)
    shape = [1] * x.dim()
    shape[dim] = n
    positions = torch.arange(n, dtype=torch.int32, device=x.device).reshape(shape)
    return torch.amin(torch.where(hit, positions, n), dim, keepdim=keepdim)


def _nonzero_coords(x: torch.Tensor) -> list[torch.Tensor]:
    """nonzero without int64: the flat int32 positions of the nonzero elements, unravelled."""
    mask = x if x.dtype is torch.bool else x != 0
    flat = torch.masked_select(torch.arange(x.numel(), dtype=torch.int32, device=x.device).reshape(x.shape), mask)
    coords = []
    stride = 1
    for size in reversed(x.shape):
        coords.append(torch.remainder(flat if stride == 1 else torch.div(flat, stride, rounding_mode="floor"), size))
        stride = stride * size
    coords.reverse()
    return coords


def _index_input(func: Callable, args: tuple, kwargs: dict) -> tuple[Any, Any]:
    """The tensor an index op reads, and its `dim` (INDEX_RESULTS' position and default)."""
    entry = INDEX_RESULTS[func]
    x = args[0] if args else kwargs.get("input")
    dim = entry.default_dim if entry.dim_position is None else \
        argument(args, kwargs, entry.dim_position, "dim", entry.default_dim)
    return x, dim


def _arg_index(d: torch.dtype, func: Callable, args: tuple, kwargs: dict) -> Any:
    """argmax/argmin: the whole result is an index."""
    x, dim = _index_input(func, args, kwargs)
    if kwargs.get("out") is not None or not isinstance(x, torch.Tensor):
        return call(func, args, kwargs)
    check_extent(func, extent(x, dim), d)
    if is_traced(x) and x.dtype is not torch.bool and not x.is_complex():
        keepdim = bool(argument(args, kwargs, 2, "keepdim", False))
        return _to(_arg_extreme(x, dim, keepdim, func in _LARGEST), d)
    return _from_native(call(func, args, kwargs), d)


def _extreme(d: torch.dtype, func: Callable, args: tuple, kwargs: dict) -> Any:
    """max/min(x, dim) -> (values, indices); max(x) and max(x, y) have no indices."""
    x, dim = _index_input(func, args, kwargs)
    if type(dim) is not int or kwargs.get("out") is not None or not isinstance(x, torch.Tensor):
        return call(func, args, kwargs)
    check_extent(func, extent(x, dim), d)
    if is_traced(x) and x.dtype is not torch.bool and not x.is_complex() and x.dim() > 0:
        keepdim = bool(argument(args, kwargs, 2, "keepdim", False))
        index = _arg_extreme(x, dim, True, func in _LARGEST)
        values = torch.gather(x, dim, index)  # the gradient reaches the chosen element only
        if not keepdim:
            values, index = values.squeeze(dim), index.squeeze(dim)
        result_type = torch.return_types.max if func in _LARGEST else torch.return_types.min
        return result_type((values, _to(index, d)))
    result = call(func, args, kwargs)
    return type(result)((result[0], _from_native(result[1], d)))


def nonzero_rule(d: torch.dtype, func: Callable, args: tuple, kwargs: dict) -> Any:
    """nonzero/argwhere/where(cond): coordinates, an (n, ndim) tensor or a tuple."""
    x = args[0] if args else kwargs.get("input", kwargs.get("condition"))
    if kwargs.get("out") is not None or not isinstance(x, torch.Tensor):
        return call(func, args, kwargs)
    as_tuple = func is torch.where or bool(kwargs.get("as_tuple", False))
    check_extent(func, max(x.shape) if x.dim() else 1, d)
    if is_traced(x) and x.dim() > 0 and type(x.numel()) is int and 0 < x.numel() <= INT32_MAX:
        coords = _nonzero_coords(x)
        if as_tuple:
            return tuple(_to(c, d) for c in coords)
        return _to(torch.stack(coords, 1), d)
    result = call(func, args, kwargs)
    if isinstance(result, tuple):
        return tuple(_from_native(c, d) for c in result)
    return _from_native(result, d)


def _nonzero_static(d: torch.dtype, func: Callable, args: tuple, kwargs: dict) -> Any:
    """nonzero_static(x, size=, fill_value=-1): coordinates padded to a fixed size."""
    x = args[0] if args else kwargs.get("input")
    result = call(func, args, kwargs)
    if kwargs.get("out") is not None:
        return result
    check_extent(func, max(x.shape) if x.dim() else 1, d)
    check_values(func, kwargs.get("fill_value", -1), kwargs.get("fill_value", -1), d)
    return _from_native(result, d)


def _count(d: torch.dtype, func: Callable, args: tuple, kwargs: dict) -> Any:
    """count_nonzero: a count over the reduced dims."""
    x, dim = _index_input(func, args, kwargs)
    check_extent(func, reduced_extent(x, dim), d, "a count")
    if is_traced(x):
        mask = x != 0
        return mask.sum(dtype=d) if dim is None else mask.sum(dim, dtype=d)
    return _from_native(call(func, args, kwargs), d)


def _search(d: torch.dtype, func: Callable, args: tuple, kwargs: dict) -> Any:
    """searchsorted(sorted, values)/bucketize(values, boundaries): PyTorch makes int32 itself."""
    if kwargs.get("out") is not None or "out_int32" in kwargs:
        return call(func, args, kwargs)
    boundaries = argument(args, kwargs, 0, "sorted_sequence") if func is torch.searchsorted else \
        argument(args, kwargs, 1, "boundaries")
    if isinstance(boundaries, torch.Tensor):
        check_extent(func, extent(boundaries, -1), d)
    return _from_native(func(*args, **{**kwargs, "out_int32": True}), d)


def _values_indices(d: torch.dtype, func: Callable, args: tuple, kwargs: dict) -> Any:
    """sort, topk, kthvalue, mode, median/nanmedian(dim), cummax/cummin: (values, indices)."""
    x, dim = _index_input(func, args, kwargs)
    result = call(func, args, kwargs)
    if not isinstance(result, tuple) or kwargs.get("out") is not None:
        return result  # median(x), nanmedian(x): values only
    check_extent(func, extent(x, dim), d)
    return type(result)((result[0], _from_native(result[1], d, xla_add=func in _XLA_ADD)))


def _indices(d: torch.dtype, func: Callable, args: tuple, kwargs: dict) -> Any:
    """argsort, multinomial: the whole result is an index."""
    x, dim = _index_input(func, args, kwargs)
    result = call(func, args, kwargs)
    if kwargs.get("out") is not None:
        return result
    check_extent(func, extent(x, dim), d)
    return _from_native(result, d)


def _unique(d: torch.dtype, func: Callable, args: tuple, kwargs: dict) -> Any:
    """unique/unique_consecutive: (values, [inverse], [counts])."""
    x, dim = _index_input(func, args, kwargs)
    result = call(func, args, kwargs)
    if not isinstance(result, tuple):
        return result
    check_extent(func, extent(x, dim), d)
    return (result[0],) + tuple(_from_native(t, d) for t in result[1:])


def _pool(d: torch.dtype, func: Callable, args: tuple, kwargs: dict) -> Any:
    """max pooling with return_indices=True: (values, indices into the spatial plane)."""
    x, rank = _index_input(func, args, kwargs)
    result = call(func, args, kwargs)
    if not isinstance(result, tuple):
        return result
    n = 1
    for size in x.shape[x.dim() - rank:]:
        n = n * size
    check_extent(func, n, d)
    return (result[0], _from_native(result[1], d, xla_add=True))


def _bincount(d: torch.dtype, func: Callable, args: tuple, kwargs: dict) -> Any:
    """bincount without weights: counts (with weights, the weights' dtype)."""
    x = args[0] if args else kwargs.get("input")
    result = call(func, args, kwargs)
    if argument(args, kwargs, 1, "weights") is not None:
        return result
    check_extent(func, x.numel(), d, "a count")
    return _from_native(result, d)


def _unravel(d: torch.dtype, func: Callable, args: tuple, kwargs: dict) -> Any:
    """unravel_index: one coordinate tensor per dimension of `shape`."""
    shape = argument(args, kwargs, 1, "shape")
    result = call(func, args, kwargs)
    sizes = shape if isinstance(shape, (tuple, list)) else (shape,)
    check_extent(func, max(sizes) if sizes else 1, d)
    return tuple(_from_native(t, d) for t in result)


def _one_hot(d: torch.dtype, func: Callable, args: tuple, kwargs: dict) -> Any:
    """one_hot: an integer tensor of 0 and 1."""
    return _from_native(call(func, args, kwargs), d)


class IndexResult(NamedTuple):
    """How an op whose result holds indices is handled."""

    rule: Callable                # (dtype, func, args, kwargs) -> the result, indices in dtype
    dim_position: int | None      # where `dim` is among the positional arguments, or None
    default_dim: Any              # `dim` when not given; for max pooling, the spatial rank


# (4) function -> its IndexResult.
INDEX_RESULTS: dict[Callable, IndexResult] = {}
for _f in both("argmax", "argmin"):
    INDEX_RESULTS[_f] = IndexResult(_arg_index, 1, None)
for _f in both("max", "min"):
    INDEX_RESULTS[_f] = IndexResult(_extreme, 1, None)
for _f in both("sort", "mode"):
    INDEX_RESULTS[_f] = IndexResult(_values_indices, 1, -1)
for _f in both("median", "nanmedian", "cummax", "cummin"):
    INDEX_RESULTS[_f] = IndexResult(_values_indices, 1, None)
for _f in both("topk", "kthvalue"):
    INDEX_RESULTS[_f] = IndexResult(_values_indices, 2, -1)
for _f in both("argsort"):
    INDEX_RESULTS[_f] = IndexResult(_indices, 1, -1)
for _f in both("multinomial"):
    INDEX_RESULTS[_f] = IndexResult(_indices, None, -1)
for _f in both("nonzero", "argwhere"):
    INDEX_RESULTS[_f] = IndexResult(nonzero_rule, None, None)
for _f in both("nonzero_static"):
    INDEX_RESULTS[_f] = IndexResult(_nonzero_static, None, None)
for _f in both("count_nonzero"):
    INDEX_RESULTS[_f] = IndexResult(_count, 1, None)
for _f in both("searchsorted", "bucketize"):
    INDEX_RESULTS[_f] = IndexResult(_search, None, None)
for _f in both("unique", "unique_consecutive"):
    INDEX_RESULTS[_f] = IndexResult(_unique, None, None)
for _f in both("bincount"):
    INDEX_RESULTS[_f] = IndexResult(_bincount, None, None)
INDEX_RESULTS[torch.unravel_index] = IndexResult(_unravel, None, None)
INDEX_RESULTS[F.one_hot] = IndexResult(_one_hot, None, None)
# Max pooling: the *_with_indices functions (what eager mode sees) and the return_indices=
# dispatchers (what torch.compile sees).
for _name_, _rank in (("max_pool1d", 1), ("max_pool2d", 2), ("max_pool3d", 3), ("adaptive_max_pool1d", 1),
                      ("adaptive_max_pool2d", 2), ("adaptive_max_pool3d", 3), ("fractional_max_pool2d", 2),
                      ("fractional_max_pool3d", 3)):
    INDEX_RESULTS[getattr(F, _name_)] = IndexResult(_pool, None, _rank)
    INDEX_RESULTS[getattr(F, _name_ + "_with_indices")] = IndexResult(_pool, None, _rank)
_LARGEST = frozenset(both("argmax", "max"))
_XLA_ADD = frozenset(both("cummax", "cummin"))
