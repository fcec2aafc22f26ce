"""What reaches the device, read from XLA's own dump (`--xla_dump_to`) of every module
torch-xla compiled in a child process:

* the real models, moved with `to_device` (64-bit parameters, buffers and ids narrowed on
  the host), through the backend (inference and two training steps) and a lazy-tensor
  training loop with `x64guard.torch_xla.sync`: no module holds any 64-bit type, boundary
  graphs included (there are none). (The lazy loop runs ViT: a lazy step that reads a value
  before the sync makes torch-xla execute that part itself, unnarrowed; Hugging Face's
  masking code does, `attention_mask.all()`, in GPT-2's eager forward. docs/torch_xla.md
  states this limit.);
* `narrow_exported` with inputs on the host: none either;
* the backend given tensors the user already put on the device at 64 bits: the program
  holds none; the only modules with 64-bit types are the boundary casts of the float ones
  (integers are read back and cast on the host);
* a transformer with dropout trained through the backend: the one 64-bit
  value is the random-number generator's state, which the x32 profile allows.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.torch_xla.common import run_python, wide_values_beside_rng_state

WIDE = re.compile(r"\b(?:s64|u64|f64|c128)\[")
INTEGER_WIDE = re.compile(r"\b[su]64\[")
# A boundary cast: a convert, with min/max (a reduce, or its stack) for the range check of integers.
BOUNDARY_OPS = {"parameter", "convert", "reshape", "reduce", "constant", "tuple", "minimum", "maximum",
                "concatenate", "broadcast", "bitcast", "copy", "call", "get-tuple-element"}

SUITE_CHILD = r"""
import json, warnings
import torch, torch_xla
import x64guard, x64guard.torch_xla as xt
from tests.torch_xla.real_models import BY_NAME, loss_of, output_of
warnings.simplefilter("ignore", x64guard.X64GuardWarning)
report = {}
for name in ["gpt2", "bert", "mistral_sliding_window", "llama_float64", "resnet18_float64", "beit"]:
    torch._dynamo.reset()
    model = BY_NAME[name]
    inputs = model.inputs(0)
    on_device = xt.to_device(model.build().eval())
    with torch.no_grad():
        out = output_of(model, torch.compile(on_device, backend="x64guard")(**xt.to_device(inputs)))
    torch._dynamo.reset()
    train = xt.to_device(model.build().train())
    fn = torch.compile(train, backend="x64guard")
    optimizer = torch.optim.SGD(train.parameters(), lr=0.05)
    batch = xt.to_device({**inputs, **model.labels(inputs)})
    losses = []
    for _ in range(2):
        loss = loss_of(model, fn(**batch))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    report[name] = {"logits": list(out.shape), "losses": losses}
# the lazy-tensor loop (a model that reads no value mid-step: see the module's docstring)
model = BY_NAME["vit"]
lazy = xt.to_device(model.build().train())
optimizer = torch.optim.SGD(lazy.parameters(), lr=0.05)
batch = xt.to_device({**model.inputs(0), **model.labels(model.inputs(0))})
losses = []
for _ in range(2):
    loss = lazy(**batch).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    xt.sync(lazy, optimizer, loss)
    losses.append(loss.item())
report["lazy_vit"] = {"losses": losses}
print(json.dumps(report))
"""

BLOCK_CHILD = r"""
import copy, json, sys, warnings
import torch, torch_xla
import x64guard, x64guard.torch_xla as xt
from tests.torch_xla.models import BY_NAME, build
warnings.simplefilter("ignore", x64guard.X64GuardWarning)
case = BY_NAME["transformer_block"]
model = build(case)
if sys.argv[1] == "export":
    program = xt.narrow_exported(torch.export.export(model, case.inputs(0)))
    for seed in (1, 2):
        out = program(*case.inputs(seed))
else:
    fn = torch.compile(copy.deepcopy(model).to(torch_xla.device()), backend="x64guard")
    with torch.no_grad():
        for seed in (1, 2):
            out = fn(*[t.to(torch_xla.device()) for t in case.inputs(seed)])
