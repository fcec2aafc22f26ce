"""Ops torch-xla 2.9 has no XLA lowering for, written with ops it lowers, so that x64guard
traces and narrows them with the rest of the graph instead of refusing them (issue 34).

torch-xla runs such an op on the CPU (its fallback): openxla does so on every call, but
x64guard traces a graph once, where the CPU result would be frozen into the program
(`torch-xla-fallback`). Each op here is decomposed twice over: in AOTAutograd's trace
(`decompositions=` of the training path) and while a graph is traced
(x64guard/torch_xla/repairs.py); autograd records the op itself, so that its backward
(`_embedding_bag_backward`, `_weight_norm_interface_backward`, no lowering either) is
decomposed too.

Measured before (torch-xla 2.9.0, CPU): `nn.EmbeddingBag` in training and with mode
"mean" or "max" (`_embedding_bag`; `_embedding_bag_forward_only`'s XLA kernel covers
"sum" only), `torch.bucketize`, `torch.nn.utils.parametrizations.weight_norm`
(`_weight_norm_interface`) fell back.
"""

from __future__ import annotations

import torch

_A = torch.ops.aten
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


def _bucketize(x, boundaries, *, out_int32=False, right=False):
    return torch._refs.bucketize(x, boundaries, out_int32=out_int32, right=right)


def _weight_norm_interface(v, g, dim=0):
    from torch._decomp import decompositions

    return decompositions._weight_norm_interface(v, g, dim)


def _weight_norm_interface_backward(grad_w, saved_v, saved_g, saved_norms, dim):
    # PyTorch's own composite form of the same gradient (WeightNorm.cpp)
    return _A._weight_norm_differentiable_backward.default(grad_w, saved_v, saved_g, saved_norms, dim)


DECOMPOSITIONS = {
    _A._embedding_bag.default: _embedding_bag,
    _A._embedding_bag_forward_only.default: _embedding_bag,
    _A.bucketize.Tensor: _bucketize,
    _A._weight_norm_interface.default: _weight_norm_interface,
    _A._embedding_bag_backward.default: _embedding_bag_backward,
    _A._weight_norm_interface_backward.default: _weight_norm_interface_backward,
}
