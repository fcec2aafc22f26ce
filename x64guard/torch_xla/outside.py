"""64-bit work that torch-xla runs outside x64guard's programs: narrowed where x64guard can,
said out loud where it cannot (issue 25, item 4).

Two paths leave work to torch-xla itself, which compiles it at full width:

* **the backend**: dynamo runs what it cannot trace eagerly on torch-xla, between or after
  the graphs it gives x64guard (a graph break; `nn.LSTM`/`GRU`/`RNN`, which dynamo skips
  unless `torch._dynamo.config.allow_rnn` is set: the whole forward then ran at 64 bits, 0
  graphs, no word). torch.compile hands dynamo its own wrapper of the backend, so no
  per-call hook of the backend survives (`backend_ctx_ctor` is dropped); dynamo's compile
  callbacks see every frame it compiles, and `_private.compiling_frame` says for
  which backend. For x64guard's frames, `_on_compile_start` turns `allow_rnn` on (the RNN is
  traced and narrowed, as `x64guard.torch_xla.compile` already did; restored at the frame's
  end); `_on_compile_end` records the graph breaks and warns (`outside-graph`) about a
  model frame dynamo gave no graph for; and a compiled graph's first call warns when an
  input was computed eagerly with 64-bit types (`note_pending_inputs`: the code between
  two graphs). Each warning is located at the break's line or the skipped frame.
* **the lazy loop**: a mid-step read of a pending tensor (`.item()`, `if mask.all():`,
  `.tolist()`, `.cpu()`, printing) makes torch-xla compile and run that tensor's graph
  itself, before `x64guard.torch_xla.sync` sees it. Reads of tensors computed from
  `to_device`'s int64 tensors, and every read inside `x64guard.torch_xla.step()`, run
  narrowed instead (reads.py). Others reach torch-xla: `sync` compares torch-xla's compile
  counter with the compiles x64guard asked for (`metrics.own_compile_count`): one
  `lazy-read` warning per sync that follows compiles of torch-xla's own, and one in the
  process for its runs of graphs it had compiled before (its cached-compile counter).
"""

from __future__ import annotations

import collections
import contextlib
import os
import threading
from typing import Any, NamedTuple, Sequence

import torch

from x64guard.torch_xla import _private as _xc
from x64guard.torch_xla import metrics as xla_metrics
from x64guard.torch_xla import reads as _reads
from x64guard.torch_xla.base import excluded_source_dirs
from x64guard import user_place
from x64guard.errors import X64GuardWarning
from x64guard.findings import Finding, Kind, Location, Severity



class _GraphBreak(NamedTuple):
    """A graph break dynamo reported in a frame compiled for x64guard."""

    reason: str
    file: str | None
    line: int | None


class OutsideRecord:
    """What this module counts about the process's torch-xla work, in one object: one per
    process, as torch-xla's compile counter and dynamo's compile callbacks are (an object
    the user held could disagree with another about the same process-wide counters)."""

    def __init__(self) -> None:
        self.compile = threading.local()     # the x64guard frame compile in progress on this thread
        self.recent_breaks: list[_GraphBreak] = []   # of x64guard frames, newest last
        self.graphs = 0                      # graphs dynamo gave the backend (backend() calls)
        self.graph_calls = 0                 # calls of the backend's compiled graphs
        self.theirs: int | None = None       # torch-xla's own compiles at the last sync (None: no baseline yet)
        self.theirs_cached = 0               # ... and its own runs of graphs from its compile cache
        self.lazy_reads_said = False         # a lazy-read warning was issued in this process
        self.calls_at_sync = 0               # graph_calls at the last sync
        # graph hash -> no 64-bit type, of the pending inputs materialize_inputs computed
        self.input_graphs: "collections.OrderedDict[bytes, bool]" = collections.OrderedDict()


RECORD = OutsideRecord()


# ============================================================================ the backend

def is_x64guard_backend(backend) -> bool:
    return bool(getattr(backend, "_x64guard_backend", False))


