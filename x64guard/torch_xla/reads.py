"""Mid-step reads of pending XLA tensors, narrowed (issue 25, item 4).

A read of a pending XLA tensor (`.item()`, `if mask.all():`, `int(t)`, `.tolist()`,
`.cpu()`, and `nonzero()`, whose shape needs the values) goes straight to torch-xla's C++,
which compiles and runs the tensor's graph at full width: no hook sees it but a torch
function mode or a tensor subclass's `__torch_function__`. Both are here, sharing one rule
(`narrowed_read`: run the tensor's pending graph through x64guard first, as `sync` does,
then read the narrowed value; the tensor keeps its dtype):

* `NarrowedReads`, the mode `x64guard.torch_xla.step()` opens: every read inside the step;
* `GuardedTensor`, what `to_device` gives an int64 tensor: the ids of a batch are where 64-bit
  lazy graphs start (Hugging Face's masks are computed from `attention_mask`), and PyTorch
  propagates the subclass to every tensor computed from them, so the reads of those run
  narrowed with no scope at all: the drop-in `x64guard.torch_xla.sync()` loop needs no
  `step()`. Moving to the host gives a plain tensor: the subclass is the device's.
  While dynamo compiles a frame (any backend) the subclass's `__torch_function__` is
  switched off (`compiling`): dynamo then traces it as a plain tensor. Process-wide while a
  compile runs, restored when the last one ends: a read in another thread meanwhile goes
  to torch-xla (the next sync warns, `lazy-read`). (Left traced, with plain ops under
  `is_dynamo_compiling()`, dynamo 2.9 breaks the graph at every Python-level override
  check, `torch.overrides.handle_torch_function`'s `_is_torch_function_mode_enabled()`:
  OPT's loss, `nn.functional.pad(labels, ...)`, then runs outside the graph, and
  torch-xla computes the padded labels at 64 bits, an s64 module.) A frame dynamo compiles while those
  callbacks are not registered (`torch._dynamo.reset()` clears them) traces
  `__torch_function__` itself: it then runs the op as a plain tensor's.
"""

from __future__ import annotations

import threading

import torch
from torch.overrides import TorchFunctionMode

from x64guard.torch_xla import _private as _xc
from x64guard.torch_xla.list_indices import INDEXING, with_int32_index
from x64guard.torch_xla.live import LIVE

_TENSOR = torch.Tensor   # its reads are TensorBase's methods, the objects torch functions are called with
# reads that return Python values: computed from the narrowed value as they are
_VALUE_READS = frozenset({_TENSOR.item, _TENSOR.__bool__, _TENSOR.__int__, _TENSOR.__float__, _TENSOR.__index__,
                          _TENSOR.tolist})
# reads that return a host tensor: widened on the host to the dtype the caller sees
_HOST_READS = frozenset({_TENSOR.cpu, _TENSOR.to})
# ops whose result's shape depends on their input's values: torch-xla executes the input
# (DeBERTa-v2's loss: `(labels >= 0).nonzero()`); indices, whatever the input's dtype
_INDEX_READS = frozenset({torch.nonzero, _TENSOR.nonzero, torch.argwhere, _TENSOR.argwhere})


class NarrowedReads(TorchFunctionMode):
    """Inside `x64guard.torch_xla.step()`: a read of a pending XLA tensor first runs that
    tensor's pending graph through x64guard (`read_narrowed`: lowered, narrowed, cached
    per graph as `sync` does), then reads the narrowed value; PyTorch still sees the
    tensor's own dtype (an int64 tensor stays int64: a pending convert of its int32 data,
    which x64guard's programs read through, as `to_device`'s ids)."""

    def __init__(self, read_narrowed):
        super().__init__()
        self._read_narrowed = read_narrowed

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        result = narrowed_read(func, args, kwargs, self._read_narrowed)
        if result is not NOT_A_READ:
            return result
        if func in INDEXING:
            args = with_int32_index(args)
        return func(*args, **kwargs)


