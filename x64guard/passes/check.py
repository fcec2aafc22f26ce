"""`check`: what a module would bring to a target, without rewriting it.

The narrowing pass runs as a dry run for the target's profile (its findings are exactly
what `narrow(..., target=...)` would do and refuse: on `x32` JAX's exact 64-bit idioms are
info and the RNG state is kept); the profile (a row of `tables.TARGET_PROFILES`) then
decides which findings the target cannot accept and adds its own rules (complex types,
custom_calls).
"""

from __future__ import annotations

import dataclasses

from jax.extend.mlir import ir

from x64guard.findings import Finding, Report, Severity
from x64guard.passes.narrow import NarrowX64Pass
from x64guard.passes.patterns.custom_calls import custom_call_target
from x64guard.passes.rewriter import Rewriter, walk
from x64guard.passes.tables import TARGET_PROFILES, TargetProfile


def profile_for(target: str) -> TargetProfile:
    try:
        return TARGET_PROFILES[target]
    except KeyError:
        raise ValueError(f"x64guard: unknown target {target!r}; known targets: "
                         f"{', '.join(sorted(TARGET_PROFILES))}") from None


def check_target(module: ir.Module, target: str) -> Report:
    profile = profile_for(target)
    findings = []
    for f in NarrowX64Pass(dry_run=True, profile=profile).apply(module).findings:
        if f.kind == "type-narrowed" and not profile.allow_64bit:
            f = dataclasses.replace(
                f, kind="type-64bit", severity=Severity.ERROR,
                message=f"64-bit types reach the {profile.name} target ({f.message.removeprefix('narrowed ')}); "
                        "`x64guard narrow` (or x64guard.narrow) narrows them as JAX's x32 mode would")
        elif f.kind == "type-narrowed":
            f = dataclasses.replace(
                f, kind="type-64bit", message=f"64-bit types ({f.message.removeprefix('narrowed ')}); "
                                              f"the {profile.name} target accepts them")
        elif profile.allow_64bit and f.severity is Severity.ERROR:
            f = dataclasses.replace(f, severity=Severity.INFO,
                                    message=f"{f.message} (only matters if the module is narrowed)")
        findings.append(f)
    findings.extend(_profile_findings(module, profile))
    return Report(target=profile.name, findings=findings)


def _profile_findings(module: ir.Module, profile: TargetProfile) -> list[Finding]:
    if profile.allow_complex and profile.known_custom_calls is None:
        return []
    rw = Rewriter(module.context, overflow="error", dry_run=True)

    def visit(op: ir.Operation) -> None:
        rw.op_index += 1
        if op.name == "func.func":
            rw.function = ir.StringAttr(op.attributes["sym_name"]).value
        if not profile.allow_complex:
            types = [r.type for r in op.results]
            types += [a.type for region in op.regions for block in region.blocks for a in block.arguments]
            if any("complex<" in str(t) for t in types):
                rw.report("complex-type", Severity.ERROR, op,
                          f"complex values are not supported on {profile.name}; split them into real and "
                          "imaginary parts (jnp.real/jnp.imag) before this point")
        if profile.known_custom_calls is not None and op.name == "stablehlo.custom_call":
            target = custom_call_target(op)
            if target not in profile.known_custom_calls:
                rw.report("custom-call-unknown", Severity.ERROR, op,
                          f"custom_call @{target} is not a kernel {profile.name} provides; "
                          "the accelerator compiler will reject it", op_name=f"stablehlo.custom_call @{target}")
        return ir.WalkResult.ADVANCE

    with module.context:
        walk(module, visit)
    return rw.findings()
