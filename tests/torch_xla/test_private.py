"""x64guard/torch_xla/_private.py: the calls into torch and torch-xla beyond their public API."""

from __future__ import annotations

import gc
import weakref

import pytest
import torch

from tests.torch_xla.common import DEVICE
from x64guard.torch_xla import _private as _xc
from x64guard.torch_xla.reads import GuardedTensor


@pytest.mark.parametrize("cls", [torch.Tensor, GuardedTensor], ids=["plain", "guarded"])
def test_a_tensor_revived_by_a_weak_reference_stays_whole(cls):
    """A tensor Python dropped while C++ still holds it (here a view's base) lives on from
    C++. Revived by a plain weak reference, its C++ side is freed under the live object
    when the view goes, and `.data =` (what sync does with each result) fails; revived by
    TensorRef, Python owns it again."""
    outcomes = {}
    for make_ref in (weakref.ref, _xc.TensorRef):
        base = torch.arange(4, device=DEVICE).float()
        base.__class__ = cls
        view = base[0:2]
        ref = make_ref(base)
        del base
        revived = ref()
        del view
        gc.collect()
        try:
            _xc.replace_data(revived, torch.zeros(3, device=DEVICE))
            outcomes[make_ref] = revived.cpu().tolist()
        except RuntimeError as error:
            outcomes[make_ref] = str(error)
    assert "incompatible tensor type" in outcomes[weakref.ref]      # the failure TensorRef exists for
    assert outcomes[_xc.TensorRef] == [0.0, 0.0, 0.0]


class _Recurrent(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(4, 4, batch_first=True)

    def forward(self, x):
        return self.lstm(x)[0].sum()


def test_frames_compiled_for_another_backend_are_left_as_dynamo_compiles_them():
    """Contained: x64guard's compile callbacks (armed, `compiling_frame` reading dynamo's
    `_compile` frame) turn `allow_rnn` on only for frames compiled for x64guard. A frame
    compiled for another backend meanwhile is traced as dynamo traces it by default (the
    LSTM breaks the graph: no graph holds it), and the configuration is as it was after."""
    import x64guard.torch_xla as xt
    from x64guard.torch_xla import outside

    graphs = []

    def recording(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    config = torch._dynamo.config.get_config_copy()
    torch._dynamo.reset()
    outside.arm()
    traces = xt.counters()["traces"]
    torch.compile(_Recurrent(), backend=recording)(torch.randn(2, 3, 4))
    assert not any("lstm" in str(node.target).lower() for gm in graphs for node in gm.graph.nodes)
    assert torch._dynamo.config.get_config_copy() == config
    assert xt.counters()["traces"] == traces


def test_torch_xla_process_flags_are_restored_after_a_trace_and_a_failed_one():
    """Contained: torch-xla's process-wide flags x64guard sets while it traces (Python
    frames recorded, 0-dim uploads as device data, Python numbers inlined) are as they
    were after a compiled graph's first call, and after a trace that failed."""
    import torch_xla

    import x64guard
    import x64guard.torch_xla as xt

    xlac = torch_xla._XLAC
    names = ("ir_debug", "xla_handle_special_scalars", "xla_all_numbers_special_scalars")

    def flags():
        return {name: getattr(xlac, f"_get_{name}")() for name in names}

    before = flags()
    xt.compile(lambda v: (v * 2).sum())(torch.arange(4.0).to(DEVICE))
    assert flags() == before

    def histogram(v):
        return torch.histc(v, bins=4, min=0, max=10) + 1     # no XLA lowering: refused while tracing

    with pytest.raises(x64guard.X64GuardError, match="no XLA lowering"):
        xt.compile(histogram)(torch.arange(6, dtype=torch.int32).to(DEVICE))
    assert flags() == before
