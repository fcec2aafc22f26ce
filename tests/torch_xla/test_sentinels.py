"""Integer scalars of a lazy graph (x64guard/torch_xla/sentinels.py): torch-xla's INT64_MAX /
INT64_MIN for a one-sided clamp or an iinfo fill narrow exactly (issue 34, D1); any other
64-bit scalar int32 cannot hold is refused, at the model's line inside `step()`."""

from __future__ import annotations

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


CASES = {
    "clamp(min=0)": lambda t: t.clamp(min=0),
    "clamp(max=2)": lambda t: t.clamp(max=2),
    "clamp_min(0)": lambda t: torch.clamp_min(t, 0),
    "masked_fill(iinfo.max).min": lambda t: t.masked_fill(t < 0, BIG).min(-1).values,
}


@pytest.mark.parametrize("scoped", [False, True], ids=["sync", "step"])
@pytest.mark.parametrize("name", list(CASES))
def test_sentinel_scalars_narrow_exactly_in_the_lazy_loop(name, scoped):
    f = CASES[name]
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


def test_the_iinfo_fill_is_int32s_extreme_as_the_backend_makes_it():
    ids = torch.tensor([[-1, -2, 3], [-4, -5, -6]])
    t = xt.to_device(ids)
    y = t.masked_fill(t < 0, BIG).min(-1).values + 0
    xt.sync()
    backend = torch.compile(lambda t: t.masked_fill(t < 0, BIG).min(-1).values, backend="x64guard")(xt.to_device(ids))
    assert y.cpu().tolist() == [3, 2**31 - 1] == backend.cpu().tolist()


def test_a_sentinel_in_arithmetic_is_refused_at_the_models_line():
    """INT64_MAX added (not a bound, not a fill) is no sentinel: refused, naming the op and
    the line inside step(); and nothing ran on the device."""
    t = xt.to_device(torch.tensor([1, 2, 3]))
    with pytest.raises(x64guard.X64GuardError) as caught:
        with xt.step():
            y = t + BIG      # the line the refusal names
            xt.sync(y)
    message = str(caught.value)
    assert "9223372036854775807 does not fit in int32" in message
    assert f"{__file__}:" in message and "stablehlo.add" in message


def test_a_clamp_bound_beyond_int32_is_refused():
    t = xt.to_device(torch.tensor([1, 2, 3]))
    y = t.clamp(max=2**40) + 0
    with pytest.raises(x64guard.X64GuardError, match="1099511627776 does not fit in int32"):
        xt.sync(y)
