"""Repairs of torch-xla 2.9 gaps, as a dispatch mode active while x64guard traces a graph."""

from __future__ import annotations

import functools
import sys

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from x64guard.errors import X64GuardError
from x64guard.torch_xla import _private as _xc
from x64guard.findings import Finding, Kind, Location, Severity
from x64guard.torch_xla.base import NARROW_DTYPE
from x64guard.torch_xla.boundary import narrow_through_host
from x64guard.torch_xla.fft import FFT_OPS, fft_as_xla
from x64guard.torch_xla.source import TRAMPOLINE_FILE, node_source


_A = torch.ops.aten

# torch-xla 2.9 lowers these with an empty `dim` list as "reduce nothing"; PyTorch means
# "reduce over every dimension" (measured: sum, mean, amax, amin, var, std and
# linalg_vector_norm return their input, or NaN). torch.export decomposes a plain
# `x.sum()` into `sum.dim_IntList(x, [])`, so `x.sum() + 1` exported as `x + 1`.
_EMPTY_DIM_MEANS_ALL = frozenset({
    _A.sum.dim_IntList, _A.mean.dim, _A.amax.default, _A.amin.default,
    _A.var.correction, _A.std.correction, _A.var_mean.correction, _A.std_mean.correction,
    _A.linalg_vector_norm.default,
})


def _is_xla(x) -> bool:
    return isinstance(x, torch.Tensor) and x.device.type == "xla"


class TorchXlaRepairs(TorchDispatchMode):
    """Active while x64guard traces a graph with torch-xla (and in mode allow):

    * reductions over an empty dim list get the full list (torch-xla reduces nothing);
    * FFTs (`_fft_c2c`, `_fft_r2c`, `_fft_c2r`), which torch-xla 2.9 runs on the CPU,
      become XLA's `fft` op, lowered by JAX at full width inside the traced graph, so
      that the core pass narrows them with the rest (complex128 -> complex64).

    * `native_dropout` in training (what dropout becomes under AOTAutograd and
      torch.export) is computed as torch-xla's own eager `dropout` computes it: keep where
      a uniform draw is below 1 - p, scale by 1/(1-p), a bool mask. torch-xla 2.9 lowers
      native_dropout with the scale 1/p (p=0.1: kept values x10, not x1.11) and its mask
      as float32 holding that scale, so that openxla's compiled dropout is wrong for any
      p but 0.5 and its gradients do not match its forward. The draw is torch-xla's
      `rand` (the same rng_bit_generator words native_dropout draws).

    * ops torch-xla 2.9 cannot lower that x64guard decomposes (`_embedding_bag`,
      `bucketize`, `_weight_norm_interface`: below);
      with `refuse_fallbacks` (a trace), any other op torch-xla would run on the CPU is
      refused before it runs, at the model's line: torch-xla's fallback first computes
      the op's pending inputs on the device, at full width.

    With `narrow_transfers` (an overflow policy, while x64guard traces a graph it will
    narrow), a 64-bit host tensor the graph moves to the device (`.to(device)`) is
    narrowed on the host and moved at 32 bits, then widened inside the graph, so that no
    64-bit data reaches the device.

    Anything that is not an XLA tensor (fake tensors of torch.export's own tracing) is
    passed through untouched.
    """

    def __init__(self, narrow_transfers: str | None = None, refuse_fallbacks: bool = False):
        super().__init__()
        self._narrow_transfers = narrow_transfers
        self._refuse_fallbacks = refuse_fallbacks

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self._narrow_transfers is not None and func is _A._to_copy.default:
            moved = self._narrowed_transfer(args[0], kwargs)
            if moved is not None:
                return moved
        if args and _is_xla(args[0]):
            if func is _A.native_dropout.default:
                return _native_dropout(*args, **kwargs)
            if func in _EMPTY_DIM_MEANS_ALL:
                args, kwargs = _full_dims(func, args, kwargs)
            elif func in FFT_OPS:
                return fft_as_xla(func, *args, **kwargs)
            elif func in DECOMPOSITIONS:
                return DECOMPOSITIONS[func](*args, **kwargs)
            elif self._refuse_fallbacks and _falls_back(func):
                raise _fallback_refusal(func)
        return func(*args, **kwargs)

    def _narrowed_transfer(self, source, kwargs: dict) -> torch.Tensor | None:
        target = kwargs.get("device")
        if not isinstance(source, torch.Tensor) or source.device.type != "cpu" or target is None or \
                torch.device(target).type != "xla":
            return None
        wide = kwargs.get("dtype") or source.dtype
        if wide not in NARROW_DTYPE:
            return None
        moved = narrow_through_host(source.to(wide), NARROW_DTYPE[wide], "a tensor the graph moves to the device",
                                    target, self._narrow_transfers)
        return moved.to(wide)


