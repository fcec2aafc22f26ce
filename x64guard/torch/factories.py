"""(1) Factories that make int64 by default (torch.tensor, arange, full, randint, ...) get
the default integer dtype as their `dtype=`, after a range check of the values they store."""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import torch

from x64guard.torch.bounds import check_values
from x64guard.torch.calls import argument, call


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



# Each returns the (min, max) of the integers the call would store as int64 by default, or
# None when it would not make an int64 tensor (floats, bools, ...).

def _data_values(args: tuple, kwargs: dict) -> tuple | None:
    return _python_ints(args[0] if args else kwargs.get("data", kwargs.get("obj")))


def _fill_values(args: tuple, kwargs: dict) -> tuple | None:
    fill = argument(args, kwargs, 1, "fill_value")
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
    n = argument(args, kwargs, 0, "n")
    return (0, max(0, n - 1)) if type(n) is int else (None, None)


def _triangle_values(args: tuple, kwargs: dict) -> tuple | None:
    row, col = argument(args, kwargs, 0, "row"), argument(args, kwargs, 1, "col")
    if type(row) is int and type(col) is int:
        return 0, max(0, max(row, col) - 1)
    return None, None


def dtype_default_rule(d: torch.dtype, func: Callable, args: tuple, kwargs: dict) -> Any:
    values, narrowest = DTYPE_DEFAULTS[func]
    if kwargs.get("dtype") is None and kwargs.get("out") is None:
        bounds = values(args, kwargs)
        if bounds is not None:
            check_values(func, bounds[0], bounds[1], d)
            if narrowest is not None and d.itemsize < narrowest.itemsize:
                return func(*args, **{**kwargs, "dtype": narrowest}).to(d)
            return func(*args, **{**kwargs, "dtype": d})
    return call(func, args, kwargs)


class DtypeDefault(NamedTuple):
    """How a factory gets the default integer dtype."""

    values: Callable            # (args, kwargs) -> the (min, max) the call stores, or None
    narrowest: torch.dtype | None  # the narrowest its kernel supports: a narrower default is made there, converted


# (1) function -> its DtypeDefault.
DTYPE_DEFAULTS: dict[Callable, DtypeDefault] = {
    torch.tensor: DtypeDefault(_data_values, None),
    torch.as_tensor: DtypeDefault(_data_values, None),
    torch.asarray: DtypeDefault(_data_values, None),
    torch.full: DtypeDefault(_fill_values, None),
    torch.arange: DtypeDefault(_range_values, None),
    torch.randint: DtypeDefault(_randint_values, None),
    torch.randperm: DtypeDefault(_count_values, None),
    torch.tril_indices: DtypeDefault(_triangle_values, torch.int32),
    torch.triu_indices: DtypeDefault(_triangle_values, torch.int32),
}
