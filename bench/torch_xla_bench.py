"""x64guard's torch-xla backend against torch-xla's own `openxla` backend (a section of
`make bench`; alone: `python -m bench.run --only torch_xla`, or `python -m bench.torch_xla_bench`).
Figures, not tests: nothing here fails on speed. Every ratio compares two timings
taken in the same run, the sides interleaved, best of N loops, results read back.

The model is the suite's transformer block (tests/torch_xla/models.py: float64
parameters, int64 tokens and positions, a causal mask, GELU), on the XLA device (CPU
backend), called under torch.no_grad(); `openxla` runs it at full width, x64guard
narrowed.

  (a) steady-state call, the same token tensor on every call (what the backend itself
      costs per call: dynamo's guards, the cached program, the inputs; the parameters'
      narrowed copies are cached). Target: x64guard / openxla <= 1.10.
  (b) fresh int64 tokens on the device for every call: x64guard reads them back, checks
      their range and casts them on the host, and uploads them (no 64-bit program on the
      device; the readback waits for the device), on every call.
  (b2) fresh int64 tokens on the host for every call, through each side's device loader:
      torch-xla's `MpDeviceLoader` (int64 on the device) for openxla,
      `x64guard.torch_xla.NarrowingDeviceLoader` (cast on the host in the loader thread,
      int32 on the device, no readback) for x64guard. Target: <= 1.3.
  (c) fresh int32 tokens on the device for every call: nothing to cast.
  (d) first call (dynamo, trace, narrow, compile), for context: one fresh model each.
  (e) a float32 MLP on float32 inputs: nothing to narrow, the same program on both
      sides, so the ratio is the backend's own per-call cost (in (a)-(c) x64guard runs
      float32 where openxla runs float64, which is part of the difference).
  (f) a training step: a tiny GPT-2 (transformers, float32, dropout 0, int32 ids and
      labels on the device), forward and backward through the backend (AOTAutograd on
      both sides), SGD outside, torch_xla.sync() after each step. Target:
      x64guard / openxla <= 1.10.
  (i)-(l) a tiny Falcon's training steps: backend and lazy loop against torch-xla's, the
      lazy sync's own overhead, fresh int64 tokens through the device loaders:
      bench/torch_xla_steps.py.
  (g) a recompile and (h) the first training step (backend and lazy loop), each side in
      fresh processes: bench/torch_xla_first_steps.py. Target for (g): <= 1.2.

`run(runs)` prints this section and returns its figures; `summary(figures)` gives the
lines of the final table.
"""

from __future__ import annotations

import copy
import gc
import hashlib
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("PJRT_DEVICE", "CPU")

_ROOT = Path(__file__).resolve().parent.parent
from bench import torch_xla_first_steps as first_steps  # noqa: E402
from bench import torch_xla_steps as falcon_steps  # noqa: E402

# (Not bench/torch_xla.py: run as a script, a file's folder is first on sys.path, and a
# file of that name would shadow the torch_xla package for every import after it.)


TARGET_STEADY = 1.10
TARGET_TRAINING = 1.10
CALLS, MIN_LOOPS = 200, 11
TRAIN_STEPS, TRAIN_LOOPS = 10, 5
BATCH, LENGTH, VOCAB = 2, 12, 64


def _met(ok: bool) -> str:
    return "MET" if ok else "NOT MET"


def _model():
    if str(_ROOT) not in sys.path:
        sys.path.append(str(_ROOT))
    from tests.torch_xla.models import TransformerBlock

    import torch

    torch.manual_seed(0)
    return TransformerBlock(vocab=VOCAB).eval().requires_grad_(False)


