"""Building the program of one input signature: trace with 64-bit types, lower, narrow,
cross-check against the x32 trace, and decide which program runs.

Equal traces (once narrowed): the x64 program is narrowed and run, proven to be x32 JAX's
program. Different (library code that decides by jax_enable_x64 or by the dtype while
tracing), or an x64 trace that raises where the x32 one does not (a library mixing int64
and int32 under x64): mode error refuses; otherwise the x32 program itself runs (its answer
is x32 JAX's by construction), said once per function at INFO on the `x64guard` logger and
by a finding (`.lower(...).findings`), in place of the narrowing summary.

The user's Python runs twice per new signature: the x64 trace, then the x32 one (the
cross-check). Only where the x64 trace raises does it run again: at most three more x64
traces (`trace_x64`'s fallback widths), then the x32 one. Arrays the first run built and
kept (a lazily built table, a cache) are seen by the second as the first's values: the
comparison binds them to the x64 trace's own (`CrossCheck.kept`); the x32 program, which
holds them, never runs.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import threading
from typing import Any, Callable, NamedTuple

from x64guard.api import NarrowResult, narrow_module
from x64guard.errors import X64GuardError
from x64guard.findings import Finding, Kind
from x64guard.jax import _private, _private_lowering
from x64guard.jax.callbacks import callbacks_at_32_bits
from x64guard.jax.inputs import StaticArgs, narrow_aval, narrow_dtype, narrowed_spec, widened_spec
from x64guard.jax.program import CompileAhead, Program
from x64guard.jax.trace_check import CrossCheck, constants_from_x64_trace, cross_check, trace_x32
from x64guard.jax.trace_messages import (identity_convert_finding, matched_constant_message, not_lowered_message,
                                         trace_differs_message)
from x64guard.jax.user_frames import raising_line, user_place, warn_at_user_line, warn_messages_at_user_line
from x64guard.modes import Mode
from x64guard.passes.tables import CONSTANT_OPS, DEFAULT_TARGET


class NarrowedX64(NamedTuple):
    lowered: Any                 # JAX's Lowered of the x64 program
    convention: Any              # its calling convention (_private_lowering.calling_convention)
    result: NarrowResult
    summary: list                # what the narrowing would warn (issued if this program runs)
    callbacks_converted: bool    # host callbacks' 64-bit operands converted to 32 bits before them


class Traced(NamedTuple):
    traced: Any                  # JAX's Traced of the x64 program
    specs: list                  # the input specs it was traced with


class RunX32(NamedTuple):
    """`_choose`'s answer when x32 JAX's own program runs: the finding that says why."""

    fallback: Finding


class X64NotLowered(Exception):
    """JAX could not lower the x64 trace (the cause is JAX's error)."""


_LOGGER = logging.getLogger("x64guard")

# Why a trace that closes over tracers cannot be built (added to JAX's own error).
_KEPT_TRACER = ("x64guard.jit: the function reached a traced value it does not take as an argument (kept from an "
                "earlier trace: a cache or a lazily built table holding jax arrays made while tracing another "
                "signature, as jax.jit refuses too; or a value of a transformation around x64guard.jit). Pass it "
                "as an argument, or build it before the first call.")

class Chosen(NamedTuple):
    """The program that runs: the narrowed x64 one or x32 JAX's."""

    traced: Any
    lowered: Any
    convention: Any
    result: NarrowResult
    compile_ahead: "CompileAhead | None"


class SaidOnce:
    """Whether the function has said (at INFO) that x32 JAX's program runs: once per function."""

    def __init__(self):
        self._said = False
        self._lock = threading.Lock()

    def first(self) -> bool:
        with self._lock:
            first, self._said = not self._said, True
        return first


@dataclasses.dataclass(frozen=True)
class FunctionSettings:
    """What building a program needs of one x64guard.jit function, handed over by it
    (function.py), never read from its private fields."""

    fun: Callable                # the user's function
    traced_fun: Callable         # x64guard's wrapper of it: JAX's caches forget its traces (release_traces)
    jit_traced: Any              # jax.jit(traced_fun, **jit_kwargs)
    statics: StaticArgs
    overflow: str
    target: str
    flat_fun: Callable           # (in_tree, static) -> the flat function a Program holds
    derive: Callable             # (key, make, trace_dtypes) -> the function of a vmap or VJP of it
    said_once: SaidOnce


@dataclasses.dataclass(frozen=True)
class Call:
    """One signature being built: the function's settings, its input tree and static arguments."""

    settings: FunctionSettings
    in_tree: Any
    static: Any

    def trace(self, specs):
        spec_args, spec_kwargs = self.in_tree.unflatten(specs)
        args, kwargs = self.settings.statics.merge(spec_args, spec_kwargs, self.static)
        return _private.trace_x64(self.settings.jit_traced, tuple(args), kwargs)

    def trace_x32(self, specs):
        return trace_x32(self.settings.jit_traced, self.settings.statics, self.in_tree, specs, self.static)


def build_program(settings: FunctionSettings, in_tree, specs, static, paths, mode: Mode,
                  compile_ahead: bool = False) -> Program:
    """The program for one signature, traced at `specs`. Once it is built, JAX's trace
    caches forget x64guard's traces (_private.release_traces says why)."""
    call = Call(settings, in_tree, static)
    try:
        chosen, specs = _build(call, specs, mode, compile_ahead)
        return _program(call, chosen, specs, paths)
    finally:
        _private.release_traces(settings.traced_fun)


def _build(call: Call, specs: list, mode: Mode, compile_ahead: bool) -> tuple[Chosen, list]:
    """The chosen program and the specs traced at."""
    settings = call.settings
    try:
        traced, specs = trace_x64(call, specs)
    except X64GuardError:
        raise
    except Exception as error:
        return _x64_trace_failed(call, specs, error, mode), specs
    narrowed, ahead = None, None
    if compile_ahead:
        narrowed, ahead = _narrow_and_start_compile(settings, traced, mode)
    # The cross-check: the x32 trace of the same call.
    check = cross_check(settings.jit_traced, settings.statics, traced, call.in_tree, specs, call.static)
    choice = _choose(settings, traced, check, narrowed, ahead, mode)
    if not isinstance(choice, RunX32):
        return choice, specs
    traced32 = check.traced32
    if constants_from_x64_trace(traced, traced32):
        # The x32 trace holds the x64 trace's conversions of closed-over NumPy arrays
        # (jaxlib's cache, _private.release_traces), which JAX cannot lower at 32 bits.
        # Traced again once nothing holds the x64 trace, it converts them itself.
        del traced, check, narrowed, ahead, traced32
        _private.release_traces(settings.traced_fun)
        traced32 = call.trace_x32(specs)
        if _private.closed_over_tracers(traced32):  # this third run reused arrays the second kept
            message = kept_state_message(len(_private.closed_over_tracers(traced32)), None, checked=False)
            raise X64GuardError(f"x64guard.jit: {message}", [Finding(Kind.TRACE_SHARED_STATE, "error", "trace",
                                                                     user_place(), message)])
    return x32_program(settings, traced32, choice.fallback, mode), specs


def trace_x64(call: Call, specs: list) -> Traced:
    """The x64 trace at `specs`, else at the fallbacks' widths; if every one fails, the first
    error. A first trace that closes over tracers raises JAX's UnexpectedTracerError (as
    jax.jit does); a fallback's that does (kept by the attempt before it) counts as failed."""
    try:
        traced = call.trace(specs)
    except X64GuardError:
        raise
    except Exception as own_width_error:
        # Code written for 64-bit inputs may not trace with 32-bit ones and x64 on
        # (lax.clamp(-1.0, x, 1.0), bitcast_convert_type(x, jnp.int64), a while_loop
        # carry mixing the input with 64-bit values): trace the x64 program it was
        # written as, its 32-bit inputs widened; if that fails too, the first error.
        # uint32 inputs are widened last: they are usually raw PRNG keys, which must stay
        # uint32 (blackjax's and numpyro's samplers mix a float32 position with float64
        # values in lax.cond under x64, and take raw keys beside it).
        # Last, every input at its 32-bit width (a library's own int32 values beside an
        # input widened to int64 fail lax.cond's equal-types check, issue 22 item 4):
        # what x32 JAX traces; the narrowing pass still checks the program.
        tried = [specs]
        candidates = [[widened_spec(s, uint32=False) for s in specs], [widened_spec(s) for s in specs],
                      [narrowed_spec(s) for s in specs]]
        for widened in candidates:
            if any(all(w is t for w, t in zip(widened, before)) for before in tried):
                continue
            tried.append(widened)
            try:
                traced = call.trace(widened)
            except Exception:
                continue
            if not _private.closed_over_tracers(traced):
                return Traced(traced, widened)
        raise own_width_error from None
    kept = _private.closed_over_tracers(traced)
    if kept:
        raise _private.escaped_tracer_error(kept[0], _KEPT_TRACER)
    return Traced(traced, specs)


def _x64_trace_failed(call: Call, specs: list, error: Exception, mode: Mode) -> Chosen:
    """The x64 trace raised at every width (a library that meets int64 and int32 in one
    lax.cond under x64). Where x32 JAX traces the call, its program runs, with one
    trace-failed finding naming the line whose JAX call raised (mode error: refused with
    it); where it does not, the x64 trace's error is raised, as before."""
    settings = call.settings
    line, name = raising_line(error), type(error).__name__
    # What the failed traces made (conversions of closed-over NumPy arrays at 64 bits,
    # jaxlib's cache: _private.release_traces) is collected before the x32 trace.
    _private.release_traces(settings.traced_fun)
    try:
        traced32 = call.trace_x32(specs)
    except Exception:  # noqa: BLE001  (x32 JAX raises too: the x64 trace's error is the user's)
        raise error from None
    if _private.closed_over_tracers(traced32):  # values kept from the failed x64 trace
        raise error from None
    message = trace_failed_message(error, line, ran_x32=mode is not Mode.ERROR)
    if mode is Mode.ERROR:
        raise X64GuardError(f"x64guard.jit: {message}", [Finding(Kind.TRACE_FAILED, "error", name, line, message)]) \
            from error
    return x32_program(settings, traced32, Finding(Kind.TRACE_FAILED, "info", name, line, message), mode)


def _narrow_and_start_compile(settings: FunctionSettings, traced, mode: Mode):
    """A direct call: lower, narrow and start compiling before the cross-check, which then
    runs while XLA compiles: (NarrowedX64, CompileAhead or None). Where lowering or
    narrowing raises, (None, None): `_choose` does it again after the cross-check, and
    raises there unless x32's program runs (the error path pays the narrowing twice)."""
    try:
        narrowed = narrowed_x64(settings, traced, mode)
    except Exception:  # noqa: BLE001  (done again, and raised, by _choose)
        return None, None
    ahead = CompileAhead.start(functools.partial(
        _private_lowering.compile_with_avals, narrowed.lowered, narrowed.result.module,
        [narrow_aval(a) for a in traced.jaxpr.in_avals],
        tuple(narrow_aval(a) for a in narrowed.convention.out_avals)))
    return narrowed, ahead


def _choose(settings: FunctionSettings, traced, check: CrossCheck, narrowed: "NarrowedX64 | None", ahead,
            mode: Mode) -> Chosen | RunX32:
    """Which program runs, by the cross-check (the module docstring says how)."""
    difference = check.difference
    # x32's trace can run in place of the x64 one: it exists and holds no value of the x64 trace.
    traced32 = check.traced32 if not check.kept else None
    if difference is not None and traced32 is not None and mode is not Mode.ERROR:
        return RunX32(Finding(Kind.TRACE_DIFFERS, "info", difference.primitive, difference.location or "?",
                              trace_differs_message(difference, ran_x32=True)))
    if narrowed is None:
        try:
            narrowed = narrowed_x64(settings, traced, mode)
        except X64NotLowered as error:
            return _x64_not_lowered(error, traced32, mode)
    result = narrowed.result
    matched = [f for f in result.findings if f.kind == Kind.DTYPE_CONSTANT and f.op in CONSTANT_OPS]
    if difference is None and traced32 is not None and matched:
        # The pass matched a constant's value to a finfo(float64) expression. The
        # traces being equal, x32 JAX's trace holds its plain rounding: a literal
        # that happens to equal the expression (TFP's owens_t coefficient
        # -0.99999999999999977 = -(1 - eps)), or a constant a lowering rule made.
        # x32's program is right in both cases (said at INFO, as any run of x32's program).
        return RunX32(dataclasses.replace(matched[0], severity="info",
                                          message=matched_constant_message(matched[0])))
    kept = _kept_state_finding(check, mode)
    if difference is not None and kept is None:  # mode error, and the narrowing itself passed
        message = trace_differs_message(difference, ran_x32=False)
        finding = Finding(Kind.TRACE_DIFFERS, "error", difference.primitive, difference.location or "?", message)
        raise X64GuardError(f"x64guard.jit: {message}", [finding])
    warn_messages_at_user_line(narrowed.summary)
    converts = identity_convert_finding(check, narrowed.callbacks_converted)
    for finding in (converts, kept):
        if finding is not None:
            result.findings.append(finding)
    if kept is not None:
        report(settings, kept)
    return Chosen(traced, narrowed.lowered, narrowed.convention, result, ahead)


def _kept_state_finding(check: CrossCheck, mode: Mode) -> Finding | None:
    """Where the x32 trace reused arrays the x64 trace built (`CrossCheck.kept`), its program
    cannot run: compared through them and equal, an info finding; different, the narrowed
    x64 program runs unchecked with a warning (mode error: refused). None: nothing kept."""
    if not check.kept:
        return None
    difference = check.difference
    location = (difference.location if difference is not None else "") or "?"
    message = kept_state_message(len(check.kept), difference, checked=difference is None)
    if difference is None:
        return Finding(Kind.TRACE_SHARED_STATE, "info", "trace", location, message)
    if mode is Mode.ERROR:
        raise X64GuardError(f"x64guard.jit: {message}",
                            [Finding(Kind.TRACE_SHARED_STATE, "error", difference.primitive, location, message)])
    return Finding(Kind.TRACE_SHARED_STATE, "warning", difference.primitive, location, message)


def report(settings: FunctionSettings, finding: Finding) -> None:
    """Say what `finding` says: a warning at the user's line; info once per function, at
    INFO on the `x64guard` logger (`logging.getLogger("x64guard").setLevel(logging.INFO)`
    and a handler to hear it; mode error refuses instead)."""
    if str(finding.severity) == "warning":
        warn_at_user_line(finding.message)
    elif settings.said_once.first():
        _LOGGER.info("x64guard: %s", finding.message)


def _x64_not_lowered(error: X64NotLowered, traced32, mode: Mode) -> RunX32:
    """JAX could not lower the x64 trace. x32 JAX's program runs in its place (its answer
    is x32 JAX's by construction); mode error refuses, since nothing narrowed was checked;
    a function x32 JAX cannot trace either gets JAX's own error."""
    cause = error.__cause__
    if traced32 is None:
        raise cause
    op, location, message = not_lowered_message(cause, x64=True, ran_x32=mode is not Mode.ERROR)
    if mode is Mode.ERROR:
        finding = Finding(Kind.TRACE_NOT_LOWERED, "error", op, location, message)
        raise X64GuardError(f"x64guard.jit: {message}", [finding]) from cause
    return RunX32(Finding(Kind.TRACE_NOT_LOWERED, "warning", op, location, message))


def _program(call: Call, chosen: Chosen, specs, paths) -> Program:
    settings, convention = call.settings, chosen.convention
    trace_dtypes = tuple(s.dtype for s in specs)
    name = getattr(settings.fun, "__name__", "fun")
    return Program(
        name=name if name.isidentifier() else "fun", narrowed=chosen.result, derive=settings.derive,
        flat_fun=settings.flat_fun(call.in_tree, call.static), in_tree=call.in_tree, out_tree=chosen.traced.out_tree,
        trace_dtypes=trace_dtypes, trace_out_dtypes=tuple(a.dtype for a in convention.out_avals),
        in_dtypes=tuple(narrow_dtype(d) or d for d in trace_dtypes), paths=paths,
        out_avals=tuple(narrow_aval(a) for a in convention.out_avals),
        effects=convention.effects, ordered_effects=convention.ordered_effects,
        kept_var_idx=convention.kept_var_idx,
        kept_in_avals=tuple(narrow_aval(a) for a in convention.in_avals),
        in_shardings=convention.in_shardings, out_shardings=convention.out_shardings,
        num_devices=convention.num_devices, host_callbacks=convention.host_callbacks,
        keepalive=convention.keepalive, lowered=chosen.lowered,
        in_avals=tuple(narrow_aval(a) for a in chosen.traced.jaxpr.in_avals), _compile_ahead=chosen.compile_ahead)


def narrowed_x64(settings: FunctionSettings, traced, mode: Mode) -> NarrowedX64:
    """The x64 trace lowered and narrowed; the narrowing's summary warning listed, not
    issued (it is issued only if this is the program that runs)."""
    callbacks = callbacks_at_32_bits(traced.jaxpr)
    try:
        lowered = _private.lower_traced(traced, callbacks)
    except X64GuardError:
        raise
    except Exception as error:  # noqa: BLE001  (_choose decides what runs instead)
        raise X64NotLowered() from error
    convention = _private_lowering.calling_convention(lowered)
    # JAX's own cached module: narrow works on a clone.
    result = narrow_module(convention.module, mode=mode, overflow=settings.overflow, target=settings.target)
    return NarrowedX64(lowered, convention, result, result.warnings, callbacks is not None)


def x32_program(settings: FunctionSettings, traced32, fallback: Finding, mode: Mode) -> Chosen:
    """The x32 trace lowered and run in place of the narrowed x64 one (its answer is x32
    JAX's by construction), `fallback` saying why (`report`)."""
    try:
        lowered = _private.lower_traced_x32(traced32)
    except Exception as error:  # noqa: BLE001  (refused: neither program can be built)
        op, location, message = not_lowered_message(error, x64=False, ran_x32=False)
        finding = Finding(Kind.TRACE_NOT_LOWERED, "error", op, location, f"{message}; before that: {fallback.message}")
        raise X64GuardError(f"x64guard.jit: {finding.message}", [finding]) from error
    convention = _private_lowering.calling_convention(lowered)
    # x32 JAX's own module still holds 64-bit values where JAX traces them with x64 off
    # (iota_2x32_shape's uint64 counters): narrowed, the pass computes them in 32 bits,
    # exactly (`rng-counters`), so that nothing 64-bit reaches the device. Its warnings
    # are issued only for a target profile (Neuron: what neuronx-cc would reject); the
    # fallback's own warning says what happened. If the pass refuses x32 JAX's module,
    # that module runs as it is: x32 JAX's program, 64-bit values and all.
    try:
        result = narrow_module(convention.module, mode=mode, overflow=settings.overflow, target=settings.target)
    except X64GuardError:
        if settings.target != DEFAULT_TARGET:
            raise  # what the target rejects, as before
        result = narrow_module(convention.module, mode=Mode.ALLOW, overflow=settings.overflow, target=settings.target)
    if settings.target != DEFAULT_TARGET:
        warn_messages_at_user_line(result.warnings)
    result.findings.append(fallback)
    report(settings, fallback)
    return Chosen(traced32, lowered, convention, result, None)


def kept_state_message(count: int, difference, checked: bool) -> str:
    """What a trace-shared-state finding says: the x32 trace reused `count` arrays the x64
    trace built; compared through them (`checked`) or not comparable (`difference`)."""
    what = (f"{user_place()}: the function kept {count} array(s) it built while x64guard.jit traced it (a lazily "
            "built table, a cache), and its next trace (with x64 off) reused them")
    if checked:
        return (f"{what}; the two traces are the same program through them, so the narrowed x64 program runs (how "
                "those arrays were computed was traced once, with x64 on) [trace-shared-state]")
    if difference is None:  # x32's program was to run, and its trace, made again, reused them
        return (f"{what}, so x32 JAX's program, which is to run here, cannot be traced: refused. Build such "
                "arrays before the first call, or pass them as arguments [trace-shared-state]")
    place = f"{difference.primitive} (line {difference.location or 'unknown'})"
    return (f"{what}, so x32 JAX's program cannot be traced here and the two traces differ from {place} on. "
            "x64guard runs the narrowed x64 program without the check that it is x32 JAX's: code that decides by "
            "jax_enable_x64 or by the dtype while tracing would run its 64-bit choice in 32 bits. Build such arrays "
            "before the first call (or pass them as arguments) to restore the check [trace-shared-state]")


def trace_failed_message(error: BaseException, line: str, ran_x32: bool) -> str:
    """What a trace-failed finding says: the x64 trace raised `error` at `line`, x32's did not."""
    first = (str(error).strip().splitlines() or [""])[0][:300]
    what = ("x64guard runs the x32 program (JAX's trace with x64 off: x32 JAX's answer)" if ran_x32 else
            "there is no x64 program to narrow; mode 'warn' runs x32 JAX's program instead")
    return (f"{user_place()}: the function cannot be traced with x64 on: {type(error).__name__} at {line}: {first} "
            "(code that mixes 64-bit values, such as jax.random.categorical's int64 result, with 32-bit ones "
            f"where JAX requires equal types); with x64 off it traces, so {what} [trace-failed]")

