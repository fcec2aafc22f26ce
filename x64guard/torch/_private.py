"""Every call x64guard.torch makes into PyTorch's private or unstable internals, here and
nowhere else, each with the versions it was seen in. A PyTorch upgrade that moves one of
them breaks this file only."""

from __future__ import annotations

import sys
from typing import Any, Callable

import torch

# Dynamo's module whose TorchInGraphFunctionVariable decides which calls reach
# torch-function modes (torch 2.9.0, 2.15.0).
DYNAMO_VARIABLES = "torch._dynamo.variables.torch"
# Dynamo's module whose `tls.current_tx` is set while it traces a frame (torch 2.9.0, 2.15.0).
_DYNAMO_CONVERT = "torch._dynamo.symbolic_convert"
_dynamo_tls: list = [None]


def dynamo_is_tracing() -> bool:
    """True while Dynamo traces or compiles a frame: torch.compile's
    `symbolic_convert.tls.current_tx` is set (torch 2.9.0, 2.15.0). Read without importing Dynamo,
    so that eager-only programs never import it."""
    tls = _dynamo_tls[0]
    if tls is None:
        module = sys.modules.get(_DYNAMO_CONVERT)
        if module is None:
            return False
        tls = _dynamo_tls[0] = module.tls
    return getattr(tls, "current_tx", None) is not None


def hand_factories_to_modes(module: Any, factories: frozenset[Callable]) -> "Callable[[], None] | None":
    """Patch Dynamo's `TorchInGraphFunctionVariable.torch_function_override_enabled` (torch
    2.9.0, 2.15.0) so that calls of `factories` reach the torch-function modes on the stack, as in
    eager mode; it reads `tx.symbolic_torch_function_state` (torch 2.9.0, 2.15.0). Returns the
    function that puts Dynamo's own method back, or None where nothing was patched (no such
    method, or patched already)."""
    name = "torch_function_override_enabled"
    cls = getattr(module, "TorchInGraphFunctionVariable", None)
    original = getattr(cls, name, None)
    if original is None or getattr(original, "_x64guard", False):
        return None
    own = vars(cls).get(name)  # None: inherited, so restoring is deleting the override

    def torch_function_override_enabled(self, tx, args, kwargs):
        if self.get_function() in factories:
            state = getattr(tx, "symbolic_torch_function_state", None)
            if state is not None:
                return bool(state.torch_function_mode_enabled and state.in_torch_function_mode())
        return original(self, tx, args, kwargs)

    torch_function_override_enabled._x64guard = True
    setattr(cls, name, torch_function_override_enabled)

    def restore() -> None:
        if vars(cls).get(name) is torch_function_override_enabled:
            if own is None:
                delattr(cls, name)
            else:
                setattr(cls, name, own)

    return restore


def function_mode_stack() -> list:
    """This thread's torch-function modes, innermost last:
    `torch.overrides._get_current_function_mode_stack` (torch 2.9.0, 2.15.0)."""
    return torch.overrides._get_current_function_mode_stack()


def pop_function_mode() -> Any:
    """Pop the innermost torch-function mode: `torch.overrides._pop_mode` (torch 2.9.0, 2.15.0)."""
    return torch.overrides._pop_mode()


def push_function_mode(mode: Any) -> None:
    """Push a torch-function mode without entering it: `torch.overrides._push_mode` (torch 2.9.0, 2.15.0)."""
    torch.overrides._push_mode(mode)
