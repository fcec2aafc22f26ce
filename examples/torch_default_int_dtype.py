"""x64guard.torch.set_default_int_dtype: PyTorch code that never makes int64.

A small ranking model, written as PyTorch code usually is (torch.tensor of Python ints,
arange, argmax, max over a dim, a bool mask summed, cross_entropy on the labels), run:
  1. eagerly, stock PyTorch and then with the default integer dtype int32;
  2. under torch.compile, counting int64 values in the graphs AOT autograd hands a
     compiler (what a Neuron or XLA backend would see), without and with the setting;
  3. through torch.export;
and an integer that int32 cannot hold, refused instead of wrapped.

Run: python examples/torch_default_int_dtype.py
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch._dynamo.backends.common import aot_autograd
from torch._functorch.aot_autograd import make_boxed_func

import x64guard.torch as xt


class Ranker(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(100, 16)
        self.out = torch.nn.Linear(16, 5)

    def forward(self, items):
        scores = self.out(self.emb(items))                 # (batch, 5)
        best = scores.argmax(1)
        top, where = scores.max(0)
        labels = torch.tensor([1, 0, 4, 2])                # Python integers
        loss = F.cross_entropy(scores, labels)             # wants int64 targets
        hits = (best == labels).sum() + (scores > 0).sum(1)
        ranks = torch.arange(scores.shape[1]).expand_as(scores)
        return loss, best, where, hits, ranks


def integer_dtypes(outputs) -> str:
    return ", ".join(sorted({str(t.dtype).replace("torch.", "") for t in outputs if not t.is_floating_point()}))


def values(n: int) -> str:
    return f"{n} int64 value{'' if n == 1 else 's'}"


def int64_values(graphs) -> int:
    count = 0
    for gm in graphs:
        for node in gm.graph.nodes:
            value = node.meta.get("val")
            for t in value if isinstance(value, (tuple, list)) else [value]:
                count += isinstance(t, torch.Tensor) and t.dtype is torch.int64
    return count


def compiled_int64(model, items) -> tuple[int, str]:
    graphs = []

    def keep(gm, example_inputs):
        graphs.append(gm)
        return make_boxed_func(gm.forward)

    torch._dynamo.reset()
    out = torch.compile(model, backend=aot_autograd(fw_compiler=keep), fullgraph=True)(items)
    return int64_values(graphs), integer_dtypes(out)


def main():
    torch.manual_seed(0)
    model = Ranker().eval()
    items = torch.tensor([3, 14, 15, 92], dtype=torch.int32)  # item ids, explicitly int32

    print("1. eager")
    stock = model(items)
    print(f"   stock PyTorch:         integer results {integer_dtypes(stock)}")
    with xt.default_int_dtype(torch.int32):
        ours = model(items)
    print(f"   default int32:         integer results {integer_dtypes(ours)}")
    same = all(torch.equal(a.to(b.dtype), b) for a, b in zip(ours, stock))
    print(f"   same values as stock PyTorch: {same}")

    print("2. torch.compile (aten graphs a backend compiles)")
    n, dtypes = compiled_int64(model, items)
    print(f"   stock PyTorch:         {values(n)} in the graph, integer results {dtypes}")
    with xt.default_int_dtype(torch.int32):
        n, dtypes = compiled_int64(model, items)
    print(f"   default int32:         {values(n)} in the graph (cross_entropy's target, which aten "
          f"requires as int64), integer results {dtypes}")

    print("3. torch.export (non-strict)")
    with xt.default_int_dtype(torch.int32):
        ep = torch.export.export(model, (items,), strict=False)
    print(f"   default int32:         {values(int64_values([ep.graph_module]))} in the exported graph")

    print("4. a value int32 cannot hold")
    with xt.default_int_dtype(torch.int32):
        try:
            torch.tensor([2 ** 40, 1])
        except xt.DefaultIntOverflowError as exc:
            print(f"   refused: {exc}")
        print(f"   explicit int64 still works: {torch.tensor([2 ** 40, 1], dtype=torch.int64).tolist()}")
    print(f"outside the block: torch.tensor([1]).dtype = {torch.tensor([1]).dtype}")


if __name__ == "__main__":
    main()
