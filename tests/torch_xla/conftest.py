"""torch-xla tests run on the CPU backend. PJRT_DEVICE must be set before torch_xla is
imported; without torch-xla installed, this directory is skipped."""

import importlib.util
import os

os.environ.setdefault("PJRT_DEVICE", "CPU")

if importlib.util.find_spec("torch_xla") is None:  # pragma: no cover
    collect_ignore_glob = ["test_*.py"]