def run(runs: int) -> dict:
    """Print the torch-xla section and return its figures."""
    try:
        import x64guard.torch_xla as xt
    except ImportError as exc:
        print(f"\n[torch-xla backend] not measured: {exc}")
        return {"skipped": str(exc)}
    import torch
    import torch_xla

    import x64guard

    start_section = time.perf_counter()
    device = torch_xla.device()
    source = b"".join(p.read_bytes() for p in sorted(Path(xt.__file__).parent.glob("*.py")))   # the package
    print(f"\n[torch-xla backend] torch {torch.__version__}, torch-xla {torch_xla.__version__}, device {device} "
          f"(PJRT_DEVICE={os.environ.get('PJRT_DEVICE')}); x64guard/torch_xla/ sha256 "
          f"{hashlib.sha256(source).hexdigest()[:12]}")
    warnings.simplefilter("ignore", x64guard.X64GuardWarning)
    loops = max(runs, MIN_LOOPS)
    model = _model()

    generator = torch.Generator().manual_seed(1)
    fresh64 = [torch.randint(0, VOCAB, (BATCH, LENGTH), generator=generator) for _ in range(CALLS)]
    same64 = [fresh64[0].to(device)] * CALLS
    # New device tensors for every timed loop (made before it starts): none was seen before.
    from torch_xla.distributed.parallel_loader import MpDeviceLoader

    inputs_of = {"a_same_tokens": lambda name: same64,
                 "b_fresh_int64": lambda name: [t.to(device) for t in fresh64],
                 # host tokens through each side's device loader: int64 on the device for openxla,
                 # narrowed on the host in the loader thread for x64guard
                 "b2_fresh_int64_loader": lambda name: (xt.NarrowingDeviceLoader(fresh64) if name == "x64guard"
                                                        else MpDeviceLoader(fresh64, device)),
                 "c_fresh_int32": lambda name: [t.to(torch.int32).to(device) for t in fresh64]}

    # (d) first call, then the compiled functions the other figures use.
    first = {}
    compiled = {}
    for name in ("openxla", "x64guard"):
        torch._dynamo.reset()
        fn = torch.compile(copy.deepcopy(model).to(device), backend=name)
        begin = time.perf_counter()
        with torch.no_grad():
            out = fn(same64[0])
        out[1].cpu()
        first[name] = time.perf_counter() - begin
        compiled[name] = fn
    # Results agree (x64guard in 32 bits): greedy tokens equal, logits within float32.
    with torch.no_grad():
        wide, narrow = compiled["openxla"](same64[0]), compiled["x64guard"](same64[0])
    same_tokens = bool(torch.equal(wide[1].cpu().to(torch.int32), narrow[1].cpu()))
    max_diff = float((wide[0].cpu() - narrow[0].cpu().double()).abs().max())

    def loop(fn, inputs) -> float:
        gc.collect()
        begin = time.perf_counter()
        with torch.no_grad():
            for x in inputs:
                out = fn(x)
        out[1].cpu()
        return (time.perf_counter() - begin) / CALLS

    figures = {"first_call_s": first, "calls_per_loop": CALLS, "loops": loops, "same_tokens": same_tokens,
               "max_abs_logit_diff": max_diff}
    for label, make_inputs in inputs_of.items():
        with torch.no_grad():
            for name, fn in compiled.items():   # warm-up: specializations for these inputs
                for x in list(make_inputs(name))[:3]:
                    fn(x)
        times = {name: [] for name in compiled}
        for _ in range(loops):
            for name, fn in compiled.items():
                times[name].append(loop(fn, make_inputs(name)))
        best = {name: min(t) for name, t in times.items()}
        median = {name: statistics.median(t) for name, t in times.items()}
        figures[label] = {"openxla_us": best["openxla"] * 1e6, "x64guard_us": best["x64guard"] * 1e6,
                          "ratio": best["x64guard"] / best["openxla"],
                          "ratio_of_medians": median["x64guard"] / median["openxla"],
                          "openxla_loops_us": [t * 1e6 for t in times["openxla"]],
                          "x64guard_loops_us": [t * 1e6 for t in times["x64guard"]]}
    # (e) nothing to narrow: a float32 MLP on float32 inputs, the same program on both sides.
    torch.manual_seed(2)
    mlp = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Tanh(), torch.nn.Linear(64, 64), torch.nn.Tanh(),
                              torch.nn.Linear(64, 8)).eval().requires_grad_(False)
    plain = {name: torch.compile(copy.deepcopy(mlp).to(device), backend=name) for name in ("openxla", "x64guard")}
    x32 = torch.randn(16, 64).to(device)
    with torch.no_grad():
        for fn in plain.values():
            for _ in range(3):
                fn(x32)
    times = {name: [] for name in plain}

    def loop_mlp(fn) -> float:
        gc.collect()
        begin = time.perf_counter()
        with torch.no_grad():
            for _ in range(CALLS):
                out = fn(x32)
        out.cpu()
        return (time.perf_counter() - begin) / CALLS

    for _ in range(loops):
        for name, fn in plain.items():
            times[name].append(loop_mlp(fn))
    best = {name: min(t) for name, t in times.items()}
    figures["e_float32_mlp"] = {"openxla_us": best["openxla"] * 1e6, "x64guard_us": best["x64guard"] * 1e6,
                                "ratio": best["x64guard"] / best["openxla"]}
    figures["f_training_step"] = _training_step(max(TRAIN_LOOPS, runs))
    figures["ijkl_falcon_steps"] = falcon_steps.run(max(runs, TRAIN_LOOPS))
    figures["gh_compile_steps"] = _compile_steps(runs)
    figures["counters"] = xt.counters()
    figures["met"] = figures["a_same_tokens"]["ratio"] <= TARGET_STEADY
    figures["training_met"] = figures["f_training_step"]["ratio"] <= TARGET_TRAINING
    figures["target"] = f"<= {TARGET_STEADY}"

    a, b, c = figures["a_same_tokens"], figures["b_fresh_int64"], figures["c_fresh_int32"]
    print(f"    model: transformer block, float64 parameters, int64 tokens {BATCH}x{LENGTH}; {CALLS} calls per "
          f"loop, best of {loops} loops, sides interleaved (per call)")
    print(f"(a) same token tensor every call:   openxla {a['openxla_us']:7.1f} us   x64guard {a['x64guard_us']:7.1f} us"
          f"   ratio {a['ratio']:.3f} (of medians {a['ratio_of_medians']:.3f})  target <= {TARGET_STEADY}  "
          f"{_met(figures['met'])}")
    print(f"(b) fresh int64 tokens on device:   openxla {b['openxla_us']:7.1f} us   x64guard {b['x64guard_us']:7.1f} us"
          f"   ratio {b['ratio']:.3f} (of medians {b['ratio_of_medians']:.3f})  (boundary cast + range check "
          f"per call)")
    b2 = figures["b2_fresh_int64_loader"]
    print(f"(b2) fresh int64 host tokens, device loaders: openxla {b2['openxla_us']:7.1f} us   x64guard "
          f"{b2['x64guard_us']:7.1f} us   ratio {b2['ratio']:.3f} (of medians {b2['ratio_of_medians']:.3f})  target <= "
          f"{falcon_steps.TARGET_FRESH}  (MpDeviceLoader vs x64guard.torch_xla.NarrowingDeviceLoader)")
    print(f"(c) fresh int32 tokens on device:   openxla {c['openxla_us']:7.1f} us   x64guard {c['x64guard_us']:7.1f} us"
          f"   ratio {c['ratio']:.3f} (of medians {c['ratio_of_medians']:.3f})")
    e = figures["e_float32_mlp"]
    print(f"(e) float32 MLP, nothing to narrow: openxla {e['openxla_us']:7.1f} us   x64guard {e['x64guard_us']:7.1f} us"
          f"   ratio {e['ratio']:.3f}  (the same program on both sides: the backend's own cost)")
    f = figures["f_training_step"]
    print(f"(f) training step, GPT-2 (2 layers, d=64, 2x12 tokens): openxla {f['openxla_ms']:6.1f} ms   x64guard "
          f"{f['x64guard_ms']:6.1f} ms   ratio {f['ratio']:.3f} (of medians {f['ratio_of_medians']:.3f})  "
          f"target <= {TARGET_TRAINING}  {_met(figures['training_met'])}; losses equal: "
          f"{'yes' if f['same_losses'] else 'NO'}")
    print(f"(d) first call: openxla {first['openxla'] * 1e3:.0f} ms, x64guard {first['x64guard'] * 1e3:.0f} ms; "
          f"greedy tokens equal: {'yes' if same_tokens else 'NO'}, max |logit difference| {max_diff:.1e} "
          f"(float32 against float64)")
    for line in falcon_steps.report(figures["ijkl_falcon_steps"]):
        print(line)
    for line in first_steps.report(figures["gh_compile_steps"]):
        print(line)
    figures["section_s"] = time.perf_counter() - start_section
    print(f"    (torch-xla section took {figures['section_s']:.0f} s)")
    return figures


