"""In-graph random numbers (torch.rand, randn, randint, bernoulli, dropout).

torch-xla draws each with `rng_bit_generator` from a `ui64[2]` state it computes in the
graph from its seed with 64-bit integer arithmetic; x64guard computes those states on the
host and passes them in as 32-bit words (x64guard/torch_xla/rng.py). The front end's
part is checked at full width: the program then draws exactly what torch-xla's own
generator draws for the same seed. Narrowed, the core pass keeps the state (the x32
profile's one 64-bit value) and the program draws the same numbers.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
import torch_xla
import torch_xla.core.xla_model as xm
from torch import nn

import x64guard
import x64guard.torch_xla as xt
from x64guard.torch_xla.lazy import LAZY_PROGRAMS
from tests.torch_xla.common import DEVICE, quietly, wide_values_beside_rng_state
from x64guard.io import modules as xmlir
from x64guard.torch_xla.rng import extract_rng_states, openxla_next_seed

SEED = 1234


class Draws(nn.Module):
    """One of each: uniform, normal, integers, Bernoulli, dropout (float32 data)."""

    def forward(self, x):
        return (x + torch.rand(x.shape, device=x.device),
                x + torch.randn(x.shape, device=x.device),
                torch.randint(0, 1000, x.shape, device=x.device),
                torch.bernoulli(torch.full(x.shape, 0.3, device=x.device)),
                nn.functional.dropout(x + 1, 0.5, training=True))




def _eager_torch_xla(model: nn.Module, x: torch.Tensor, calls: int) -> list:
    """torch-xla's own generator: the model run lazily, synced after each call."""
    xm.set_rng_state(SEED)
    results = []
    for _ in range(calls):
        out = model(x.to(DEVICE))
        torch_xla.sync()
        results.append([t.cpu() for t in out])
    return results


# --------------------------------------------------------------------------- the front end's part

def test_state_words_are_torch_xla_seed_arithmetic():
    """torch-xla's module for two draws, the states taken out: each is its s64 LCG step
    of the seed, zero-extended, as the bitcast of the input words reads it."""
    xm.set_rng_state(SEED)
    draws = [torch.rand(4, device=DEVICE), torch.randint(0, 10, (4,), device=DEVICE)]
    ids, _ = xt._xc.graph_inputs(draws)
    module, _ = xmlir.load(xt._xc.stablehlo_text(draws, str(DEVICE)))
    rng = extract_rng_states(module, ids.index(xt._xc.seed_id()))
    torch_xla.sync()
    assert rng.count == 2 and rng.input_shape() == (2, 2, 2)
    text = str(module)
    assert text.count("rng_bit_generator") == 2 and "214013" not in text and "2531011" not in text
    words = rng.words(SEED).view(np.uint32).reshape(2, 2, 2).view(np.uint64)[..., 0]
    first = (SEED * 214013 + 2531011) % 2**64
    second = (first * 214013 + 2531011) % 2**64
    assert words.tolist() == [[first, 0], [second, 0]]


@pytest.mark.slow
def test_full_width_program_draws_what_torch_xla_draws():
    """narrow_exported(mode='allow') runs x64guard's program without narrowing: the states
    come from the host-computed words, and every draw equals torch-xla's own, call after
    call (x64guard advances the seed as torch-xla's compiled calls do)."""
    model = Draws()
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    program = xt.narrow_exported(torch.export.export(model, (x,)), mode="allow")
    assert program.result is not None and "rng_bit_generator" in program.text
    expected = _eager_torch_xla(model, x, 1)
    xm.set_rng_state(SEED)
    got = [t.cpu() for t in program(x)]
    for want, have in zip(expected[0], got):
        assert torch.equal(want, have)
    assert xm.get_rng_state() == openxla_next_seed(SEED)
    second = [t.cpu() for t in program(x)]
    assert not torch.equal(second[0], got[0])                      # a new draw each call


# --------------------------------------------------------------------------- narrowed programs that draw

@pytest.mark.slow
def test_backend_draws_what_torch_xla_draws_for_the_same_seed():
    model = Draws()
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    expected = _eager_torch_xla(model, x, 2)
    # openxla, warmed up (its first call perturbs the seed while it compiles), agrees with eager.
    openxla = torch.compile(model, backend="openxla")
    openxla(x.to(DEVICE))
    xm.set_rng_state(SEED)
    warm = [[t.cpu() for t in openxla(x.to(DEVICE))] for _ in range(2)]
    torch._dynamo.reset()
    fn = torch.compile(model, backend="x64guard")
    xm.set_rng_state(SEED)
    got = [[t.cpu() for t in quietly(fn, x.to(DEVICE))] for _ in range(2)]   # from the first call on
    for call in range(2):
        for k in range(5):   # randint's int64 values come back as int32
            want = expected[call][k] if call == 0 else warm[call][k]
            assert torch.equal(got[call][k], want.to(got[call][k].dtype)), (call, k)
    (spec,) = xt.compiled_graphs()[-1].specializations()
    assert spec.rng is not None and spec.rng.count == 5
    assert not wide_values_beside_rng_state(spec.program.hlo)


