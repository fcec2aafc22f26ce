"""x64guard.torch: `set_default_int_dtype`, the integer twin of `torch.set_default_dtype`
proposed in pytorch/pytorch#141994, delivered as a library::

    import torch, x64guard.torch as xt

    xt.set_default_int_dtype(torch.int32)      # this thread, until changed
    torch.tensor([1, 2, 3]).dtype              # torch.int32
    with xt.default_int_dtype(torch.int16):    # this thread, restored on exit
        torch.arange(5).dtype                  # torch.int16

The default integer dtype decides what PyTorch would otherwise make int64 on its own:
tensors built from Python integers, bool tensors promoted with Python integers, integer
sums and counts, integer tensors created without a dtype, and the indices that
index-returning ops produce. Explicit `dtype=torch.int64` requests are honoured; setting
`torch.int64` restores PyTorch's own behaviour exactly (no mode, nothing intercepted).
Values that do not fit the default raise `DefaultIntOverflowError`; nothing wraps.

How: a `torch.overrides.TorchFunctionMode`, one subclass per dtype (torch.compile guards on
the types of the modes on the stack, so a graph compiled under int32 is never reused under
int16 or int64). The mode sees the calls a user makes (functions of `torch`, methods of
`torch.Tensor`, functions of `torch.nn.functional`) and nothing inside them. What it does
is in the rule modules' tables (rules.py joins them): which calls get a `dtype=` default
(DTYPE_DEFAULTS), which binary ops promote bools or range-check Python integers
(BINARY_OPERANDS), which reductions accumulate in the default (ACCUMULATIONS), which
results hold indices (INDEX_RESULTS), which arguments PyTorch requires to be int64
(INT64_ARGUMENTS) or at least int32 (INT32_ARGUMENTS).

Eager CPU/CUDA tensors take PyTorch's own index ops and convert their int64 result. While
torch.compile or torch.export trace, and on devices that build graphs (XLA), argmax/argmin,
max/min over a dim, nonzero/argwhere and count_nonzero are computed without any int64
intermediate, so the captured graph holds no int64 for them.

Threads: the setting belongs to the calling thread (PyTorch's torch-function mode stack is
thread-local, so a mode cannot reach other threads); every thread starts at int64. This is
unlike torch.set_default_dtype (process-wide) and like `x64guard.mode`.

The modules: bounds.py (the dtypes a default may be, DefaultIntOverflowError, the range
checks), calls.py (reading a call's arguments), the rules and their tables by kind
(factories.py, arithmetic.py, indices.py, index_arguments.py; rules.py joins them),
default_int.py (the mode and the API), dynamo_patch.py (torch.compile support) and
_private.py (every private PyTorch call, with the versions it was seen in).
"""

from __future__ import annotations

from x64guard.versions import check_torch_version

check_torch_version()  # before any of PyTorch's private calls: a clear message for an untested torch

from x64guard.torch.bounds import ALLOWED_DTYPES, DefaultIntOverflowError  # noqa: E402
from x64guard.torch.default_int import (default_int_dtype, get_default_int_dtype,  # noqa: E402
                                        set_default_int_dtype)
from x64guard.torch.rules import (ACCUMULATIONS, BINARY_OPERANDS, DTYPE_DEFAULTS,  # noqa: E402
                                  INDEX_RESULTS, INT32_ARGUMENTS, INT64_ARGUMENTS)

__all__ = ["set_default_int_dtype", "get_default_int_dtype", "default_int_dtype", "DefaultIntOverflowError",
           "ALLOWED_DTYPES"]

# The public names say they are x64guard.torch's (help(), tracebacks, pickles), wherever
# in the package they are defined.
for _public in (DefaultIntOverflowError, default_int_dtype, get_default_int_dtype, set_default_int_dtype):
    _public.__module__ = __name__
del _public
