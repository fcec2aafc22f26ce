"""`x64guard.torch_xla.sync()` without arguments (x64guard/torch_xla/lazy.py): each step lowers
the same graph, whatever order the garbage collector lists the step's tensors in (issue 34,
D4: a tiny Falcon's logits and loss swapped places at step 4 and a third program was traced
and compiled, where torch_xla.sync() compiles two)."""

from __future__ import annotations

import gc
import warnings

import pytest
import torch

import x64guard
import x64guard.torch_xla as xt

pytestmark = pytest.mark.torch


def test_a_collection_mid_step_does_not_trace_the_step_again():
    w = xt.to_device(torch.randn(4, 4))
    traces = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", x64guard.X64GuardWarning)
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


def test_a_refusal_without_a_recorded_line_says_how_to_get_it():
    """Outside `step()` torch-xla records no Python line for the lazy graph's ops: the
    refusal says so and how to have the line named, rather than only torch-xla's op name."""
    ids = xt.to_device(torch.tensor([70000, 3]))
    product = ids * ids
    try:
        xt.sync(product)
    except x64guard.X64GuardError as error:
        message = str(error)
    else:
        pytest.fail("the overflowing product was not refused")
    del product     # and the cycles of the exception's frames: later syncs without arguments must not find it
    gc.collect()
    assert "int64 arithmetic at aten__mul (no Python line was recorded for it:" in message
    assert "inside x64guard.torch_xla.step() to have it named" in message
