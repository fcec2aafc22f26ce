"""x64guard.torch: `set_default_int_dtype`, the integer twin of `torch.set_default_dtype`
proposed in pytorch/pytorch#141994, delivered as a library.

    import torch, x64guard.torch as xt

    xt.set_default_int_dtype(torch.int32)      # this thread, until changed
    torch.tensor([1, 2, 3]).dtype              # torch.int32
    with xt.default_int_dtype(torch.int16):    # this thread, restored on exit
        torch.arange(5).dtype                  # torch.int16

The default integer dtype decides what PyTorch would otherwise make int64 on its own:
tensors built from Python integers, bool tensors promoted with Python integers, integer
sums and counts, integer tensors created without a dtype, and the indices that
index-returning ops produce. Explicit `dtype=torch.int64` requests are honoured; setting
`torch.int64` restores PyTorch's own behaviour exactly (no mode, nothing intercepted).
Values that do not fit the default raise `DefaultIntOverflowError`; nothing wraps.

How: a `torch.overrides.TorchFunctionMode`, one subclass per dtype (torch.compile guards on
the types of the modes on the stack, so a graph compiled under int32 is never reused under
int16 or int64). The mode sees the calls a user makes (functions of `torch`, methods of
`torch.Tensor`, functions of `torch.nn.functional`) and nothing inside them. What it does
is in the tables at the end: which calls get a `dtype=` default (DTYPE_DEFAULTS), which
binary ops promote bools or range-check Python integers (BINARY_OPERANDS), which reductions
accumulate in the default (ACCUMULATIONS), which results hold indices (INDEX_RESULTS),
which arguments PyTorch requires to be int64 (INT64_ARGUMENTS) or at least int32
(INT32_ARGUMENTS).

Eager CPU/CUDA tensors take PyTorch's own index ops and convert their int64 result. While
torch.compile or torch.export trace, and on devices that build graphs (XLA), argmax/argmin,
max/min over a dim, nonzero/argwhere and count_nonzero are computed without any int64
intermediate, so the captured graph holds no int64 for them.

Threads: the setting belongs to the calling thread (PyTorch's torch-function mode stack is
thread-local, so a mode cannot reach other threads); every thread starts at int64. This is
unlike torch.set_default_dtype (process-wide) and like `x64guard.mode`.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from typing import Any, Callable, Iterator

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from x64guard.errors import X64GuardError

__all__ = ["set_default_int_dtype", "get_default_int_dtype", "default_int_dtype", "DefaultIntOverflowError",
           "ALLOWED_DTYPES"]

ALLOWED_DTYPES = (torch.int8, torch.int16, torch.int32, torch.int64)
_BOUNDS = {d: (int(torch.iinfo(d).min), int(torch.iinfo(d).max)) for d in ALLOWED_DTYPES}
_NARROW = frozenset({torch.int8, torch.int16, torch.int32})
_INT32_MAX = _BOUNDS[torch.int32][1]
# Devices whose eager ops run at once: an int64 intermediate there is never seen by a
# compiler, so PyTorch's own (faster) index ops are used and their results converted.
_EAGER_DEVICES = frozenset({"cpu", "cuda", "mps"})


class DefaultIntOverflowError(X64GuardError, OverflowError):
    """A value, an index or a count cannot be held by the default integer dtype: x64guard
    refuses rather than wrap. An explicit `dtype=torch.int64` keeps 64 bits there."""


# --------------------------------------------------------------------------- helpers

def _arg(args: tuple, kwargs: dict, pos: int, name: str, default: Any = None) -> Any:
    if len(args) > pos:
        return args[pos]
    return kwargs.get(name, default)


def _with_arg(args: tuple, kwargs: dict, pos: int, name: str, value: Any) -> tuple[tuple, dict]:
    if len(args) > pos:
        return args[:pos] + (value,) + args[pos + 1:], kwargs
    return args, {**kwargs, name: value}


def _call(func: Callable, args: tuple, kwargs: dict) -> Any:
    return func(*args, **kwargs) if kwargs else func(*args)


def _name(func: Callable) -> str:
    qual = getattr(func, "__qualname__", None) or getattr(func, "__name__", repr(func))
    for prefix, shown in (("_VariableFunctionsClass.", "torch."), ("TensorBase.", "Tensor.")):
        if qual.startswith(prefix):
            return shown + qual[len(prefix):]
    module = getattr(func, "__module__", None) or ""
    if module.startswith("torch.nn.functional") or module == "torch._C._nn":
        return "torch.nn.functional." + getattr(func, "__name__", qual)
    return qual if qual.startswith("Tensor.") else "torch." + getattr(func, "__name__", qual)


def _overflow(func: Callable, what: str, d: torch.dtype) -> DefaultIntOverflowError:
    lo, hi = _BOUNDS[d]
    return DefaultIntOverflowError(
        f"x64guard.torch: {_name(func)}: {what} does not fit in the default integer dtype {d} "
        f"({lo}..{hi}); x64guard refuses rather than wrap. Pass dtype=torch.int64 to keep 64 bits "
        f"here, or run this code under x64guard.torch.default_int_dtype(torch.int64).")


def _check_values(func: Callable, lo: Any, hi: Any, d: torch.dtype) -> None:
    """Raise unless the concrete values lo..hi fit d (symbolic ones are not checked)."""
    low, high = _BOUNDS[d]
    if type(lo) is int and lo < low:
        raise _overflow(func, f"the value {lo}", d)
    if type(hi) is int and hi > high:
        raise _overflow(func, f"the value {hi}", d)


def _check_extent(func: Callable, n: Any, d: torch.dtype, what: str = "an index or count") -> None:
    """Indices below n and counts up to n must fit d: refuse a size above d's maximum."""
    if type(n) is int and n > _BOUNDS[d][1]:
        raise _overflow(func, f"{what} up to {n} (from the tensor's shape)", d)


