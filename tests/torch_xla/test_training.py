"""Training through x64guard, against eager PyTorch run at 32 bits on the CPU: the
backend with the optimizer step outside the compiled region (the usual loop) and inside
it, and the lazy-tensor loop with `x64guard.torch_xla.sync`. Losses, gradients and updated
parameters agree within float32 tolerance; integer results (the greedy token) exactly;
the programs torch-xla runs hold no 64-bit type."""

from __future__ import annotations

import copy

import pytest
import torch
import torch_xla
from torch import nn

import x64guard
import x64guard.torch_xla as xt
from x64guard.torch_xla.boundary import narrow_alias
from x64guard.torch_xla.lazy import LAZY_PROGRAMS
from x64guard.torch_xla import metrics as xla_metrics
from tests.torch_xla.common import HLO_WIDE, quietly

VOCAB, LENGTH = 64, 12


class TinyLM(nn.Module):
    """Written with PyTorch's 64-bit defaults: int64 tokens and positions (arange), a
    float64 model, the greedy next token (argmax: int64)."""

    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, 32)
        self.pos = nn.Embedding(16, 32)
        self.norm = nn.LayerNorm(32)
        self.mlp = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, VOCAB))
        self.double()

    def forward(self, tokens):
        """(the loss of predicting each token from itself and its position, the greedy
        next token). The loss is computed here, inside the compiled graph: cross_entropy
        takes int64 targets, a cast the narrowed program drops."""
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        logits = self.mlp(self.norm(self.tok(tokens) + self.pos(positions)[None]))
        loss = nn.functional.cross_entropy(logits.reshape(-1, VOCAB), tokens.reshape(-1).long())
        return loss, logits[:, -1].argmax(dim=-1)


def _tokens(seed: int) -> torch.Tensor:
    return torch.randint(0, VOCAB, (2, LENGTH), generator=torch.Generator().manual_seed(seed))


def _models():
    torch.manual_seed(0)
    model = TinyLM()
    reference = copy.deepcopy(model).float()          # eager PyTorch at 32 bits, on the CPU
    return xt.to_device(model), reference


def _assert_parameters_match(on_device: nn.Module, reference: nn.Module, atol: float = 2e-6) -> None:
    for (name, mine), theirs in zip(on_device.named_parameters(), reference.parameters()):
        assert mine.dtype == torch.float32 and mine.device.type == "xla", name
        torch.testing.assert_close(mine.detach().cpu(), theirs.detach(), rtol=1e-5, atol=atol, msg=name)


@pytest.mark.slow
def test_backend_training_optimizer_outside_matches_eager():
    model, reference = _models()
    compiled = torch.compile(model, backend="x64guard")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.5, momentum=0.9)
    losses = []
    for step in range(3):
        tokens = _tokens(step)
        loss, greedy = quietly(compiled, xt.to_device(tokens))
        loss.backward()
        expected, expected_greedy = reference(tokens)
        expected.backward()
        # gradients, before the step
        for (name, mine), theirs in zip(model.named_parameters(), reference.parameters()):
            torch.testing.assert_close(mine.grad.cpu(), theirs.grad, rtol=1e-5, atol=1e-6, msg=name)
        optimizer.step()
        optimizer.zero_grad()
        reference_optimizer.step()
        reference_optimizer.zero_grad()
        torch.testing.assert_close(loss.detach().cpu(), expected.detach(), rtol=1e-5, atol=1e-6)
        assert greedy.dtype == torch.int32 and torch.equal(greedy.cpu(), expected_greedy.to(torch.int32))
        losses.append(loss.item())
    _assert_parameters_match(model, reference)
    graphs = [g for g in xt.compiled_graphs() if g.role in ("forward", "backward")][-2:]
    assert {g.role for g in graphs} == {"forward", "backward"}
    for graph in graphs:
        (spec,) = graph.specializations()
        assert not HLO_WIDE.search(spec.program.hlo)
    assert any(s.result.changes.get("i64->i32") for g in graphs for s in g.specializations())


@pytest.mark.slow
def test_backend_training_optimizer_inside_matches_eager():
    """The whole step compiled: dynamo breaks the graph at backward(); the optimizer's
    in-place update of parameters and state (Adam) is a graph of its own, narrowed, and
    written back into them by AOTAutograd."""
    model, reference = _models()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    reference_optimizer = torch.optim.Adam(reference.parameters(), lr=1e-2)

    def step(m, opt, tokens):
        loss, greedy = m(tokens)
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss, greedy

    compiled_step = torch.compile(step, backend="x64guard")
    for k in range(3):
        tokens = _tokens(10 + k)
        loss, greedy = quietly(compiled_step, model, optimizer, xt.to_device(tokens))
        expected, expected_greedy = step(reference, reference_optimizer, tokens)
        torch.testing.assert_close(loss.detach().cpu(), expected.detach(), rtol=1e-5, atol=1e-6)
        assert torch.equal(greedy.cpu(), expected_greedy.to(torch.int32))
    _assert_parameters_match(model, reference, atol=1e-5)
    roles = [g.role for g in xt.compiled_graphs()]
    assert {"forward", "backward", "inference"} <= set(roles)   # the optimizer's graph: "inference"