@pytest.mark.slow
def test_backend_randint_draws_what_torch_xla_draws():
    """torch-xla draws randint from 64-bit words (int32 randint too) and reduces them to
    the range in 64-bit arithmetic; narrowed, the same words and the same reduction (the
    core does the 64-bit remainder in 32-bit arithmetic): the values torch-xla's own
    int64 randint gives for the same seed, as int32, call after call. (torch-xla's own
    32-bit program cannot be the oracle: XLA_USE_32BIT_LONG=1 fails to lower randint,
    "minval_type == maxval_type".)"""
    def draw(x):
        return torch.randint(0, 1000, x.shape, device=x.device)

    xm.set_rng_state(SEED)
    expected = []
    for _ in range(2):
        eager = draw(torch.zeros(2, 3, device=DEVICE))
        torch_xla.sync()
        expected.append(eager.cpu())
    fn = torch.compile(draw, backend="x64guard")
    xm.set_rng_state(SEED)
    got = [quietly(fn, torch.zeros(2, 3, device=DEVICE)).cpu() for _ in range(2)]
    assert [g.dtype for g in got] == [torch.int32] * 2
    assert [g.tolist() for g in got] == [e.tolist() for e in expected]
    (spec,) = xt.compiled_graphs()[-1].specializations()
    assert not wide_values_beside_rng_state(spec.program.hlo)


