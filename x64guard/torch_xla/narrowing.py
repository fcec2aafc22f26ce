"""Where the torch-xla front end calls the core pass: `narrow_lowered` runs it
(`x64guard.api.narrow_module`) on torch-xla's lowered module with the mode, overflow
policy and target profile it is given, places the findings at the model's lines
(source.py), and issues its warnings at the user's line; the core's RNG-state refusals
come with what a torch-xla user can do."""

from __future__ import annotations

from x64guard import user_place
from x64guard.api import NarrowResult, narrow_module
from x64guard.errors import X64GuardError
from x64guard.findings import Kind, format_findings
from x64guard.modes import Mode
from x64guard.torch_xla.base import excluded_source_dirs
from x64guard.torch_xla.rng import STATE_LOCATION
from x64guard.torch_xla.source import SourceMap, locate_findings


def _rng_refusal(error: X64GuardError) -> X64GuardError:
    """The core's RNG findings, with what a torch-xla user can do."""
    return X64GuardError(
        "x64guard.torch_xla: this graph draws random numbers (torch.randn, torch.randint, dropout, ...); "
        "torch-xla generates them with rng_bit_generator, whose state is XLA's 2 x uint64 (x64guard passes it "
        "in as 32-bit words, computed on the host from torch-xla's seed), and this x64guard's core pass does not "
        "keep that state 64-bit; a 32-bit state would be a different generator, so x64guard refuses rather than "
        "return numbers of another stream. Draw them outside the compiled function (on the CPU, or eagerly) and "
        "pass them in, or keep this graph in 64 bits (mode='allow').\n" + str(error), error.findings)


def narrow_lowered(module, mode: Mode, overflow: str, sources: SourceMap | None, target: str = "x32") -> NarrowResult:
    """The core pass on torch-xla's module for the target profile `target`, findings placed
    at the model's lines."""
    try:
        result = narrow_module(module, mode=mode, overflow=overflow, target=target)
    except X64GuardError as exc:
        findings = locate_findings(exc.findings, sources)
        head = str(exc).split("\n", 1)[0]
        located = X64GuardError(head + ("\n" + format_findings(findings) if findings else ""), findings)
        if any(f.kind in (Kind.RNG_STATE, Kind.RNG_BITS) for f in exc.findings):
            # Findings at the ops x64guard added to make the states are its own, not the user's.
            own = [f for f in findings if f.location.file == STATE_LOCATION]
            if own:
                findings = [f for f in findings if f not in own]
                located = X64GuardError(head + "\n" + format_findings(findings), findings)
            raise _rng_refusal(located) from exc
        raise located from exc
    result.findings = locate_findings(result.findings, sources)
    # Its summary warning points at the user's line that made dynamo compile, not here.
    place = user_place.find_user_place(excluded_source_dirs())
    for message in result.warnings:
        user_place.warn_at(message, place)
    return result
