"""(2) Binary ops with a Python integer operand, torch.where, and (3) the reductions that
accumulate in int64."""

from __future__ import annotations

from typing import Any, Callable

import torch

from x64guard.torch.bounds import NARROW_DTYPES, check_extent, check_values, reduced_extent
from x64guard.torch.calls import argument, both, call
from x64guard.torch.indices import nonzero_rule


# A bool tensor with a Python integer promotes to int64 in PyTorch: here to the default.
# And a Python integer that meets an int8/int16/int32 tensor must fit it: PyTorch would
# wrap it silently (int32 tensor + 2**40 adds 0; int32 tensor == 2**32 compares with 0).

def binary_rule(d: torch.dtype, func: Callable, args: tuple, kwargs: dict) -> Any:
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
            check_values(func, value, value, d)
            return func(*(v.to(d) if v is tensor else v for v in args))
        if dtype in NARROW_DTYPES:
            check_values(func, value, value, dtype)
        return func(a, b)

    operands = [v for k, v in kwargs.items() if k not in _NOT_OPERANDS]
    operands.extend(args)
    ints = [v for v in operands if type(v) is int]
    tensors = [v for v in operands if isinstance(v, torch.Tensor)]
    if not ints or not tensors:
        return call(func, args, kwargs)
    dtype = tensors[0].dtype
    for t in tensors[1:]:
        dtype = torch.promote_types(dtype, t.dtype)
    if dtype is torch.bool:
        if not BINARY_OPERANDS[func] or kwargs.get("out") is not None:
            return call(func, args, kwargs)
        dtype = d  # the bool tensors promote to the default, as PyTorch's do to int64
        args = tuple(v.to(d) if isinstance(v, torch.Tensor) else v for v in args)
        kwargs = {k: v.to(d) if isinstance(v, torch.Tensor) and k not in _NOT_OPERANDS else v
                  for k, v in kwargs.items()}
    if dtype in NARROW_DTYPES:
        for v in ints:
            check_values(func, v, v, dtype)
    return call(func, args, kwargs)


_NOT_OPERANDS = frozenset({"out", "alpha", "rounding_mode"})


def where_rule(d: torch.dtype, func: Callable, args: tuple, kwargs: dict) -> Any:
    """torch.where(cond, x, y) and x.where(cond, y): the operands (not the condition) promote;
    where(cond) alone is nonzero(cond, as_tuple=True)."""
    if func is torch.where:
        if len(args) + len(kwargs) < 3:
            return nonzero_rule(d, func, args, kwargs)
        cond = argument(args, kwargs, 0, "condition")
        x, y = argument(args, kwargs, 1, "input"), argument(args, kwargs, 2, "other")
    else:
        x, cond, y = args[0], argument(args, kwargs, 1, "condition"), argument(args, kwargs, 2, "other")
    if type(x) is not int and type(y) is not int:
        return call(func, args, kwargs)
    if any(isinstance(v, torch.Tensor) and v.dtype is not torch.bool for v in (x, y)):
        return call(func, args, kwargs)
    for v in (x, y):
        if type(v) is int:
            check_values(func, v, v, d)
    device = cond.device if isinstance(cond, torch.Tensor) else None
    x = x.to(d) if isinstance(x, torch.Tensor) else torch.scalar_tensor(x, dtype=d, device=device)
    y = y.to(d) if isinstance(y, torch.Tensor) else y
    return torch.where(cond, x, y)


# --------------------------------------------------------------------------- (3) accumulation
# sum/prod/cumsum of bool and integer tensors accumulate in int64 in PyTorch: here in the
# wider of the input's dtype and the default (an explicit int64 input stays int64). A count
# of True values that might not fit the default is refused; integer sums wrap as integer
# arithmetic does in any dtype.

def accumulate_rule(d: torch.dtype, func: Callable, args: tuple, kwargs: dict) -> Any:
    x = args[0] if args else kwargs.get("input")
    if not isinstance(x, torch.Tensor) or x.dtype.is_floating_point or x.dtype.is_complex:
        return call(func, args, kwargs)
    if kwargs.get("dtype") is None and kwargs.get("out") is None:
        target = torch.promote_types(x.dtype, d)
        if target in NARROW_DTYPES:
            if x.dtype is torch.bool and func not in _PRODUCTS:
                check_extent(func, reduced_extent(x, argument(args, kwargs, 1, "dim")), d, "a count of True values")
            return func(*args, **{**kwargs, "dtype": target})
    return call(func, args, kwargs)


# make int64 in PyTorch (promoted to the default here), False where the integer is only
# range-checked (sub of a bool raises in PyTorch; division and comparisons make floats and
# bools; in-place ops keep their tensor's dtype).
BINARY_OPERANDS: dict[Callable, bool] = {}
for _f in both("add", "mul", "multiply", "floor_divide", "remainder", "fmod", "pow",
               "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift",
               "clamp", "clip", "result_type", "__and__", "__or__", "__xor__", "__rand__", "__ror__",
               "__rxor__", "__lshift__", "__rshift__", "__rlshift__", "__rrshift__", "__radd__", "__rmul__",
               "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__pow__", "__rpow__"):
    BINARY_OPERANDS[_f] = True
for _f in both("sub", "subtract", "rsub", "__rsub__", "div", "divide", "true_divide", "__truediv__",
               "__rtruediv__", "__div__", "__rdiv__", "div_", "__itruediv__", "eq", "ne", "lt", "le", "gt", "ge", "__eq__", "__ne__",
               "__lt__", "__le__", "__gt__", "__ge__", "greater", "greater_equal", "less", "less_equal",
               "not_equal", "add_", "sub_", "mul_", "floor_divide_", "remainder_", "fmod_", "bitwise_and_",
               "bitwise_or_", "bitwise_xor_", "__iadd__", "__isub__", "__imul__", "__ifloordiv__", "__imod__",
               "__iand__", "__ior__", "__ixor__", "__ilshift__", "__irshift__"):
    BINARY_OPERANDS.setdefault(_f, False)

# (3) reductions that accumulate bool and integer tensors in int64.
ACCUMULATIONS = both("sum", "nansum", "prod", "cumsum", "cumprod")
_PRODUCTS = frozenset(both("prod", "cumprod"))
