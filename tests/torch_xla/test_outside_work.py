"""64-bit work torch-xla would run outside x64guard's programs (issue 25, item 4): narrowed,
or said out loud, never silent.

* the backend under plain `torch.compile(backend="x64guard")`: an LSTM tagger is traced and
  narrowed (dynamo skipped it before: 0 graphs, the forward at 64 bits); a frame dynamo
  gives no graph for warns, at the frame; int64 work run eagerly between two graphs (a
  graph break) warns, at the break's line;
* the lazy loop: a mid-step read (`if padding.max() > 0:`, `int(t)`, `.cpu()`, `nonzero()`)
  on int64 data warns at the next `sync` (`lazy-read`); inside `x64guard.torch_xla.step()` the reads
  run narrowed instead, torch-xla compiles nothing itself, and the values equal eager's.
  A tiny OPT trained lazily in a child process: XLA's dump of every module compiled holds no
  64-bit type with `step()` (without it, Hugging Face's `padding_mask.all()` made one s64
  module; M2M100 and DeBERTa-v2 were measured the same way, not tested here).
"""

from __future__ import annotations

import json
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import x64guard
import x64guard.torch_xla as xt
from x64guard.torch_xla import metrics as xla_metrics
from tests.torch_xla.common import run_python, wide_values_beside_rng_state
from tests.torch_xla.models import EmbeddingArgmax


def outside_warnings(caught, kind: str) -> list[str]:
    return [str(w.message) for w in caught if str(w.message).endswith(f"[{kind}]")]


class LSTMTagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(50, 8)
        self.lstm = nn.LSTM(8, 8, batch_first=True)
        self.head = nn.Linear(8, 4)
        self.double()                     # float64 weights: what ran eagerly at 64 bits before

    def forward(self, ids):
        states, _ = self.lstm(self.embed(ids))
        return self.head(states).argmax(-1)


