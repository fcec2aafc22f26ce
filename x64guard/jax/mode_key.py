"""x64guard's mode in JAX's cache keys, registered when x64guard.jit is first used.

A `jax.jit` around x64guard.jit calls traces them narrowed or not by the mode, so the mode
is mirrored (x64guard/settings.py `add_mirror`) into a JAX configuration state that takes
part in the jit cache key and the trace context: such a jit compiles separately for `allow`
(full width) and `warn`/`error` (narrowed). It is hashed into the persistent compilation
cache key too, so a cache directory never serves one for the other.
"""

from __future__ import annotations

import jax

from x64guard import settings, versions
from x64guard.jax import _private
from x64guard.modes import Mode

_NAME = "x64guard_mode"


class JaxModeState:
    """The mirror: a JAX configuration state holding the mode's value."""

    def __init__(self, default: Mode):
        versions.check_jax_version()  # the state lives in JAX's configuration: a clear message first
        self._state = _private.register_enum_state(
            _NAME, [m.value for m in Mode], default.value,
            help="x64guard: allow keeps 64-bit types, warn narrows them with a warning, error refuses them.")
        if self._state.value != default.value:  # registered before (tests reload modules)
            self.set_default(default)

    def set_default(self, mode: Mode) -> None:
        jax.config.update(_NAME, mode.value)

    def override(self, mode: Mode):
        return self._state(mode.value)  # this thread only, restored on exit


def register() -> None:
    """Mirror the mode into JAX's cache keys (once; later calls do nothing)."""
    settings.add_mirror(_NAME, JaxModeState)
    _private.chain_persistent_cache_key(lambda: f"{_NAME}={settings.current_mode().value}")
