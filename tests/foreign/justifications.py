"""Why a module of the foreign corpus may be refused: one row per finding kind, as data.

A refusal of the corpus passes only if every error finding's kind has a row here and the
row's `applies` accepts the module and the finding. A new kind of refusal (or an old kind
on a module it was not justified for) fails the corpus until someone writes down why it is
right to refuse.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from x64guard.findings import Finding

from tests.foreign.corpus import ForeignModule

# Ops whose 64-bit results (kept as the expected value of a testdata module) leave the
# 32-bit range for inputs in the 32-bit range: bit patterns of float64 or of a complemented
# uint64, and left shifts by up to 39 bits.
_WIDE_RESULTS = {"not", "bitcast_same_width", "shift_left"}


@dataclasses.dataclass(frozen=True)
class Justification:
    why: str
    applies: Callable[[ForeignModule, Finding], bool]


REFUSALS: dict[str, Justification] = {
    "constant-out-of-range": Justification(
        "a testdata module embeds the 64-bit expected result as a constant; for these ops the result "
        "is beyond int32/uint32 (a float64 bit pattern, ~x of a uint64, x << 39), so no 32-bit "
        "constant holds it and narrowing would check against another value",
        lambda module, finding: module.form == "testdata" and module.op.name in _WIDE_RESULTS
        and finding.op in ("stablehlo.constant", "check.expect_eq_const")),
    "shift-by-width": Justification(
        "a testdata module embeds the shift amounts as constants (up to 39): a 64-bit shift by 33 to 63 "
        "shifts out every bit of a 32-bit integer, where x32 JAX shifts a width-derived amount by 32 less; "
        "the module cannot say which it is, so x64guard refuses (docs/limits.md)",
        lambda module, finding: module.form == "testdata" and finding.op.startswith("stablehlo.shift_")),
}


def justified(module: ForeignModule, finding: Finding) -> str | None:
    """The reason `finding` may refuse `module`, or None when nothing justifies it."""
    row = REFUSALS.get(finding.kind)
    if row is not None and row.applies(module, finding):
        return row.why
    return None