@functools.lru_cache(maxsize=None)
def _falls_back(func) -> bool:
    """Whether torch-xla runs `func` on the CPU: no XLA kernel, and none the dispatcher
    uses for XLA instead (CompositeExplicitAutograd; CompositeImplicitAutograd ops are
    decomposed before a dispatch mode sees them)."""
    has = _xc.has_kernel
    name = func.name()
    return not (has(name, "XLA") or has(name, "CompositeExplicitAutograd") or has(name, "CompositeImplicitAutograd"))


def _fallback_refusal(func) -> X64GuardError:
    """The refusal of an op torch-xla cannot lower, at the model line of the FX node being
    run (the node-by-node trampoline frame on the stack), before anything ran."""
    name = func.name()
    location, where = Location.at("the traced graph"), ""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename != TRAMPOLINE_FILE:
        frame = frame.f_back
    node = frame.f_locals.get("node") if frame is not None else None
    if isinstance(node, torch.fx.Node):
        source = node_source(node)
        if source.file is not None:
            location, where = Location.source(source.file, source.line, None), f" at {source.describe()}"
    message = (f"torch-xla has no XLA lowering for {name}{where}: it would run on the CPU while the graph is traced "
               "(its inputs first computed on the device at full width), and its result would be frozen into the "
               "program. Move that op out of the compiled function, or compute it with ops torch-xla lowers")
    return X64GuardError(f"x64guard.torch_xla: {message}", [Finding(Kind.TORCH_XLA_FALLBACK, Severity.ERROR, name,
                                                                    location, message)])


def _native_dropout(x: torch.Tensor, p: float, train: bool | None) -> tuple[torch.Tensor, torch.Tensor]:
    """aten.native_dropout with PyTorch's meaning: (x * mask / (1 - p), mask)."""
    if not train or p == 0:
        return x.clone(), torch.ones_like(x, dtype=torch.bool)
    if p == 1:
        return torch.zeros_like(x), torch.zeros_like(x, dtype=torch.bool)
    keep = torch.rand_like(x) < (1 - p)
    return x * keep * (1.0 / (1 - p)), keep


