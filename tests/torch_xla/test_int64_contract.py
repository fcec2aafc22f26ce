"""The torch contract for int64 (issue 25, items 0, 1, 3, 4): the oracle is eager PyTorch
at int64. Whatever x64guard narrows gives eager's answer or is refused, on every path:

* int64 arithmetic int32 cannot hold (a bucketing hash, a multiplicative hash, a
  cumulative sum of large ids, a flat index product) raises `integer-overflow` at the
  model's line through the backend (ids moved with `to_device` or put on the device at
  int64), `narrow_exported` and the lazy loop (`sync()` with and without arguments);
  the same programs on small ids equal eager exactly;
* `to_device` keeps ids int64 as PyTorch sees them (XLA holds int32), so `one_hot`,
  `cross_entropy`'s targets and `bincount` work through the backend and the lazy loop;
* `x64guard.torch_xla.sync()` with no arguments narrows every pending tensor: a lazy
  loop that calls it alone trains as eager does, and XLA's dump of every module it
  compiled holds no 64-bit type beyond the random-number state;
* `mode="error"` trains a float32 model with dropout (x64guard's own dropout made an f64
  constant before).
"""

from __future__ import annotations

import json
import warnings

import pytest
import torch
from torch import nn

import x64guard
import x64guard.torch_xla as xt
from tests.torch_xla.common import DEVICE, quietly, run_python, wide_values_beside_rng_state
from tests.torch_xla.real_models import RECOMMENDER_BATCH, Recommender, Tagger

BIG = [2_000_000_000, 5, 123_456_789, 1_999_999_999, 7, 2**31 - 1, 42, 1_000_000_007]
SMALL = [3, 5, 12_345, 99, 7, 1_000, 42, 65_535]


class Hash(nn.Module):
    """The issue's repro: bucket ids by (id * 31) % 4093."""

    def forward(self, user):
        return (user * 31) % 4093


class KnuthHash(nn.Module):
    """A multiplicative hash with Knuth's constant (int32 cannot hold the constant)."""

    def forward(self, user):
        return (user * 2654435761) % 4096


class CumulativeIds(nn.Module):
    def forward(self, user):
        return user.cumsum(0)


class FlatIndex(nn.Module):
    """row * n_cols + col, an index product."""

    def forward(self, user):
        return user * 1000 + (user % 1000)


KIN = [Hash, KnuthHash, CumulativeIds, FlatIndex]


def _ids(values):
    return torch.tensor(values, dtype=torch.int64)


def _refused(error: Exception) -> bool:
    return isinstance(error, x64guard.X64GuardError) and error.findings and \
        error.findings[0].kind in ("integer-overflow", "constant-out-of-range", "input-out-of-range")


@pytest.mark.parametrize("model", KIN, ids=lambda m: m.__name__)
def test_overflowing_id_arithmetic_is_refused_on_every_path_and_small_ids_equal_eager(model):
    paths = {
        "backend, to_device ids": lambda v: torch.compile(model(), backend="x64guard")(xt.to_device(_ids(v))),
        "backend, int64 on the device": lambda v: torch.compile(model(), backend="x64guard")(_ids(v).to(DEVICE)),
        "narrow_exported": lambda v: xt.narrow_exported(torch.export.export(model(), (_ids(SMALL),)))(_ids(v)),
        "lazy sync(out)": lambda v: _lazy(model, v, named=True),
        "lazy sync()": lambda v: _lazy(model, v, named=False),
    }
    for name, run in paths.items():
        torch._dynamo.reset()
        with pytest.raises(x64guard.X64GuardError) as info:
            quietly(run, BIG)
        assert _refused(info.value), (name, str(info.value)[:500])
        if not name.startswith("lazy"):   # the lazy graph carries no Python lines (docs/torch_xla.md)
            assert "test_int64_contract.py" in str(info.value), (name, str(info.value)[:500])
        if model is KnuthHash:
            continue     # its constant alone is refused: int32 cannot hold it
        torch._dynamo.reset()
        got = quietly(run, SMALL)
        assert torch.equal(got.cpu().to(torch.int64), model()(_ids(SMALL))), name


