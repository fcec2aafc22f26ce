"""A test helper: a module narrowed by the pass, then checked once more as a whole
(passes/legality.py's whole-module check), the front ends' and guards' edits included."""

from __future__ import annotations

from jax.extend.mlir import ir

from x64guard.modes import Overflow
from x64guard.passes import NarrowX64Pass
from x64guard.passes.driver import PassRun
from x64guard.passes.legality import check_legality
from x64guard.passes.rewriter import Rewriter
from x64guard.passes.store import FindingsStore
from x64guard.passes.tables import DEFAULT_TARGET, TARGET_PROFILES
from x64guard.passes.types import TypeConverter


def narrowed_is_legal(module) -> None:
    """The pass checks op by op as it narrows; this is the whole module checked once more,
    on its own, the guard's and the dtype fix's ops included."""
    NarrowX64Pass().apply(module)
    converter = TypeConverter(module.context)
    run = PassRun(module.context, converter, FindingsStore(converter), Rewriter(), TARGET_PROFILES[DEFAULT_TARGET],
                  Overflow.ERROR)
    with module.context, ir.Location.unknown():
        check_legality(module, run)
