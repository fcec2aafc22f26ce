"""`check`: what a module would bring to a target, without rewriting it.

The narrowing pass runs as a recording run for the target's profile (its findings are
exactly what `narrow(..., target=...)` would do and refuse: on `x32` JAX's exact 64-bit
idioms are info and the RNG state is kept), with the profile's own rules (complex types,
custom_calls: patterns/profile.py; neuronx-cc's documented rejections on the Neuron
targets: patterns/neuron.py) in the same walk. Narrowed types are reported as 64-bit
types reaching the target (`type-64bit`): an error where the profile allows none, info
where it accepts them (there, the pass's other errors only matter if the module is
narrowed, and are info too).
"""

from __future__ import annotations

from jax.extend.mlir import ir

from x64guard.findings import Kind, Report, Severity
from x64guard.passes.narrow import NarrowX64Pass
from x64guard.passes.patterns.neuron import NeuronOptions, neuron_patterns
from x64guard.passes.patterns.profile import profile_patterns
from x64guard.passes.store import TypeReport
from x64guard.passes.tables import TARGET_PROFILES, TargetProfile

_INT64_CHANGES = frozenset({"i64->i32", "si64->si32", "ui64->ui32"})
_ONLY_IF_NARROWED = " (only matters if the module is narrowed)"


def profile_for(target: str) -> TargetProfile:
    try:
        return TARGET_PROFILES[target]
    except KeyError:
        raise ValueError(f"x64guard: unknown target {target!r}; known targets: "
                         f"{', '.join(sorted(TARGET_PROFILES))}") from None


def types_reaching(profile: TargetProfile, neuron: NeuronOptions | None = None) -> TypeReport:
    """How `check` reports the 64-bit types that reach `profile`'s target."""
    if profile.allow_64bit:
        return TypeReport(Kind.TYPE_64BIT, Severity.INFO,
                          f"64-bit types ({{changes}}); the {profile.name} target accepts them")
    if neuron is None:
        return TypeReport(Kind.TYPE_64BIT, Severity.ERROR,
                          f"64-bit types reach the {profile.name} target ({{changes}}); `x64guard narrow` "
                          "(or x64guard.narrow) narrows them as JAX's x32 mode would")
    narrow = (f"`x64guard narrow --target {profile.name}` (or x64guard.narrow) narrows them as JAX's x32 "
              "mode would, range-checked")
    if neuron.native_int64:
        return TypeReport(Kind.TYPE_64BIT, Severity.ERROR,
                          f"64-bit types reach {profile.name} ({{changes}}); neuronx-cc runs int64 natively "
                          f"with --native-int64=enabled, but has no float64 or complex128; {narrow}",
                          accepted=_INT64_CHANGES,
                          accepted_message=f"64-bit integers ({{changes}}); {profile.name} runs them natively "
                                           "(--native-int64=enabled)")
    return TypeReport(Kind.TYPE_64BIT, Severity.ERROR,
                      f"64-bit types reach {profile.name} ({{changes}}); neuronx-cc converts 64-bit integers to "
                      "32 bits without a range check (values outside int32 are silently changed) and has no "
                      f"float64 or complex128; {narrow}")


def check_target(module: ir.Module, target: str, *, all_positions: bool = False,
                 neuron_cc_flags: str | None = None) -> Report:
    """`neuron_cc_flags`: neuronx-cc's flags for a Neuron target (None: $NEURON_CC_FLAGS)."""
    profile = profile_for(target)
    neuron = NeuronOptions.resolve(profile, neuron_cc_flags) if profile.neuron_chip else None
    note = _ONLY_IF_NARROWED if profile.allow_64bit or (neuron and neuron.native_int64) else None
    result = NarrowX64Pass(
        record_only=True, profile=profile, rewrite_exact_idioms=profile.exact_idioms_are_info,
        extra_patterns=profile_patterns(profile) + neuron_patterns(profile, neuron_cc_flags),
        types=types_reaching(profile, neuron), all_positions=all_positions, errors_note=note,
        note_kinds=None if profile.allow_64bit else frozenset({Kind.CONSTANT_OUT_OF_RANGE}),
    ).apply(module)
    return Report(target=profile.name, findings=result.findings)


def neuron_findings(module: ir.Module, target: str, neuron_cc_flags: str | None = None) -> list:
    """Only the Neuron rules' findings for `module` (what remains of a narrowed module)."""
    profile = profile_for(target)
    if profile.neuron_chip is None:
        return []
    report = check_target(module, target, neuron_cc_flags=neuron_cc_flags)
    return [f for f in report.findings if f.kind.value.startswith(("NCC_", "neuron-"))]