NOT_A_READ = object()
READS = _VALUE_READS | _HOST_READS | _INDEX_READS


def narrowed_read(func, args: tuple, kwargs: dict, read_narrowed):
    """`func(*args, **kwargs)` computed from the narrowed value when it reads the values of
    a pending XLA tensor (`read_narrowed` runs the tensor's graph through x64guard first);
    NOT_A_READ otherwise, for the caller to run `func` as it is."""
    if (func in _VALUE_READS or func in _HOST_READS) and args \
            and (func is not _TENSOR.to or _to_host(args[1:], kwargs)) and _pending_xla(args[0]):
        tensor = args[0]
        narrowed = read_narrowed(tensor)
        result = func(narrowed, *args[1:], **kwargs)
        if func in _HOST_READS and narrowed.dtype is not tensor.dtype and not _names_dtype(args[1:], kwargs):
            result = result.to(tensor.dtype)   # on the host: eager's dtype, no 64-bit device graph
        return result
    if func in _INDEX_READS and args and _pending_xla(args[0]):
        return func(read_narrowed(args[0]), *args[1:], **kwargs)
    return NOT_A_READ


def _pending_xla(x) -> bool:
    return isinstance(x, torch.Tensor) and x.device.type == "xla" and _xc.needs_materialization([x])[0]


def _to_host(args: tuple, kwargs: dict) -> bool:
    """Whether `Tensor.to(*args, **kwargs)` moves to the CPU (a read), not within the device."""
    device = kwargs.get("device")
    for arg in args:
        if isinstance(arg, (str, torch.device)):
            device = arg
    return device is not None and torch.device(device).type == "cpu"


def _names_dtype(args: tuple, kwargs: dict) -> bool:
    return "dtype" in kwargs or any(isinstance(a, torch.dtype) for a in args)


