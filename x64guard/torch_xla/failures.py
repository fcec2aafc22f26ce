"""Refusals and failures: x64guard's refusals of a traced graph, and torch-xla's own
exceptions as one line with a workaround."""

from __future__ import annotations

import contextlib
import re
from typing import Iterator

from x64guard.errors import X64GuardError
from x64guard.findings import Finding, Kind, Severity
from x64guard.torch_xla import metrics as xla_metrics


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


def refusal(kind: Kind, op: str, message: str) -> X64GuardError:
    finding = Finding(kind, Severity.ERROR, op, "the traced graph", message)
    return X64GuardError(f"x64guard.torch_xla: {message}", [finding])


class TraceWatch:
    """Fails a trace that executed something: a torch-xla CPU fallback (an op it cannot
    lower) or a read of a value; either would bake first-call values into the program."""

    def __enter__(self):
        # Executions dispatched before the trace (earlier calls) finish asynchronously and
        # count when they finish: wait for them, so that the count moves only for the trace.
        xla_metrics.wait_device_ops()
        self._executions = xla_metrics.execution_count()
        self._fallbacks = xla_metrics.fallback_counts()
        return self

    def __exit__(self, kind, value, traceback) -> None:
        if kind is not None:
            return
        fallbacks = sorted(name for name, n in xla_metrics.fallback_counts().items()
                           if n > self._fallbacks.get(name, 0))
        if fallbacks:
            raise refusal(Kind.TORCH_XLA_FALLBACK, fallbacks[0],
                          f"torch-xla has no XLA lowering for {', '.join(fallbacks)}: it runs on the CPU while the "
                          "graph is traced, and its result would be frozen into the program. Move that op out of "
                          "the compiled function")
        xla_metrics.wait_device_ops()
        if xla_metrics.execution_count() != self._executions:
            raise refusal(Kind.TORCH_XLA_EXECUTION, "graph", "tracing the graph executed part of it on the device "
                          "(a value was read while tracing); its result would be frozen into the program. Move "
                          "data-dependent code out of the compiled function")
