"""What x64guard.jit's cross-check says (trace_check.py compares the traces): the messages of
a trace difference and of a trace JAX could not lower, and the `identity-convert` finding
that names converts to the same type where the narrowed module and x32 JAX's differ by them."""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from x64guard.findings import Finding, Kind
from x64guard.jax import _private
from x64guard.jax.trace_check import CrossCheck
from x64guard.jax.user_frames import user_place


def trace_differs_message(difference, ran_x32: bool) -> str:
    user = user_place()
    what = ("x64guard runs the x32 program (JAX's trace with x64 off: x32 JAX's answer) instead of narrowing the "
            "x64 one" if ran_x32 else
            "narrowing cannot reproduce x32 JAX's answer there. Call it under jax.jit with x64 off, or keep it in "
            "64 bits (mode='allow')")
    if difference.lowering:
        return (f"{user}: the library primitive {difference.primitive} (library line "
                f"{difference.location or 'unknown'}) lowers to another program with x64 on than with x64 off: its "
                "lowering runs library code, which can decide by jax_enable_x64 or the dtype, or emit a host "
                f"callback traced for 64-bit values (equinox's error checks in lineax, optimistix, diffrax: "
                f"throw=False or EQX_ON_ERROR=nan remove it); {what} [trace-differs]")
    return (f"{user}: the function traced with x64 on is another program than with x64 off (code that decides by "
            f"jax_enable_x64 or by the dtype while tracing), first at {difference.primitive} (library line "
            f"{difference.location or 'unknown'}): x64 trace `{difference.x64}`, x32 trace `{difference.x32}`; "
            f"{what} [trace-differs]")


# JAX's lowering errors name the op and its source: `'stablehlo.add' op requires ...` and
# `at loc("jit(f)/add"(callsite("f"("/path/file.py":12:4 to :9) ...`.
_MLIR_OP = re.compile(r"'([a-z_]+\.[a-z_0-9.]+)' op")
_LOC_OP = re.compile(r'loc\("[^"]*?/([^"/]+)"')
_LOC_LINE = re.compile(r'"([^"]+)":(\d+):\d+')


def not_lowered_message(error: BaseException, x64: bool, ran_x32: bool) -> tuple[str, str, str]:
    """(op, location, message) for a trace JAX could not lower: the op and source line
    its error names ('?' where it names none), its first line, the known cause, what to do."""
    text = str(error)
    op = _MLIR_OP.search(text) or _LOC_OP.search(text)
    line = _LOC_LINE.search(text)
    op_name, location = (op.group(1) if op else type(error).__name__), (f"{line.group(1)}:{line.group(2)}" if line else "?")
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    first = lines[0] if lines else type(error).__name__
    if first.endswith(":") and len(lines) > 1:  # "Cannot lower jaxpr with verifier errors:" then the reason
        first = f"{first} {lines[1]}"
    if x64:
        what = ("x64guard runs the x32 program (JAX's trace with x64 off: x32 JAX's answer) instead of narrowing "
                "the x64 one" if ran_x32 else "there is nothing narrowed to check; mode 'warn' runs x32 JAX's "
                "program instead")
        width, other = "x64", "x64 off"
    else:
        what, width, other = "refused: neither program can be built", "x32", "x64 on"
    return op_name, location, (
        f"{user_place()}: JAX could not lower the function's {width} trace ({first}; {op_name} at "
        f"{location}); {what}. A known cause: a NumPy array the function closes over was converted by JAX "
        f"earlier in this process with {other} and is still in use there (a jitted function's cached trace): "
        "jaxlib keeps one conversion per array, whatever jax_enable_x64 says, and a trace at the other width "
        "gets it. Pass such arrays as arguments, or hold them at the width you mean "
        "(np.asarray(table, np.float32)) [trace-not-lowered]")


class _Reason(NamedTuple):
    equation: Any        # where it is seen (None: no equation)
    what: str


def identity_convert_finding(check: CrossCheck, callbacks_converted: bool) -> Finding | None:
    """An info finding when the narrowed program may differ from x32 JAX's by converts to
    the type their operand already has, which compute nothing (None when nothing says so):
    the traces convert weak-typed values made strong (or the reverse) in different places,
    which the module does not record; a library primitive's lowerings differ only by them;
    an equation's lowering converts one operand of two widths to the other's type; or
    x64guard.jit converted host callback operands to 32 bits (x32 JAX's are 32-bit already).
    Located at the equation of the first reason."""
    reasons: list[_Reason] = []
    if len(check.converts64) != len(check.converts32):
        reasons.append(_Reason((check.converts64 or check.converts32)[0],
                               f"the x64 trace holds {len(check.converts64)} conversions that change no type "
                               f"once narrowed (weak-typed values made strong), the x32 trace "
                               f"{len(check.converts32)}"))
    if check.converts_in_lowerings:
        reasons.append(_Reason(check.converts_in_lowerings[0],
                               f"the library primitive {check.converts_in_lowerings[0].primitive.name} lowers "
                               "with such conversions at one width and not at the other"))
    if check.weak_scalars_folded and check.converts32:
        reasons.append(_Reason(check.weak_scalars_folded[0],
                               "a weak-typed float scalar the function computes is converted to 32 bits, which the "
                               "narrowed module folds and x32 JAX's module keeps (weak made strong)"))
    if check.merged_widths:
        reasons.append(_Reason(check.merged_widths[0],
                               f"{check.merged_widths[0].primitive.name} takes operands of two widths that narrow "
                               "to one type (its lowering converts one operand to the other's type)"))
    if callbacks_converted:
        reasons.append(_Reason(None, "x64guard.jit converts host callback operands to 32 bits before the callback"))
    if not reasons:
        return None
    first = reasons[0].equation
    location = (_private.equation_location(first) if first is not None else "") or user_place()
    return Finding(Kind.IDENTITY_CONVERT, "info", "convert", location,
                   f"{'; '.join(reason.what for reason in reasons)}: the narrowed module may hold converts x32 JAX's "
                   "does not, or lack some it holds, each a convert to the type its operand has, which computes "
                   "nothing: the same program")


def matched_constant_message(finding: Finding) -> str:
    user = user_place()
    return (f"{user}: a float64 constant at {finding.location} equals a finfo(float64) expression "
            f"({finding.message.split(':')[0]}), but the function traced with x64 off holds its plain rounding "
            "(a literal, not the expression): x64guard runs the x32 program (JAX's trace with x64 off: x32 JAX's "
            "answer) instead of narrowing the x64 one [dtype-constant]")