def arm() -> None:
    """Register the compile callbacks (again: torch._dynamo.reset() clears them), and take
    the lazy loop's compile baseline at the first call; every entry point of
    x64guard.torch_xla calls this (importing the package needs neither)."""
    _xc.compile_callbacks(_on_compile_start, _on_compile_end)
    if RECORD.theirs is None:
        start_lazy_count()


def note_graph() -> None:
    RECORD.graphs += 1


def note_graph_call() -> None:
    RECORD.graph_calls += 1


class _FrameCompile(NamedTuple):
    """A frame dynamo is compiling for x64guard, as it stood when the compile began."""

    patch: Any                 # torch._dynamo.config.patch(allow_rnn=True), entered
    breaks_before: int         # dynamo's graph-break reasons so far
    skips_before: dict         # dynamo's skip counts so far
    graphs_before: int         # graphs the backend had been given
    library: bool              # the frame is PyTorch's or x64guard's own code, not the model's
    code: Any                  # the frame's code object, or None


def _on_compile_start(args) -> None:
    """Before dynamo traces a frame for backend='x64guard': RNN modules are traced (dynamo
    skips nn.LSTM/GRU/RNN unless allow_rnn is set: the whole forward then ran eagerly at 64
    bits, 0 graphs), restored when the frame is compiled."""
    _reads.compiling(True)    # any backend's frame: GuardedTensor is a plain tensor to dynamo
    if getattr(RECORD.compile, "state", None) is not None:
        return
    backend, code = _xc.compiling_frame()
    if not is_x64guard_backend(backend):
        return
    # frames of PyTorch's and x64guard's own code (a weakref callback dynamo meets) are not the model's
    library = code is None or code.co_filename.startswith((user_place.PACKAGE_DIR, *excluded_source_dirs()))
    patch = torch._dynamo.config.patch(allow_rnn=True)
    patch.__enter__()
    reasons, skips = _xc.dynamo_records()
    RECORD.compile.state = _FrameCompile(patch, len(reasons), skips, RECORD.graphs, library, code)


def _on_compile_end(args) -> None:
    _reads.compiling(False)
    state = getattr(RECORD.compile, "state", None)
    if state is None:
        return
    RECORD.compile.state = None
    patch, breaks_before, skips_before, graphs_before, library, code = state
    patch.__exit__(None, None, None)
    reasons, skips = _xc.dynamo_records()
    for reason in reasons[breaks_before:]:
        frame = reason.user_stack[-1] if reason.user_stack else None
        first = reason.reason.strip().splitlines()[0] if reason.reason.strip() else "a graph break"
        RECORD.recent_breaks.append(_GraphBreak(first, frame.filename if frame else None,
                                                frame.lineno if frame else None))
    del RECORD.recent_breaks[:-8]
    gave_up = [key.strip().splitlines()[0] for key, count in skips.items() if count > skips_before.get(key, 0)]
    if gave_up and RECORD.graphs == graphs_before and not library:
        where = Location.source(code.co_filename, code.co_firstlineno, None, code.co_name)
        _warn(Finding(Kind.OUTSIDE_GRAPH, Severity.WARNING, "skipped frame", where,
                      f"dynamo gave x64guard no graph for a frame ({'; '.join(gave_up)}): it runs eagerly on "
                      "torch-xla, at full width, unnarrowed (64-bit types stay 64-bit). Make the code traceable "
                      "(TORCH_LOGS=graph_breaks shows why), or move it out of the compiled function"))


