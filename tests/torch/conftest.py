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


def pytest_terminal_summary(terminalreporter):
    """int64 results per real model under default_int_dtype(torch.int32) (test_real_models.py)."""
    import sys

    module = sys.modules.get("tests.torch.test_real_models")
    results = getattr(module, "RESULTS", None)
    if not results:
        return
    columns = ["int64 ids", "int32 ids and buffers", "explicit int64 lines"]
    terminalreporter.write_sep("=", "int64 aten results of a forward under default_int_dtype(torch.int32)")
    terminalreporter.write_line("| model | " + " | ".join(columns) + " |")
    terminalreporter.write_line("|---" * (len(columns) + 1) + "|")
    for name, row in results.items():
        terminalreporter.write_line(f"| {name} | " + " | ".join(row.get(c, "-") for c in columns) + " |")
