"""The pending XLA tensors a sync without arguments computes: the tensors x64guard made or
was given, tracked weakly as they appear, instead of a scan of the garbage collector's heap.

`LIVE` holds, without keeping any alive (`torch.utils.weak.WeakIdKeyDictionary`):
* kept: what `to_device` moved (a model's parameters and buffers, a batch's tensors), and
  what a scan found once (below), in the order first seen: each step lowers the same graph;
* made: every tensor a `GuardedTensor` op returned (what the step computed from
  `to_device`'s int64 tensors: Hugging Face's masks, logits, the loss), in the order made:
  a plain weak reference by id, with no callback, since an op's result usually dies before
  the next op (a callback at each death cost as much as the insert: 1.4 us of an op's 8);
  the dead ones are dropped by the next `candidates`, or when the table doubles.
Each sync without arguments takes those, and the gradients of those that are leaves.

What it does not know (optimizer state made by the optimizer, a loss computed only from a
batch moved with `.to(device)`) torch-xla's live-tensor report names after the sync; only
then does `scan` read the collector's young generations, and the whole heap if that is not
enough; what a scan found is kept from then on, so that a steady loop reads no heap.

`LIVE` is module-level: `GuardedTensor.__torch_function__`, a classmethod, registers into it
with no owner object at hand, and one process has one set of live XLA tensors.
"""

from __future__ import annotations

import threading
import weakref
from typing import Iterable, NamedTuple

import torch
from torch.utils.weak import WeakIdKeyDictionary

from x64guard.torch_xla import _private as _xc


_MADE_PRUNE_AT = 4096   # made entries before dead ones are dropped between syncs
# What a sync reads of every tracked tensor (its leafness, dtype, device, the `.data =` check)
# is read without a GuardedTensor's __torch_function__, which would run those reads as on a
# plain tensor anyway (reads.py), at about 2 us each: most of a Falcon sync's tracked tensors
# are GuardedTensors (51 of 71).
_PLAIN = _xc.plain_torch_function_type()


class SyncTarget(NamedTuple):
    """A tensor a sync computes and replaces with its narrowed result."""

    path: "str | LiveName"  # a name for messages
    tensor: torch.Tensor
    is_state: bool         # a parameter, gradient, buffer or optimizer state (must already be 32-bit)


class _Refused(NamedTuple):
    """A tensor a sync without arguments refused, as it was then: not taken again."""

    ref: weakref.ref
    data: str            # its pending computation (`_private.data_id`)