@pytest.mark.parametrize("model", [Hash, FlatIndex], ids=lambda m: m.__name__)
def test_small_ids_settle_the_checks_without_a_read_back_and_large_ones_are_still_read_and_refused(model):
    """(ids * 31) % 4093 and ids * 1000 + ids % 1000 hold in int32 for small ids: ids
    x64guard checked on the host (to_device, the boundary's cast, a host input) settle the
    checks, so the call does not read the flags back (a read waits for the device); 2e9
    does not, the flags are read, and the call is refused. The lazy graph takes 31 and 1000
    as arguments, and one magnitude bounds all of an op's arguments, so a product settles
    there for ids up to 2**15 (docs/torch_xla.md, "Integer arithmetic")."""
    settled = [3, 5, 12_345, 99, 7, 1_000, 42, 32_000]
    paths = {
        "backend, to_device ids": lambda v: torch.compile(model(), backend="x64guard")(xt.to_device(_ids(v))),
        "backend, int64 on the device": lambda v: torch.compile(model(), backend="x64guard")(_ids(v).to(DEVICE)),
        "narrow_exported": lambda v: xt.narrow_exported(torch.export.export(model(), (_ids(SMALL),)))(_ids(v)),
        "lazy sync()": lambda v: _lazy(model, v, named=False),
    }
    for name, run in paths.items():
        torch._dynamo.reset()
        quietly(run, settled)                     # traced and compiled
        reads = xt.counters()["overflow_reads"]
        got = quietly(run, settled)
        assert xt.counters()["overflow_reads"] == reads, name
        assert torch.equal(got.cpu().to(torch.int64), model()(_ids(settled))), name
        with pytest.raises(x64guard.X64GuardError) as info:
            quietly(run, BIG)
        assert _refused(info.value) and xt.counters()["overflow_reads"] > reads, (name, str(info.value)[:300])


def _lazy(model, values, named: bool):
    out = model()(xt.to_device(_ids(values)))
    if named:
        xt.sync(out)
    else:
        xt.sync()
    return out


def test_the_checks_are_proved_away_where_ranges_allow():
    """Positions from arange plus an offset, a remainder's sign fix-up, a cumsum of a mask:
    no check, so no read after the call."""

    class Positions(nn.Module):
        def forward(self, ids, mask):
            positions = torch.arange(ids.shape[-1], device=ids.device) + 2
            return ids % 97 + positions, mask.bool().long().cumsum(-1)

    torch._dynamo.reset()
    fn = torch.compile(Positions(), backend="x64guard")
    batch = xt.to_device({"ids": _ids([[1, 2, 3]]), "mask": _ids([[1, 1, 0]])})
    out = quietly(fn, **batch)
    assert [o.cpu().tolist() for o in out] == [[[3, 5, 7]], [[1, 2, 2]]]
    assert all(s.program.checks is None for g in xt.compiled_graphs()[-1:] for s in g.specializations())


BATCH = RECOMMENDER_BATCH


def _eager_losses(steps: int = 3):
    torch.manual_seed(0)
    model = Recommender()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.2)
    losses = []
    for _ in range(steps):
        loss, counts = model(**BATCH)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    return losses, counts, model


@pytest.mark.parametrize("path", ["backend", "backend, sync()", "lazy sync()"])
def test_long_only_ops_work_on_ids_moved_by_to_device(path):
    """"backend, sync()": the backend's step ended by a sync without arguments, which must
    leave the ids (and dynamo's copies of them) to the backend, not narrow them in place."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = xt.to_device(Recommender())
    batch = xt.to_device(BATCH)
    assert batch["user"].dtype == torch.int64       # as PyTorch sees it; XLA holds int32
    fn = torch.compile(model, backend="x64guard") if path.startswith("backend") else model
    optimizer = torch.optim.SGD(model.parameters(), lr=0.2)
    losses = []
    for _ in range(3):
        loss, counts = quietly(fn, **batch)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if path.endswith("sync()"):
            with warnings.catch_warnings():
                warnings.simplefilter("error", x64guard.X64GuardWarning)   # nothing left pending
                warnings.filterwarnings("ignore", message="x64guard: narrowed")
                # (what torch-xla compiled itself since the last sync, here or in an earlier test of
                # this process: test_outside_work.py tests that warning)
                warnings.filterwarnings("ignore", message=r"(?s).*\[lazy-read\]$")
                xt.sync()
        losses.append(loss.item())
    expected, expected_counts, reference = _eager_losses()
    assert losses == pytest.approx(expected, rel=1e-5)
    assert counts.cpu().tolist() == expected_counts.tolist()
    for mine, theirs in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(mine.detach().cpu(), theirs.detach(), rtol=1e-5, atol=1e-6)


def test_mode_error_trains_a_float32_model_with_dropout():
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = xt.to_device(nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.3), nn.Linear(8, 1)))
    fn = xt.compile(model, mode="error")
    x = xt.to_device(torch.randn(6, 4))
    for _ in range(2):
        loss = fn(x).square().mean()
        loss.backward()
    assert torch.isfinite(loss.cpu())


LAZY_DUMP_CHILD = r"""
import glob, json, os, warnings
import torch, torch_xla
import x64guard, x64guard.torch_xla as xt
from tests.torch_xla.test_int64_contract import Recommender, BATCH
warnings.simplefilter("ignore", x64guard.X64GuardWarning)
torch.manual_seed(0)
model = xt.to_device(Recommender(p=0.2, counts=False))
batch = xt.to_device(BATCH)
optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
losses = []
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for _ in range(3):
        loss, counts = model(**batch)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        xt.sync()                          # the drop-in: no arguments
        losses.append(loss.item())