def _extent(x: torch.Tensor, dim: Any) -> Any:
    if dim is None:
        return x.numel()
    return x.size(dim) if x.dim() else 1


def _reduced_extent(x: torch.Tensor, dim: Any) -> Any:
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return x.numel()
    if isinstance(dim, (list, tuple)):
        n = 1
        for k in dim:
            n = n * _extent(x, k)
        return n
    return _extent(x, dim)


def _traced(x: torch.Tensor) -> bool:
    """True while torch.compile/torch.export trace, or for a device that builds graphs (XLA)."""
    if torch.compiler.is_compiling():
        return True
    return not (x.is_cpu or x.is_cuda) and x.device.type not in _EAGER_DEVICES


def _python_ints(data: Any) -> tuple[Any, Any] | None:
    """(min, max) of the Python integers `data` is made of, or None when PyTorch would not
    infer int64 from it (floats, complex, only bools, tensors, numpy arrays and scalars).
    Symbolic integers count as integers but cannot be range-checked (None bounds)."""
    kind = type(data)
    if kind is int:
        return data, data
    if not isinstance(data, (list, tuple)):
        return (None, None) if isinstance(data, torch.SymInt) else None
    lo = hi = None
    saw_int = False
    stack = [data]
    while stack:
        item = stack.pop()
        if item and not torch.compiler.is_compiling() and set(map(type, item)) == {int}:
            low, high = min(item), max(item)  # a flat list of ints, at C speed
            lo = low if lo is None or low < lo else lo
            hi = high if hi is None or high > hi else hi
            saw_int = True
            continue
        for value in item:
            vkind = type(value)
            if vkind is int:
                saw_int = True
                lo = value if lo is None or value < lo else lo
                hi = value if hi is None or value > hi else hi
            elif vkind is bool:
                continue
            elif isinstance(value, (list, tuple)):
                stack.append(value)
            elif isinstance(value, torch.SymInt):
                saw_int = True
            else:
                return None
    return (lo, hi) if saw_int else None


# --------------------------------------------------------------------------- (1) dtype defaults
# Each returns the (min, max) of the integers the call would store as int64 by default, or
# None when it would not make an int64 tensor (floats, bools, ...).

def _data_values(args: tuple, kwargs: dict) -> tuple | None:
    return _python_ints(args[0] if args else kwargs.get("data", kwargs.get("obj")))


def _fill_values(args: tuple, kwargs: dict) -> tuple | None:
    fill = _arg(args, kwargs, 1, "fill_value")
    if type(fill) is int:
        return fill, fill
    return (None, None) if isinstance(fill, torch.SymInt) else None


def _is_int(value: Any) -> bool:
    """A Python or symbolic integer, or a 0-d integer tensor (whose value is not read)."""
    if type(value) is int or isinstance(value, torch.SymInt):
        return True
    return (isinstance(value, torch.Tensor) and value.dim() == 0 and value.dtype is not torch.bool
            and not value.dtype.is_floating_point and not value.dtype.is_complex)


