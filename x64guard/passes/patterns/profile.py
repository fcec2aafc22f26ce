"""What a target profile refuses beyond 64-bit types (`check` only): complex values on a
target without complex types, custom_call targets the accelerator does not provide.

Rules of the same walk as the narrowing rules, added by `check` for the profiles that
need them (passes/check.py); they only report.
"""

from __future__ import annotations

from jax.extend.mlir import ir

from x64guard.findings import Kind, Severity
from x64guard.passes.driver import OpContext, Outcome, RewritePattern
from x64guard.passes.patterns.custom_calls import custom_call_target
from x64guard.passes.tables import TargetProfile


class ReportComplexTypes(RewritePattern):
    """Any op with a complex result or block argument, on a profile without complex types."""

    def __init__(self, profile: TargetProfile) -> None:
        self._profile = profile

    def match_and_rewrite(self, op: ir.Operation, ctx: OpContext) -> Outcome:
        spelling = ctx.converter.spelling
        types = list(ctx.result_types)
        if len(op.regions):
            types += [a.type for region in op.regions for block in region.blocks for a in block.arguments]
        if any("complex<" in spelling(t) for t in types):
            ctx.report(Kind.COMPLEX_TYPE, Severity.ERROR,
                       f"complex values are not supported on {self._profile.name}; split them into real and "
                       "imaginary parts (jnp.real/jnp.imag) before this point")
        return Outcome.NO_MATCH


class ReportUnknownCustomCalls(RewritePattern):
    """A custom_call target outside the profile's list, whatever its types."""

    op_names = frozenset({"stablehlo.custom_call"})

    def __init__(self, profile: TargetProfile) -> None:
        self._profile = profile

    def match_and_rewrite(self, op: ir.Operation, ctx: OpContext) -> Outcome:
        target = custom_call_target(op)
        if target not in self._profile.known_custom_calls:
            ctx.report(Kind.CUSTOM_CALL_UNKNOWN, Severity.ERROR,
                       f"custom_call @{target} is not a kernel {self._profile.name} provides; "
                       "the accelerator compiler will reject it", op_name=f"stablehlo.custom_call @{target}")
        return Outcome.NO_MATCH  # the narrowing rules still judge the call's types


def profile_patterns(profile: TargetProfile) -> tuple[RewritePattern, ...]:
    """The rules `check` adds for `profile` (none for most)."""
    patterns: list[RewritePattern] = []
    if profile.known_custom_calls is not None:
        patterns.append(ReportUnknownCustomCalls(profile))
    if not profile.allow_complex:
        patterns.append(ReportComplexTypes(profile))
    return tuple(patterns)
