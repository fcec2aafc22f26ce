"""Foreign corpus modules (by module name) whose narrowed module is not the module JAX lowers
with x64 off, and why (tests/module_equality.py). Data, from measurements."""

from tests.module_equality import KnownDifference

MODULE_EXCEPTIONS: dict[str, KnownDifference] = {
}
