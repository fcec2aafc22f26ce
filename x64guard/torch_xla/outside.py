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
  counter with the compiles x64guard asked for (`_private.own_compile_count`): one
  `lazy-read` warning per sync that follows compiles of torch-xla's own.
"""

from __future__ import annotations

import collections
import contextlib
import os
import re
import threading
from typing import Any, NamedTuple, Sequence

import torch

from x64guard.torch_xla import _private as _xc
from x64guard.torch_xla import reads as _reads
from x64guard.torch_xla.base import excluded_source_dirs
from x64guard import user_place
from x64guard.errors import X64GuardWarning
from x64guard.findings import Finding, Kind, Location, Severity

_WIDE_TYPE = re.compile(r"\b(?:s64|u64|f64|c128)\[")
_COMPILE = threading.local()   # the x64guard frame compile in progress on this thread
class _GraphBreak(NamedTuple):
    """A graph break dynamo reported in a frame compiled for x64guard."""

    reason: str
    file: str | None
    line: int | None


_RECENT_BREAKS: list[_GraphBreak] = []   # of x64guard frames, newest last
_GRAPHS = [0]   # graphs dynamo gave the backend (backend() calls)
_GRAPH_CALLS = [0]   # calls of the backend's compiled graphs


# ============================================================================ the backend

def is_x64guard_backend(backend) -> bool:
    return bool(getattr(backend, "_x64guard_backend", False))


def arm() -> None:
    """Register the compile callbacks (again: torch._dynamo.reset() clears them); every
    entry point of x64guard.torch_xla calls this, importing it does not. The first call
    takes the lazy loop's baseline."""
    if _LAZY["theirs"] is None:
        start_lazy_count()
    _xc.compile_callbacks(_on_compile_start, _on_compile_end)


def note_graph() -> None:
    _GRAPHS[0] += 1


def note_graph_call() -> None:
    _GRAPH_CALLS[0] += 1


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
    if getattr(_COMPILE, "state", None) is not None:
        return
    backend, code = _xc.compiling_frame()
    if not is_x64guard_backend(backend):
        return
    # frames of PyTorch's and x64guard's own code (a weakref callback dynamo meets) are not the model's
    library = code is None or code.co_filename.startswith((user_place.PACKAGE_DIR, *excluded_source_dirs()))
    patch = torch._dynamo.config.patch(allow_rnn=True)
    patch.__enter__()
    reasons, skips = _xc.dynamo_records()
    _COMPILE.state = _FrameCompile(patch, len(reasons), skips, _GRAPHS[0], library, code)


def _on_compile_end(args) -> None:
    _reads.compiling(False)
    state = getattr(_COMPILE, "state", None)
    if state is None:
        return
    _COMPILE.state = None
    patch, breaks_before, skips_before, graphs_before, library, code = state
    patch.__exit__(None, None, None)
    reasons, skips = _xc.dynamo_records()
    for reason in reasons[breaks_before:]:
        frame = reason.user_stack[-1] if reason.user_stack else None
        first = reason.reason.strip().splitlines()[0] if reason.reason.strip() else "a graph break"
        _RECENT_BREAKS.append(_GraphBreak(first, frame.filename if frame else None, frame.lineno if frame else None))
    del _RECENT_BREAKS[:-8]
    gave_up = [key.strip().splitlines()[0] for key, count in skips.items() if count > skips_before.get(key, 0)]
    if gave_up and _GRAPHS[0] == graphs_before and not library:
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
            for (path, t), pending in zip(tensors, flags) if pending and _WIDE_TYPE.search(_xc.hlo_text([t]))]
    if not wide:
        return
    location = Location.at("the compiled function")
    breaks = [f"{reason} at {file}:{line}" if file else reason for reason, file, line in _RECENT_BREAKS[-2:]]
    if _RECENT_BREAKS and _RECENT_BREAKS[-1].file:
        location = Location.source(_RECENT_BREAKS[-1].file, _RECENT_BREAKS[-1].line, None)
    message = (f"a graph given to x64guard takes {', '.join(wide[:4])}{', ...' if len(wide) > 4 else ''} computed "
               f"outside any x64guard graph, with 64-bit types, after a graph break "
               f"({'; '.join(breaks) or 'dynamo recorded none'}); torch-xla computes that code eagerly, at full "
               "width, unnarrowed. Remove the graph break (TORCH_LOGS=graph_breaks shows each) or move the 64-bit "
               "work inside the compiled code")
    _warn(Finding(Kind.OUTSIDE_GRAPH, Severity.WARNING, "graph break", location, message))


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

# torch-xla's own compiles and the backend's graph calls at the last sync (None: x64guard not used yet)
_LAZY = {"theirs": None, "graph_calls": 0}


def start_lazy_count() -> None:
    """The baseline: torch-xla's own compiles before x64guard.torch_xla's first use are
    not the lazy loop's."""
    _LAZY["theirs"] = _xc.compile_count() - _xc.own_compile_count()
    _LAZY["graph_calls"] = _GRAPH_CALLS[0]


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
    backend's graphs, or torch_xla.sync() itself ran them at full width."""
    if _LAZY["theirs"] is None:    # x64guard's first use: nothing before it is the lazy loop's
        start_lazy_count()
    theirs = _xc.compile_count() - _xc.own_compile_count()
    new, _LAZY["theirs"] = theirs - _LAZY["theirs"], theirs
    backend_calls, _LAZY["graph_calls"] = _GRAPH_CALLS[0] - _LAZY["graph_calls"], _GRAPH_CALLS[0]
    if new <= 0:
        return
    advice = _LAZY_READ_ADVICE["backend" if backend_calls > 0 else "lazy"]
    message = (f"torch-xla compiled {new} graph(s) of its own since the previous x64guard.torch_xla.sync; they "
               f"ran at full width, unnarrowed (64-bit types stay 64-bit there). {advice}")
    _warn(Finding(Kind.LAZY_READ, Severity.WARNING, "sync", "the lazy step", message))


_INPUT_GRAPHS: "collections.OrderedDict[bytes, bool]" = collections.OrderedDict()   # graph hash -> no 64-bit type


def materialize_inputs(tensors: list, device: str) -> None:
    """Compute the pending graph of inputs x64guard takes (a backward's `ones_like(loss)`
    seed, an eager cast between graphs) before a program runs, as torch-xla's own dynamo
    backend does. When that graph holds no 64-bit type, torch-xla's compile of it is
    counted as x64guard's (no `lazy-read`: nothing ran at full width); one that holds one
    stays torch-xla's own, and the next sync says so. Judged once per graph hash."""
    if not tensors:
        return
    key = _xc.graph_hash(tensors)
    narrow = _INPUT_GRAPHS.get(key)
    if narrow is None:
        narrow = _INPUT_GRAPHS[key] = not _WIDE_TYPE.search(_xc.hlo_text(tensors))
        while len(_INPUT_GRAPHS) > 256:
            _INPUT_GRAPHS.popitem(last=False)
    with _xc.own_compiles() if narrow else contextlib.nullcontext():
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
