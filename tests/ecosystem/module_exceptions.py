"""Ecosystem programs whose narrowed module is not the module jax.jit lowers with x64 off,
and why (tests/module_equality.py). Data: filled from measurements; an entry whose program
becomes module-equal fails the suite until it is removed."""

from tests.module_equality import KnownDifference

MODULE_EXCEPTIONS: dict[str, KnownDifference] = {
}