def _full_dims(func, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """`dim=[]` -> every dimension, for the ops in _EMPTY_DIM_MEANS_ALL."""
    x = args[0]
    if x.dim() == 0:
        return args, kwargs
    names = [a.name for a in func._schema.arguments]
    index = names.index("dim")
    if "dim" in kwargs:
        value = kwargs["dim"]
    elif index < len(args):
        value = args[index]
    else:
        default = func._schema.arguments[index].default_value
        value = default if default is not None else None
    if value is None or len(value) != 0:
        return args, kwargs
    full = list(range(x.dim()))
    if "dim" in kwargs or index >= len(args):
        return args, {**kwargs, "dim": full}
    return args[:index] + (full,) + args[index + 1:], kwargs


# ----------------------------------------------------------------------------- decompositions
# Ops torch-xla 2.9 has no XLA lowering for, written with ops it lowers, so that x64guard
# traces and narrows them with the rest of the graph instead of refusing them (issue 34).
#
# torch-xla runs such an op on the CPU (its fallback): openxla does so on every call, but
# x64guard traces a graph once, where the CPU result would be frozen into the program
# (`torch-xla-fallback`). Each op here is decomposed twice over: in AOTAutograd's trace
# (`decompositions=` of the training path) and while a graph is traced
# (the dispatch mode above); autograd records the op itself, so that its backward
# (`_embedding_bag_backward`, `_weight_norm_interface_backward`, no lowering either) is
# decomposed too.
#
# Measured before (torch-xla 2.9.0, CPU): `nn.EmbeddingBag` in training and with mode
# "mean" or "max" (`_embedding_bag`; `_embedding_bag_forward_only`'s XLA kernel covers
# "sum" only), `torch.bucketize`, `torch.nn.utils.parametrizations.weight_norm`
# (`_weight_norm_interface`) fell back.

_SUM, _MEAN, _MAX = 0, 1, 2    # `mode` of aten._embedding_bag


def _embedding_bag(weight, indices, offsets, scale_grad_by_freq=False, mode=_SUM, sparse=False,
                   per_sample_weights=None, include_last_offset=False, padding_idx=-1):
    """aten._embedding_bag on 1-D `indices` (F.embedding_bag flattens 2-D input into
    bags of equal size): per bag the sum, mean or max of its rows; an empty bag, or one
    holding only `padding_idx`, gives zeros, as PyTorch's kernel does. Returns (output,
    offset2bag, bag_size, max_indices), what `_embedding_bag_backward` (below) reads."""
    count, width = indices.shape[0], weight.shape[1]
    bags = offsets.shape[0] - (1 if include_last_offset else 0)
    starts = offsets[1:bags]
    # the bag of each position: how many later bags start at or before it (offsets are sorted);
    # a bag starting at `count` (an empty last bag) lands in the extra slot and is dropped
    hits = torch.zeros(count + 1, dtype=indices.dtype, device=indices.device).index_add(0, starts,
                                                                                         torch.ones_like(starts))
    offset2bag = hits[:count].cumsum(0)
    keep = indices != padding_idx if padding_idx >= 0 else torch.ones_like(indices, dtype=torch.bool)
    rows = weight.index_select(0, indices)
    bag_size = torch.zeros(bags, dtype=indices.dtype, device=indices.device).index_add(0, offset2bag, keep.to(
        indices.dtype))
    if mode == _MAX:
        output, max_indices = _bag_max(weight, indices, rows, keep, offset2bag, bag_size, bags)
    else:
        if per_sample_weights is not None:
            rows = rows * per_sample_weights[:, None].to(rows.dtype)
        rows = torch.where(keep[:, None], rows, torch.zeros_like(rows))
        output = torch.zeros(bags, width, dtype=weight.dtype, device=weight.device).index_add(0, offset2bag, rows)
        if mode == _MEAN:
            output = output / bag_size.clamp(min=1)[:, None].to(output.dtype)
        max_indices = torch.zeros(bags, 0, dtype=indices.dtype, device=indices.device)
    return output, offset2bag, bag_size, max_indices


def _bag_max(weight, indices, rows, keep, offset2bag, bag_size, bags):
    """Per bag and column the largest row value (zeros for an empty bag) and the weight
    row it came from, the first position on ties (the backward's `maximum_indices`)."""
    count, width = rows.shape
    floor = torch.finfo(weight.dtype).min
    masked = torch.where(keep[:, None], rows, torch.full_like(rows, floor))
    where_bag = offset2bag[:, None].expand(count, width)
    init = torch.full((bags, width), floor, dtype=weight.dtype, device=weight.device)
    best = init.scatter_reduce(0, where_bag, masked, "amax", include_self=True)
    filled = bag_size[:, None] > 0
    output = torch.where(filled, best, torch.zeros_like(best))
    positions = torch.arange(count, dtype=indices.dtype, device=indices.device)[:, None].expand(count, width)
    is_best = (masked == best.index_select(0, offset2bag)) & keep[:, None]
    candidates = torch.where(is_best, positions, torch.full_like(positions, count))
    first = torch.full((bags, width), count, dtype=indices.dtype, device=indices.device).scatter_reduce(
        0, where_bag, candidates, "amin", include_self=True)
    padded = torch.cat([indices, indices.new_zeros(1)])      # an empty bag's `count` reads the extra 0
    max_indices = torch.where(filled, padded.index_select(0, first.flatten()).view(bags, width),
                              torch.zeros_like(first))
    return output, max_indices


def _embedding_bag_backward(grad, indices, offsets, offset2bag, bag_size, maximum_indices, num_weights,
                            scale_grad_by_freq, mode, sparse, per_sample_weights, padding_idx=-1):
    """aten._embedding_bag_backward, dense: the weight's gradient."""
    width = grad.shape[1]
    zeros = torch.zeros(num_weights, width, dtype=grad.dtype, device=grad.device)
    if mode == _MAX:
        filled = (bag_size > 0)[:, None]
        return zeros.scatter_add(0, maximum_indices, torch.where(filled, grad, torch.zeros_like(grad)))
    rows = grad.index_select(0, offset2bag)
    if mode == _MEAN:
        rows = rows / bag_size.clamp(min=1).index_select(0, offset2bag)[:, None].to(rows.dtype)
    if per_sample_weights is not None:
        rows = rows * per_sample_weights[:, None].to(rows.dtype)
    if padding_idx >= 0:
        rows = torch.where((indices != padding_idx)[:, None], rows, torch.zeros_like(rows))
    if scale_grad_by_freq:
        seen = torch.zeros(num_weights, dtype=grad.dtype, device=grad.device).index_add(
            0, indices, torch.ones_like(indices, dtype=grad.dtype))
        rows = rows / seen.index_select(0, indices)[:, None]
    return zeros.index_add(0, indices, rows)


def _weight_norm_interface_backward(grad_w, saved_v, saved_g, saved_norms, dim):
    # PyTorch's own composite form of the same gradient (WeightNorm.cpp)
    return _A._weight_norm_differentiable_backward.default(grad_w, saved_v, saved_g, saved_norms, dim)


DECOMPOSITIONS = {
    _A._embedding_bag.default: _embedding_bag,
    _A._embedding_bag_forward_only.default: _embedding_bag,
    _A.bucketize.Tensor: _xc.reference_bucketize,
    _A._weight_norm_interface.default: _xc.decomposed_weight_norm_interface,
    _A._embedding_bag_backward.default: _embedding_bag_backward,
    _A._weight_norm_interface_backward.default: _weight_norm_interface_backward,
}
