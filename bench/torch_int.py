"""x64guard.torch.set_default_int_dtype benchmark (a section of `make bench`; alone:
`python -m bench.run --only torch` or `python -m bench.torch_int [runs]`). Figures, not tests:
nothing here fails on speed. Every figure is a ratio of timings taken in the same run, the
sides interleaved, best of N, time.perf_counter, one intra-op thread.

  (a) a loop of small ops, eager mode: a classifier's evaluation step on a batch of 32
      (two matmuls, relu, argmax, max over a dim, comparisons, bool sums, arange, advanced
      indexing, cross_entropy: 17 PyTorch calls), with the default int32 against stock
      PyTorch. Target: <= 1.5x. For scale, the same loop under an empty
      TorchFunctionMode (a mode that only forwards each call): the floor any
      TorchFunctionMode-based implementation pays, x64guard's rules or not.
  (b) per op, on tiny tensors (8x8: the op itself costs 1-8 us, so the overhead shows at
      its largest): stock, empty mode and int32 default, in us per call.
  (c) torch.int64 (the setting off): the same loop as (a), no mode on the stack.
  (d) the loop of (a) on a batch of 512: the same calls, larger kernels, for scale.

`run(runs)` prints this section and returns its figures; `summary(figures)` gives the
lines of the final table.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import time
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

import x64guard.torch as xt

TARGET_RATIO = 1.5
LOOP_STEPS = 400          # steps per timed loop in (a)
OP_CALLS = 1000           # calls per timed loop in (b)
MIN_RUNS = 7


class EmptyMode(TorchFunctionMode):
    """Forwards every call: the cost of having any Python TorchFunctionMode on the stack."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if kwargs:
            return func(*args, **kwargs)
        return func(*args)


SIDES: dict[str, Callable[[], contextlib.AbstractContextManager]] = {
    "stock": contextlib.nullcontext,
    "empty_mode": EmptyMode,
    "int32": lambda: xt.default_int_dtype(torch.int32),
    "int64": lambda: xt.default_int_dtype(torch.int64),
}


# --------------------------------------------------------------------------- (a) the loop

def make_batch(batch: int = 32):
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(batch, 64, generator=g), "w1": torch.randn(64, 64, generator=g) / 8,
            "b1": torch.randn(64, generator=g), "w2": torch.randn(64, 10, generator=g) / 8}


def step(x, w1, b1, w2, labels):
    """A classifier's evaluation step, written as PyTorch code is."""
    h = torch.relu(x @ w1 + b1)
    logits = h @ w2
    pred = logits.argmax(1)
    correct = (pred == labels).sum()
    top, where = logits.max(1)
    loss = F.cross_entropy(logits, labels)
    active = (logits > 0).sum(1)
    rows = torch.arange(x.shape[0])
    picked = logits[rows, labels]
    confident = (top > 0.5) + 0
    return correct, loss, where, active, picked.sum(), confident.sum()


def labels_under(side: str, batch: int = 32) -> torch.Tensor:
    with SIDES[side]():
        return torch.tensor([i % 10 for i in range(batch)])  # int32 under the setting


