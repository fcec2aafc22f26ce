"""torch.compile support. (a) Dynamo (torch 2.9) hands a call to the torch-function modes
on the stack only for functions it considers overridable, leaving out the factories PyTorch
lists as "ignored" (torch.tensor, arange, randint, randperm, ...) which eager mode does hand
to modes: a compiled graph would create int64 where eager code creates the default. The
patch makes Dynamo hand those factories to modes, as eager mode does (modes only: tensor
subclasses still never see them). It is installed when a narrow default is first set, into
Dynamo's module when that is imported, so that eager-only programs never import Dynamo.
(b) While Dynamo traces or compiles, torch functions that run for real are its own (fake
propagation, AOT autograd, inductor), not the user's (Dynamo traces those symbolically
through the mode): they see stock PyTorch (`_private.dynamo_is_tracing`, read by the mode).
The private calls themselves are in _private.py."""

from __future__ import annotations

import sys

from x64guard.torch._private import DYNAMO_VARIABLES, hand_factories_to_modes
from x64guard.torch.factories import DTYPE_DEFAULTS

_DYNAMO_FACTORIES = frozenset(DTYPE_DEFAULTS)


def _teach_dynamo(module) -> None:
    hand_factories_to_modes(module, _DYNAMO_FACTORIES)


class _DynamoImportHook:
    """A meta path finder that patches Dynamo's module right after it is first executed."""

    def find_spec(self, name, path=None, target=None):
        if name != DYNAMO_VARIABLES:
            return None
        import importlib.machinery

        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_patch(module):
            exec_module(module)
            _teach_dynamo(module)

        spec.loader.exec_module = exec_and_patch
        return spec


def install_dynamo_hook() -> None:
    """Patch Dynamo now if it is imported, else when it is."""
    if DYNAMO_VARIABLES in sys.modules:
        _teach_dynamo(sys.modules[DYNAMO_VARIABLES])
    elif not any(isinstance(f, _DynamoImportHook) for f in sys.meta_path):
        sys.meta_path.insert(0, _DynamoImportHook())
