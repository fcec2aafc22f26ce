"""The lazy-tensor loop: `sync` runs a step's pending graph narrowed, `step` narrows the
reads in the middle of one."""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import threading
from typing import Any, Iterator

import torch

from x64guard.api import NarrowResult
from x64guard.errors import X64GuardError, X64GuardWarning
from x64guard.findings import Finding, Kind, Severity
from x64guard.modes import Mode, resolve_mode, resolve_overflow
from x64guard.torch_xla import _private as _xc
from x64guard.torch_xla import outside as _outside
from x64guard.torch_xla import reads as _reads
from x64guard.torch_xla import share as _share
from x64guard.torch_xla.base import COUNTERS, NARROW_DTYPE, xla_device, excluded_source_dirs
from x64guard.torch_xla.boundary import held_over, narrow_alias
from x64guard.torch_xla.constants import narrowed_constants, narrowed_scalars
from x64guard.torch_xla.failures import refusal, torch_xla_failures
from x64guard.torch_xla.narrowing import narrow_lowered
from x64guard.torch_xla.lowering import ScalarUse, read_lowering, scalar_uses
from x64guard.passes.overflow_checks import guard
from x64guard.torch_xla.live import LIVE, SyncTarget, scan, targets_of
from x64guard.torch_xla.program import Program
from x64guard.torch_xla.rng import RngStates
from x64guard.torch_xla.source import StackSourceMap
from x64guard.torch_xla.tracing import TRACE_LOCK, rng_words


@dataclasses.dataclass
class _LazyProgram:
    """A lazy graph (by torch-xla's graph hash) narrowed and compiled, for `sync`."""

    program: Program
    dtypes: list[torch.dtype]          # per module parameter, what the program takes
    seed_index: int | None             # the position of torch-xla's seed among the graph's inputs
    rng: RngStates | None
    result: NarrowResult
    stablehlo: str
    scalars: dict[int, ScalarUse]      # per 64-bit integer scalar parameter: its sentinels, where it is used


class _LazyProgramCache:
    """The programs `sync` and `step` compiled, by (mode, overflow policy, torch-xla's graph
    hash), least recently used first; every read and write under the cache's lock.

    Bounded: a lazy loop whose shapes vary (bucketed sequence lengths, a last smaller
    batch) lowers one graph per shape, and each program holds its narrowed module, the
    core's result and a compiled executable, so that an unbounded cache grows with every
    new shape. `limit` (64) is well above what a training loop cycles through (one step
    graph and a few mid-step reads per shape bucket) and small enough that the programs
    kept stay a small part of the host's memory. An evicted program is compiled again
    if its graph comes back (torch-xla's own computation cache may still hold it)."""

    limit = 64

    def __init__(self) -> None:
        self._programs: collections.OrderedDict[tuple, _LazyProgram] = collections.OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple) -> _LazyProgram | None:
        with self._lock:
            program = self._programs.get(key)
            if program is not None:
                self._programs.move_to_end(key)
            return program

    def put(self, key: tuple, program: _LazyProgram) -> None:
        with self._lock:
            self._programs[key] = program
            self._programs.move_to_end(key)
            while len(self._programs) > max(self.limit, 1):
                self._programs.popitem(last=False)

    def values(self) -> list[_LazyProgram]:
        """The programs kept, least recently used first (a copy)."""
        with self._lock:
            return list(self._programs.values())

    def __len__(self) -> int:
        with self._lock:
            return len(self._programs)

    def clear(self) -> None:
        with self._lock:
            self._programs.clear()


LAZY_PROGRAMS = _LazyProgramCache()
_PLAIN_TENSORS = _xc.plain_torch_function_type()


def sync(*keep: Any, mode: "Mode | str | None" = None, overflow: str = "error") -> None:
    """Run the pending lazy computation of the tensors in `keep` narrowed, in place of
    `torch_xla.sync()` at the end of a lazy-tensor training step::

        model = x64guard.torch_xla.to_device(model)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for batch in batches:
            loss = model(**x64guard.torch_xla.to_device(batch)).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            x64guard.torch_xla.sync(model, optimizer, loss)

    torch-xla lowers and compiles its lazy graph inside `torch_xla.sync()` (C++
    `_xla_step_marker`) with no Python hook between the two, so x64guard cannot narrow
    the graph `torch_xla.sync()` runs. This is the closest equivalent: `keep` names what
    the step must compute (modules: parameters, their gradients, buffers; optimizers:
    their state; tensors; dicts, lists and tuples of these). Their joint pending graph is
    lowered, narrowed (once per graph: torch-xla's graph hash is the key), run as one
    program, and each tensor takes its result. Pending tensors not named in `keep` stay
    pending (torch-xla computes them, unnarrowed, when something reads them).

    With no arguments, the drop-in for `torch_xla.sync()`: every pending XLA tensor Python
    holds, and each keeps its dtype, as torch-xla's sync keeps it (an int64 tensor stays
    int64 over its int32 result, a GuardedTensor: nothing 64-bit on the device); what it
    cannot find, it warns about (`sync-pending`). Tensors named directly (a loss, a greedy
    token) come back narrowed, as the backend's outputs do (an int64 argmax becomes int32).
    Parameters, buffers and optimizer state
    must already be 32-bit (move models with `to_device`): a 64-bit one is refused, not
    narrowed behind the model's back.
    """
    _outside.check_lazy_reads()      # torch-xla's own compiles since the previous sync: said, never silent
    _outside.arm()
    resolved = resolve_mode(mode)
    policy = resolve_overflow(overflow).value
    device = xla_device()
    if keep:
        _sync_tensors(targets_of(keep), resolved, policy, device)
        return
    left = _sync_live(resolved, policy, device)
    if left:
        shapes = ", ".join(shape for shape in list(left.values())[:6]) + (", ..." if len(left) > 6 else "")
        finding = Finding(Kind.SYNC_PENDING, Severity.WARNING, "sync", "the lazy step",
                          f"{len(left)} XLA tensor(s) with pending computations ({shapes}) have no Python object "
                          "x64guard.torch_xla.sync can find (autograd's internals, a tensor held only by C++); "
                          "torch-xla will compute them at full width, unnarrowed, when they are read or at its own "
                          "next sync. Name what the step must keep: x64guard.torch_xla.sync(model, optimizer, loss)")
        import warnings

        warnings.warn(X64GuardWarning(f"x64guard.torch_xla.sync: {finding.message}"), stacklevel=2)


