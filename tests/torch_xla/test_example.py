"""examples/torch_xla_narrow.py runs as a torch-xla user runs it."""

import re

import pytest

from tests.support import child


@pytest.mark.slow
def test_torch_xla_example():
    proc = child.run_python("examples/torch_xla_narrow.py", env={"PJRT_DEVICE": "CPU"}, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "to_device:    parameters {torch.float32} | ids torch.int64 on xla:0" in out
    losses = re.findall(r"loss (\d\.\d+) \(eager float32 (\d\.\d+)\)", out)
    assert len(losses) == 3 and all(abs(float(a) - float(b)) < 1e-5 for a, b in losses)
    assert float(losses[2][0]) < float(losses[0][0])
    assert out.count("same tags: True") == 4
    assert "64-bit types in the HLO torch-xla runs: none" in out
    assert "refused:      x64guard.torch_xla: input ids: value 1099511627776 does not fit in int32" in out
    assert re.search(r"mode=error:  \d+ findings, e\.g\. torch_xla_narrow\.py:\d+ \[", out)
    assert "dropout:      trained a step with in-graph dropout" in out
    assert re.search(r"lazy loop:    loss \d\.\d+, programs narrowed 1", out)
    assert "x32 check of the narrowed StableHLO: ok" in out