class LiveTensors:
    """The XLA tensors x64guard made or was given, weakly (see the module's docstring), and
    those a sync without arguments leaves pending on purpose."""

    def __init__(self, made_prune_at: int = _MADE_PRUNE_AT) -> None:
        self.kept = WeakIdKeyDictionary()
        self.made: dict[int, weakref.ref] = {}     # id -> ref, in the order made (note_made)
        self._made_prune_at = self._made_limit = made_prune_at
        self._lock = threading.Lock()
        self.refused: dict[int, _Refused] = {}              # by id(tensor): refused, not taken again
        self.alias_copies: dict[int, weakref.ref] = {}      # torch-xla tensor id -> a copy of to_device's ids

    def keep(self, tensors: Iterable[torch.Tensor]) -> None:
        with self._lock:
            for tensor in tensors:
                if isinstance(tensor, torch.Tensor) and tensor.device.type == "xla":
                    self.kept.setdefault(tensor, None)

    def note_made(self, tensor: torch.Tensor) -> None:
        """A fresh XLA result of a GuardedTensor op. An id a dead tensor held moves to the end,
        so that the live ones stay in the order made (the order a sync lowers them in)."""
        key = id(tensor)
        with self._lock:
            old = self.made.get(key)
            if old is not None:
                if old() is tensor:
                    return
                del self.made[key]
            self.made[key] = weakref.ref(tensor)
            if len(self.made) > self._made_limit:
                self._prune_made()

    def _prune_made(self) -> list[torch.Tensor]:
        """The live made tensors, in order; the dead ones' entries dropped. Caller holds the lock.
        (Most of a step's results are dead by its sync: only the live ones are copied.)"""
        alive = [(key, ref, tensor) for key, ref in self.made.items() if (tensor := ref()) is not None]
        self.made = {key: ref for key, ref, _ in alive}
        self._made_limit = max(self._made_prune_at, 2 * len(self.made))
        return [tensor for _, _, tensor in alive]

    def candidates(self) -> list[torch.Tensor]:
        """The live tracked tensors, kept first, then made, then the gradients of those that
        are leaves (a parameter's; a saliency map's, made from to_device's ids)."""
        with self._lock:
            found = {id(t): t for t in (*self.kept.keys(), *self._prune_made())}
        with _PLAIN():
            leaves = [tensor for tensor in found.values() if _is_leaf(tensor)]
        for tensor in leaves:
            grad = _xla_grad(tensor)
            if grad is not None:
                found.setdefault(id(grad), grad)
        return list(found.values())

    def targets(self, tensors: list[torch.Tensor], wanted: set[int] | None = None) -> list[SyncTarget]:
        """The pending ones of `tensors` (`wanted`: torch-xla tensor ids to keep), but
        to_device's int64 tensors and the copies of them (dynamo's detached inputs: their
        convert too), and tensors whose data a plain XLA tensor's cannot replace (left
        pending, and reported with the rest of what stayed pending)."""
        from x64guard.torch_xla.boundary import BOUNDARY, narrow_alias

        # (every sync without arguments runs this over each tracked tensor: data_id only of
        # those with the dtype of to_device's live ids, since a copy of them has it)
        data_id = _xc.data_id_function()
        id_tensors = BOUNDARY.id_tensors()
        aliases = {data_id(tensor) for tensor in id_tensors}
        with _PLAIN():
            alias_dtypes = {tensor.dtype for tensor in id_tensors}
            copies = [t.dtype in alias_dtypes for t in tensors]
        kept = []
        for t, maybe_copy in zip(tensors, copies):
            if narrow_alias(t) is not None:
                continue
            if maybe_copy and data_id(t) in aliases:
                self.alias_copies[_xc.tensor_id(t)] = _xc.TensorRef(t)
                continue
            kept.append(t)
        if wanted is not None:
            kept = [t for t in kept if _xc.tensor_id(t) in wanted]
        if not kept:
            return []
        flags = _xc.needs_materialization(kept)
        with _PLAIN():
            return [SyncTarget(LiveName(t), t, isinstance(t, torch.nn.Parameter)) for t, pending in zip(kept, flags)
                    if pending and _xc.takes_device_data(t)]

    def note_refused(self, tensors: list[torch.Tensor]) -> None:
        for key, refused in list(self.refused.items()):
            if refused.ref() is None:
                self.refused.pop(key, None)
        for tensor in tensors:
            self.refused[id(tensor)] = _Refused(_xc.TensorRef(tensor), _xc.data_id(tensor))

    def refused_before(self, tensor: torch.Tensor) -> bool:
        """Whether `tensor` holds exactly the computation a sync without arguments refused."""
        entry = self.refused.get(id(tensor))
        return entry is not None and entry.ref() is tensor and entry.data == _xc.data_id(tensor)

    def left_pending(self, device: str) -> dict[int, str]:
        """torch-xla tensor id -> shape of every XLA tensor still pending (torch-xla's
        live-tensor report), but to_device's ids, the copies of them, and what was refused.
        The report (each pending tensor's IR as text: to_device's ids alone cost 0.2-0.5 ms a
        step) is read only when the device holds more pending tensors than those."""
        from x64guard.torch_xla.boundary import BOUNDARY

        known = {_xc.tensor_id(tensor): tensor for tensor in BOUNDARY.id_tensors()}
        for key, ref in list(self.alias_copies.items()):
            tensor = ref()
            if tensor is None:
                self.alias_copies.pop(key, None)
            else:
                known[key] = tensor
        for refused in list(self.refused.values()):
            tensor = refused.ref()
            if tensor is not None and self.refused_before(tensor):
                known[_xc.tensor_id(tensor)] = tensor
        on_device = [tensor for tensor in known.values() if str(tensor.device) == device]
        if _xc.pending_count(device) == sum(_xc.needs_materialization(on_device)):
            return {}     # every pending tensor of the device is one of these (each is live there)
        return {tensor_id: shape for tensor_id, shape in _xc.pending_tensor_report(device) if tensor_id not in known}


class LiveName:
    """A tracked tensor's name for messages ("a parameter float32[64, 64]"), formatted only
    when a message uses it: a sync without arguments names every tensor it takes, at every
    step, and almost never says any of them."""

    __slots__ = ("tensor",)

    def __init__(self, tensor: torch.Tensor) -> None:
        self.tensor = tensor

    def __str__(self) -> str:
        kind = "a parameter" if isinstance(self.tensor, torch.nn.Parameter) else "a tensor"
        return f"{kind} {str(self.tensor.dtype).removeprefix('torch.')}{list(self.tensor.shape)}"


def _is_leaf(tensor: torch.Tensor) -> bool:
    """Whether `tensor` is an autograd leaf: a tensor whose `.grad` autograd fills (False
    where autograd refuses to say). By autograd's flag alone: a parameter updated in place
    from a tensor that requires grad is no leaf, and reading its `.grad` would warn in the
    user's process; and `isinstance(t, Parameter)` runs Parameter's Python __instancecheck__
    (0.7 us) for each of the step's made tensors, which are not parameters."""
    try:
        return tensor.is_leaf
    except RuntimeError:    # a no_grad view whose base changed in place: autograd refuses to say
        return False


def _xla_grad(tensor: torch.Tensor) -> "torch.Tensor | None":
    """The XLA gradient of a leaf, or None. (Read with the tensor's own __torch_function__:
    a GuardedTensor's gradient is then a GuardedTensor too, as everything computed from it.)"""
    try:
        grad = tensor.grad
    except RuntimeError:
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
            # by the object's type, not isinstance: isinstance reads `__class__`, which runs
            # code in proxies (torch.distributed's deprecated `reduce_op` warns, a dead
            # weakref.proxy raises); a proxied tensor is itself in the heap
            if not issubclass(type(obj), torch.Tensor):
                continue
            found = obj.device.type == "xla" and id(obj) not in known
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