def _sync_live(resolved: Mode, policy: str, device: torch.device) -> dict[int, str]:
    """The drop-in sync: the tensors x64guard tracks (live.py); then, only when torch-xla's
    live-tensor report still names pending tensors, those the collector's young generations
    hold, then those of the whole heap. What stays pending even then (torch-xla tensor id ->
    shape), for the caller to warn about."""
    device_str = str(device)
    candidates = LIVE.candidates()
    _sync_refusing(LIVE.targets(candidates), resolved, policy, device)
    left = LIVE.left_pending(device_str)
    known = None      # (built only when something is left: most steps leave nothing)
    for young_only in (True, False):
        if not left:
            break
        known = {id(t) for t in candidates} if known is None else known
        found = scan(young_only, known)
        known.update(id(t) for t in found)
        _sync_refusing(LIVE.targets(found, wanted=set(left)), resolved, policy, device)
        left = LIVE.left_pending(device_str)
    return left


@contextlib.contextmanager
def step(*, mode: "Mode | str | None" = None, overflow: str = "error") -> Iterator[None]:
    """A lazy step whose mid-step reads run narrowed::

        for batch in batches:
            with x64guard.torch_xla.step():
                loss = model(**batch).loss     # Hugging Face's masks read `padding_mask.all()`
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
            x64guard.torch_xla.sync(model, optimizer, loss)

    A read of a pending XLA tensor (`.item()`, `bool(t)` / `if t:`, `int(t)`, `float(t)`,
    `.tolist()`, `.cpu()`, `.to("cpu")`, and `nonzero()`, whose shape needs the values) makes
    torch-xla compile and run that tensor's graph
    itself, at full width; inside `step()` x64guard runs it instead, narrowed as `sync`
    runs a step (once per graph, cached), and the read returns the narrowed value (an int64
    tensor's `.cpu()` is widened back to int64 on the host). The tensor keeps its dtype.
    Printing a pending tensor is not intercepted (torch-xla computes it; the next sync
    warns). Inside the scope torch-xla also records each op's Python stack, so that the
    findings of `sync` name the model's lines. The scope is a torch function mode: every
    torch op in it pays a small Python call; do not wrap compiled functions in it."""
    resolved, policy = (None if mode is None else resolve_mode(mode)), resolve_overflow(overflow).value
    # torch-xla records each op's Python stack meanwhile: findings of the step's graphs name its lines
    with _reads.NarrowedReads(functools.partial(read_narrowed, mode=resolved, policy=policy)), \
            _xc.python_frames_recorded():
        yield


def read_narrowed(tensor: torch.Tensor, *, mode: Mode | None, policy: str) -> torch.Tensor:
    """Run `tensor`'s pending graph narrowed; return its narrowed device data. A tensor
    narrowed to another dtype becomes a pending convert of that data (`narrow_alias`),
    so that PyTorch still sees its dtype."""
    alias = narrow_alias(tensor)
    if alias is not None:
        return alias
    resolved = mode or resolve_mode(None)
    _sync_tensors([SyncTarget("a tensor read in the step", tensor, False)], resolved, policy, xla_device(),
                  keep_dtypes=True)
    alias = narrow_alias(tensor)
    return alias if alias is not None else tensor.detach()


def _take_keeping_dtype(tensor: torch.Tensor, narrowed: torch.Tensor) -> None:
    """`tensor` takes `narrowed`, its value at 32 bits, and keeps its own dtype: a pending
    convert of that data, which x64guard's programs read through (`narrow_alias`, as
    `to_device`'s ids), and a GuardedTensor, so that a read of it runs narrowed too (a
    plain tensor's `.cpu()` would have torch-xla compile the convert, at 64 bits)."""
    _xc.replace_data(tensor, narrowed.to(tensor.dtype))
    held_over(tensor, narrowed)


