"""Refusals and failures: x64guard's refusals of a traced graph, torch-xla's own exceptions
as one line with a workaround, and the core pass run with the target and the model's lines."""

from __future__ import annotations

import contextlib
import re
from typing import Iterator

from x64guard import user_place
from x64guard.api import NarrowResult, narrow_module
from x64guard.errors import X64GuardError
from x64guard.findings import Finding, Kind, Severity, format_findings
from x64guard.modes import Mode
from x64guard.torch_xla import _private as _xc
from x64guard.torch_xla.base import excluded_source_dirs
from x64guard.torch_xla.rng import STATE_LOCATION
from x64guard.torch_xla.source import SourceMap, locate_findings


class TorchXlaFailure(RuntimeError):
    """torch-xla itself failed on a graph x64guard handed it (while tracing, lowering or
    compiling it). The message names x64guard's path and a workaround; torch-xla's own
    exception is the `__cause__`."""


_WORKAROUNDS = {
    "backend": "check that the model runs with torch-xla's own backend (torch.compile(model, backend='openxla')); "
               "if it does, please report this to x64guard; meanwhile keep the failing code out of the compiled "
               "function (torch._dynamo.disable)",
    "narrow_exported": "compile the model with torch.compile(model, backend='x64guard') instead (dynamo traces it "
                       "without torch.export's decompositions), or export it without the failing op",
    "sync": "run the step with torch.compile(step, backend='x64guard'), or let torch-xla run it (torch_xla.sync())",
}


@contextlib.contextmanager
def torch_xla_failures(path: str, doing: str) -> Iterator[None]:
    """torch-xla's own exceptions, as one line that says which x64guard path met them
    and what to try (x64guard's refusals pass through)."""
    try:
        yield
    except (X64GuardError, TorchXlaFailure):
        raise
    except Exception as exc:  # noqa: BLE001 - re-raised with its cause
        lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
        first = lines[0] if lines else ""
        if len(first) > 240:
            first = first[:237] + "..."
        raise TorchXlaFailure(f"x64guard.torch_xla ({path}): torch-xla failed {doing} ({type(exc).__name__}: "
                              f"{first}). Workaround: {_WORKAROUNDS[path]}") from exc


_TRACEBACK_LINE = re.compile(r'File "([^"]+)", line (\d+)')


def failed_before_trace(exc: Exception, doing: str, verdict: str) -> TorchXlaFailure:
    """A failure of PyTorch's own compile of a graph (AOTAutograd's trace, before x64guard
    sees the graph), as a TorchXlaFailure with the model line its message names and what
    torch-xla's own `openxla` backend made of the same graph (`verdict`)."""
    text = str(exc)
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    first = next((line for line in lines if "raised:" not in line and not line.startswith("backend=")), "")
    first = first if len(first) <= 240 else first[:237] + "..."
    where = _TRACEBACK_LINE.findall(text)
    at = f", at {where[-1][0]}:{where[-1][1]}" if where else ""
    return TorchXlaFailure(f"x64guard.torch_xla (backend): {doing} failed before x64guard traced the graph "
                           f"({type(exc).__name__}: {first}{at}). {verdict}")


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


def refusal(kind: Kind, op: str, message: str) -> X64GuardError:
    finding = Finding(kind, Severity.ERROR, op, "the traced graph", message)
    return X64GuardError(f"x64guard.torch_xla: {message}", [finding])


class TraceWatch:
    """Fails a trace that executed something: a torch-xla CPU fallback (an op it cannot
    lower) or a read of a value; either would bake first-call values into the program."""

    def __enter__(self):
        # Executions dispatched before the trace (earlier calls) finish asynchronously and
        # count when they finish: wait for them, so that the count moves only for the trace.
        _xc.wait_device_ops()
        self._executions = _xc.execution_count()
        self._fallbacks = _xc.fallback_counts()
        return self

    def __exit__(self, kind, value, traceback) -> None:
        if kind is not None:
            return
        fallbacks = sorted(name for name, n in _xc.fallback_counts().items() if n > self._fallbacks.get(name, 0))
        if fallbacks:
            raise refusal(Kind.TORCH_XLA_FALLBACK, fallbacks[0],
                          f"torch-xla has no XLA lowering for {', '.join(fallbacks)}: it runs on the CPU while the "
                          "graph is traced, and its result would be frozen into the program. Move that op out of "
                          "the compiled function")
        _xc.wait_device_ops()
        if _xc.execution_count() != self._executions:
            raise refusal(Kind.TORCH_XLA_EXECUTION, "graph", "tracing the graph executed part of it on the device "
                          "(a value was read while tracing); its result would be frozen into the program. Move "
                          "data-dependent code out of the compiled function")
