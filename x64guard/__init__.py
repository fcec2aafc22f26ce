"""x64guard: narrow 64-bit StableHLO programs for accelerators without 64-bit types,
correctly, or refuse clearly."""

from x64guard._compat import check_jax_version

check_jax_version()

from x64guard.api import NarrowResult, check, narrow
from x64guard.errors import X64GuardError, X64GuardWarning
from x64guard.findings import Finding, Report, Severity
from x64guard.modes import Mode, Overflow
from x64guard.settings import current_mode, mode, set_mode
from x64guard.jax import jit

__version__ = "0.1.0"

__all__ = ["narrow", "check", "jit", "mode", "set_mode", "current_mode", "NarrowResult", "Report", "Finding", "Severity", "Mode", "Overflow",
           "X64GuardError", "X64GuardWarning", "__version__"]
