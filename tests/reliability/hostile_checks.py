"""Assertions over the per-case records the hostile-input children return."""

from __future__ import annotations

from collections import Counter


def summarise(records: list[dict]) -> Counter:
    counts: Counter = Counter()
    for record in records:
        if "crash" in record:
            counts["crash"] += 1
            continue
        for api in ("narrow", "check"):
            outcome = record[api].split(':')[0].split(' without')[0]
            if "bytecode reader was killed" in record[api] or "bytecode reader exited" in record[api]:
                outcome += " (reader process crashed)"
            elif "bytecode reader did not finish" in record[api]:
                outcome += " (reader process hung)"
            counts[f"{api}: {outcome}"] += 1
    return counts


def problems(records: list[dict], limit: int = 25) -> list[str]:
    """Every case that crashed, hung, raised something other than ValueError (X64GuardError
    is one) or a ValueError without an "x64guard: ..." message, returned an unusable
    result, or tripped the audit hook (eval/exec/compile/unpickling/subprocess while
    reading input)."""
    found = []
    for record in records:
        where = f"case {record['index']}"
        if "crash" in record:
            found.append(f"{where}: the child {record['crash']} ({record.get('stderr', '')[-300:]!r})")
            continue
        for api in ("narrow", "check"):
            if record[api].startswith("UNEXPECTED") or "(foreign message)" in record[api]:
                found.append(f"{where} [{record['case']}] {api}: {record[api].splitlines()[0][:240]}")
        if record.get("audit"):
            found.append(f"{where} [{record['case']}]: audit events while reading input: {record['audit']}")
    return found[:limit] + ([f"... and {len(found) - limit} more"] if len(found) > limit else [])