def test_lstm_tagger_under_plain_torch_compile_is_traced_and_narrowed():
    torch.manual_seed(0)
    cpu = LSTMTagger()
    ids = torch.randint(0, 50, (2, 5))
    torch._dynamo.reset()
    before = xt.counters()["traces"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", x64guard.X64GuardWarning)
        tags = torch.compile(xt.to_device(cpu), backend="x64guard")(xt.to_device(ids))
    assert xt.counters()["traces"] > before             # a graph, not the forward run eagerly by nobody
    assert tags.dtype == torch.int32                     # narrowed, as the backend's outputs are
    assert tags.cpu().tolist() == cpu(ids).tolist()
    assert torch._dynamo.config.allow_rnn is False       # set for x64guard's frames only, and restored


@pytest.fixture
def contextmanager_scope():
    import contextlib

    @contextlib.contextmanager
    def scope():
        yield

    return scope


def test_a_frame_dynamo_gives_no_graph_warns_at_the_frame(contextmanager_scope):
    class Hashed(nn.Module):
        def forward(self, ids):
            with contextmanager_scope():           # dynamo cannot break a graph inside it: the frame is skipped
                torch._dynamo.graph_break()
                return (ids * 31 + 7) % 13

    ids = torch.randint(0, 50, (2, 5))
    torch._dynamo.reset()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = torch.compile(Hashed(), backend="x64guard")(xt.to_device(ids))
    found = outside_warnings(caught, "outside-graph")
    assert len(found) == 1, found
    assert "no graph for a frame" in found[0] and "test_outside_work.py" in found[0] and "[forward]" in found[0]
    assert out.cpu().tolist() == ((ids * 31 + 7) % 13).tolist()


@torch._dynamo.disable
def eager_positions(ids):
    return (torch.arange(ids.shape[1], device=ids.device) * 3 + ids) % 7     # int64, eagerly on torch-xla


class BrokenTagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(50, 8)
        self.head = nn.Linear(8, 4)

    def forward(self, ids):
        states = self.embed(ids)
        positions = eager_positions(ids)           # a graph break: int64 work between two graphs
        return self.head(states).argmax(-1) + positions


def test_int64_work_between_two_graphs_warns_at_the_break():
    torch.manual_seed(0)
    cpu = BrokenTagger()
    ids = torch.randint(0, 50, (2, 5))
    torch._dynamo.reset()
    compiled = torch.compile(xt.to_device(cpu), backend="x64guard")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = compiled(xt.to_device(ids))
        second = compiled(xt.to_device(ids))
    found = outside_warnings(caught, "outside-graph")
    assert len(found) == 1, found                   # once, at the graph's first call
    assert "int64[2, 5]" in found[0] and "test_outside_work.py" in found[0]
    assert "torch.compiler.disable" in found[0]      # dynamo's reason for the break
    expected = cpu(ids).tolist()
    assert first.cpu().tolist() == expected and second.cpu().tolist() == expected


def test_torch_xlas_own_compiles_in_a_backend_step_get_the_backends_advice():
    """The work dynamo left between the backend's graphs is compiled by torch-xla itself:
    the sync that ends such a step says so with the backend's advice (remove the graph
    break), not the lazy loop's (`step()`), which would not help there."""
    settle()
    torch.manual_seed(0)
    ids = torch.randint(0, 50, (3, 7))    # a shape of its own: torch-xla has not compiled this eager work yet
    torch._dynamo.reset()
    compiled = torch.compile(xt.to_device(BrokenTagger()), backend="x64guard")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tags = compiled(xt.to_device(ids))
        xt.sync(tags)
    found = outside_warnings(caught, "lazy-read")
    assert len(found) == 1, found
    assert "graphs of backend='x64guard'" in found[0] and "Remove the graph break" in found[0]
    assert "x64guard.torch_xla.step()" not in found[0]


def test_ids_torch_xlas_own_sync_computed_at_64_bits_are_named_once():
    """to_device's int64 ids are int32 device data under a pending convert; a plain
    torch_xla.sync() ending a backend step materializes that convert as a 64-bit graph
    and 64-bit device data. Not silent: the next backend call that takes them, or the
    next to_device, says so, once per tensor; a step ended by x64guard.torch_xla.sync()
    leaves the ids as they were, and nothing is said."""
    import torch_xla

    settle()
    torch.manual_seed(0)
    ids = torch.randint(0, 50, (2, 9))
    torch._dynamo.reset()
    cpu = EmbeddingArgmax()
    compiled = torch.compile(xt.to_device(cpu), backend="x64guard")
    results = []

    def mine() -> list[str]:   # ids other tests of this process left alive may be named too
        return [w for w in outside_warnings(caught, "wide-ids") if "int64[2, 9]" in w]

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        batch = xt.to_device({"ids": ids})
        results.append(compiled(batch["ids"]))
        xt.sync()                                  # x64guard's sync: the ids stay int32 on the device
        results.append(compiled(batch["ids"]))
        batch = xt.to_device({"ids": ids})
        assert mine() == []
        results.append(compiled(batch["ids"]))
        torch_xla.sync()                           # torch-xla's: the ids' convert runs at 64 bits
        results.append(compiled(batch["ids"]))     # the same batch again: said at the boundary
        assert len(mine()) == 1
        batch = xt.to_device({"ids": ids})         # those ids were named already
        assert len(mine()) == 1
        results.append(compiled(batch["ids"]))
        torch_xla.sync()
        batch = xt.to_device({"ids": ids})         # the previous step's ids: said at the next to_device
        results.append(compiled(batch["ids"]))
    found = mine()
    assert len(found) == 2, found
    assert all("x64guard.torch_xla.sync()" in w for w in found)
    expected = cpu(ids).tolist()
    assert all(r.cpu().tolist() == expected for r in results)


class Masked(nn.Module):
    """Reads int64 values in the middle of the step, as Hugging Face's masking code does."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(50, 8)
        self.head = nn.Linear(8, 4)

    def forward(self, ids, mask):
        states = self.embed(ids)
        padding = mask.long().cumsum(-1)                   # int64 work
        if padding.max() > 0:                              # bool of a pending int64 comparison
            states = states * (padding > 0).unsqueeze(-1)
        count = int(padding[:, -1].sum())                  # int of a pending int64 value
        host = padding.cpu()                               # a pending int64 tensor to the host
        kept = (padding > 2).nonzero()                     # torch-xla executes the input for the shape
        loss = F.cross_entropy(self.head(states).flatten(0, 1), ids.flatten() % 4) * (count / 10) * len(kept)
        return loss, host


BATCH = {"ids": torch.tensor([[3, 14, 15, 9, 26, 5], [35, 8, 9, 7, 9, 3]]),
         "mask": torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0]])}


def train_lazily(use_step: bool, guarded: bool = True) -> tuple[list[float], list, torch.dtype, list]:
    """`guarded`: the batch moved with to_device (int64 GuardedTensors); else as torch-xla's
    users move it, `.to(device)` (int64 device data: nothing catches a read outside step())."""
    torch.manual_seed(0)
    model = xt.to_device(Masked())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    device = next(model.parameters()).device
    batch = xt.to_device(BATCH) if guarded else {k: v.to(device) for k, v in BATCH.items()}
    losses = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            with xt.step() if use_step else _nothing():
                loss, host = model(**batch)
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
            xt.sync(model, optimizer, loss)
            losses.append(loss.item())
        xt.sync()                                   # the count of a step that follows
    return losses, host.tolist(), host.dtype, outside_warnings(caught, "lazy-read")


def _nothing():
    import contextlib

    return contextlib.nullcontext()


def train_eagerly() -> tuple[list[float], list]:
    torch.manual_seed(0)
    model = Masked()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for _ in range(3):
        loss, host = model(**BATCH)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    return losses, host.tolist()


def settle() -> None:
    """Sync what earlier tests of this process left pending or compiled, so that the warnings
    counted next are this test's: a leftover a sync refuses (another test's overflowing
    constant) is left alone by the next sync, which then starts the count."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", x64guard.X64GuardWarning)
        for _ in range(2):
            try:
                xt.sync()
                return
            except x64guard.X64GuardError:
                continue


