"""x64guard's JAX front end: `x64guard.jit` (`jax.jit`, narrowed) and the objects behind it.

The modules, along the seams of what x64guard.jit does:
  function.py     `jit`, `NarrowedFunction`: the wrapper, its cache and C++ dispatch
  build.py        one signature's program: trace, lower, narrow, cross-check, choose
  program.py      the narrowed program, its compile and run; `Lowered`, `Compiled`
  inputs.py       input widths: how inputs are traced, keyed, converted, range-checked
  callbacks.py    host callbacks at 32 bits (the jaxpr rewrite, results on the host)
  primitive.py    the `x64guard_call` primitive: inlined into outer jits, vmap, grad
  trace_check.py  the x64 trace compared with the x32 trace
  trace_messages.py  what the cross-check says: its messages and the identity-convert finding
  user_frames.py  warnings at the user's calling line
  _private.py     every private JAX call of configuration, tracing and jaxprs, and nothing else
  _private_lowering.py  every private JAX call of the program (compile, call primitive, C++ dispatch)

  mode_key.py     the mode in JAX's jit and persistent cache keys (registered by function.py)

Importing this package loads none of them: each public name is loaded on first use
(PEP 562), so that `import x64guard.jax` stays cheap. The core imports nothing from here
(tests/test_layers.py).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Public name -> the module that defines it.
_PUBLIC = {
    "jit": "x64guard.jax.function",
    "NarrowedFunction": "x64guard.jax.function",
    "Lowered": "x64guard.jax.program",
    "Compiled": "x64guard.jax.program",
    "NARROW_DTYPE": "x64guard.jax.inputs",
}

__all__ = list(_PUBLIC)


def __getattr__(name: str) -> Any:
    module_name = _PUBLIC.get(name)
    if module_name is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value  # later lookups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))


if TYPE_CHECKING:
    from x64guard.jax.function import NarrowedFunction, jit
    from x64guard.jax.inputs import NARROW_DTYPE
    from x64guard.jax.program import Compiled, Lowered