@pytest.mark.slow
def test_random_ops_in_a_compiled_training_step_run():
    """nn.Dropout, torch.randn, rand, randint and bernoulli inside a compiled training step."""
    class Noisy(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(50, 16)
            self.linear = nn.Linear(16, 16)
            self.drop = nn.Dropout(0.2)

        def forward(self, ids):
            h = self.drop(self.embed(ids)) + 0.01 * torch.randn(ids.shape + (16,), device=ids.device)
            h = h * torch.bernoulli(torch.full_like(h, 0.9)) + torch.rand_like(h) * 0.01
            shuffled = torch.randint(0, ids.shape[1], ids.shape, device=ids.device)
            return (self.linear(h) - 1).pow(2).mean() + shuffled.float().mean() * 0

    torch.manual_seed(0)
    model = xt.to_device(Noisy())
    fn = torch.compile(model, backend="x64guard")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    ids = xt.to_device(torch.randint(0, 50, (4, 6)))
    losses = []
    for _ in range(4):
        loss = quietly(fn, ids)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
    forward = [g for g in xt.compiled_graphs() if g.role == "forward"][-1]
    (spec,) = forward.specializations()
    assert spec.rng is not None and spec.rng.count >= 5
    assert not wide_values_beside_rng_state(spec.program.hlo)


@pytest.mark.slow
def test_compiled_dropout_is_torch_xla_eager_dropout_openxla_is_not():
    """Under AOTAutograd dropout becomes aten.native_dropout, which torch-xla 2.9 lowers
    with the scale 1/p instead of 1/(1-p). x64guard computes it as torch-xla's eager
    dropout does (x64guard/torch_xla/repairs.py, TorchXlaRepairs): the same values, bit for bit,
    from the same seed; openxla's kept values are scaled by 1/p."""
    x = torch.randn(4, 50, generator=torch.Generator().manual_seed(0))

    def dropout(t):
        return nn.functional.dropout(t, 0.3, training=True)

    xm.set_rng_state(SEED)
    eager = dropout(x.to(DEVICE))
    torch_xla.sync()
    fn = torch.compile(dropout, backend="x64guard")
    xm.set_rng_state(SEED)
    assert torch.equal(quietly(fn, x.to(DEVICE)).cpu(), eager.cpu())
    torch._dynamo.reset()
    openxla = torch.compile(lambda t: torch.ops.aten.native_dropout(t, 0.3, True)[0], backend="openxla")
    kept = openxla(x.to(DEVICE)).cpu()
    scale = (kept[kept != 0] / x[kept != 0]).mean().item()
    assert scale == pytest.approx(1 / 0.3, rel=1e-5)            # torch-xla's own: 1/p


@pytest.mark.slow
def test_transformer_with_dropout_trains():
    """GPT-2 with dropout 0.1 through the backend: the loss of the first step is the loss
    torch-xla computes eagerly from the same seed (the same dropout masks and scale); the
    gradient is the gradient of that loss (a directional derivative against a central
    difference with the same masks); SGD lowers the loss step after step."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from tests.torch_xla.real_models import VOCAB

    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=VOCAB, n_positions=64, resid_pdrop=0.1,
                        embd_pdrop=0.1, attn_pdrop=0.1, bos_token_id=1, eos_token_id=2)
    base = GPT2LMHeadModel(config)
    ids = torch.randint(0, VOCAB, (2, 12), generator=torch.Generator().manual_seed(3))

    def loss_at_seed(fn, batch):
        xm.set_rng_state(SEED)
        return fn(input_ids=batch, labels=batch, use_cache=False).loss

    eager = copy.deepcopy(base).to(DEVICE)
    expected = loss_at_seed(eager, ids.to(DEVICE))
    torch_xla.sync()
    model = xt.to_device(base)
    fn = torch.compile(model, backend="x64guard")
    batch = xt.to_device(ids)
    loss = quietly(loss_at_seed, fn, batch)
    assert loss.item() == pytest.approx(expected.item(), rel=1e-5)
    loss.backward()
    generator = torch.Generator().manual_seed(5)
    direction = [torch.randn(p.shape, generator=generator) for p in model.parameters()]
    norm = torch.sqrt(sum(d.pow(2).sum() for d in direction))
    direction = [(d / norm).to(DEVICE) for d in direction]
    slope = sum((p.grad * d).sum() for p, d in zip(model.parameters(), direction)).item()
    eps, values = 1e-2, []
    for sign in (1, -1):
        with torch.no_grad():
            for p, d in zip(model.parameters(), direction):
                p.add_(sign * eps * d)
        values.append(loss_at_seed(fn, batch).item())
        with torch.no_grad():
            for p, d in zip(model.parameters(), direction):
                p.sub_(sign * eps * d)
    assert slope == pytest.approx((values[0] - values[1]) / (2 * eps), rel=0.02)
    model.zero_grad()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for _ in range(4):
        loss = fn(input_ids=batch, labels=batch, use_cache=False).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
    forward = [g for g in xt.compiled_graphs() if g.role == "forward"]
    assert any(s.rng is not None and s.rng.count == 7 for g in forward for s in g.specializations())
    for graph in xt.compiled_graphs()[-4:]:
        for spec in graph.specializations():
            assert not wide_values_beside_rng_state(spec.program.hlo)


@pytest.mark.slow
def test_exported_program_with_random_numbers_runs_narrowed():
    model = Draws()
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    program = quietly(xt.narrow_exported, torch.export.export(model, (x,)))
    expected = _eager_torch_xla(model, x, 1)
    xm.set_rng_state(SEED)
    got = [t.cpu() for t in program(x)]
    for k in range(5):
        assert torch.equal(got[k], expected[0][k].to(got[k].dtype)), k
    assert got[2].dtype == torch.int32
    assert not wide_values_beside_rng_state(program.hlo)


@pytest.mark.slow
def test_lazy_loop_with_dropout_runs_narrowed():
    torch.manual_seed(0)
    model = xt.to_device(nn.Sequential(nn.Linear(8, 16), nn.Dropout(0.2), nn.Linear(16, 1)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x = xt.to_device(torch.randn(16, 8, dtype=torch.float64))
    losses = []
    for _ in range(5):
        loss = model(x).pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        quietly(xt.sync, model, optimizer, loss)
        losses.append(loss.item())
    assert losses[-1] < losses[0]
    program = list(LAZY_PROGRAMS.values())[-1]
    assert program.rng is not None and not wide_values_beside_rng_state(program.program.hlo)


def test_target_is_passed_to_the_pass():
    """`target=` reaches the core pass as an argument: x32 keeps the generators' u64
    state, x32-strict refuses it (compile and narrow_exported alike)."""
    x = torch.randn(4)

    def draw(v):
        return v + torch.rand(v.shape, device=v.device)

    xt.compile(draw, target="x32")(x.to(DEVICE))
    torch._dynamo.reset()
    with pytest.raises(x64guard.X64GuardError, match="random numbers"):
        xt.compile(draw, target="x32-strict")(x.to(DEVICE))
    torch._dynamo.reset()

    class Draw(nn.Module):
        def forward(self, v):
            return draw(v)

    exported = torch.export.export(Draw(), (x,))
    xt.narrow_exported(exported, target="x32")(x)
    with pytest.raises(x64guard.X64GuardError, match="random numbers"):
        xt.narrow_exported(exported, target="x32-strict")
