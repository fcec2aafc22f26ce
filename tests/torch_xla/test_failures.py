"""Failures keep their type (issue 34, deliverable 4): a graph AOTAutograd cannot trace under
backend="x64guard" reaches the user as `TorchXlaFailure`, with the model's line and what
torch-xla's own `openxla` backend makes of the same graph; not as dynamo's
`BackendCompilerFailed`."""

from __future__ import annotations

import gc
import warnings

import pytest
import torch

import x64guard
import x64guard.torch_xla as xt

pytestmark = pytest.mark.torch


class InPlacePool(torch.nn.Module):
    """Swin V2's pooler in small: an in-place op sends the graph through AOTAutograd, whose
    functional trace of adaptive_avg_pool1d fails in torch-xla 2.9 (openxla's too)."""

    def __init__(self):
        super().__init__()
        self.pool = torch.nn.AdaptiveAvgPool1d(1)

    def forward(self, x):
        h = x * 2
        h.add_(1)
        return self.pool(h.transpose(1, 2))    # the line the failure names


def test_an_aotautograd_failure_is_a_torch_xla_failure_with_openxlas_verdict():
    x = xt.to_device(torch.randn(1, 4, 3))
    torch._dynamo.reset()
    compiled = torch.compile(xt.to_device(InPlacePool()), backend="x64guard")
    for _ in range(2):     # every call, not only the first
        with pytest.raises(xt.TorchXlaFailure) as caught, torch.no_grad():
            compiled(x)
    message = str(caught.value)
    assert "AOTAutograd failed before x64guard traced the graph (RuntimeError: Expected XLA tensor" in message
    assert f"{__file__}:{InPlacePool.forward.__code__.co_firstlineno + 3}" in message
    assert "torch-xla's own backend fails on the same graph too" in message
    assert isinstance(caught.value.__cause__, RuntimeError)
    del caught
    gc.collect()     # the exception's frames hold tensors: later syncs without arguments must not find them


@pytest.mark.slow
def test_swin_v2s_aotautograd_failure_is_a_torch_xla_failure_with_openxlas_verdict():
    transformers = pytest.importorskip("transformers")
    config = transformers.Swinv2Config(image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 2],
                                       window_size=4)
    torch.manual_seed(0)
    model = xt.to_device(transformers.Swinv2Model(config).eval())
    pixels = xt.to_device(torch.randn(1, 3, 32, 32))
    torch._dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", x64guard.X64GuardWarning)
        with pytest.raises(xt.TorchXlaFailure) as caught, torch.no_grad():
            torch.compile(model, backend="x64guard")(pixel_values=pixels)
    message = str(caught.value)
    assert "AOTAutograd failed before x64guard traced the graph" in message
    assert "modeling_swinv2.py:" in message                        # the model's line (its pooler)
    assert "torch-xla's own backend fails on the same graph too" in message
    assert caught.value.__cause__ is not None
    del caught
    gc.collect()