def _compile_steps(runs: int) -> dict:
    """(g) and (h): fresh processes per side (a first step must find no cache warm)."""
    return first_steps.run(processes=max(2, min(runs, 3)))


def _training_step(loops: int) -> dict:
    """(f): the same tiny GPT-2 trained through each backend, steps interleaved by loop."""
    import torch
    import torch_xla
    from transformers import GPT2Config, GPT2LMHeadModel

    device = torch_xla.device()
    torch.manual_seed(0)
    base = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=500, n_positions=64,
                                      resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=1,
                                      eos_token_id=2))
    ids = torch.randint(0, 500, (2, 12), generator=torch.Generator().manual_seed(1)).to(torch.int32).to(device)
    mask = torch.ones(2, 12, dtype=torch.int32).to(device)
    sides = {}
    for name in ("openxla", "x64guard"):
        torch._dynamo.reset()
        model = copy.deepcopy(base).to(device)
        sides[name] = (torch.compile(model, backend=name), torch.optim.SGD(model.parameters(), lr=0.01))

    def steps(name: str, count: int) -> tuple[float, float]:
        fn, optimizer = sides[name]
        gc.collect()
        begin = time.perf_counter()
        for _ in range(count):
            loss = fn(input_ids=ids, attention_mask=mask, labels=ids, use_cache=False).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            torch_xla.sync()
        value = loss.item()
        return (time.perf_counter() - begin) / count, value

    losses = {name: steps(name, 2)[1] for name in sides}        # compile and warm up
    same = abs(losses["openxla"] - losses["x64guard"]) <= 1e-5 * abs(losses["openxla"])
    times = {name: [] for name in sides}
    for _ in range(loops):
        for name in sides:
            times[name].append(steps(name, TRAIN_STEPS)[0])
    best = {name: min(t) for name, t in times.items()}
    median = {name: statistics.median(t) for name, t in times.items()}
    return {"openxla_ms": best["openxla"] * 1e3, "x64guard_ms": best["x64guard"] * 1e3,
            "ratio": best["x64guard"] / best["openxla"], "ratio_of_medians": median["x64guard"] / median["openxla"],
            "same_losses": same, "steps_per_loop": TRAIN_STEPS, "loops": loops,
            "openxla_loops_ms": [t * 1e3 for t in times["openxla"]],
            "x64guard_loops_ms": [t * 1e3 for t in times["x64guard"]]}


