"""The lazy loop (x64guard/torch_xla/lazy.py, its scalars: lowering.py):

* `x64guard.torch_xla.sync()` without arguments lowers the same graph each step, whatever
  order the garbage collector lists the step's tensors in (issue 34, D4: a tiny Falcon's
  logits and loss swapped places at step 4 and a third program was traced and compiled,
  where torch_xla.sync() compiles two);
* torch-xla's INT64_MAX / INT64_MIN scalars for a one-sided clamp or an iinfo fill narrow
  exactly (D1); any other 64-bit scalar int32 cannot hold is refused, at the model's line
  inside `step()`, and outside it the refusal says how to have the line named."""

from __future__ import annotations

import contextlib
import gc
import warnings

import pytest
import torch

import x64guard
import x64guard.torch_xla as xt

pytestmark = pytest.mark.torch
BIG = torch.iinfo(torch.int64).max


@pytest.fixture(autouse=True)
def quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", x64guard.X64GuardWarning)
        yield


def test_a_collection_mid_step_does_not_trace_the_step_again():
    w = xt.to_device(torch.randn(4, 4))
    traces = []
    for step in range(4):
        before = xt.counters()["traces"]
        first = (w * 2).sum(0)
        if step == 2:
            gc.collect(0)   # `first` moves to an older generation: the collector lists it after `second`
        second = w * 3 + 1
        xt.sync()
        traces.append(xt.counters()["traces"] - before)
    assert traces == [1, 0, 0, 0]
    torch.testing.assert_close(first.cpu(), (w.cpu() * 2).sum(0))
    torch.testing.assert_close(second.cpu(), w.cpu() * 3 + 1)     # (XLA may fuse it: within float32 rounding)


def refusal_of(make, scope=contextlib.nullcontext) -> str:
    """The message of the sync that refuses what `make()` leaves pending (made inside
    `scope()`); the refused tensors are dropped with the exception's frames, so that later
    syncs without arguments (other tests) do not find them."""
    try:
        with scope():
            pending = make()
            xt.sync(pending)
    except x64guard.X64GuardError as error:
        message = str(error)
    else:
        pytest.fail("not refused")
    del pending
    gc.collect()
    return message


def test_a_refusal_without_a_recorded_line_says_how_to_get_it():
    """Outside `step()` torch-xla records no Python line for the lazy graph's ops: the
    refusal says so and how to have the line named, rather than only torch-xla's op name."""
    ids = xt.to_device(torch.tensor([70000, 3]))
    message = refusal_of(lambda: ids * ids)
    assert "int64 arithmetic at aten__mul (no Python line was recorded for it:" in message
    assert "inside x64guard.torch_xla.step() to have it named" in message


SENTINEL_CASES = {
    "clamp(min=0)": lambda t: t.clamp(min=0),
    "clamp(max=2)": lambda t: t.clamp(max=2),
    "clamp_min(0)": lambda t: torch.clamp_min(t, 0),
    "masked_fill(iinfo.max).min": lambda t: t.masked_fill(t < 0, BIG).min(-1).values,
}


@pytest.mark.parametrize("scoped", [False, True], ids=["sync", "step"])
@pytest.mark.parametrize("name", list(SENTINEL_CASES))
def test_sentinel_scalars_narrow_exactly_in_the_lazy_loop(name, scoped):
    f = SENTINEL_CASES[name]
    ids = torch.tensor([[1, -2, 3], [-4, 5, 6]])
    for _ in range(2):                     # the second call runs the cached program
        t = xt.to_device(ids)
        if scoped:
            with xt.step():
                y = f(t) + 0
        else:
            y = f(t) + 0
        xt.sync()
        assert y.cpu().tolist() == f(ids).tolist()


def test_the_lazy_graphs_numbers_and_index_tables_are_read_once_and_follow_their_values():
    """A sync reads a Python number of the lazy graph back once (torch-xla keeps one device
    buffer per number) and shares a small index table by value: the same graph with another
    bound, or another index table, still gives eager's answer, and a bound beyond int32 is
    still refused after the cache has seen smaller ones."""
    ids = torch.tensor([[1, -2, 3], [-4, 5, 6]])
    for bound, index in ((2, [-1]), (5, [-2]), (2, [-1]), (0, [-3])):
        t = xt.to_device(ids)
        y = t.clamp(max=bound)[:, index] + 0
        xt.sync()
        assert y.cpu().tolist() == ids.clamp(max=bound)[:, index].tolist(), (bound, index)
    t = xt.to_device(ids)
    assert "1099511627776 does not fit in int32" in refusal_of(lambda: t.clamp(max=2**40)[:, [-1]] + 0)


def test_the_iinfo_fill_is_int32s_extreme_as_the_backend_makes_it():
    ids = torch.tensor([[-1, -2, 3], [-4, -5, -6]])
    t = xt.to_device(ids)
    y = t.masked_fill(t < 0, BIG).min(-1).values + 0
    xt.sync()
    backend = torch.compile(lambda t: t.masked_fill(t < 0, BIG).min(-1).values, backend="x64guard")(xt.to_device(ids))
    assert y.cpu().tolist() == [3, 2**31 - 1] == backend.cpu().tolist()


def test_a_sentinel_in_arithmetic_is_refused_at_the_models_line():
    """INT64_MAX added (not a bound, not a fill) is no sentinel: refused, naming the op and
    the line inside step()."""
    t = xt.to_device(torch.tensor([1, 2, 3]))
    message = refusal_of(lambda: t + BIG, xt.step)      # the line the refusal names
    assert "9223372036854775807 does not fit in int32" in message
    assert f"{__file__}:" in message and "stablehlo.add" in message


def test_a_clamp_bound_beyond_int32_is_refused():
    t = xt.to_device(torch.tensor([1, 2, 3]))
    assert "1099511627776 does not fit in int32" in refusal_of(lambda: t.clamp(max=2**40) + 0)
