"""x64guard's mode as JAX configuration: `x64guard.mode(...)`, `x64guard.set_mode(...)`.

The mode is a JAX configuration state that takes part in the jit cache key and the trace
context, so any `jax.jit` that contains x64guard-narrowed calls compiles separately for
`allow` (full width) and `warn`/`error` (narrowed), and it is hashed into the persistent
compilation cache key, so a cache directory never serves one for the other.
Its initial value is $X64GUARD_MODE (read, never written, when this module is first
used), else warn.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

from x64guard import modes, versions
from x64guard.jax import _private
from x64guard.modes import Mode

versions.check_jax_version()  # the state lives in JAX's configuration: a clear message first
_STATE = _private.register_enum_state(
    "x64guard_mode", [m.value for m in Mode], modes.mode_from_environment().value,
    help="x64guard: allow keeps 64-bit types, warn narrows them with a warning, error refuses them.")


_MODES = {m.value: m for m in Mode}


def current_mode() -> Mode:
    """The mode in force in this thread: x64guard.mode(...) > set_mode(...) > $X64GUARD_MODE > warn."""
    return _MODES[_STATE.value]


def set_mode(mode: "Mode | str") -> None:
    """Set the process-wide default mode (other threads included)."""
    import jax

    jax.config.update("x64guard_mode", modes.resolve_mode(mode).value)


@contextlib.contextmanager
def mode(mode: "Mode | str") -> Iterator[Mode]:
    """`with x64guard.mode("allow"): ...` sets the mode for this thread, restored on exit."""
    resolved = modes.resolve_mode(mode)
    with _STATE(resolved.value):
        yield resolved


modes.set_default_mode_source(current_mode)
_private.chain_persistent_cache_key(lambda: f"x64guard_mode={_STATE.value}")