def summary(figures: dict) -> list[str]:
    """The lines of the final summary table."""
    if "skipped" in figures:
        return ["  torch-xla backend: not measured (" + figures["skipped"] + ")"]
    a, b, c = figures["a_same_tokens"], figures["b_fresh_int64"], figures["c_fresh_int32"]
    first = figures["first_call_s"]
    return [
        "  x64guard torch-xla backend vs openxla (transformer block, float64 + int64)",
        f"  (a) steady-state call  x64guard {a['x64guard_us']:.0f} us  openxla {a['openxla_us']:.0f} us  "
        f"ratio {a['ratio']:.2f}  target <= {TARGET_STEADY}  {_met(figures['met'])}",
        f"      (fresh int64 tokens each call: ratio {b['ratio']:.2f}, through the device loaders "
        f"{figures['b2_fresh_int64_loader']['ratio']:.2f} (target <= {falcon_steps.TARGET_FRESH}); fresh int32 tokens: ratio {c['ratio']:.2f}; "
        f"float32 MLP, nothing narrowed: ratio {figures['e_float32_mlp']['ratio']:.2f}; "
        f"first call {first['x64guard'] * 1e3:.0f} ms vs {first['openxla'] * 1e3:.0f} ms)",
        f"  (f) training step (GPT-2)  x64guard {figures['f_training_step']['x64guard_ms']:.1f} ms  openxla "
        f"{figures['f_training_step']['openxla_ms']:.1f} ms  ratio {figures['f_training_step']['ratio']:.2f}  "
        f"target <= {TARGET_TRAINING}  {_met(figures['training_met'])}",
        *("  " + line for line in falcon_steps.report(figures["ijkl_falcon_steps"])),
        *("  " + line for line in first_steps.report(figures["gh_compile_steps"])),
    ]


if __name__ == "__main__":
    result = run(next((int(a) for a in sys.argv[1:] if a.isdigit()), 3))
    print("\n" + "\n".join(summary(result)))
