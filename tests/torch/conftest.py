"""torch and torch-xla are an extra: without them, tests/torch is skipped. torch-xla runs on
the CPU here (PJRT_DEVICE=CPU, set before torch_xla is imported)."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("PJRT_DEVICE", "CPU")

torch = pytest.importorskip("torch")

import x64guard.torch as xt  # noqa: E402


@pytest.fixture(autouse=True)
def back_to_int64():
    """Every test starts and ends at PyTorch's own behaviour, with no mode left behind."""
    xt.set_default_int_dtype(torch.int64)
    before = torch.overrides._get_current_function_mode_stack()
    yield
    xt.set_default_int_dtype(torch.int64)
    assert torch.overrides._get_current_function_mode_stack() == before