pending = [str(w.message) for w in caught if "sync" in str(w.message)]
print(json.dumps({"losses": losses, "counters": xt.counters(), "pending_warnings": pending}))
"""


def test_lazy_loop_with_sync_and_no_arguments_leaves_nothing_64bit_on_the_device(tmp_path):
    dump = tmp_path / "dump"
    proc = run_python(LAZY_DUMP_CHILD, env={"XLA_FLAGS": f"--xla_dump_to={dump} --xla_dump_hlo_as_text"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["losses"][-1] < report["losses"][0]
    assert report["counters"]["calls"] >= 3 and not report["pending_warnings"]
    modules = sorted(dump.glob("*.before_optimizations.txt"))   # what torch-xla handed XLA
    assert modules, "XLA dumped nothing"
    wide = {path.name: wide_values_beside_rng_state(path.read_text()) for path in modules}
    assert not {name: lines for name, lines in wide.items() if lines}


def test_sync_with_no_arguments_warns_about_what_it_cannot_reach(monkeypatch):
    """A pending tensor Python does not hold (here: untracked, and hidden from the scan) is reported
    loudly, never left silently to torch-xla's unnarrowed graph."""
    held = torch.ones(3, device=DEVICE) * 2
    monkeypatch.setattr(xt.lazy, "scan", lambda young_only, known: [])
    with pytest.warns(x64guard.X64GuardWarning, match="torch-xla will compute them at full width"):
        xt.sync()
    monkeypatch.undo()
    xt.sync()
    assert held.cpu().tolist() == [2.0, 2.0, 2.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error", x64guard.X64GuardWarning)
        xt.sync()


def test_rnn_taggers_lstm_narrowed_through_compile_gru_fails_as_torch_xla_failure():
    torch.manual_seed(0)
    batch = {"ids": torch.randint(0, 20, (2, 5)), "tags": torch.randint(0, 3, (2, 5))}
    cpu = Tagger(nn.LSTM)
    expected = cpu(**batch)
    torch._dynamo.reset()
    before = xt.counters()["traces"]
    loss = quietly(xt.compile(xt.to_device(cpu)), **xt.to_device(batch))   # dynamo told to trace the LSTM
    loss.backward()
    assert xt.counters()["traces"] > before       # narrowed, not run eagerly by nobody
    assert loss.item() == pytest.approx(expected.item(), rel=1e-5)
    torch._dynamo.reset()
    with pytest.raises(xt.TorchXlaFailure, match="torch-xla failed"):
        quietly(torch.compile(xt.to_device(Tagger(nn.GRU)), backend="x64guard"), **xt.to_device(batch))


def test_cpu_output_runs_on_the_cpu_and_a_device_read_is_refused_naming_its_line():
    """A CPU tensor the graph makes is computed on the CPU (tests/torch_xla/test_mixed_device.py);
    one computed from an XLA value is refused, naming the line that made it."""
    class CpuScale(nn.Module):
        def forward(self, x):
            return x * 2, torch.tensor(2.0) * 3, (x * 2).cpu()

    torch._dynamo.reset()
    fast = torch.compile(CpuScale(), backend="x64guard")
    with pytest.raises(x64guard.X64GuardError, match=r"a CPU tensor made at .*test_int64_contract.py:\d+ .*"
                                                     r"computed from an XLA value"):
        fast(xt.to_device(torch.ones(3)))
