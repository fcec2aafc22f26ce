"""Reading and rewriting the arguments of an intercepted torch call, and naming it in messages."""

from __future__ import annotations

from typing import Any, Callable

import torch


def argument(args: tuple, kwargs: dict, pos: int, name: str, default: Any = None) -> Any:
    if len(args) > pos:
        return args[pos]
    return kwargs.get(name, default)


def with_argument(args: tuple, kwargs: dict, pos: int, name: str, value: Any) -> tuple[tuple, dict]:
    if len(args) > pos:
        return args[:pos] + (value,) + args[pos + 1:], kwargs
    return args, {**kwargs, name: value}


def call(func: Callable, args: tuple, kwargs: dict) -> Any:
    return func(*args, **kwargs) if kwargs else func(*args)


def display_name(func: Callable) -> str:
    qual = getattr(func, "__qualname__", None) or getattr(func, "__name__", repr(func))
    for prefix, shown in (("_VariableFunctionsClass.", "torch."), ("TensorBase.", "Tensor.")):
        if qual.startswith(prefix):
            return shown + qual[len(prefix):]
    module = getattr(func, "__module__", None) or ""
    if module.startswith("torch.nn.functional") or module == "torch._C._nn":
        return "torch.nn.functional." + getattr(func, "__name__", qual)
    return qual if qual.startswith("Tensor.") else "torch." + getattr(func, "__name__", qual)



def both(*names: str) -> list[Callable]:
    """torch.NAME and torch.Tensor.NAME, for the names that exist."""
    found = []
    for name in names:
        for owner in (torch, torch.Tensor):
            value = getattr(owner, name, None)
            if value is not None and value not in found:
                found.append(value)
    return found
