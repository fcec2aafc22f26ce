"""The pending XLA tensors a sync without arguments computes: the tensors x64guard made or
was given, tracked weakly as they appear, instead of a scan of the garbage collector's heap.

`LIVE` holds, without keeping any alive (`torch.utils.weak.WeakIdKeyDictionary`):
* kept: what `to_device` moved (a model's parameters and buffers, a batch's tensors), and
  what a scan found once (below), in the order first seen: each step lowers the same graph;
* made: every tensor a `GuardedTensor` op returned (what the step computed from
  `to_device`'s int64 tensors: Hugging Face's masks, logits, the loss), in the order made.
Each sync without arguments takes those, and the gradients of the kept leaves.

What it does not know (optimizer state made by the optimizer, a loss computed only from a
batch moved with `.to(device)`) torch-xla's live-tensor report names after the sync; only
then does `scan` read the collector's young generations, and the whole heap if that is not
enough (module-level because `GuardedTensor.__torch_function__`, a classmethod, registers
into it with no owner object at hand; one process has one set of live XLA tensors).
"""

from __future__ import annotations

import threading
from typing import Iterable, NamedTuple

import torch
from torch.utils.weak import WeakIdKeyDictionary

from x64guard.torch_xla import _private as _xc


class SyncTarget(NamedTuple):
    """A tensor a sync computes and replaces with its narrowed result."""

    path: str              # a name for messages
    tensor: torch.Tensor
    is_state: bool         # a parameter, gradient, buffer or optimizer state (must already be 32-bit)


class LiveTensors:
    """The XLA tensors x64guard made or was given, weakly (see the module's docstring)."""

    def __init__(self) -> None:
        self.kept = WeakIdKeyDictionary()
        self.made = WeakIdKeyDictionary()
        self._lock = threading.Lock()

    def keep(self, tensors: Iterable[torch.Tensor]) -> None:
        with self._lock:
            for tensor in tensors:
                if isinstance(tensor, torch.Tensor) and tensor.device.type == "xla":
                    self.kept.setdefault(tensor, None)

    def note_made(self, tensor: torch.Tensor) -> None:
        """A fresh XLA result of a GuardedTensor op (one dict insert per op)."""
        with self._lock:
            self.made[tensor] = None

    def candidates(self) -> list[torch.Tensor]:
        """The live tracked tensors, kept first, then made, then the kept leaves' gradients."""
        with self._lock:
            found = {id(t): t for t in (*self.kept.keys(), *self.made.keys())}
        for tensor in list(found.values()):
            grad = leaf_grad(tensor)
            if grad is not None:
                found.setdefault(id(grad), grad)
        return list(found.values())


def leaf_grad(tensor: torch.Tensor) -> "torch.Tensor | None":
    """A leaf's XLA gradient, or None."""
    try:
        grad = tensor.grad if isinstance(tensor, torch.nn.Parameter) or tensor.is_leaf else None
    except RuntimeError:    # a no_grad view whose base changed in place: autograd refuses to say
        return None
    return grad if isinstance(grad, torch.Tensor) and grad.device.type == "xla" else None


LIVE = LiveTensors()


def scan(young_only: bool, known: set[int]) -> list[torch.Tensor]:
    """XLA tensors the garbage collector lists (its young generations, what the step made;
    or with `young_only=False` every object, about 0.3 s with transformers loaded) that are
    not in `known` (ids), in the order torch-xla made them (its tensor ids count up: each
    step then lowers the same graph). Each is kept from now on (`LIVE.kept`). Only called
    when torch-xla reports a pending tensor x64guard does not track."""
    import gc

    fresh: dict[int, torch.Tensor] = {}
    for generation in ((0, 1) if young_only else (None,)):
        objects = gc.get_objects() if generation is None else gc.get_objects(generation)
        for obj in objects:
            try:
                found = isinstance(obj, torch.Tensor) and obj.device.type == "xla" and id(obj) not in known
            except ReferenceError:  # a weakref.proxy whose referent died: the collector still lists it
                continue
            if found and id(obj) not in fresh and _xc.is_xla_tensor(obj):   # not a fake tensor dynamo holds
                fresh[id(obj)] = _xc.owned(obj)
        del objects
    ordered = [tensor for _, tensor in sorted(fresh.items(), key=lambda item: _xc.tensor_id(item[1]))]
    LIVE.keep(ordered)
    return ordered


def targets_of(keep: Iterable) -> list[SyncTarget]:
    """The XLA tensors with pending IR among `keep`, each once (modules: parameters, their
    gradients, buffers; optimizers: their state; tensors; dicts, lists, tuples of these);
    to_device's int64 tensors (`is_alias`) stay as they are."""
    from x64guard.torch_xla.boundary import narrow_alias

    found: dict[int, SyncTarget] = {}

    def add(path: str, value, state: bool = False) -> None:
        if isinstance(value, torch.Tensor):
            if value.device.type == "xla" and id(value) not in found:
                found[id(value)] = SyncTarget(path, value, state)
        elif isinstance(value, torch.nn.Module):
            for name, parameter in value.named_parameters():
                add(f"parameter {name}", parameter, True)
                if parameter.grad is not None:
                    add(f"gradient of {name}", parameter.grad, True)
            for name, buffer in value.named_buffers():
                add(f"buffer {name}", buffer, True)
        elif isinstance(value, torch.optim.Optimizer):
            for group in value.param_groups:
                for parameter in group["params"]:
                    add("an optimized parameter", parameter, True)
                    for name, state_value in value.state.get(parameter, {}).items():
                        add(f"optimizer state {name!r}", state_value, True)
        elif isinstance(value, dict):
            for k, v in value.items():
                add(str(k), v)
        elif isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                add(f"item {i}", v)

    for k, value in enumerate(keep):
        add(f"argument {k}", value)
    items = [item for item in found.values() if narrow_alias(item.tensor) is None]
    flags = _xc.needs_materialization([t for _, t, _ in items]) if items else []
    return [item for item, pending in zip(items, flags) if pending]
