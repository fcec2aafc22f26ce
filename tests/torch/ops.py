"""The op table: each row is a call, the dtype(s) it must produce under each default
integer dtype, and the inputs it takes. Data, not test functions: tests/torch/test_ops.py
runs every row under int8/int16/int32/int64 in eager mode, under torch.compile and on
XLA tensors, and compares the values with stock PyTorch (no setting).

Expected dtypes are written per output:
  "D"        the default integer dtype
  "D|int32"  the wider of the default and int32 (an integer input never narrows)
  any other  that torch dtype, whatever the default ("float32", "int64", "bool", ...)

`graph_int64` names rows whose graph keeps an int64 value on purpose (an aten op with no
narrower form, or an argument PyTorch requires to be int64): see the README's limits.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F

# Every extent stays below 127, so the int8 default can hold every index and count.
X = torch.tensor([[0.5, -1.0, 2.0, 2.0, -0.25, 3.0],
                  [1.5, 0.0, -2.0, 4.0, 4.0, -3.5],
                  [-0.5, 2.5, 1.0, -1.5, 0.75, 0.0],
                  [3.0, -2.5, 0.0, 1.25, -4.0, 2.0]])


def inputs(device: str | torch.device = "cpu") -> dict[str, torch.Tensor]:
    """Fresh inputs, built with explicit dtypes so that no default decides them."""
    x = X.to(device)
    return {
        "x": x,
        "b": (X > 0).to(device),
        "i8": torch.tensor([3, -1, 3, 7, 0], dtype=torch.int8, device=device),
        "i16": torch.tensor([2, 5, 5, 1], dtype=torch.int16, device=device),
        "i32": torch.tensor([4, 4, 1, 9, 2, 2], dtype=torch.int32, device=device),
        "i64": torch.tensor([6, 1, 6], dtype=torch.int64, device=device),
        "img": torch.arange(32, dtype=torch.float32, device=device).reshape(1, 2, 4, 4).flip(-1),
        "probs": torch.tensor([0.1, 0.2, 0.3, 0.4], device=device),
    }


@dataclasses.dataclass(frozen=True)
class Op:
    name: str
    fn: Callable[[dict], object]
    expect: tuple[str, ...]          # per output (one entry for a single tensor)
    data_dependent: bool = False     # output shape depends on values (nonzero, unique, ...)
    random: bool = False             # reseeded before each run
    graph_int64: bool = False        # the compiled graph keeps an int64 value (documented)
    xla: bool = True                 # also run on XLA tensors
    xla_s64: bool = False            # torch-xla's own lowering writes s64 (RNG state, index lowering)


def op(name, fn, *expect, **kw) -> Op:
    return Op(name, fn, tuple(expect), **kw)


OPS: list[Op] = [
    # (1) tensors built from Python integers --------------------------------------------
    op("tensor_list", lambda t: torch.tensor([1, 2, 3], device=t["x"].device), "D"),
    op("tensor_nested", lambda t: torch.tensor([[1, -2], [3, 4]], device=t["x"].device), "D"),
    op("tensor_scalar", lambda t: torch.tensor(7, device=t["x"].device), "D"),
    op("tensor_bool_and_int", lambda t: torch.tensor([True, 2], device=t["x"].device), "D"),
    op("tensor_bools", lambda t: torch.tensor([True, False], device=t["x"].device), "bool"),
    op("tensor_floats", lambda t: torch.tensor([1.0, 2], device=t["x"].device), "float32"),
    op("tensor_explicit_int64", lambda t: torch.tensor([1, 2], dtype=torch.int64, device=t["x"].device), "int64"),
    op("tensor_from_shape", lambda t: torch.tensor(t["x"].shape, device=t["x"].device), "D"),
    op("as_tensor", lambda t: torch.as_tensor([5, 6], device=t["x"].device), "D"),
    op("asarray", lambda t: torch.asarray([3, 4], device=t["x"].device), "D"),
    op("full_int", lambda t: torch.full((2, 3), 5, device=t["x"].device), "D"),
    op("full_float", lambda t: torch.full((2,), 1.5, device=t["x"].device), "float32"),
    op("arange_end", lambda t: torch.arange(10, device=t["x"].device), "D"),
    op("arange_start_step", lambda t: torch.arange(2, 20, 3, device=t["x"].device), "D"),
    op("arange_negative_step", lambda t: torch.arange(5, -5, -2, device=t["x"].device), "D"),
    op("arange_of_tensor", lambda t: torch.arange(t["i32"][1]), "D", xla=False),
    op("arange_float", lambda t: torch.arange(0, 1, 0.25, device=t["x"].device), "float32"),
    op("arange_explicit_int64", lambda t: torch.arange(4, dtype=torch.long, device=t["x"].device), "int64"),
    op("randint", lambda t: torch.randint(0, 100, (6,), device=t["x"].device), "D", random=True, xla_s64=True),
    op("randint_high_only", lambda t: torch.randint(50, (4,), device=t["x"].device), "D", random=True, xla_s64=True),
    op("randperm", lambda t: torch.randperm(20, device=t["x"].device), "D", random=True),
    op("tril_indices", lambda t: torch.tril_indices(4, 3, device=t["x"].device), "D"),
    op("triu_indices", lambda t: torch.triu_indices(3, 5, 1, device=t["x"].device), "D"),
    op("zeros_explicit_long", lambda t: torch.zeros(3, dtype=torch.long, device=t["x"].device), "int64"),
    op("numpy_int64_array", lambda t: torch.tensor(np.array([1, 2], dtype=np.int64)), "int64", xla=False),
    # (2) bool tensors with Python integers ---------------------------------------------
    op("bool_add", lambda t: t["b"] + 1, "D"),
    op("bool_radd", lambda t: 1 + t["b"], "D"),
    op("bool_mul", lambda t: t["b"] * 3, "D"),
    op("bool_rmul", lambda t: 3 * t["b"], "D"),
    op("bool_and", lambda t: t["b"] & 1, "D"),
    op("bool_lshift", lambda t: t["b"] << 2, "D"),
    op("bool_floordiv", lambda t: t["b"] // 1, "D"),
    op("bool_pow", lambda t: t["b"] ** 2, "D"),
    op("torch_add_bool", lambda t: torch.add(t["b"], 5), "D"),
    op("where_scalars", lambda t: torch.where(t["b"], 1, 0), "D"),
    op("where_bool_and_int", lambda t: torch.where(t["b"], t["b"], 5), "D"),
    op("clamp_bool", lambda t: torch.clamp(t["b"], 0, 1), "D"),
    op("clamp_bool_keywords", lambda t: t["b"].clamp(min=0, max=1), "D"),
    op("bool_add_bool", lambda t: t["b"] + True, "bool"),
    op("int8_add_int", lambda t: t["i8"] + 1, "int8"),
    op("float_add_int", lambda t: t["x"] + 1, "float32"),
    op("bool_add_int64_tensor", lambda t: t["b"][0] + t["i64"][:1].expand(6), "int64"),
    # accumulation of bool and integer tensors
    op("bool_sum", lambda t: t["b"].sum(), "D"),
    op("bool_sum_dim", lambda t: t["b"].sum(1), "D"),
    op("bool_cumsum", lambda t: torch.cumsum(t["b"], 0), "D"),
    op("int8_sum", lambda t: t["i8"].sum(), "D|int8"),
    op("int16_prod", lambda t: t["i16"].prod(), "D|int16"),
    op("int32_cumsum", lambda t: t["i32"].cumsum(0), "D|int32"),
    op("int64_sum", lambda t: t["i64"].sum(), "int64"),
    op("float_sum", lambda t: t["x"].sum(), "float32"),
    op("count_nonzero", lambda t: torch.count_nonzero(t["x"]), "D", xla_s64=True),
    op("count_nonzero_dim", lambda t: torch.count_nonzero(t["x"], dim=1), "D", xla_s64=True),
    # (3) index-returning ops -------------------------------------------------------------
    op("argmax", lambda t: t["x"].argmax(), "D"),
    op("argmax_dim", lambda t: torch.argmax(t["x"], 1), "D"),
    op("argmin_keepdim", lambda t: t["x"].argmin(0, keepdim=True), "D"),
    op("argmax_int", lambda t: t["i32"].argmax(), "D"),
    op("max_dim", lambda t: t["x"].max(1), "float32", "D"),
    op("min_dim_keepdim", lambda t: torch.min(t["x"], 0, keepdim=True), "float32", "D"),
    op("max_of_two", lambda t: torch.max(t["x"], -t["x"]), "float32"),
    op("sort", lambda t: t["x"].sort(1), "float32", "D", graph_int64=True),
    op("sort_stable_descending", lambda t: torch.sort(t["i32"], descending=True, stable=True), "int32", "D",
       graph_int64=True),
    op("argsort", lambda t: t["x"].argsort(descending=True), "D", graph_int64=True),
    op("topk", lambda t: t["x"].topk(2), "float32", "D", graph_int64=True),
    op("kthvalue", lambda t: t["x"].kthvalue(2, 1), "float32", "D", graph_int64=True),
    op("median_dim", lambda t: t["x"].median(1), "float32", "D", graph_int64=True),
    op("cummax", lambda t: t["x"].cummax(1), "float32", "D", graph_int64=True),
    op("nonzero", lambda t: t["b"].nonzero(), "D", data_dependent=True),
    op("nonzero_float", lambda t: torch.nonzero(t["x"]), "D", data_dependent=True),
    op("nonzero_as_tuple", lambda t: t["b"].nonzero(as_tuple=True), "D", "D", data_dependent=True),
    op("argwhere", lambda t: torch.argwhere(t["b"]), "D", data_dependent=True),
    op("nonzero_static", lambda t: torch.nonzero_static(t["b"], size=20), "D", graph_int64=True, xla=False),
    op("where_condition_only", lambda t: torch.where(t["b"]), "D", "D", data_dependent=True),
    op("unique", lambda t: torch.unique(t["i32"], return_inverse=True, return_counts=True), "int32", "D", "D",
       data_dependent=True, graph_int64=True),
    op("unique_consecutive", lambda t: t["i32"].unique_consecutive(return_counts=True), "int32", "D",
       data_dependent=True, graph_int64=True),
    op("searchsorted", lambda t: torch.searchsorted(t["probs"], t["x"]), "D"),
    op("bucketize", lambda t: torch.bucketize(t["x"], t["probs"], right=True), "D"),
    op("searchsorted_explicit_int64", lambda t: torch.searchsorted(t["probs"], t["x"], out_int32=False), "int64"),
    op("bincount", lambda t: torch.bincount(t["i32"]), "D", data_dependent=True, graph_int64=True),
    op("multinomial", lambda t: torch.multinomial(t["probs"], 3), "D", random=True, graph_int64=True, xla=False),
    op("max_pool2d_indices", lambda t: F.max_pool2d(t["img"], 2, return_indices=True), "float32", "D",
       graph_int64=True),
    op("unravel_index", lambda t: torch.unravel_index(t["i32"], (3, 4)), "D", "D", graph_int64=True),
    # (4) ops that require int64 (or int32) index arguments keep working -------------------
    op("one_hot", lambda t: F.one_hot(torch.tensor([2, 0, 1], device=t["x"].device), 4), "D", graph_int64=True),
    op("one_hot_of_argmax", lambda t: F.one_hot(t["x"].argmax(1), 6), "D", graph_int64=True),
    op("cross_entropy", lambda t: F.cross_entropy(t["x"], torch.tensor([1, 5, 0, 2], device=t["x"].device)), "float32",
       graph_int64=True),
    op("nll_loss", lambda t: F.nll_loss(t["x"].log_softmax(1), t["x"].argmin(1)), "float32", graph_int64=True),
    op("take", lambda t: torch.take(t["x"], torch.tensor([0, 7, 23], device=t["x"].device)), "float32", graph_int64=True),
    op("take_along_dim", lambda t: torch.take_along_dim(t["x"], t["x"].argmax(1, keepdim=True), 1), "float32",
       graph_int64=True),
    op("index_fill", lambda t: t["x"].index_fill(1, torch.tensor([0, 3], device=t["x"].device), -9.0), "float32",
       graph_int64=True),
    op("max_unpool2d", lambda t: F.max_unpool2d(*F.max_pool2d(t["img"], 2, return_indices=True), 2), "float32",
       graph_int64=True),
    op("gather", lambda t: torch.gather(t["x"], 1, t["x"].argmax(1, keepdim=True)), "float32"),
    op("scatter_add", lambda t: torch.zeros(4, 6, device=t["x"].device).scatter_add(
        1, torch.tensor([[0], [5], [2], [1]], device=t["x"].device), t["x"][:, :1]), "float32"),
    op("index_select", lambda t: t["x"].index_select(1, torch.tensor([5, 0], device=t["x"].device)), "float32"),
    op("getitem_tensor", lambda t: t["x"][torch.tensor([3, 0], device=t["x"].device)], "float32", xla_s64=True),
    op("getitem_two_tensors", lambda t: t["x"][torch.tensor([1, 2], device=t["x"].device), t["x"].argmax(1)[:2]],
       "float32", xla_s64=True),
    op("embedding", lambda t: F.embedding(torch.tensor([[0, 2], [3, 1]], device=t["x"].device), t["x"]), "float32"),
]

# Every row name is unique.
assert len({o.name for o in OPS}) == len(OPS)


def expected_dtype(spec: str, default: torch.dtype) -> torch.dtype:
    if spec == "D":
        return default
    if spec.startswith("D|"):
        return torch.promote_types(default, getattr(torch, spec[2:]))
    return getattr(torch, spec)


def outputs(result) -> list:
    """The outputs of a call as a list (torch.return_types and tuples flattened)."""
    if isinstance(result, (tuple, list)):
        return list(result)
    return [result]