print(json.dumps([t.cpu().tolist() for t in out][1]))
"""

DROPOUT_CHILD = r"""
import json, warnings
import torch, torch_xla
import x64guard, x64guard.torch_xla as xt
from transformers import GPT2Config, GPT2LMHeadModel
warnings.simplefilter("ignore", x64guard.X64GuardWarning)
torch.manual_seed(0)
model = xt.to_device(GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=500, n_positions=64,
                                                resid_pdrop=0.1, embd_pdrop=0.1, attn_pdrop=0.1)))
fn = torch.compile(model, backend="x64guard")
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
ids = xt.to_device(torch.randint(0, 500, (2, 12)))
losses = []
for _ in range(3):
    loss = fn(input_ids=ids, labels=ids, use_cache=False).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    losses.append(loss.item())
print(json.dumps({"losses": losses}))
"""


def _modules(dump: Path) -> dict[str, str]:
    """Every module XLA compiled, before its optimizations."""
    return {path.name: path.read_text() for path in sorted(dump.glob("*.before_optimizations.txt"))}


def _ops(text: str) -> set[str]:
    return set(re.findall(r"= \S+ ([a-z][\w-]*)\(", text))


def _run_dumped(code: str, where: Path, argument: str = "") -> tuple[dict, dict[str, str]]:
    if argument:
        code = f"import sys; sys.argv = ['child', {argument!r}]\n" + code
    proc = run_python(code, env={"XLA_FLAGS": f"--xla_dump_to={where} --xla_dump_hlo_as_text"}, timeout=1500)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1]), _modules(where)


@pytest.mark.slow
def test_real_models_and_training_compile_nothing_64bit(tmp_path):
    report, modules = _run_dumped(SUITE_CHILD, tmp_path)
    assert len(report) == 7 and all(r["losses"][1] < r["losses"][0] for r in report.values())
    assert len(modules) >= 20        # every program, every boundary graph, torch-xla's own steps
    wide = {name: WIDE.findall(text)[:3] for name, text in modules.items() if WIDE.search(text)}
    assert not wide, wide
    print(f"{len(modules)} modules compiled, none with a 64-bit type")


@pytest.fixture(scope="module", params=["export", "backend"])
def block_dump(request, tmp_path_factory):
    report, modules = _run_dumped(BLOCK_CHILD, tmp_path_factory.mktemp(f"xla_dump_{request.param}"), request.param)
    assert len(report) == 2   # the greedy tokens, computed
    return request.param, modules


@pytest.mark.slow
def test_no_64bit_type_in_the_program(block_dump):
    path, modules = block_dump
    programs = {name: text for name, text in modules.items()
                if "SyncTensorsGraph" in name and not _ops(text) <= BOUNDARY_OPS}
    assert len(programs) == 1, sorted(modules)   # the transformer: dot, erf, gather, ...
    for name, text in programs.items():
        assert "dot(" in text and not WIDE.search(text), (name, WIDE.findall(text)[:5])
    wide = [name for name, text in modules.items() if WIDE.search(text)]
    if path == "export":   # inputs and parameters cast on the host: nothing 64-bit at all
        assert not wide
    else:                  # tensors the user put on the device in 64 bits: only the boundary casts
        assert wide        # of the float64 parameters; the int64 tokens are cast on the host
        assert all(_ops(modules[name]) <= BOUNDARY_OPS for name in wide)
        assert not [name for name in wide if INTEGER_WIDE.search(modules[name])]


@pytest.mark.slow
def test_training_with_dropout_holds_only_the_rng_state(tmp_path):
    report, modules = _run_dumped(DROPOUT_CHILD, tmp_path)
    assert report["losses"][-1] < report["losses"][0]
    drawing = [name for name, text in modules.items() if "rng-bit-generator" in text]
    assert drawing
    for name, text in modules.items():
        assert not wide_values_beside_rng_state(text), (name, wide_values_beside_rng_state(text)[:3])
