"""One model of the training suite (tests/torch_xla/real_models.py: SUITE), every path, in
one child process that XLA dumps into (`XLA_FLAGS=--xla_dump_to=DIR --xla_dump_hlo_as_text`):

* with dropout on, three SGD steps through each path of PATHS, x64guard's first: each path's
  losses, its error if it failed, and which modules XLA compiled for it (the files the dump
  gained while it ran) and the 64-bit values in them beyond the random-number state;
* with dropout off, three steps of eager PyTorch (CPU, float32) and of each path of
  EXACT_PATHS (x64guard's): the losses and the largest difference of the updated parameters
  and buffers, and the modules dumped as above; then torch-xla's own paths (openxla, the plain
  lazy loop, and openxla under the backend's tracing flag), each x64guard path's bits compared
  with its counterparts', by name.

Printed as one JSON line, `REPORT {...}`: tests/torch_xla/test_model_suite.py asserts on it.
Run as `python -m tests.torch_xla.suite_child NAME DUMP_DIR` with PJRT_DEVICE=CPU.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import re
import sys
import time
import traceback
import warnings
from pathlib import Path

import torch
import torch_xla

import x64guard
import x64guard.torch_xla as xt
from x64guard.torch_xla import _private as _xc
from tests.torch_xla.common import wide_values_beside_rng_state
from tests.torch_xla.real_models import SUITE_BY_NAME, RealModel, loss_of

BACKEND, BACKEND_SYNC, LAZY_ALL, LAZY_NAMED, LAZY_NO_STEP, OPENXLA, LAZY_PLAIN, OPENXLA_INLINED = (
    "x64guard backend, torch_xla.sync()", "x64guard backend, x64guard sync()", "x64guard lazy, step() + sync()",
    "x64guard lazy, step() + sync(model, optimizer, loss)", "x64guard lazy, sync() without step()",
    "openxla, torch_xla.sync()", "lazy, torch_xla.sync()", "openxla, Python numbers inlined, torch_xla.sync()")
# The lazy loops run each step inside x64guard.torch_xla.step(), which narrows mid-step reads
# (Hugging Face's `padding_mask.all()`); LAZY_NO_STEP is the bare drop-in for torch_xla.sync(),
# without step(): its reads are of tensors computed from to_device's int64 GuardedTensors,
# which run them narrowed.
LAZY_PATHS = (LAZY_ALL, LAZY_NAMED)
# With dropout: x64guard's paths first (a cached program is not dumped twice; sync() before
# sync(args), so that the no-argument loop's programs are the ones dumped), then torch-xla's.
# (The lazy loops before the backend: torch-xla's scan GRU fails under torch.compile and can
# leave the process's device state broken for what runs after it.)
X64GUARD_PATHS = [LAZY_ALL, LAZY_NAMED, LAZY_NO_STEP, BACKEND]
PATHS = X64GUARD_PATHS + [OPENXLA, LAZY_PLAIN]
# Without dropout, against eager: the backend's step ends with x64guard's sync (torch_xla.sync()
# would materialize to_device's ids at int64: docs/torch_xla.md, "The real-model suite").
EXACT_PATHS = [BACKEND_SYNC, LAZY_ALL, LAZY_NAMED]
# The same runs through torch-xla's own paths (dropout off, so no random numbers): x64guard only
# narrows integers, so where its XLA program is torch-xla's (no op replaced, repairs.DECOMPOSITIONS;
# no Python number inlined as a constant, the backend's tracing) its paths give torch-xla's bits,
# a sharper oracle than eager's tolerance (test_model_suite.py, KNOWN_BIT_DIFFERENCES).
EXACT_COUNTERPART = {BACKEND_SYNC: OPENXLA, LAZY_ALL: LAZY_PLAIN, LAZY_NAMED: LAZY_PLAIN}
# The backend traces with Python numbers as XLA constants (`_private.inline_scalars`), openxla
# with them as parameters: openxla run under the same torch-xla flag is the backend's second
# counterpart, for the models where that is the only difference (test_model_suite.py).
INLINED_COUNTERPART = {BACKEND_SYNC: OPENXLA_INLINED}
EXACT_COUNTERPARTS = [*dict.fromkeys(EXACT_COUNTERPART.values()), OPENXLA_INLINED]
STEPS, LR, DROPOUT = 3, 0.05, 0.1


def _batch(model: RealModel) -> dict:
    inputs = model.inputs(0)
    return {**inputs, **model.labels(inputs)}


def _placed(path: str, module: torch.nn.Module, batch: dict):
    """x64guard's paths move with `to_device` (narrowed on the host); the others as torch-xla's
    users do, `.to(device)`."""
    if path.startswith("x64guard"):
        return xt.to_device(module), xt.to_device(batch)
    device = torch_xla.device()
    module = module.to(device)
    if hasattr(module, "tie_weights"):
        # `.to(xla)` makes a new Parameter per tensor, so tied weights (ALBERT's, RoBERTa's,
        # OPT's, M2M100's decoders) come apart and train as two: Hugging Face's Trainer
        # ties them again after the move (trainer.py, `_move_model_to_device`), as here.
        # (x64guard's `to_device` keeps shared parameters shared.)
        module.tie_weights()
    return module, {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}


def _end_step(path: str, model: torch.nn.Module, optimizer, loss) -> None:
    if path == LAZY_NAMED:
        xt.sync(model, optimizer, loss)
    elif path in (LAZY_ALL, LAZY_NO_STEP, BACKEND_SYNC):
        xt.sync()
    else:
        torch_xla.sync()         # the backend and openxla too: as their users' loops do


def train(path: str, module: torch.nn.Module, batch: dict) -> tuple[list[float], torch.nn.Module]:
    torch._dynamo.reset()
    model, batch = _placed(path, module, batch)
    backend = {BACKEND: "x64guard", BACKEND_SYNC: "x64guard", OPENXLA: "openxla",
               OPENXLA_INLINED: "openxla"}.get(path)
    fn = torch.compile(model, backend=backend) if backend else model
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    losses = []
    for _ in range(STEPS):
        with xt.step() if path in LAZY_PATHS else contextlib.nullcontext():
            # the flag while the graphs are traced and run, as the backend sets it for its traces;
            # not over the optimizer's lazy step, which x64guard's sync runs without it
            with _xc.inline_scalars() if path == OPENXLA_INLINED else contextlib.nullcontext():
                loss = loss_of(SPEC, fn(**batch))
                loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        _end_step(path, model, optimizer, loss)
        losses.append(loss.item())
    return losses, model


def eager(module: torch.nn.Module, batch: dict) -> tuple[list[float], torch.nn.Module]:
    for sub in module.modules():
        # torch-xla replaces nn.GRU at import by its scan-based GRU (a subclass), which takes
        # XLA tensors only: eager's reference is PyTorch's own, on the same weights
        if isinstance(sub, torch.nn.GRU) and type(sub) is not torch.nn.modules.rnn.GRU:
            sub.__class__ = torch.nn.modules.rnn.GRU
    optimizer = torch.optim.SGD(module.parameters(), lr=LR)
    losses = []
    for _ in range(STEPS):
        loss = loss_of(SPEC, module(**batch))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    return losses, module


def _differences(mine: torch.nn.Module, theirs: torch.nn.Module) -> dict:
    """The largest absolute difference of the parameters, and the largest relative one of the
    floating buffers (batch norm's running statistics; running_var apart: torch-xla updates it
    with the biased variance), and whether integer buffers are equal."""
    params = max((float((a.detach().cpu() - b.detach()).abs().max())
                  for a, b in zip(mine.parameters(), theirs.parameters())), default=0.0)
    report = {"param_diff": params, "buffer_rel_diff": 0.0, "running_var_rel_diff": 0.0, "int_buffers_equal": True}
    for (name, a), b in zip(mine.named_buffers(), theirs.buffers()):
        a = a.cpu()
        if not b.is_floating_point():
            report["int_buffers_equal"] &= bool(torch.equal(a.long(), b.long()))
            continue
        relative = float((a - b).abs().max()) / (float(b.abs().max()) + 1e-6)
        key = "running_var_rel_diff" if name.endswith("running_var") else "buffer_rel_diff"
        report[key] = max(report[key], relative)
    return report


def _bit_differences(mine: torch.nn.Module, theirs: torch.nn.Module) -> dict:
    """The parameters and floating buffers that differ in any bit, by name, and the largest
    difference among them (integer buffers compared by value: x64guard keeps them at 32 bits;
    a name only one side has counts as differing)."""
    ours, others = [dict(m.named_parameters()) | dict(m.named_buffers()) for m in (mine, theirs)]
    names, worst = sorted(set(ours) ^ set(others)), 0.0
    for name, a in ours.items():
        if name not in others:
            continue
        a, b = a.detach().cpu(), others[name].detach().cpu()
        same = torch.equal(a, b) if a.is_floating_point() else torch.equal(a.long(), b.long())
        if not same:
            names.append(name)
            if a.is_floating_point():
                worst = max(worst, float((a - b).abs().max()))
    return {"differing": names, "max_diff": worst}


class _Dump:
    """The modules XLA dumped since the last call."""

    def __init__(self, where: str):
        self.where, self.seen = Path(where), set()

    def new_modules(self) -> dict[str, str]:
        paths = set(self.where.glob("*.before_optimizations.txt")) - self.seen
        self.seen |= paths
        return {p.name: p.read_text() for p in sorted(paths)}


def _scan(modules: dict[str, str]) -> dict:
    wide = {name: lines[:3] for name, text in modules.items() if (lines := wide_values_beside_rng_state(text))}
    return {"modules": len(modules), "wide": wide}


def _error(error: BaseException) -> str:
    """The error's type, first lines and where it was raised (its last frames)."""
    lines = [line for line in str(error).splitlines() if line.strip()]
    frames = [f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in traceback.extract_tb(error.__traceback__)[-3:]]
    return f"{type(error).__name__}: {' | '.join(lines[:4])}"[:700] + f" (at {' < '.join(reversed(frames))})"