def test_mid_step_reads_of_tensors_to_device_did_not_make_warn_once():
    """A batch moved as torch-xla's users move it (`.to(device)`, int64 device data): a
    read outside step() goes to torch-xla, unnarrowed; the next sync says so, once."""
    settle()
    losses, host, dtype, found = train_lazily(use_step=False, guarded=False)
    assert len(found) == 1, found                   # the first step's graphs; later steps reuse them
    assert "torch-xla compiled 4 graph(s) of its own" in found[0] and "x64guard.torch_xla.step()" in found[0]
    eager_losses, eager_host = train_eagerly()
    assert losses == pytest.approx(eager_losses, rel=1e-5)
    assert host == eager_host and dtype == torch.int64


def train_with_torch_xla(steps: int = 2) -> None:
    """The same model and batch trained by torch-xla's own lazy loop (`.to(device)`,
    `torch_xla.sync()`): its graphs, mid-step reads included, go into torch-xla's cache."""
    import torch_xla

    torch.manual_seed(0)
    device = torch_xla.device()
    model = Masked().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    batch = {k: v.to(device) for k, v in BATCH.items()}
    for _ in range(steps):
        loss, _ = model(**batch)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        torch_xla.sync()


def test_mid_step_reads_of_graphs_torch_xla_compiled_earlier_warn_once(monkeypatch):
    """The reads' graphs were compiled by a plain torch-xla loop earlier in the process:
    torch-xla runs them from its cache (no new compile), and the first sync says so, once
    (measured before: 12 such runs over three steps, no warning)."""
    from x64guard.torch_xla import outside

    train_with_torch_xla()
    settle()                                      # the plain loop's own compiles: counted, not this test's
    monkeypatch.setattr(outside.RECORD, "lazy_reads_said", False)
    compiles, cached = xla_metrics.compile_count(), xla_metrics.cached_run_count()
    _, _, _, found = train_lazily(use_step=False, guarded=False)
    assert xla_metrics.cached_run_count() - cached >= 12 and xla_metrics.compile_count() - compiles <= 1
    assert len(found) == 1, found
    assert "torch-xla ran 4 graph(s) of its own" in found[0] and "from its compile cache" in found[0]
    assert "x64guard.torch_xla.step()" in found[0]
    _, _, _, again = train_lazily(use_step=False, guarded=False)
    assert again == []                            # said once in the process, not at every sync
    _, _, _, narrowed = train_lazily(use_step=True, guarded=False)
    assert narrowed == []                         # step(): the reads run narrowed, nothing of torch-xla's


def test_mid_step_reads_of_to_device_batches_run_narrowed_without_step():
    """The drop-in loop, no step(): the batch from to_device is int64 GuardedTensors, and
    every read of a pending tensor computed from them (`if padding.max() > 0:`, `int(...)`,
    `.cpu()`, `nonzero()`) runs narrowed; torch-xla compiles nothing itself."""
    settle()
    compiles, own = xla_metrics.compile_count(), xla_metrics.own_compile_count()
    losses, host, dtype, found = train_lazily(use_step=False)
    assert not found
    assert xla_metrics.compile_count() - compiles == xla_metrics.own_compile_count() - own
    eager_losses, eager_host = train_eagerly()
    assert losses == pytest.approx(eager_losses, rel=1e-5)
    assert host == eager_host and dtype == torch.int64


def test_x64guards_own_range_checks_are_not_counted_as_mid_step_reads():
    """Two int64 device inputs are read back, range-checked and cast on the host at the
    boundary: reads of x64guard's own, which the next sync must not report as the user's."""
    settle()
    add = torch.compile(lambda a, b: a * b + 1, backend="x64guard")
    device = xt.to_device(torch.zeros(1)).device
    a, b = torch.tensor([3, -4], device=device), torch.tensor([5, 6], device=device)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = add(a, b)
        xt.sync()
    assert out.cpu().tolist() == [16, -23]
    assert outside_warnings(caught, "lazy-read") == []