def _loop_seconds(fn: Callable[[], object], calls: int) -> float:
    gc.collect()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def time_sides(make: Callable[[str], Callable[[], object]], sides: list[str], calls: int, runs: int) -> dict:
    """Best seconds per call of each side, the sides interleaved run by run."""
    fns = {side: make(side) for side in sides}
    for side in sides:  # warm-up
        with SIDES[side]():
            _loop_seconds(fns[side], max(1, calls // 10))
    times: dict[str, list[float]] = {side: [] for side in sides}
    for _ in range(runs):
        for side in sides:
            with SIDES[side]():
                times[side].append(_loop_seconds(fns[side], calls))
    return {side: {"best_s": min(ts), "runs_s": ts} for side, ts in times.items()}


def loop(runs: int, size: int = 32) -> dict:
    batch = make_batch(size)

    def make(side):
        labels = labels_under(side, size)
        return lambda: step(batch["x"], batch["w1"], batch["b1"], batch["w2"], labels)

    sides = ["stock", "empty_mode", "int32", "int64"] if size == 32 else ["stock", "int32"]
    timed = time_sides(make, sides, LOOP_STEPS if size == 32 else LOOP_STEPS // 4, runs)
    us = {side: timed[side]["best_s"] * 1e6 for side in sides}
    if size != 32:
        ratio = us["int32"] / us["stock"]
        print(f"(d) the same loop on a batch of {size}: stock {us['stock']:.1f} us   int32 default "
              f"{us['int32']:.1f} us   ratio {ratio:.2f}")
        return {"batch": size, "stock_us": us["stock"], "int32_us": us["int32"], "ratio": ratio}
    # the results agree with stock PyTorch (values; dtypes int32 where stock has int64)
    with SIDES["int32"]():
        ours = step(batch["x"], batch["w1"], batch["b1"], batch["w2"], labels_under("int32"))
    stock = step(batch["x"], batch["w1"], batch["b1"], batch["w2"], labels_under("stock"))
    same = all(torch.equal(a.to(b.dtype), b) for a, b in zip(ours, stock))
    dtypes = sorted({str(t.dtype).replace("torch.", "") for t in ours if not t.is_floating_point()})
    figures = {
        "calls_per_step": 17, "batch": 32,
        "stock_us": us["stock"], "int32_us": us["int32"], "empty_mode_us": us["empty_mode"], "int64_us": us["int64"],
        "ratio": us["int32"] / us["stock"], "empty_mode_ratio": us["empty_mode"] / us["stock"],
        "int64_ratio": us["int64"] / us["stock"],
        "x64guard_over_empty_mode": us["int32"] / us["empty_mode"],
        "per_call_overhead_us": (us["int32"] - us["stock"]) / 17,
        "same_values": same, "integer_dtypes": dtypes,
        "target": f"<= {TARGET_RATIO}", "met": us["int32"] / us["stock"] <= TARGET_RATIO,
        "runs_s": {side: timed[side]["runs_s"] for side in sides},
    }
    print(f"(a) loop of small ops (a classifier step on a batch of 32, 17 calls), per step, best of {runs}:")
    print(f"    stock {us['stock']:.1f} us   int32 default {us['int32']:.1f} us   ratio {figures['ratio']:.2f}"
          f"   (target <= {TARGET_RATIO})")
    print(f"    empty TorchFunctionMode {us['empty_mode']:.1f} us (ratio {figures['empty_mode_ratio']:.2f}: the floor of "
          f"any mode); x64guard / empty mode {figures['x64guard_over_empty_mode']:.2f}")
    print(f"    overhead {figures['per_call_overhead_us']:.2f} us per call; results equal stock PyTorch's: {same}; "
          f"integer results: {', '.join(dtypes)}")
    print(f"(c) int64 (setting off, no mode): {us['int64']:.1f} us, ratio {figures['int64_ratio']:.2f}")
    return figures


# --------------------------------------------------------------------------- (b) per op

def per_op(runs: int) -> dict:
    x = torch.randn(8, 8, generator=torch.Generator().manual_seed(1))
    y = torch.randn(8, 8, generator=torch.Generator().manual_seed(2))
    ops: dict[str, Callable[[torch.Tensor], object]] = {
        "relu (forwarded)": lambda ids: torch.relu(x),
        "matmul (forwarded)": lambda ids: x @ y,
        "x.shape (forwarded)": lambda ids: x.shape,
        "x + 1.0 (checked)": lambda ids: x + 1.0,
        "x > 0 (checked)": lambda ids: x > 0,
        "torch.tensor([1, 2, 3])": lambda ids: torch.tensor([1, 2, 3]),
        "torch.arange(8)": lambda ids: torch.arange(8),
        "bool.sum()": lambda ids: (x > 0).sum(),
        "x.argmax(1)": lambda ids: x.argmax(1),
        "x.max(0)": lambda ids: x.max(0),
        "torch.where(b, 1, 0)": lambda ids: torch.where(x > 0, 1, 0),
        "x[ids]": lambda ids: x[ids],
        "cross_entropy": lambda ids: F.cross_entropy(x, ids),
    }
    figures = {}
    print(f"(b) per op on 8x8 tensors, us per call (best of {runs}): stock / empty mode / int32 default, ratio")
    for name, op in ops.items():
        def make(side, op=op):
            ids = labels_under(side)[:8] % 8
            return lambda: op(ids)

        timed = time_sides(make, ["stock", "empty_mode", "int32"], OP_CALLS, runs)
        us = {side: v["best_s"] * 1e6 for side, v in timed.items()}
        figures[name] = {**{f"{k}_us": v for k, v in us.items()}, "ratio": us["int32"] / us["stock"],
                         "empty_mode_ratio": us["empty_mode"] / us["stock"]}
        print(f"    {name:26s} {us['stock']:6.2f} / {us['empty_mode']:6.2f} / {us['int32']:6.2f}   "
              f"{us['int32'] / us['stock']:.2f}x (empty mode {us['empty_mode'] / us['stock']:.2f}x)")
    return figures


def run(runs: int) -> dict:
    """Print the x64guard.torch section and return its figures."""
    runs = max(MIN_RUNS, runs)
    start = time.perf_counter()
    package = Path(xt.__file__).parent
    source = b"".join(path.read_bytes() for path in sorted(package.glob("*.py")))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        print(f"\n[x64guard.torch] torch {torch.__version__}, 1 intra-op thread; "
              f"x64guard/torch/*.py sha256 {hashlib.sha256(source).hexdigest()[:12]}")
        figures = {"a_loop": loop(runs), "b_per_op": per_op(runs), "d_loop_batch_512": loop(runs, 512)}
    finally:
        torch.set_num_threads(threads)
    figures["torch_py_sha256"] = hashlib.sha256(source).hexdigest()
    figures["section_s"] = time.perf_counter() - start
    print(f"    (x64guard.torch section took {figures['section_s']:.0f} s)")
    return figures


def summary(figures: dict) -> list[str]:
    """The lines of the final summary table."""
    a = figures["a_loop"]
    worst = max(figures["b_per_op"].items(), key=lambda kv: kv[1]["ratio"])
    return [
        "  x64guard.torch.set_default_int_dtype(int32) vs stock PyTorch, eager",
        f"  (a) loop of small ops  int32 {a['int32_us']:.1f} us  stock {a['stock_us']:.1f} us  ratio {a['ratio']:.2f}  "
        f"target <= {TARGET_RATIO}  {'MET' if a['met'] else 'NOT MET'}",
        f"      (empty TorchFunctionMode: ratio {a['empty_mode_ratio']:.2f}; x64guard / empty mode "
        f"{a['x64guard_over_empty_mode']:.2f}; setting off (int64): ratio {a['int64_ratio']:.2f})",
        f"  (b) per op on 8x8 tensors: worst {worst[0]} {worst[1]['ratio']:.2f}x "
        f"(empty mode {worst[1]['empty_mode_ratio']:.2f}x)",
        f"  (d) the loop on a batch of 512: ratio {figures['d_loop_batch_512']['ratio']:.2f}",
    ]


if __name__ == "__main__":
    import sys

    result = run(next((int(a) for a in sys.argv[1:] if a.isdigit()), MIN_RUNS))
    print("\n" + "\n".join(summary(result)))