def note_pending_inputs(args: Sequence, paths: Sequence[str], is_alias) -> None:
    """At a compiled graph's first call: XLA inputs whose pending computation (done
    eagerly, outside any x64guard program: code between graphs) holds a 64-bit type;
    torch-xla compiles that computation itself, unnarrowed. One warning per graph."""
    tensors = [(path, a) for path, a in zip(paths, args)
               if isinstance(a, torch.Tensor) and a.device.type == "xla" and not is_alias(a)]
    if not tensors:
        return
    flags = _xc.needs_materialization([t for _, t in tensors])
    wide = [f"{_input_name(path)} ({str(t.dtype).removeprefix('torch.')}{list(t.shape)})"
            for (path, t), pending in zip(tensors, flags) if pending and holds_wide_type([t], str(t.device))]
    if not wide:
        return
    location = Location.at("the compiled function")
    breaks = [f"{reason} at {file}:{line}" if file else reason for reason, file, line in RECORD.recent_breaks[-2:]]
    if RECORD.recent_breaks and RECORD.recent_breaks[-1].file:
        location = Location.source(RECORD.recent_breaks[-1].file, RECORD.recent_breaks[-1].line, None)
    message = (f"a graph given to x64guard takes {', '.join(wide[:4])}{', ...' if len(wide) > 4 else ''} computed "
               f"outside any x64guard graph, with 64-bit types, after a graph break "
               f"({'; '.join(breaks) or 'dynamo recorded none'}); torch-xla computes that code eagerly, at full "
               "width, unnarrowed. Remove the graph break (TORCH_LOGS=graph_breaks shows each) or move the 64-bit "
               "work inside the compiled code")
    _warn(Finding(Kind.OUTSIDE_GRAPH, Severity.WARNING, "graph break", location, message))


def holds_wide_type(tensors: list, device: str) -> bool:
    """Whether the pending graph of `tensors` holds a type x64guard narrows: the type
    table's `is_wide` over its StableHLO's block arguments and results."""
    from x64guard.io import modules as xmlir
    from x64guard.passes.driver import collect
    from x64guard.passes.ir_queries import is_wide

    module, _ = xmlir.load(_xc.stablehlo_text(tensors, device), trusted=True)
    for op in collect(module).ops:
        if any(is_wide(result.type) for result in op.results):
            return True
        if any(is_wide(argument.type) for region in op.regions for block in region.blocks
               for argument in block.arguments):
            return True
    return False


def _input_name(path: str) -> str:
    """dynamo's name of a graph input; its resume functions take the values the eager code
    left on the stack as `___stack0`, ..."""
    return "a value the eager code returned" if "___stack" in path else path


def _warn(finding: Finding) -> None:
    warning = X64GuardWarning(f"x64guard.torch_xla: {finding.location}: {finding.message} [{finding.kind}]")
    warning.findings = [finding]
    # the standard library's frames (contextlib's, around dynamo's compile) are not the user's line either
    excluded = (*excluded_source_dirs(), os.path.dirname(contextlib.__file__) + os.sep)
    user_place.warn_at(warning, user_place.find_user_place(excluded))


# ============================================================================ the lazy loop

def start_lazy_count() -> None:
    """The baseline: torch-xla's own compiles before x64guard.torch_xla's first use are
    not the lazy loop's."""
    RECORD.theirs, RECORD.theirs_cached = _theirs()
    RECORD.calls_at_sync = RECORD.graph_calls


def _theirs() -> tuple[int, int]:
    """torch-xla's compiles, and runs of graphs from its compile cache, that x64guard did not cause."""
    return (xla_metrics.compile_count() - xla_metrics.own_compile_count(),
            xla_metrics.cached_run_count() - xla_metrics.own_compile_count(cached=True))


# Why torch-xla compiled graphs of its own, and what to do, per path: a step that ran
# graphs of backend='x64guard' left the work between them (a graph break) or a read after
# them; a lazy step read a pending value mid-step.
_LAZY_READ_ADVICE = {
    "backend": ("The step ran graphs of backend='x64guard'; torch-xla compiled the code dynamo left outside them "
                "(a graph break: the outside-graph warnings and TORCH_LOGS=graph_breaks name each) or a read of a "
                "pending tensor between them (.item(), if tensor:, .cpu()). Remove the graph break, or move the "
                "read after x64guard.torch_xla.sync(...)"),
    "lazy": ("A read of a pending tensor in the middle of a step (.item(), if tensor:, .all() in an if, .tolist(), "
             ".cpu(), print) makes torch-xla compute it at once; so do torch_xla.sync() and ops torch-xla runs on "
             "the CPU. Run the step inside `with x64guard.torch_xla.step():` (its reads then run narrowed), move "
             "such reads after x64guard.torch_xla.sync(...), or compile the forward with "
             "torch.compile(model, backend='x64guard') (Hugging Face's masking code skips its reads when traced)"),
}