def test_the_backend_recipe_with_a_32bit_backward_seed_does_not_warn():
    """The documented recipe (backend, AdamW, `xt.sync()`): the backward's pending
    `ones_like(loss)` seed, which x64guard computes before its program runs, holds no
    64-bit type: torch-xla's compile of it is no unnarrowed work (issue 34, D5)."""
    settle()
    torch.manual_seed(0)
    model = xt.to_device(nn.Sequential(nn.Embedding(50, 16), nn.Linear(16, 5)))
    torch._dynamo.reset()
    step = torch.compile(lambda ids: F.cross_entropy(model(ids).flatten(0, 1), (ids % 5).flatten()),
                         backend="x64guard")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            loss = step(xt.to_device(torch.randint(0, 50, (2, 9))))
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            xt.sync()
            loss.item()
    assert outside_warnings(caught, "lazy-read") == []


def test_mid_step_reads_inside_step_run_narrowed():
    settle()
    compiles, own = xla_metrics.compile_count(), xla_metrics.own_compile_count()
    losses, host, dtype, found = train_lazily(use_step=True)
    assert not found
    assert xla_metrics.compile_count() - compiles == xla_metrics.own_compile_count() - own   # torch-xla compiled nothing itself
    eager_losses, eager_host = train_eagerly()
    assert losses == pytest.approx(eager_losses, rel=1e-5)
    assert host == eager_host and dtype == torch.int64          # the read keeps PyTorch's dtype


OPT_CHILD = r"""
import contextlib, copy, json, warnings
import torch, torch_xla
from transformers import OPTConfig, OPTForCausalLM
import x64guard, x64guard.torch_xla as xt
torch.manual_seed(0)
config = OPTConfig(vocab_size=64, hidden_size=16, num_hidden_layers=1, ffn_dim=32, num_attention_heads=2,
                   max_position_embeddings=32, word_embed_proj_dim=16, dropout=0.0, attention_dropout=0.0,
                   activation_dropout=0.0, layerdrop=0.0)
cpu_model = OPTForCausalLM(config)
eager_model = copy.deepcopy(cpu_model)
ids = torch.randint(3, 64, (2, 6))
mask = torch.ones(2, 6, dtype=torch.long)
mask[1, 4:] = 0                                  # padding: the masking code reads padding_mask.all()
batch = {"input_ids": ids, "attention_mask": mask, "labels": ids}
model = xt.to_device(cpu_model)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
device_batch = xt.to_device(batch)
losses = []
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for _ in range(2):
        with xt.step() if USE_STEP else contextlib.nullcontext():
            loss = model(**device_batch).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        if USE_STEP:
            xt.sync(model, optimizer, loss)
        else:
            xt.sync()                            # the drop-in for torch_xla.sync(), no step()
        losses.append(loss.item())
lazy_read = [str(w.message) for w in caught if "[lazy-read]" in str(w.message)]
eager_optimizer = torch.optim.SGD(eager_model.parameters(), lr=0.1)
eager = []
for _ in range(2):
    loss = eager_model(**batch).loss
    loss.backward()
    eager_optimizer.step()
    eager_optimizer.zero_grad()
    eager.append(loss.item())
print(json.dumps({"losses": losses, "eager": eager, "lazy_read": lazy_read}))
"""


@pytest.mark.parametrize("use_step", [True, False], ids=["step-and-named-sync", "bare-sync"])
def test_opt_lazy_loop_compiles_nothing_64bit(tmp_path, use_step):
    """Hugging Face's masking code reads `padding_mask.all()` mid-step. Inside step() the
    mode catches the read; with the bare drop-in `sync()` the mask, computed from
    to_device's attention_mask, is a GuardedTensor, which catches it: both run it narrowed
    (before GuardedTensor the bare loop's dump held one s64 module, `s64[]` in, `pred[]` out)."""
    dump = tmp_path / "dump"
    proc = run_python(f"USE_STEP = {use_step}\n" + OPT_CHILD,
                      env={"XLA_FLAGS": f"--xla_dump_to={dump} --xla_dump_hlo_as_text"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not report["lazy_read"]
    assert report["losses"] == pytest.approx(report["eager"], rel=1e-5)
    modules = sorted(dump.glob("*.before_optimizations.txt"))
    assert modules, "XLA dumped nothing"
    wide = {path.name: wide_values_beside_rng_state(path.read_text()) for path in modules}
    assert not {name: lines for name, lines in wide.items() if lines}


def test_lazy_findings_inside_step_name_the_user_line():
    """torch-xla records each op's Python stack inside step(): sync's findings name the
    model's line, not torch-xla's op (`loc("aten__mul")`, what they named before)."""
    import inspect

    ids = xt.to_device(torch.tensor([2_000_000_000, 3]))
    with xt.step():
        line = inspect.currentframe().f_lineno + 1
        hashed = (ids * 37) % 4099                 # int32 cannot hold 2e9 * 37: refused, at this line
    with pytest.raises(x64guard.X64GuardError, match=rf"int64 arithmetic at .*test_outside_work.py:{line} "):
        xt.sync(hashed)
