"""Integer arithmetic that int32 cannot hold, on the torch side: the adapter of the core's
range analysis (x64guard/passes/overflow_checks.py).

The torch contract (docs/torch_xla.md, "Integer arithmetic"): the oracle of a PyTorch
program is eager PyTorch at int64, not x32 JAX. So before the core pass narrows a
torch-xla module, `x64guard.passes.overflow_checks.guard` adds a check of every int64 op
it cannot prove stays in int32 (program.py reads the flags after each call and raises
`integer-overflow`); what this module adds is how a check's location reads in the
message: the model's line, or why torch-xla recorded none.
"""

from __future__ import annotations

import re

_FILE_LINE = re.compile(r'"([^"]+)":(\d+):\d+')
_NAME_ONLY = re.compile(r'loc\("([^"]*)"\)')
NO_LINE = ("no Python line was recorded for it: in a lazy loop, run the step inside x64guard.torch_xla.step() to "
           "have it named")


def describe(location: str) -> str:
    """A location text as `file:line` (the first file location in it), else as it is and
    why no line (the lazy loop records Python lines only inside `step()`)."""
    match = _FILE_LINE.search(location)
    if match:
        return f"{match.group(1)}:{match.group(2)}"
    name = _NAME_ONLY.fullmatch(location)       # loc("aten__mul"): torch-xla's name of the op
    return f"{name.group(1) if name else location} ({NO_LINE})"