def check_lazy_reads() -> None:
    """At a sync: warn once when torch-xla compiled graphs of its own (not asked for by
    x64guard) since the previous sync: a mid-step read, code dynamo left between the
    backend's graphs, or torch_xla.sync() itself ran them at full width. Graphs it ran from
    its compile cache (compiled before x64guard's loop began: an earlier plain torch-xla
    loop's) are said once per process, at the first sync that sees them, unless a
    lazy-read was said before: later runs of one graph are not news, and torch-xla names no
    graph it runs, so x64guard cannot tell a cached graph it reported from one it did not."""
    if RECORD.theirs is None:    # x64guard's first use: nothing before it is the lazy loop's
        start_lazy_count()
    theirs, theirs_cached = _theirs()
    new, new_cached = theirs - RECORD.theirs, theirs_cached - RECORD.theirs_cached
    RECORD.theirs, RECORD.theirs_cached = theirs, theirs_cached
    backend_calls, RECORD.calls_at_sync = RECORD.graph_calls - RECORD.calls_at_sync, RECORD.graph_calls
    if new > 0:
        what = f"torch-xla compiled {new} graph(s) of its own since the previous x64guard.torch_xla.sync"
    elif new_cached > 0 and not RECORD.lazy_reads_said:
        what = (f"torch-xla ran {new_cached} graph(s) of its own since the previous x64guard.torch_xla.sync, "
                "from its compile cache (compiled before x64guard's loop began, such as an earlier torch-xla loop's; "
                "said once, not at every sync)")
    else:
        return
    RECORD.lazy_reads_said = True
    advice = _LAZY_READ_ADVICE["backend" if backend_calls > 0 else "lazy"]
    message = f"{what}; they ran at full width, unnarrowed (64-bit types stay 64-bit there). {advice}"
    _warn(Finding(Kind.LAZY_READ, Severity.WARNING, "sync", "the lazy step", message))


def materialize_inputs(tensors: list, device: str) -> None:
    """Compute the pending graph of inputs x64guard takes (a backward's `ones_like(loss)`
    seed, an eager cast between graphs) before a program runs, as torch-xla's own dynamo
    backend does. When that graph holds no 64-bit type, torch-xla's compile of it is
    counted as x64guard's (no `lazy-read`: nothing ran at full width); one that holds one
    stays torch-xla's own, and the next sync says so. Judged once per graph hash."""
    if not tensors:
        return
    key = _xc.graph_hash(tensors)
    narrow = RECORD.input_graphs.get(key)
    if narrow is None:
        narrow = RECORD.input_graphs[key] = not holds_wide_type(tensors, device)
        while len(RECORD.input_graphs) > 256:
            RECORD.input_graphs.popitem(last=False)
    with xla_metrics.own_compiles() if narrow else contextlib.nullcontext():
        _xc.materialize(tensors, device)


def check_widened_ids(widened: list[str]) -> None:
    """At `to_device`: warn when int64 tensors an earlier `to_device` made were computed
    at 64 bits on the device by torch-xla's own sync since (one warning, whatever the
    count; Python shows it once per call site)."""
    if not widened:
        return
    shapes = ", ".join(widened[:4]) + (", ..." if len(widened) > 4 else "")
    message = ("int64 tensors x64guard.torch_xla.to_device made earlier (int32 on the device, int64 as PyTorch "
               f"sees them; {shapes}) were computed at 64 bits on the device by torch-xla's own sync "
               "(torch_xla.sync(), xm.mark_step()): it materializes every pending tensor, these int32 -> int64 "
               "converts included, as a 64-bit graph and 64-bit device data. Results stay exact (x64guard's "
               "programs cast such tensors back on the host), but 64-bit types reached the device. End each step "
               "with x64guard.torch_xla.sync() instead, which computes them narrowed")
    _warn(Finding(Kind.WIDE_IDS, Severity.WARNING, "to_device", "the step before", message))