class GuardedTensor(torch.Tensor):
    """An XLA tensor whose pending values x64guard computes, narrowed, when something
    reads them; `to_device` gives int64 tensors this class, and every tensor computed from
    them gets it too (see the module's docstring). Its dtype is its own.

    The class is given by changing the Python class of a fresh result (`_reclassed`), not
    with PyTorch's default `as_subclass`: that makes an alias, a view whose base (the plain
    result, autograd's graph on it) stays pending behind it. Measured: after a step whose
    loss was computed from such ids, each loss's base stayed pending and held that step's
    random-number seed, which the next sync without arguments found and refused."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        # Every op on a GuardedTensor runs this (a Falcon step: ~150), so its common path is
        # inline: a fresh plain result noted and reclassed as `_reclassed` does.
        if kwargs is None:
            kwargs = {}
        if func in _PLAIN_GETTERS:   # half of a Falcon step's ~180: no tensor, nothing to read
            with _PLAIN_OPS():
                return func(*args, **kwargs)
        if _is_dynamo_compiling():   # dynamo traces this (its callbacks were not armed): a plain op
            return _plain(func, args, kwargs)
        if func in READS:
            result = narrowed_read(func, args, kwargs, _read_narrowed_default)
            if result is not NOT_A_READ:
                return _reclassed(result, args, kwargs)
        with _PLAIN_OPS():
            if func in INDEXING:   # a list index: a shared int32 table, not fresh int64 data to read back
                args = with_int32_index(args)
            result = func(*args, **kwargs)
        if func in _NOT_TENSORS:
            return result
        if type(result) is _TENSOR:
            if result.is_xla and not _is_argument(result, args, kwargs):
                LIVE.note_made(result)
                result.__class__ = GuardedTensor
            return result
        return _reclassed(result, args, kwargs)


_is_dynamo_compiling = torch.compiler.is_dynamo_compiling
_PLAIN_OPS = _xc.plain_torch_function_type()


def _plain(func, args: tuple, kwargs: dict):
    """`func(*args, **kwargs)` as on plain tensors: what `torch.Tensor.__torch_function__`
    does for the class `torch.Tensor` (subclasses' switched off meanwhile, the result left
    as it is), without its checks."""
    with _PLAIN_OPS():
        return func(*args, **kwargs)


# what `Tensor.__torch_function__` leaves as it is (torch/_tensor.py: `get_default_nowrap_functions`)
_NOT_TENSORS = frozenset(torch.overrides.get_default_nowrap_functions())
# properties that describe a tensor and return no tensor (`.device`, `.shape`, ...): read
# as a plain tensor's, with none of an op's bookkeeping
_PLAIN_GETTERS = frozenset(getattr(_TENSOR, name).__get__ for name in (
    "device", "is_xla", "shape", "dtype", "is_leaf", "ndim", "requires_grad", "layout", "is_cuda", "is_cpu",
    "is_sparse", "is_quantized", "is_meta", "is_nested", "itemsize", "nbytes", "output_nr", "_version"))
_GUARDED_TORCH_FUNCTION = GuardedTensor.__dict__["__torch_function__"]


def _read_narrowed_default(tensor: torch.Tensor) -> torch.Tensor:
    from x64guard.torch_xla.lazy import read_narrowed   # lazy.py imports this module

    return read_narrowed(tensor, mode=None, policy="error")


def _reclassed(result, args: tuple, kwargs: dict):
    """`result` with each fresh tensor in it a GuardedTensor on the XLA device and a plain
    tensor elsewhere (`.cpu()`: the subclass is the device's). A tensor that is one of the
    op's arguments (an in-place op, a no-op `.to()` or `type_as` returns its input) stays
    as the caller has it."""
    if isinstance(result, (tuple, list)):
        items = [_reclassed(item, args, kwargs) for item in result]
        return type(result)(*items) if hasattr(result, "_fields") else type(result)(items)
    if type(result) not in (torch.Tensor, GuardedTensor):    # a Parameter, another subclass, not a tensor
        return result
    cls = GuardedTensor if result.is_xla else torch.Tensor
    if _is_argument(result, args, kwargs):
        return result
    if cls is GuardedTensor:
        LIVE.note_made(result)     # what a sync without arguments computes (live.py)
    if type(result) is not cls:
        result.__class__ = cls
    return result


def _is_argument(result: torch.Tensor, args: tuple, kwargs: dict) -> bool:
    """Whether `result` is one of the op's arguments, or in a list or tuple among them (a
    loop, not a generator: this runs on every op of a GuardedTensor)."""
    for arg in (*args, *kwargs.values()) if kwargs else args:
        if arg is result:
            return True
        if isinstance(arg, (tuple, list)):
            for item in arg:
                if item is result:
                    return True
    return False


def guarded(tensor: torch.Tensor) -> torch.Tensor:
    """`tensor`, an int64-as-PyTorch-sees-it XLA tensor x64guard made (`to_device`'s, or
    one a sync without arguments kept int64), as a GuardedTensor: the same tensor object,
    another Python class (see GuardedTensor for why not `as_subclass`); a GuardedTensor
    or another subclass stays as it is."""
    if type(tensor) is torch.Tensor:
        tensor.__class__ = GuardedTensor
    return tensor


_COMPILING = {"depth": 0}
_COMPILING_LOCK = threading.Lock()


def compiling(started: bool) -> None:
    """Dynamo starts (`True`) or ends compiling a frame: GuardedTensor is a plain tensor to
    it meanwhile (`__torch_function__` switched to PyTorch's disabled one, as
    `nn.Parameter` has it), and itself again after the last compile in progress ends."""
    with _COMPILING_LOCK:
        _COMPILING["depth"] = max(0, _COMPILING["depth"] + (1 if started else -1))
        GuardedTensor.__torch_function__ = torch._C._disabled_torch_function_impl if _COMPILING["depth"] else \
            _GUARDED_TORCH_FUNCTION