def _sync_refusing(tensors: list[SyncTarget], resolved: Mode, policy: str,
                   device: torch.device) -> None:
    """_sync_tensors for a sync without arguments: tensors it refused (an overflow, a
    64-bit parameter) stay pending, as torch-xla left them, and later syncs without
    arguments leave them alone instead of refusing again for an earlier step."""
    tensors = [item for item in tensors if not LIVE.refused_before(item.tensor)]
    try:
        _sync_tensors(tensors, resolved, policy, device, keep_dtypes=True)
    except X64GuardError:
        LIVE.note_refused([tensor for _, tensor, _ in tensors])
        raise


def _sync_tensors(tensors: list[SyncTarget], resolved: Mode, policy: str, device: torch.device,
                  keep_dtypes: bool = False) -> None:
    """Run the joint pending graph of `tensors` narrowed; each tensor takes its result:
    narrowed (an int64 loss becomes int32), or with `keep_dtypes` its own dtype kept
    (`_take_keeping_dtype`: a sync without arguments, a read)."""
    device_str = str(device)
    if not tensors:
        return
    wide = [f"{path} ({t.dtype})" for path, t, state in tensors if state and t.dtype in NARROW_DTYPE]
    if wide and resolved is not Mode.ALLOW:
        raise refusal(Kind.SYNC_64BIT_TENSOR, "sync", f"{', '.join(wide[:5])} would take a narrowed result in place; "
                      "x64guard does not narrow the parameters, buffers or optimizer state of a model behind its "
                      "back. Move the model and its inputs with x64guard.torch_xla.to_device")
    pending = [t for _, t, _ in tensors]
    key = (resolved, policy, _xc.graph_hash(pending))
    with TRACE_LOCK:
        ids, values = _xc.graph_inputs(pending)
        lazy = LAZY_PROGRAMS.get(key)
        if lazy is None:    # (looked up under the trace lock: two threads do not compile one graph twice)
            lazy = _compile_lazy(pending, ids, values, resolved, policy, device)
            LAZY_PROGRAMS.put(key, lazy)
        taken = [value for k, value in enumerate(values) if k != lazy.seed_index]
        dtypes = lazy.dtypes[:len(taken)]
        # sentinel scalars (lowering.scalar_input) are narrowed by their own rule; the other
        # 64-bit constants in one readback, cached per device buffer (constants.py)
        inputs = narrowed_constants(taken, [v.dtype if j in lazy.scalars else d for j, (v, d) in
                                            enumerate(zip(taken, dtypes))], "an input of the lazy graph", device)
        scalars = {j: taken[j] for j in lazy.scalars if j < len(taken) and taken[j].dtype is not dtypes[j]}
        for j, moved in narrowed_scalars(scalars, dict(enumerate(dtypes)), lazy.scalars, device).items():
            inputs[j] = moved
        if lazy.rng is not None:
            inputs.append(rng_words(lazy.rng, device, device_str))
        ordered = [inputs[k] for k in lazy.program.order]
        results = lazy.program.run(ordered)
    with _PLAIN_TENSORS():   # a GuardedTensor's `.data =` as a plain tensor's, without its __torch_function__
        for tensor, result in zip(pending, results):
            if keep_dtypes and result.dtype is not tensor.dtype:
                _take_keeping_dtype(tensor, result)
            else:
                _xc.replace_data(tensor, result)
    COUNTERS["calls"] += 1


def _compile_lazy(pending: list[torch.Tensor], ids: list, values: list, mode: Mode, overflow: str,
                  device: torch.device) -> _LazyProgram:
    device_str = str(device)
    COUNTERS["traces"] += 1
    # the Python lines torch-xla recorded for the step's ops (inside xt.step()) reach the locations
    with torch_xla_failures("sync", "lowering the lazy graph"), _xc.python_frames_recorded():
        bytecode = _xc.stablehlo_bytecode(pending, device_str)
    module, text, seed_index, rng = read_lowering(bytecode, ids, [t.dtype for t in pending])
    sources = StackSourceMap(excluded_source_dirs())
    sources.relocate(module)
    keep_wide = mode is Mode.ALLOW
    scalars = scalar_uses(module) if not keep_wide else {}
    checks = guard(module) if not keep_wide else None
    result = narrow_lowered(module, mode, overflow, sources)
    dtypes, in_types = [], []
    for k, value in enumerate(values):
        if k == seed_index:
            continue
        dtype = value.dtype if keep_wide else NARROW_DTYPE.get(value.dtype, value.dtype)
        dtypes.append(dtype)
        in_types.append((tuple(value.shape), dtype))
    if rng is not None:
        in_types.append((rng.input_shape(), torch.int32))
    with torch_xla_failures("sync", "compiling the narrowed program"):
        program = Program(result.text, in_types, device, checks=checks,
                          share_key=_share.fingerprint(result.module, in_types, device_str))
    return _LazyProgram(program, dtypes, seed_index, rng, result, text, scalars)