def _run(path: str, build, dump: _Dump | None) -> dict:
    started = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        try:
            if path.startswith("x64guard"):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    xt.sync()  # lazy-read counts from here: the paths before this one are not its own
            warnings.simplefilter("always", x64guard.X64GuardWarning)
            losses, model = train(path, build(), _batch(SPEC))
            entry = {"losses": losses, "model": model}
        except Exception as error:  # noqa: BLE001 - every path reports; one failure hides no other
            entry = {"error": _error(error)}
    ours = [str(w.message) for w in caught if issubclass(w.category, x64guard.X64GuardWarning)]
    entry["warnings"] = sorted({message[:300] for message in ours})
    entry["warning_kinds"] = sorted({m[1] for message in ours if (m := re.search(r"\[([a-z0-9-]+)\]$", message))})
    entry["seconds"] = round(time.perf_counter() - started, 1)
    if dump is not None:
        entry["dump"] = _scan(dump.new_modules())
    return entry


def main(name: str, dump_dir: str) -> dict:
    global SPEC
    SPEC = SUITE_BY_NAME[name]
    dump = _Dump(dump_dir)
    dump.new_modules()
    report: dict = {"name": name, "dropout": {}, "exact": {}}
    started = time.perf_counter()
    reference_losses, reference = eager(SPEC.build(0.0), _batch(SPEC))
    report["eager"] = {"losses": reference_losses, "seconds": round(time.perf_counter() - started, 1)}
    # The lazy loops first, then the paths through torch.compile: torch-xla's scan GRU fails
    # under torch.compile (openxla's too) and leaves the process's device state broken for what
    # follows (a later x64guard sync met a program without inputs: TorchXlaFailure, an open item).
    # Within each kind x64guard's paths come first: a cached program is not dumped twice, and
    # the bare sync() path's `lazy-read` counts torch-xla's compiles, so a read whose graph
    # torch-xla's own path compiled before goes unwarned (M2M100's mask read, measured).
    lazy = (*LAZY_PATHS, LAZY_NO_STEP, LAZY_PLAIN)
    runs = []
    for kind_of_path in (lambda p: p in lazy, lambda p: p not in lazy):
        runs += [("exact", p) for p in EXACT_PATHS if kind_of_path(p)]
        runs += [("dropout", p) for p in PATHS if kind_of_path(p)]
        runs += [("exact", p) for p in EXACT_COUNTERPARTS if kind_of_path(p)]
    trained = {}
    for kind, path in runs:
        entry = _run(path, lambda: SPEC.build(0.0 if kind == "exact" else DROPOUT), dump)
        if "model" in entry:
            model = entry.pop("model")
            if kind == "exact":
                entry.update(_differences(model, reference))
                trained[path] = model
        report[kind][path] = entry
    for key, counterparts in (("counterpart", EXACT_COUNTERPART), ("inlined_counterpart", INLINED_COUNTERPART)):
        for path, theirs in counterparts.items():
            if path in trained and theirs in trained:
                report["exact"][path][key] = _bit_differences(trained[path], trained[theirs])
    return report


SPEC: RealModel


def print_report(name: str, dump_dir: str) -> None:
    text = json.dumps(main(name, dump_dir))
    keep = os.environ.get("X64GUARD_SUITE_REPORTS")     # a folder to keep the reports in, for reading
    if keep:
        Path(keep, f"{name}.json").write_text(text)
    print("REPORT " + text, flush=True)


if __name__ == "__main__":
    print_report(sys.argv[1], sys.argv[2])
