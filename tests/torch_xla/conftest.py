"""torch-xla tests run on the CPU backend. PJRT_DEVICE must be set before torch_xla is
imported; without torch-xla installed, this directory is skipped.

"""

import importlib.util
import os

os.environ.setdefault("PJRT_DEVICE", "CPU")

if importlib.util.find_spec("torch_xla") is None:  # pragma: no cover
    collect_ignore_glob = ["test_*.py"]

def pytest_terminal_summary(terminalreporter):
    """The real-model table (tests/torch_xla/test_real_models.py), as markdown."""
    import sys

    module = sys.modules.get("tests.torch_xla.test_real_models")
    results = getattr(module, "RESULTS", None)
    if not results:
        _suite_summary(terminalreporter, sys.modules.get("tests.torch_xla.test_model_suite"))
        return
    columns = ["inference", "training (2 steps)", "narrow_exported", "XLA_USE_32BIT_LONG=1", "narrowed (inference)"]
    terminalreporter.write_sep("=", "x64guard real-model suite (torch-xla backend, against eager at 32 bits)")
    terminalreporter.write_line("| model | " + " | ".join(columns) + " |")
    terminalreporter.write_line("|---" * (len(columns) + 1) + "|")
    for name, row in results.items():
        terminalreporter.write_line(f"| {name} | " + " | ".join(row.get(c, "-") for c in columns) + " |")
    _suite_summary(terminalreporter, sys.modules.get("tests.torch_xla.test_model_suite"))


def _suite_summary(terminalreporter, module):
    """The training suite's table (tests/torch_xla/test_model_suite.py), as markdown."""
    results = getattr(module, "RESULTS", None)
    if not results:
        return
    columns = sorted({column for row in results.values() for column in row})
    terminalreporter.write_sep("=", "x64guard training suite (3 steps, dropout 0.1; eager equality with dropout off)")
    terminalreporter.write_line("| model | " + " | ".join(columns) + " |")
    for name, row in results.items():
        terminalreporter.write_line(f"| {name} | " + " | ".join(row.get(c, "-") for c in columns) + " |")
