"""x64guard's torch-xla front end: torch-xla graphs narrowed at the StableHLO level.

    torch.compile(model, backend="x64guard")              # a dynamo backend (entry point)
    x64guard.torch_xla.compile(model, mode=None, overflow="error")
    x64guard.torch_xla.narrow_exported(exported_program)  # torch.export programs
    x64guard.torch_xla.to_device(model_or_batch)          # 64-bit data narrowed on the host, then moved
    x64guard.torch_xla.sync(model, optimizer, loss)       # a lazy-tensor step, narrowed
    x64guard.torch_xla.sync()                             # the drop-in for torch_xla.sync()
    x64guard.torch_xla.NarrowingDeviceLoader(loader)      # MpDeviceLoader, batches narrowed on the host

How a graph runs: torch-xla traces it lazily at full width and lowers it to StableHLO
(`_get_stablehlo`, the lowering itself, not a serialized portable artifact); the front end
adapts torch-xla's spelling (erf, result dtypes: lowering.py), takes the random-number
generators' seed arithmetic out of the program (rng.py) and places every op at its model
line (source.py); `x64guard.narrow` narrows the module; the narrowed module becomes an
XlaComputation that torch-xla calls as one op of its lazy graph (the route torch-xla's own
`call_jax` takes), compiled once into torch-xla's computation cache and run from there on
every later call with the same input signature (`_run_cached_graph`, what torch-xla's own
dynamo backend does: program.py). Graphs that need gradients or write to their inputs go
through AOTAutograd first, as torch-xla's `openxla` backend does; their forward and
backward graphs are narrowed alike (backend.py).

Inputs are cast to 32 bits on the way in (on the host when they come from the host,
integers range-checked: boundary.py); outputs are 32-bit XLA tensors, but for CPU tensors
the graph makes from constants and shapes: its CPU part runs on the CPU, as PyTorch runs
it (mixed.py).

Only adapts: the narrowing is `x64guard.narrow`'s. What this package adds is torch-xla
plumbing, the boundary, and repairs of torch-xla 2.9 gaps met on the way (reductions over
an empty dim list, FFTs, which torch-xla runs on the CPU, its `custom_call @mhlo.erf`
spelling of erf, native_dropout's scale: repairs.py, fft.py, lowering.py). Every private
torch-xla call is in x64guard/torch_xla/_private.py.

The modules, in the order a graph meets them:
    base.py       the dtype table, the counters, the device
    repairs.py    dispatch repairs active while a graph is traced; fft.py: FFTs as XLA's fft
    failures.py   refusals, torch-xla's own failures; narrowing.py: the core pass, called with
                  the mode, overflow policy and target it is passed
    lowering.py   torch-xla's StableHLO read and adapted for the core pass
    tracing.py    a graph traced, narrowed, compiled; its inputs and outputs on each call
    boundary.py   64-bit tensors cast to 32 bits on their way in (cached per device buffer)
    program.py    a narrowed module as one op of torch-xla's lazy graph
    overflow.py   int64 arithmetic checked at run time (the core's passes/overflow_checks.py);
                  share.py: programs shared across traces
    backend.py    the dynamo backend and `compile`; mixed.py: graphs with a CPU part
    outside.py    64-bit work dynamo leaves outside the graphs, reported
    exported.py   `narrow_exported`; device.py: `to_device`; lazy.py: `sync` and `step`
    reads.py      mid-step reads run narrowed: `step`'s mode, and `GuardedTensor`, the
                  class `to_device` gives int64 tensors (and torch to what is computed from them)
"""

from __future__ import annotations

try:
    import torch  # noqa: F401
    import torch_xla  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("x64guard.torch_xla needs torch and torch-xla: pip install 'x64guard[torch-xla]' "
                      f"(torch==2.9.0, torch-xla==2.9.0) ({exc})") from exc

from x64guard.torch_xla import _private as _xc
from x64guard.versions import check_torch_xla_version

check_torch_xla_version()   # before anything else of torch-xla is touched

from x64guard.torch_xla.backend import backend, compile, compiled_graphs  # noqa: E402
from x64guard.torch_xla.base import BACKEND_NAME, NARROW_DTYPE, xla_device, counters  # noqa: E402
from x64guard.torch_xla.boundary import narrow_alias  # noqa: E402
from x64guard.torch_xla.device import to_device  # noqa: E402
from x64guard.torch_xla.exported import NarrowedProgram, narrow_exported  # noqa: E402
from x64guard.torch_xla.failures import TorchXlaFailure  # noqa: E402
from x64guard.torch_xla.reads import GuardedTensor  # noqa: E402
from x64guard.torch_xla.lazy import LAZY_PROGRAMS, step, sync  # noqa: E402
from x64guard.torch_xla.loader import NarrowingDeviceLoader  # noqa: E402

__all__ = ["backend", "compile", "narrow_exported", "to_device", "sync", "step", "NarrowedProgram", "NARROW_DTYPE",
           "counters", "TorchXlaFailure", "GuardedTensor", "NarrowingDeviceLoader"]
