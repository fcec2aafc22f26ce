"""Findings: what the pass saw, where, and what the user can do about it."""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass, field


class Severity(str, enum.Enum):
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"

    def __str__(self) -> str:
        return self.value


SEVERITY_RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.ERROR: 2}


@dataclass(frozen=True)
class Finding:
    """One thing the pass saw.

    `kind` is a short stable identifier (`type-narrowed`, `constant-out-of-range`,
    `custom-call`, `rng-state`, `bitcast-width`, ...); `location` is file:line:col when the
    module carries a source location, else the op's position; `count` says how many ops at
    that location share this finding (findings are grouped, never one per element).
    """

    kind: str
    severity: Severity
    op: str
    location: str
    message: str
    count: int = 1

    def __str__(self) -> str:
        times = f" (x{self.count})" if self.count > 1 else ""
        return f"{self.location}: {self.severity}: {self.op}{times}: {self.message} [{self.kind}]"

    def to_dict(self) -> dict:
        return {"kind": self.kind, "severity": str(self.severity), "op": self.op,
                "location": self.location, "message": self.message, "count": self.count}


def errors(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity is Severity.ERROR]


def format_findings(findings: list[Finding], limit: int = 50) -> str:
    lines = [f"  {f}" for f in findings[:limit]]
    if len(findings) > limit:
        lines.append(f"  ... and {len(findings) - limit} more")
    return "\n".join(lines)


@dataclass
class Report:
    """What `x64guard.check` found: no rewrite, every 64-bit use and every blocker."""

    target: str
    findings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when nothing would reach the target in a form it does not accept."""
        return not errors(self.findings)

    def counts_by_kind(self) -> dict[str, int]:
        counter: Counter[str] = Counter()
        for f in self.findings:
            counter[f.kind] += f.count
        return dict(counter)

    def __str__(self) -> str:
        head = f"x64guard check --target {self.target}: " + ("ok" if self.ok else "not ok")
        return head + ("\n" + format_findings(self.findings) if self.findings else "")