@pytest.mark.slow
def test_lazy_training_loop_with_sync_matches_eager():
    """The usual torch-xla loop, with x64guard.torch_xla.sync in place of torch_xla.sync:
    one narrowed program per distinct graph, reused from the second step on."""
    model, reference = _models()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.5)
    tokens = _tokens(20)
    before = xt.counters()
    for step in range(3):
        loss, greedy = model(xt.to_device(tokens))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        quietly(xt.sync, model, optimizer, loss, greedy)
        assert not any(xt._xc.needs_materialization([loss, greedy, *model.parameters()]))
        assert greedy.dtype == torch.int32          # an output named directly comes back narrowed
        expected, expected_greedy = reference(tokens)
        expected.backward()
        reference_optimizer.step()
        reference_optimizer.zero_grad()
        torch.testing.assert_close(loss.detach().cpu(), expected.detach(), rtol=1e-5, atol=1e-6)
        assert torch.equal(greedy.cpu(), expected_greedy.to(greedy.dtype))
    _assert_parameters_match(model, reference)
    after = xt.counters()
    assert after["traces"] - before["traces"] == 1 and after["calls"] - before["calls"] == 3
    (program,) = [p for p in LAZY_PROGRAMS.values() if p.result.changes.get("i64->i32")][-1:]
    assert not HLO_WIDE.search(program.program.hlo)


def test_lazy_program_cache_is_bounded_and_results_stay_right(monkeypatch):
    """A lazy loop whose shapes vary lowers one graph per shape: the programs `sync` keeps
    are an LRU of `limit` (64; here 2), and a graph evicted and met again is compiled again."""
    monkeypatch.setattr(LAZY_PROGRAMS, "limit", 2)
    before = xt.counters()
    for n in (3, 4, 5, 6, 3):
        host = torch.arange(n, dtype=torch.float64) * 0.5
        x = xt.to_device(host)
        y = x * 2 + 1
        quietly(xt.sync, y)
        assert len(LAZY_PROGRAMS) <= 2
        torch.testing.assert_close(y.cpu(), (host * 2 + 1).float())
    assert xt.counters()["traces"] - before["traces"] == 5     # shape 3 was evicted by 5 and 6


def test_sync_refuses_a_64bit_tensor_it_would_overwrite():
    torch.manual_seed(0)
    model = TinyLM().to(xt.xla_device())          # float64 parameters on the device, as they are
    loss, _ = model(_tokens(0).to(xt.xla_device()))
    loss.backward()
    with pytest.raises(x64guard.X64GuardError, match="to_device") as info:
        xt.sync(model)
    assert info.value.findings[0].kind == "sync-64bit-tensor"


def test_to_device_narrows_on_the_host_and_range_checks():
    torch.manual_seed(0)
    model = TinyLM()
    model.register_buffer("steps", torch.tensor(7, dtype=torch.int64))
    moved = xt.to_device(model)
    assert moved is not model and next(model.parameters()).dtype == torch.float64   # the original is untouched
    assert {p.dtype for p in moved.parameters()} == {torch.float32}
    assert moved.steps.dtype == torch.int32 and moved.steps.device.type == "xla"
    assert all(p.requires_grad for p in moved.parameters())
    torch.testing.assert_close(moved.tok.weight.cpu(), model.tok.weight.float())
    # shared parameters stay shared
    tied = nn.Sequential(nn.Embedding(4, 3), nn.Linear(3, 4, bias=False))
    tied[1].weight = tied[0].weight
    moved_tied = xt.to_device(tied)
    assert moved_tied[1].weight is moved_tied[0].weight
    batch = xt.to_device({"input_ids": torch.tensor([[1, 2]]), "scale": torch.tensor([0.5], dtype=torch.float64),
                          "flag": True})
    # ids stay int64 as PyTorch sees them (one_hot, eager's int64 arithmetic); XLA holds them as int32
    assert batch["input_ids"].dtype == torch.int64 and batch["scale"].dtype == torch.float32 and batch["flag"]
    assert narrow_alias(batch["input_ids"]).dtype == torch.int32
    with pytest.raises(x64guard.X64GuardError, match=r"input_ids: value 4294967296 does not fit in int32"):
        xt.to_device({"input_ids": torch.tensor([[1, 2**32]])})


class SetsProblemTypeOnFirstCall(TinyLM):
    """Hugging Face's classifiers set `config.problem_type` during their first call: dynamo
    guards on the attribute, so the second step recompiles a graph that lowers as before."""

    problem_type = None

    def forward(self, tokens):
        if self.problem_type is None:
            self.problem_type = "single_label_classification"
        return super().forward(tokens)


def test_recompiled_graph_reuses_the_programs_of_the_first():
    torch.manual_seed(0)
    model = SetsProblemTypeOnFirstCall()
    reference = copy.deepcopy(model).float()
    model = xt.to_device(model)
    compiled = torch.compile(model, backend="x64guard")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.5)
    for step in range(3):
        tokens = _tokens(20 + step)
        before, compiles = xt.counters(), xla_metrics.compile_count()
        loss, greedy = quietly(compiled, xt.to_device(tokens))
        loss.backward()
        after, compiled_now = xt.counters(), xla_metrics.compile_count() - compiles
        if step == 1:   # dynamo recompiled: forward and backward traced again, and compiled no more
            assert after["traces"] - before["traces"] == 2
            assert after["programs"] == before["programs"]
            assert after["programs_shared"] - before["programs_shared"] == 2
            assert compiled_now == 0
        expected, expected_greedy = reference(tokens)
        expected.backward()
        torch.testing.assert_close(loss.detach().cpu(), expected.detach(), rtol=1e-5, atol=1e-6)
        assert torch.equal(greedy.cpu(), expected_greedy.to(torch.int32))
        for opt in (optimizer, reference_optimizer):
            opt.step()
            opt.zero_grad()
        torch_xla.sync()   # the update runs here, not as a pending input of the next step's call
    _assert_parameters_match(model, reference)
    forward = [g for g in xt.compiled_graphs() if g.role == "forward"][-2:]
    assert forward[0] is not forward[1]
    assert forward[0].specializations()[0].program.graph == forward[1].specializations()[0].program.graph
