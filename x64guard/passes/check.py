"""`check`: what a module would bring to a target, without rewriting it.

The narrowing pass runs as a recording run for the target's profile (its findings are
exactly what `narrow(..., target=...)` would do and refuse: on `x32` JAX's exact 64-bit
idioms are info and the RNG state is kept), with the profile's own rules (complex types,
custom_calls: patterns/profile.py) in the same walk. Narrowed types are reported as
64-bit types reaching the target (`type-64bit`): an error where the profile allows none,
info where it accepts them (there, the pass's other errors only matter if the module is
narrowed, and are info too).
"""

from __future__ import annotations

from jax.extend.mlir import ir

from x64guard.findings import Kind, Report, Severity
from x64guard.passes.narrow import NarrowX64Pass
from x64guard.passes.patterns.profile import profile_patterns
from x64guard.passes.store import TypeReport
from x64guard.passes.tables import TARGET_PROFILES, TargetProfile


def profile_for(target: str) -> TargetProfile:
    try:
        return TARGET_PROFILES[target]
    except KeyError:
        raise ValueError(f"x64guard: unknown target {target!r}; known targets: "
                         f"{', '.join(sorted(TARGET_PROFILES))}") from None


def types_reaching(profile: TargetProfile) -> TypeReport:
    """How `check` reports the 64-bit types that reach `profile`'s target."""
    if profile.allow_64bit:
        return TypeReport(Kind.TYPE_64BIT, Severity.INFO,
                          f"64-bit types ({{changes}}); the {profile.name} target accepts them")
    return TypeReport(Kind.TYPE_64BIT, Severity.ERROR,
                      f"64-bit types reach the {profile.name} target ({{changes}}); `x64guard narrow` "
                      "(or x64guard.narrow) narrows them as JAX's x32 mode would")


def check_target(module: ir.Module, target: str, *, all_positions: bool = False) -> Report:
    profile = profile_for(target)
    result = NarrowX64Pass(
        record_only=True, profile=profile, rewrite_exact_idioms=profile.exact_idioms_are_info,
        extra_patterns=profile_patterns(profile), types=types_reaching(profile), all_positions=all_positions,
        errors_note=" (only matters if the module is narrowed)" if profile.allow_64bit else None,
    ).apply(module)
    return Report(target=profile.name, findings=result.findings)