def _range_values(args: tuple, kwargs: dict) -> tuple | None:
    if len(args) >= 2:
        start, end = args[0], args[1]
        step = args[2] if len(args) > 2 else kwargs.get("step", 1)
    elif len(args) == 1 and "end" in kwargs:
        start, end, step = args[0], kwargs["end"], kwargs.get("step", 1)
    elif len(args) == 1:
        start, end, step = kwargs.get("start", 0), args[0], kwargs.get("step", 1)
    else:
        start, end, step = kwargs.get("start", 0), kwargs.get("end"), kwargs.get("step", 1)
    if not (_is_int(start) and _is_int(end) and _is_int(step)):
        return None
    if type(start) is int and type(end) is int and type(step) is int and step != 0:
        count = max(0, -((start - end) // step))
        if count:
            last = start + (count - 1) * step
            return min(start, last), max(start, last)
    return None, None


def _randint_values(args: tuple, kwargs: dict) -> tuple | None:
    if len(args) >= 2 and not isinstance(args[1], (tuple, list)):
        low, high = args[0], args[1]                 # randint(low, high, size)
    elif args:
        low, high = kwargs.get("low", 0), args[0]    # randint(high, size)
    else:
        low, high = kwargs.get("low", 0), kwargs.get("high")
    if type(low) is int and type(high) is int:
        return low, max(low, high - 1)
    return None, None


def _count_values(args: tuple, kwargs: dict) -> tuple | None:
    n = _arg(args, kwargs, 0, "n")
    return (0, max(0, n - 1)) if type(n) is int else (None, None)


def _triangle_values(args: tuple, kwargs: dict) -> tuple | None:
    row, col = _arg(args, kwargs, 0, "row"), _arg(args, kwargs, 1, "col")
    if type(row) is int and type(col) is int:
        return 0, max(0, max(row, col) - 1)
    return None, None


def _dtype_default(d: torch.dtype, func: Callable, args: tuple, kwargs: dict) -> Any:
    values, narrowest = DTYPE_DEFAULTS[func]
    if kwargs.get("dtype") is None and kwargs.get("out") is None:
        bounds = values(args, kwargs)
        if bounds is not None:
            _check_values(func, bounds[0], bounds[1], d)
            if narrowest is not None and d.itemsize < narrowest.itemsize:
                return func(*args, **{**kwargs, "dtype": narrowest}).to(d)
            return func(*args, **{**kwargs, "dtype": d})
    return _call(func, args, kwargs)


# --------------------------------------------------------------------------- (2) binary ops
# A bool tensor with a Python integer promotes to int64 in PyTorch: here to the default.
# And a Python integer that meets an int8/int16/int32 tensor must fit it: PyTorch would
# wrap it silently (int32 tensor + 2**40 adds 0; int32 tensor == 2**32 compares with 0).

def _binary(d: torch.dtype, func: Callable, args: tuple, kwargs: dict) -> Any:
    if len(args) == 2 and not kwargs:  # the common case: x + 1, 1 + x, x == 1
        a, b = args
        if type(b) is int:
            tensor, value = a, b
        elif type(a) is int:
            tensor, value = b, a
        else:
            return func(a, b)
        if not isinstance(tensor, torch.Tensor):
            return func(a, b)
        dtype = tensor.dtype
        if dtype is torch.bool and BINARY_OPERANDS[func]:
            _check_values(func, value, value, d)
            return func(*(v.to(d) if v is tensor else v for v in args))
        if dtype in _NARROW:
            _check_values(func, value, value, dtype)
        return func(a, b)

    operands = [v for k, v in kwargs.items() if k not in _NOT_OPERANDS]
    operands.extend(args)
    ints = [v for v in operands if type(v) is int]
    tensors = [v for v in operands if isinstance(v, torch.Tensor)]
    if not ints or not tensors:
        return _call(func, args, kwargs)
    dtype = tensors[0].dtype
    for t in tensors[1:]:
        dtype = torch.promote_types(dtype, t.dtype)
    if dtype is torch.bool:
        if not BINARY_OPERANDS[func] or kwargs.get("out") is not None:
            return _call(func, args, kwargs)
        dtype = d  # the bool tensors promote to the default, as PyTorch's do to int64
        args = tuple(v.to(d) if isinstance(v, torch.Tensor) else v for v in args)
        kwargs = {k: v.to(d) if isinstance(v, torch.Tensor) and k not in _NOT_OPERANDS else v
                  for k, v in kwargs.items()}
    if dtype in _NARROW:
        for v in ints:
            _check_values(func, v, v, dtype)
    return _call(func, args, kwargs)


_NOT_OPERANDS = frozenset({"out", "alpha", "rounding_mode"})


def _where(d: torch.dtype, func: Callable, args: tuple, kwargs: dict) -> Any:
    """torch.where(cond, x, y) and x.where(cond, y): the operands (not the condition) promote;
    where(cond) alone is nonzero(cond, as_tuple=True)."""
    if func is torch.where:
        if len(args) + len(kwargs) < 3:
            return _nonzero(d, func, args, kwargs)
        cond, x, y = _arg(args, kwargs, 0, "condition"), _arg(args, kwargs, 1, "input"), _arg(args, kwargs, 2, "other")
    else:
        x, cond, y = args[0], _arg(args, kwargs, 1, "condition"), _arg(args, kwargs, 2, "other")
    if type(x) is not int and type(y) is not int:
        return _call(func, args, kwargs)
    if any(isinstance(v, torch.Tensor) and v.dtype is not torch.bool for v in (x, y)):
        return _call(func, args, kwargs)
    for v in (x, y):
        if type(v) is int:
            _check_values(func, v, v, d)
    device = cond.device if isinstance(cond, torch.Tensor) else None
    x = x.to(d) if isinstance(x, torch.Tensor) else torch.scalar_tensor(x, dtype=d, device=device)
    y = y.to(d) if isinstance(y, torch.Tensor) else y
    return torch.where(cond, x, y)


# --------------------------------------------------------------------------- (3) accumulation
# sum/prod/cumsum of bool and integer tensors accumulate in int64 in PyTorch: here in the
# wider of the input's dtype and the default (an explicit int64 input stays int64). A count
# of True values that might not fit the default is refused; integer sums wrap as integer
# arithmetic does in any dtype.

def _accumulate(d: torch.dtype, func: Callable, args: tuple, kwargs: dict) -> Any:
    x = args[0] if args else kwargs.get("input")
    if not isinstance(x, torch.Tensor) or x.dtype.is_floating_point or x.dtype.is_complex:
        return _call(func, args, kwargs)
    if kwargs.get("dtype") is None and kwargs.get("out") is None:
        target = torch.promote_types(x.dtype, d)
        if target in _NARROW:
            if x.dtype is torch.bool and func not in _PRODUCTS:
                _check_extent(func, _reduced_extent(x, _arg(args, kwargs, 1, "dim")), d, "a count of True values")
            return func(*args, **{**kwargs, "dtype": target})
    return _call(func, args, kwargs)


# --------------------------------------------------------------------------- (4) index results

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
    _, dim_pos, dim_default = INDEX_RESULTS[func]
    x = args[0] if args else kwargs.get("input")
    dim = _arg(args, kwargs, dim_pos, "dim", dim_default) if dim_pos is not None else dim_default
    return x, dim


def _arg_index(d: torch.dtype, func: Callable, args: tuple, kwargs: dict) -> Any:
    """argmax/argmin: the whole result is an index."""
    x, dim = _index_input(func, args, kwargs)
    if kwargs.get("out") is not None or not isinstance(x, torch.Tensor):
        return _call(func, args, kwargs)
    _check_extent(func, _extent(x, dim), d)
    if _traced(x) and x.dtype is not torch.bool and not x.is_complex():
        keepdim = bool(_arg(args, kwargs, 2, "keepdim", False))
        return _to(_arg_extreme(x, dim, keepdim, func in _LARGEST), d)
    return _from_native(_call(func, args, kwargs), d)


def _extreme(d: torch.dtype, func: Callable, args: tuple, kwargs: dict) -> Any:
    """max/min(x, dim) -> (values, indices); max(x) and max(x, y) have no indices."""
    x, dim = _index_input(func, args, kwargs)
    if type(dim) is not int or kwargs.get("out") is not None or not isinstance(x, torch.Tensor):
        return _call(func, args, kwargs)
    _check_extent(func, _extent(x, dim), d)
    if _traced(x) and x.dtype is not torch.bool and not x.is_complex() and x.dim() > 0:
        keepdim = bool(_arg(args, kwargs, 2, "keepdim", False))
        index = _arg_extreme(x, dim, True, func in _LARGEST)
        values = torch.gather(x, dim, index)  # the gradient reaches the chosen element only
        if not keepdim:
            values, index = values.squeeze(dim), index.squeeze(dim)
        result_type = torch.return_types.max if func in _LARGEST else torch.return_types.min
        return result_type((values, _to(index, d)))
    result = _call(func, args, kwargs)
    return type(result)((result[0], _from_native(result[1], d)))


def _nonzero(d: torch.dtype, func: Callable, args: tuple, kwargs: dict) -> Any:
    """nonzero/argwhere/where(cond): coordinates, an (n, ndim) tensor or a tuple."""
    x = args[0] if args else kwargs.get("input", kwargs.get("condition"))
    if kwargs.get("out") is not None or not isinstance(x, torch.Tensor):
        return _call(func, args, kwargs)
    as_tuple = func is torch.where or bool(kwargs.get("as_tuple", False))
    _check_extent(func, max(x.shape) if x.dim() else 1, d)
    if _traced(x) and x.dim() > 0 and type(x.numel()) is int and 0 < x.numel() <= _INT32_MAX:
        coords = _nonzero_coords(x)
        if as_tuple:
            return tuple(_to(c, d) for c in coords)
        return _to(torch.stack(coords, 1), d)
    result = _call(func, args, kwargs)
    if isinstance(result, tuple):
        return tuple(_from_native(c, d) for c in result)
    return _from_native(result, d)


def _nonzero_static(d: torch.dtype, func: Callable, args: tuple, kwargs: dict) -> Any:
    """nonzero_static(x, size=, fill_value=-1): coordinates padded to a fixed size."""
    x = args[0] if args else kwargs.get("input")
    result = _call(func, args, kwargs)
    if kwargs.get("out") is not None:
        return result
    _check_extent(func, max(x.shape) if x.dim() else 1, d)
    _check_values(func, kwargs.get("fill_value", -1), kwargs.get("fill_value", -1), d)
    return _from_native(result, d)


def _count(d: torch.dtype, func: Callable, args: tuple, kwargs: dict) -> Any:
    """count_nonzero: a count over the reduced dims."""
    x, dim = _index_input(func, args, kwargs)
    _check_extent(func, _reduced_extent(x, dim), d, "a count")
    if _traced(x):
        mask = x != 0
        return mask.sum(dtype=d) if dim is None else mask.sum(dim, dtype=d)
    return _from_native(_call(func, args, kwargs), d)


def _search(d: torch.dtype, func: Callable, args: tuple, kwargs: dict) -> Any:
    """searchsorted(sorted, values)/bucketize(values, boundaries): PyTorch makes int32 itself."""
    if kwargs.get("out") is not None or "out_int32" in kwargs:
        return _call(func, args, kwargs)
    boundaries = _arg(args, kwargs, 0, "sorted_sequence") if func is torch.searchsorted else \
        _arg(args, kwargs, 1, "boundaries")
    if isinstance(boundaries, torch.Tensor):
        _check_extent(func, _extent(boundaries, -1), d)
    return _from_native(func(*args, **{**kwargs, "out_int32": True}), d)


def _values_indices(d: torch.dtype, func: Callable, args: tuple, kwargs: dict) -> Any:
    """sort, topk, kthvalue, mode, median/nanmedian(dim), cummax/cummin: (values, indices)."""
    x, dim = _index_input(func, args, kwargs)
    result = _call(func, args, kwargs)
    if not isinstance(result, tuple) or kwargs.get("out") is not None:
        return result  # median(x), nanmedian(x): values only
    _check_extent(func, _extent(x, dim), d)
    return type(result)((result[0], _from_native(result[1], d, xla_add=func in _XLA_ADD)))


def _indices(d: torch.dtype, func: Callable, args: tuple, kwargs: dict) -> Any:
    """argsort, multinomial: the whole result is an index."""
    x, dim = _index_input(func, args, kwargs)
    result = _call(func, args, kwargs)
    if kwargs.get("out") is not None:
        return result
    _check_extent(func, _extent(x, dim), d)
    return _from_native(result, d)


def _unique(d: torch.dtype, func: Callable, args: tuple, kwargs: dict) -> Any:
    """unique/unique_consecutive: (values, [inverse], [counts])."""
    x, dim = _index_input(func, args, kwargs)
    result = _call(func, args, kwargs)
    if not isinstance(result, tuple):
        return result
    _check_extent(func, _extent(x, dim), d)
    return (result[0],) + tuple(_from_native(t, d) for t in result[1:])


def _pool(d: torch.dtype, func: Callable, args: tuple, kwargs: dict) -> Any:
    """max pooling with return_indices=True: (values, indices into the spatial plane)."""
    x, rank = _index_input(func, args, kwargs)
    result = _call(func, args, kwargs)
    if not isinstance(result, tuple):
        return result
    n = 1
    for size in x.shape[x.dim() - rank:]:
        n = n * size
    _check_extent(func, n, d)
    return (result[0], _from_native(result[1], d, xla_add=True))


def _bincount(d: torch.dtype, func: Callable, args: tuple, kwargs: dict) -> Any:
    """bincount without weights: counts (with weights, the weights' dtype)."""
    x = args[0] if args else kwargs.get("input")
    result = _call(func, args, kwargs)
    if _arg(args, kwargs, 1, "weights") is not None:
        return result
    _check_extent(func, x.numel(), d, "a count")
    return _from_native(result, d)


def _unravel(d: torch.dtype, func: Callable, args: tuple, kwargs: dict) -> Any:
    """unravel_index: one coordinate tensor per dimension of `shape`."""
    shape = _arg(args, kwargs, 1, "shape")
    result = _call(func, args, kwargs)
    sizes = shape if isinstance(shape, (tuple, list)) else (shape,)
    _check_extent(func, max(sizes) if sizes else 1, d)
    return tuple(_from_native(t, d) for t in result)


def _one_hot(d: torch.dtype, func: Callable, args: tuple, kwargs: dict) -> Any:
    """one_hot: an integer tensor of 0 and 1."""
    return _from_native(_call(func, args, kwargs), d)


# --------------------------------------------------------------------------- (5) index arguments

def _widen(d: torch.dtype, func: Callable, args: tuple, kwargs: dict) -> Any:
    """Ops that require int64 (INT64_ARGUMENTS) or at least int32 (INT32_ARGUMENTS) index
    arguments get them, so that the narrow defaults keep working; values are unchanged."""
    if func in INT64_ARGUMENTS:
        places, target, accept = INT64_ARGUMENTS[func], torch.int64, _NARROW
    else:
        places, target, accept = INT32_ARGUMENTS[func], torch.int32, _NARROW_INDEX_8_16
    for pos, name in places:
        value = _arg(args, kwargs, pos, name)
        if isinstance(value, torch.Tensor):
            if value.dtype in accept:
                args, kwargs = _with_arg(args, kwargs, pos, name, value.to(target))
        elif isinstance(value, (tuple, list)) and any(isinstance(v, torch.Tensor) and v.dtype in accept for v in value):
            widened = type(value)(v.to(target) if isinstance(v, torch.Tensor) and v.dtype in accept else v for v in value)
            args, kwargs = _with_arg(args, kwargs, pos, name, widened)
    if func in INDEX_RESULTS:
        return INDEX_RESULTS[func][0](d, func, args, kwargs)
    return _call(func, args, kwargs)


# --------------------------------------------------------------------------- the tables

def _both(*names: str) -> list[Callable]:
    """torch.NAME and torch.Tensor.NAME, for the names that exist."""
    found = []
    for name in names:
        for owner in (torch, torch.Tensor):
            value = getattr(owner, name, None)
            if value is not None and value not in found:
                found.append(value)
    return found


# (1) function -> (the integers the call stores, or None; the narrowest dtype its kernel
# supports, or None: a narrower default is made there and converted).
DTYPE_DEFAULTS: dict[Callable, tuple[Callable, torch.dtype | None]] = {
    torch.tensor: (_data_values, None),
    torch.as_tensor: (_data_values, None),
    torch.asarray: (_data_values, None),
    torch.full: (_fill_values, None),
    torch.arange: (_range_values, None),
    torch.randint: (_randint_values, None),
    torch.randperm: (_count_values, None),
    torch.tril_indices: (_triangle_values, torch.int32),
    torch.triu_indices: (_triangle_values, torch.int32),
}

# (2) binary ops with a Python integer operand: True where a bool tensor and the integer
# make int64 in PyTorch (promoted to the default here), False where the integer is only
# range-checked (sub of a bool raises in PyTorch; division and comparisons make floats and
# bools; in-place ops keep their tensor's dtype).
BINARY_OPERANDS: dict[Callable, bool] = {}
for _f in _both("add", "mul", "multiply", "floor_divide", "remainder", "fmod", "pow",
                "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift",
                "clamp", "clip", "result_type", "__and__", "__or__", "__xor__", "__rand__", "__ror__",
                "__rxor__", "__lshift__", "__rshift__", "__rlshift__", "__rrshift__", "__radd__", "__rmul__",
                "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__pow__", "__rpow__"):
    BINARY_OPERANDS[_f] = True
for _f in _both("sub", "subtract", "rsub", "__rsub__", "div", "divide", "true_divide", "__truediv__",
                "__rtruediv__", "__div__", "__rdiv__", "div_", "__itruediv__", "eq", "ne", "lt", "le", "gt", "ge", "__eq__", "__ne__",
                "__lt__", "__le__", "__gt__", "__ge__", "greater", "greater_equal", "less", "less_equal",
                "not_equal", "add_", "sub_", "mul_", "floor_divide_", "remainder_", "fmod_", "bitwise_and_",
                "bitwise_or_", "bitwise_xor_", "__iadd__", "__isub__", "__imul__", "__ifloordiv__", "__imod__",
                "__iand__", "__ior__", "__ixor__", "__ilshift__", "__irshift__"):
    BINARY_OPERANDS.setdefault(_f, False)

# (3) reductions that accumulate bool and integer tensors in int64.
ACCUMULATIONS = _both("sum", "nansum", "prod", "cumsum", "cumprod")
_PRODUCTS = frozenset(_both("prod", "cumprod"))

# (4) function -> (rule, position of `dim` or None, default dim; for pooling, the rank)
INDEX_RESULTS: dict[Callable, tuple[Callable, int | None, Any]] = {}
for _f in _both("argmax", "argmin"):
    INDEX_RESULTS[_f] = (_arg_index, 1, None)
for _f in _both("max", "min"):
    INDEX_RESULTS[_f] = (_extreme, 1, None)
for _f in _both("sort", "mode"):
    INDEX_RESULTS[_f] = (_values_indices, 1, -1)
for _f in _both("median", "nanmedian", "cummax", "cummin"):
    INDEX_RESULTS[_f] = (_values_indices, 1, None)
for _f in _both("topk", "kthvalue"):
    INDEX_RESULTS[_f] = (_values_indices, 2, -1)
for _f in _both("argsort"):
    INDEX_RESULTS[_f] = (_indices, 1, -1)
for _f in _both("multinomial"):
    INDEX_RESULTS[_f] = (_indices, None, -1)
for _f in _both("nonzero", "argwhere"):
    INDEX_RESULTS[_f] = (_nonzero, None, None)
for _f in _both("nonzero_static"):
    INDEX_RESULTS[_f] = (_nonzero_static, None, None)
for _f in _both("count_nonzero"):
    INDEX_RESULTS[_f] = (_count, 1, None)
for _f in _both("searchsorted", "bucketize"):
    INDEX_RESULTS[_f] = (_search, None, None)
for _f in _both("unique", "unique_consecutive"):
    INDEX_RESULTS[_f] = (_unique, None, None)
for _f in _both("bincount"):
    INDEX_RESULTS[_f] = (_bincount, None, None)
INDEX_RESULTS[torch.unravel_index] = (_unravel, None, None)
INDEX_RESULTS[F.one_hot] = (_one_hot, None, None)
# Max pooling: the *_with_indices functions (what eager mode sees) and the return_indices=
# dispatchers (what torch.compile sees).
for _name_, _rank in (("max_pool1d", 1), ("max_pool2d", 2), ("max_pool3d", 3), ("adaptive_max_pool1d", 1),
                      ("adaptive_max_pool2d", 2), ("adaptive_max_pool3d", 3), ("fractional_max_pool2d", 2),
                      ("fractional_max_pool3d", 3)):
    INDEX_RESULTS[getattr(F, _name_)] = (_pool, None, _rank)
    INDEX_RESULTS[getattr(F, _name_ + "_with_indices")] = (_pool, None, _rank)
_LARGEST = frozenset(_both("argmax", "max"))
_XLA_ADD = frozenset(_both("cummax", "cummin"))

# (5) ops PyTorch 2.9 refuses to run on int32 indices ("expected scalar type Long"): their
# index arguments (position, keyword) are converted to int64 first.
INT64_ARGUMENTS: dict[Callable, list[tuple[int, str]]] = {
    F.one_hot: [(0, "tensor")],
    F.nll_loss: [(1, "target")],
    F.cross_entropy: [(1, "target")],   # class indices; probability targets are floats
    F.multi_margin_loss: [(1, "target")],
    F.multilabel_margin_loss: [(1, "target")],
    F.max_unpool1d: [(1, "indices")],
    F.max_unpool2d: [(1, "indices")],
    F.max_unpool3d: [(1, "indices")],
}
for _f in _both("take", "put", "put_"):
    INT64_ARGUMENTS[_f] = [(1, "index")]
for _f in _both("take_along_dim"):
    INT64_ARGUMENTS[_f] = [(1, "indices")]
for _f in _both("index_copy", "index_copy_", "index_fill", "index_fill_"):
    INT64_ARGUMENTS[_f] = [(2, "index")]

# Ops that take int32 or int64 indices but not int8/int16: widened to int32 under the
# int8 and int16 defaults (untouched under int32).
INT32_ARGUMENTS: dict[Callable, list[tuple[int, str]]] = {
    F.embedding: [(0, "input")],
    F.embedding_bag: [(0, "input"), (2, "offsets")],
    torch.Tensor.__getitem__: [(1, "indices")],
    torch.Tensor.__setitem__: [(1, "indices")],
}
for _f in _both("gather", "scatter", "scatter_", "scatter_add", "scatter_add_", "scatter_reduce", "scatter_reduce_",
                "index_select", "index_add", "index_add_", "index_reduce", "index_reduce_"):
    INT32_ARGUMENTS[_f] = [(2, "index")]
for _f in _both("index_put", "index_put_"):
    INT32_ARGUMENTS[_f] = [(1, "indices")]
for _f in _both("repeat_interleave"):
    INT32_ARGUMENTS[_f] = [(1, "repeats")]
_NARROW_INDEX_8_16 = frozenset({torch.int8, torch.int16})


def _build_rules() -> dict[Callable, Callable]:
    rules: dict[Callable, Callable] = {}
    for func in BINARY_OPERANDS:
        rules[func] = _binary
    for func in ACCUMULATIONS:
        rules[func] = _accumulate
    for func, (rule, _, _) in INDEX_RESULTS.items():
        rules[func] = rule
    for func in _both("where"):
        rules[func] = _where
    for func in list(INT64_ARGUMENTS) + list(INT32_ARGUMENTS):
        rules[func] = _widen
    for func in DTYPE_DEFAULTS:
        rules[func] = _dtype_default
    return rules


_RULES = _build_rules()


# --------------------------------------------------------------------------- torch.compile
# The private PyTorch hooks, all here. (a) Dynamo (torch 2.9) hands a call to the
# torch-function modes on the stack only for functions it considers overridable, leaving
# out the factories PyTorch lists as "ignored" (torch.tensor, arange, randint, randperm,
# ...) which eager mode does hand to modes: a compiled graph would create int64 where
# eager code creates the default. The hook makes Dynamo hand those factories to modes, as
# eager mode does (modes only: tensor subclasses still never see them). It is installed
# when a narrow default is first set, into Dynamo's module when that is imported, so that
# eager-only programs never import Dynamo. (b) While Dynamo traces or compiles, torch
# functions that run for real are its own (fake propagation, AOT autograd, inductor), not
# the user's (Dynamo traces those symbolically through the mode): they see stock PyTorch.

_DYNAMO_VARIABLES = "torch._dynamo.variables.torch"
_DYNAMO_CONVERT = "torch._dynamo.symbolic_convert"
_DYNAMO_FACTORIES = frozenset(DTYPE_DEFAULTS)
_dynamo_tls: list = [None]


def _compiler_busy() -> bool:
    tls = _dynamo_tls[0]
    if tls is None:
        module = sys.modules.get(_DYNAMO_CONVERT)
        if module is None:
            return False
        tls = _dynamo_tls[0] = module.tls
    return getattr(tls, "current_tx", None) is not None


def _teach_dynamo(module: Any) -> None:
    cls = getattr(module, "TorchInGraphFunctionVariable", None)
    original = getattr(cls, "torch_function_override_enabled", None)
    if original is None or getattr(original, "_x64guard", False):
        return

    def torch_function_override_enabled(self, tx, args, kwargs):
        if self.get_function() in _DYNAMO_FACTORIES:
            state = getattr(tx, "symbolic_torch_function_state", None)
            if state is not None:
                return bool(state.torch_function_mode_enabled and state.in_torch_function_mode())
        return original(self, tx, args, kwargs)

    torch_function_override_enabled._x64guard = True
    cls.torch_function_override_enabled = torch_function_override_enabled


class _DynamoImportHook:
    """A meta path finder that patches Dynamo's module right after it is first executed."""

    def find_spec(self, name, path=None, target=None):
        if name != _DYNAMO_VARIABLES:
            return None
        import importlib.machinery

        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_patch(module):
            exec_module(module)
            _teach_dynamo(module)

        spec.loader.exec_module = exec_and_patch
        return spec


def _install_dynamo_hook() -> None:
    if _DYNAMO_VARIABLES in sys.modules:
        _teach_dynamo(sys.modules[_DYNAMO_VARIABLES])
    elif not any(isinstance(f, _DynamoImportHook) for f in sys.meta_path):
        sys.meta_path.insert(0, _DynamoImportHook())


# --------------------------------------------------------------------------- the mode and the API

class _DefaultIntMode(TorchFunctionMode):
    """Applies the rules for `dtype`. One subclass per dtype: torch.compile guards on the
    types of the modes on the stack, so graphs are never shared between dtypes."""

    dtype: torch.dtype = torch.int64

    def __torch_function__(self, func, types, args=(), kwargs=None):
        rule = _RULES.get(func)
        if rule is None or (not torch.compiler.is_dynamo_compiling() and _compiler_busy()):
            if kwargs:
                return func(*args, **kwargs)
            return func(*args)
        return rule(self.dtype, func, args, kwargs if kwargs else {})


_MODE_TYPES = {d: type(f"DefaultInt{str(d).split('.')[-1].capitalize()}Mode", (_DefaultIntMode,),
                       {"dtype": d, "__module__": __name__})
               for d in (torch.int8, torch.int16, torch.int32)}

_state = threading.local()


def _validate(d: Any) -> torch.dtype:
    if not isinstance(d, torch.dtype) or d not in ALLOWED_DTYPES:
        raise TypeError(f"x64guard.torch: the default integer dtype must be one of torch.int8, torch.int16, "
                        f"torch.int32, torch.int64; got {d!r}")
    return d


def _install(d: torch.dtype) -> None:
    """Make d this thread's default: x64guard's mode (if any) is replaced where it sits in
    the torch-function mode stack, so other modes keep their order; int64 leaves none."""
    current = getattr(_state, "mode", None)
    new = _MODE_TYPES[d]() if d is not torch.int64 else None
    above = []
    if current is not None and any(m is current for m in torch.overrides._get_current_function_mode_stack()):
        while True:
            mode = torch.overrides._pop_mode()
            if mode is current:
                break
            above.append(mode)
    if new is not None:
        _install_dynamo_hook()
        torch.overrides._push_mode(new)
    for mode in reversed(above):
        torch.overrides._push_mode(mode)
    _state.mode = new


def get_default_int_dtype() -> torch.dtype:
    """The calling thread's default integer dtype (torch.int64 unless set)."""
    mode = getattr(_state, "mode", None)
    return torch.int64 if mode is None else mode.dtype


def set_default_int_dtype(d: torch.dtype) -> None:
    """Set the calling thread's default integer dtype: torch.int8, int16, int32 or int64
    (anything else raises TypeError). torch.int64 restores PyTorch's own behaviour exactly.
    The floating-point default (torch.set_default_dtype) is not touched."""
    _install(_validate(d))


@contextlib.contextmanager
def default_int_dtype(d: torch.dtype) -> Iterator[torch.dtype]:
    """`with default_int_dtype(torch.int32): ...` sets the calling thread's default and
    restores, on exit (also on an exception), the one in force on entry. Blocks nest."""
    d = _validate(d)
    previous = get_default_int_dtype()
    _install(d)
    try:
        yield d
    finally:
        _install(previous)
