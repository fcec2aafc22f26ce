"""The two ways x64guard speaks: an error that refuses, a warning that summarises."""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    from x64guard.findings import Finding


class X64GuardError(ValueError):
    """x64guard refused: the module cannot be narrowed without changing its result.

    `.findings` lists every reason, each with its op, location and what to do.
    """

    def __init__(self, message: str, findings: Sequence["Finding"] = ()):
        self.findings = list(findings)
        super().__init__(message)


class X64GuardWarning(UserWarning):
    """x64guard narrowed something a user should know about."""
