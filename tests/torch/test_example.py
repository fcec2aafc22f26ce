"""examples/torch_default_int_dtype.py runs as a user runs it and prints what the README says."""

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_example():
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "torch_default_int_dtype.py")],
                          capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONPATH": ROOT})
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "default int32:         integer results int32" in out
    assert "same values as stock PyTorch: True" in out
    stock, ours = (int(n) for n in re.findall(r"(\d+) int64 values? in the graph", out))
    assert stock > 5 and ours == 1
    assert "1 int64 value in the exported graph" in out
    assert "refused: x64guard.torch: torch.tensor: the value 1099511627776" in out
    assert "outside the block: torch.tensor([1]).dtype = torch.int64" in out
