"""The torch-xla section's compile-time cases (bench/torch_xla_bench.py runs them), each
side in a fresh process, so that no cache of torch-xla's, dynamo's or x64guard's holds
a program from an earlier measurement; sides interleaved, best of N processes:

  (g) a recompile: a tiny GPT-2 trained through the backend, with an attribute its first
      call sets and its forward reads (as Hugging Face's classifiers set
      `config.problem_type`): dynamo recompiles at step 2 a graph that lowers as step 1's.
      The figure is step 2 (dynamo, AOTAutograd, trace, compile, run, `torch_xla.sync()`,
      the loss read). Target: x64guard / openxla <= 1.2. (RoBERTa itself is not used:
      torch-xla 2.9's `openxla` returns a wrong `loss` when training it, an intermediate
      of logits' shape; x64guard's loss equals eager's.)
  (h) the first training step, compiles included: the same GPT-2 through the backend
      (x64guard against openxla), and a tiny DeBERTa-v2 classifier in the lazy loop
      (`x64guard.torch_xla.sync(model, optimizer, loss)` against `torch_xla.sync()`).

`python bench/torch_xla_first_steps.py SIDE PATH` runs one process's measurement and
prints it as JSON (SIDE: openxla, plain or x64guard; PATH: backend or lazy).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

TARGET_RECOMPILE = 1.2
_ROOT = Path(__file__).resolve().parent.parent


def _gpt2_with_a_first_call_flag():
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    class FirstCallSetsProblemType(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner
            self.problem_type = None

        def forward(self, ids, mask):
            if self.problem_type is None:     # as HF's classifiers do with config.problem_type
                self.problem_type = "language_modeling"
            return self.inner(input_ids=ids, attention_mask=mask, labels=ids, use_cache=False).loss

    torch.manual_seed(0)
    inner = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=500, n_positions=64,
                                       resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=1,
                                       eos_token_id=2))
    inner.loss_type = "ForCausalLM"   # else HF logs a warning in the first call: a graph break in dynamo
    return FirstCallSetsProblemType(inner)


def _deberta_v2():
    import torch
    from transformers import DebertaV2Config, DebertaV2ForSequenceClassification

    torch.manual_seed(0)
    return DebertaV2ForSequenceClassification(DebertaV2Config(
        vocab_size=500, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
        max_position_embeddings=64, num_labels=3, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        pooler_dropout=0.0, type_vocab_size=0, relative_attention=True, position_buckets=8,
        max_relative_positions=16, pos_att_type=["p2c", "c2p"]))


def measure(side: str, path: str, steps: int = 3) -> dict:
    """Seconds of each of the first `steps` training steps in this process, with
    torch-xla's compile count and x64guard's counters of each."""
    os.environ.setdefault("PJRT_DEVICE", "CPU")
    import warnings

    import torch
    import torch_xla
    import torch_xla.debug.metrics as metrics

    import x64guard
    import x64guard.torch_xla as xt

    warnings.simplefilter("ignore", x64guard.X64GuardWarning)
    device = torch_xla.device()
    ids = torch.randint(2, 500, (2, 12), generator=torch.Generator().manual_seed(1))
    if path == "backend":
        model = _gpt2_with_a_first_call_flag().to(device)
        ids, mask = ids.to(torch.int32).to(device), torch.ones(2, 12, dtype=torch.int32).to(device)
        fn = torch.compile(model, backend=side)
        loss_of = lambda: fn(ids, mask)   # noqa: E731
        sync = torch_xla.sync
    else:
        model, labels = _deberta_v2(), torch.tensor([0, 2])
        if side == "x64guard":
            model = xt.to_device(model)
            ids, labels = xt.to_device((ids, labels))
        else:
            model = model.to(device)
            ids, labels = ids.to(device), labels.to(device)
        loss_of = lambda: model(input_ids=ids, labels=labels).loss   # noqa: E731
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    rows = []
    for _ in range(steps):
        compiles, own = int(metrics.counter_value("UncachedCompile") or 0), xt.counters()
        begin = time.perf_counter()
        loss = loss_of()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if path == "lazy" and side == "x64guard":
            xt.sync(model, optimizer, loss)
        else:
            torch_xla.sync()
        value = loss.item()
        seconds = time.perf_counter() - begin
        rows.append({"s": seconds, "loss": value,
                     "compiles": int(metrics.counter_value("UncachedCompile") or 0) - compiles,
                     "x64guard": {k: v - own[k] for k, v in xt.counters().items() if v != own[k]}})
    return {"side": side, "path": path, "steps": rows}


def _in_fresh_process(side: str, path: str) -> dict:
    env = dict(os.environ, PJRT_DEVICE=os.environ.get("PJRT_DEVICE", "CPU"),
               PYTHONPATH=os.pathsep.join(p for p in (str(_ROOT), os.environ.get("PYTHONPATH")) if p))
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), side, path], capture_output=True,
                          text=True, env=env, cwd=_ROOT, timeout=900)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"{side}/{path} failed:\n{done.stderr[-3000:]}")
    return json.loads(lines[-1])


def run(processes: int = 3, paths: tuple[str, ...] = ("backend", "lazy")) -> dict:
    """(g) and (h): `processes` fresh processes per side and path, sides interleaved."""
    sides = {"backend": ("openxla", "x64guard"), "lazy": ("plain", "x64guard")}
    runs = {path: {side: [] for side in sides[path]} for path in paths}
    for _ in range(processes):
        for path in paths:
            for side in sides[path]:
                runs[path][side].append(_in_fresh_process(side, path))
    figures = {}
    for path, by_side in runs.items():
        base, ours = sides[path]
        first = {side: [r["steps"][0]["s"] for r in rs] for side, rs in by_side.items()}
        losses = {side: [s["loss"] for s in rs[0]["steps"]] for side, rs in by_side.items()}
        figures[path] = {
            "first_step_s": {side: min(v) for side, v in first.items()},
            "first_step_ratio": min(first[ours]) / min(first[base]),
            "first_step_ratio_of_medians": statistics.median(first[ours]) / statistics.median(first[base]),
            "losses_equal": all(abs(a - b) <= 1e-5 * abs(a) for a, b in zip(losses[base], losses[ours])),
            "runs": by_side}
        if path == "backend":
            second = {side: [r["steps"][1]["s"] for r in rs] for side, rs in by_side.items()}
            figures[path]["recompile_s"] = {side: min(v) for side, v in second.items()}
            figures[path]["recompile_ratio"] = min(second[ours]) / min(second[base])
            figures[path]["recompile_ratio_of_medians"] = (statistics.median(second[ours])
                                                          / statistics.median(second[base]))
            figures[path]["recompile_compiles"] = {side: rs[0]["steps"][1]["compiles"]
                                                   for side, rs in by_side.items()}
    return figures


def report(figures: dict) -> list[str]:
    lines = []
    backend, lazy = figures.get("backend"), figures.get("lazy")
    if backend:
        r, s, c = backend["recompile_ratio"], backend["recompile_s"], backend["recompile_compiles"]
        lines.append(f"(g) recompile step (GPT-2, dynamo recompiles at step 2): openxla {s['openxla']:.2f} s "
                     f"({c['openxla']} XLA compiles)   x64guard {s['x64guard']:.2f} s ({c['x64guard']} XLA compiles)"
                     f"   ratio {r:.2f} (of medians {backend['recompile_ratio_of_medians']:.2f})  target <= "
                     f"{TARGET_RECOMPILE}  {'MET' if r <= TARGET_RECOMPILE else 'NOT MET'}")
        f = backend["first_step_s"]
        lines.append(f"(h) first training step, backend (GPT-2): openxla {f['openxla']:.2f} s   x64guard "
                     f"{f['x64guard']:.2f} s   ratio {backend['first_step_ratio']:.2f} (of medians "
                     f"{backend['first_step_ratio_of_medians']:.2f}); losses equal: "
                     f"{'yes' if backend['losses_equal'] else 'NO'}")
    if lazy:
        f = lazy["first_step_s"]
        lines.append(f"(h) first training step, lazy loop (DeBERTa-v2): torch_xla.sync() {f['plain']:.2f} s   "
                     f"x64guard.torch_xla.sync {f['x64guard']:.2f} s   ratio {lazy['first_step_ratio']:.2f} (of "
                     f"medians {lazy['first_step_ratio_of_medians']:.2f}); losses equal: "
                     f"{'yes' if lazy['losses_equal'] else 'NO'}")
    return lines


if __name__ == "__main__":
    if len(sys.argv) == 3:
        print(json.dumps(measure(sys.argv[1], sys.argv[2])))
    else:
        result = run(next((int(a) for a in sys.argv[1:] if a.isdigit()), 3))
        print("\n".join(report(result)))
        for path, by_path in result.items():   # every process's step times, for the record
            for side, runs in by_path["runs"].items():
                print(f"    {path} {side}: " + "; ".join(" ".join(f"{s['s']:.2f}" for s in r["steps"]) for r in runs)
                      + " s (steps 1 2 3 of each process)")
