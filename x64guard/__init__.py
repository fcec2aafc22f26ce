"""x64guard: narrow 64-bit StableHLO programs for accelerators without 64-bit types,
correctly, or refuse clearly.

`import x64guard` is quiet: it loads neither JAX nor torch, starts no backend and changes
no environment variable. Each public name is loaded from its module the first time it is
used (PEP 562 module `__getattr__`), so `x64guard.narrow` brings in the pass and JAX's
MLIR bindings, `x64guard.jit` the JAX front end, and `x64guard.torch` /
`x64guard.torch_xla` / `x64guard.cli` their front ends, only when a program asks for them.
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING, Any

from x64guard.errors import X64GuardError, X64GuardWarning
from x64guard.modes import Mode, Overflow, mode_from_environment

__version__ = "0.1.0"

mode_from_environment()  # a bad $X64GUARD_MODE is a clear error at import, not at first use

if "jax" in sys.modules:
    # JAX is loaded already: say now, not at first use, if it is a version x64guard was
    # not tested with (x64guard/io/modules.py checks too, the moment x64guard first loads JAX).
    from x64guard.versions import check_jax_version

    check_jax_version()

# Public name -> the module that defines it, loaded on first use.
_LAZY_NAMES: dict[str, str] = {
    "narrow": "x64guard.api",
    "narrow_module": "x64guard.api",
    "check": "x64guard.api",
    "NarrowResult": "x64guard.api",
    "Finding": "x64guard.findings",
    "Report": "x64guard.findings",
    "Severity": "x64guard.findings",
    "mode": "x64guard.settings",
    "set_mode": "x64guard.settings",
    "current_mode": "x64guard.settings",
    "jit": "x64guard.jax",
}

# Submodules reachable as attributes (`x64guard.torch.set_default_int_dtype`), imported on
# first use like any `import x64guard.torch`.
_SUBMODULES = frozenset({"api", "cli", "errors", "findings", "io", "jax", "modes",
                         "passes", "settings", "torch", "torch_xla"})

__all__ = ["narrow", "narrow_module", "check", "jit", "mode", "set_mode", "current_mode", "NarrowResult", "Report", "Finding",
           "Severity", "Mode", "Overflow", "X64GuardError", "X64GuardWarning", "__version__"]


def __getattr__(name: str) -> Any:
    module_name = _LAZY_NAMES.get(name)
    if module_name is not None:
        value = getattr(importlib.import_module(module_name), name)
        globals()[name] = value  # later lookups are plain attribute reads
        return value
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")  # the import binds it here too
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY_NAMES) | _SUBMODULES)


if TYPE_CHECKING:  # what type checkers and IDEs see: the same names, imported eagerly
    # (not `jit`: the root imports no front end, tests/test_layers.py)
    from x64guard.api import NarrowResult, check, narrow
    from x64guard.findings import Finding, Report, Severity
    from x64guard.settings import current_mode, mode, set_mode
