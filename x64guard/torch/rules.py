"""Which rule each intercepted torch function gets: the tables of factories.py,
arithmetic.py, indices.py and index_arguments.py, joined into one lookup."""

from __future__ import annotations

from typing import Callable

from x64guard.torch.arithmetic import ACCUMULATIONS, BINARY_OPERANDS, accumulate_rule, binary_rule, where_rule
from x64guard.torch.calls import both
from x64guard.torch.factories import DTYPE_DEFAULTS, dtype_default_rule
from x64guard.torch.index_arguments import INT32_ARGUMENTS, INT64_ARGUMENTS, widen_rule
from x64guard.torch.indices import INDEX_RESULTS

__all__ = ["DTYPE_DEFAULTS", "BINARY_OPERANDS", "ACCUMULATIONS", "INDEX_RESULTS", "INT64_ARGUMENTS",
           "INT32_ARGUMENTS", "RULES"]


def _build_rules() -> dict[Callable, Callable]:
    rules: dict[Callable, Callable] = {}
    for func in BINARY_OPERANDS:
        rules[func] = binary_rule
    for func in ACCUMULATIONS:
        rules[func] = accumulate_rule
    for func, entry in INDEX_RESULTS.items():
        rules[func] = entry.rule
    for func in both("where"):
        rules[func] = where_rule
    for func in list(INT64_ARGUMENTS) + list(INT32_ARGUMENTS):
        rules[func] = widen_rule
    for func in DTYPE_DEFAULTS:
        rules[func] = dtype_default_rule
    return rules


RULES = _build_rules()
