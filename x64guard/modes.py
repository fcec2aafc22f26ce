"""Modes, with the names and meanings of JAX's `jax_explicit_x64_dtypes`."""

from __future__ import annotations

import enum
import os
from typing import Callable

MODE_ENV_VAR = "X64GUARD_MODE"


class Mode(enum.StrEnum):
    """allow: keep 64-bit types (findings still reported); warn: narrow, warn once per
    module; error: refuse any 64-bit use."""

    ALLOW = "allow"
    WARN = "warn"
    ERROR = "error"


class Overflow(enum.StrEnum):
    """What to do with a constant the 32-bit type cannot hold."""

    ERROR = "error"
    SATURATE = "saturate"
    WRAP = "wrap"


def _parse(enum_cls, value, what: str):
    if isinstance(value, enum_cls):
        return value
    try:
        return enum_cls(str(value).strip().lower())
    except ValueError:
        allowed = ", ".join(repr(m.value) for m in enum_cls)
        raise ValueError(f"x64guard: unknown {what} {value!r}; expected one of {allowed}") from None


def mode_from_environment() -> Mode:
    """$X64GUARD_MODE, else warn (JAX's default for jax_explicit_x64_dtypes)."""
    env = os.environ.get(MODE_ENV_VAR, "").strip()
    if not env:
        return Mode.WARN
    return _parse(Mode, env, f"mode in ${MODE_ENV_VAR}")


# Where the default mode comes from. x64guard.settings replaces this with its own
# (so that x64guard.mode(...) and set_mode(...) apply everywhere).
_default_mode: Callable[[], Mode] = mode_from_environment


def set_default_mode_source(source: Callable[[], Mode]) -> None:
    global _default_mode
    _default_mode = source


def resolve_mode(mode: "Mode | str | None") -> Mode:
    """`mode` if given, else the current default (x64guard.mode / set_mode /
    $X64GUARD_MODE, else warn)."""
    if mode is None:
        return _default_mode()
    return _parse(Mode, mode, "mode")


def resolve_overflow(overflow: "Overflow | str") -> Overflow:
    return _parse(Overflow, overflow, "overflow policy")
