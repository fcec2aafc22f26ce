"""`import x64guard.torch_xla` changes nothing in the process (issue 35, item 4): dynamo's
compile callbacks, dynamo's and torch's configuration, Python's warnings filters and
torch-xla's compile counters are as they were. x64guard arms what it needs at its first
use (the backend's first call, `compile`, `to_device`, `sync`); the backend itself is
found through the `torch_dynamo_backends` entry point. Each case runs in a fresh
interpreter (what an import does can only be seen once per process)."""

from __future__ import annotations

import pytest

from tests.support.child import run_json

pytestmark = pytest.mark.torch

_STATE = """
        def state():
            from torch._dynamo.callback import callback_handler
            import torch_xla.debug.metrics as metrics
            return {
                "start_callbacks": [repr(f) for f in callback_handler.start_callbacks],
                "end_callbacks": [repr(f) for f in callback_handler.end_callbacks],
                "dynamo_config": repr(sorted(torch._dynamo.config.get_config_copy().items())),
                "functorch_config": repr(sorted(torch._functorch.config.get_config_copy().items())),
                "warnings_filters": repr(warnings.filters),
                "compiles": metrics.counter_value("UncachedCompile"),
            }
"""


def test_importing_the_front_end_changes_nothing():
    out = run_json("""
        import json, warnings
        import torch, torch_xla, torch._dynamo, torch._functorch.config
        """ + _STATE + """
        before = state()
        import x64guard.torch_xla
        after = state()
        print(json.dumps({"changed": sorted(k for k in before if before[k] != after[k]),
                          "backend": "x64guard" in torch._dynamo.list_backends(exclude_tags=())}))
    """, env={"PJRT_DEVICE": "CPU"})
    assert out["changed"] == []
    assert out["backend"]


def test_first_use_arms_the_compile_callbacks():
    out = run_json("""
        import json, warnings
        import torch, torch_xla, torch._dynamo, torch._functorch.config
        """ + _STATE + """
        import x64guard.torch_xla as xt
        before = state()
        xt.to_device(torch.zeros(2, dtype=torch.int64))
        after = state()
        print(json.dumps({"added": len(after["start_callbacks"]) - len(before["start_callbacks"]),
                          "config_unchanged": before["dynamo_config"] == after["dynamo_config"]}))
    """, env={"PJRT_DEVICE": "CPU"})
    assert out["added"] == 1 and out["config_unchanged"]
