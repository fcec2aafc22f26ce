"""x64guard.jit: trace with 64-bit types for one function, run it narrowed.

`x64guard.jit(f)` traces `f` with jax_enable_x64 on for that trace only (thread-local,
restored on exit), lowers it once, narrows the lowering with the core pass and compiles
the narrowed module with the x64 lowering's own compile arguments (devices, shardings,
donation, host callbacks, effects): no jax.export round trip, no second lowering. A C++
dispatcher like jax.jit's runs later calls of a signature without Python.

It composes like any JAX function: inside an outer `jax.jit` (an `x64guard_call`
primitive whose lowering rule inlines the narrowed module), under `jax.vmap` (a batching
rule that narrows the vmapped function) and under `jax.grad` (a custom VJP that narrows
the x64 VJP).

Host callbacks (jax.debug.print/callback, pure_callback, io_callback, equinox's error_if)
run at 32 bits: the traced program is rewritten so that each callback receives what x32
JAX would give it and its declared 64-bit results come back narrowed (integers
range-checked), so the narrowed module's callbacks carry only 32-bit types.

Inputs: float32/complex64 data is traced at its own width (as x32 JAX traces it),
integers and 64-bit data at 64 bits (docs/jit.md, "Input widths", gives the data).

Only adapts: all narrowing is `x64guard.narrow`.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import threading
import warnings
from typing import Any, Callable, NamedTuple, Sequence

import jax
import numpy as np
from jax import lax

from x64guard import _compat, _user_line
from x64guard.io import modules
from x64guard.api import NarrowResult, narrow
from x64guard.errors import X64GuardError
from x64guard.findings import Finding, Kind
from x64guard.modes import Mode, resolve_mode, resolve_overflow
from x64guard.passes.equality import canonical_text
from x64guard.settings import current_mode
from x64guard.passes.tables import CONSTANT_OPS, DEFAULT_TARGET, NARROW_NUMPY_DTYPE

# The numpy side of the type map (the core's type table): what an input or output dtype becomes.
NARROW_DTYPE: dict[np.dtype, np.dtype] = NARROW_NUMPY_DTYPE

_WIDE_INTEGERS = frozenset(wide for wide in NARROW_DTYPE if wide.kind in "iu")
_ALLOW = Mode.ALLOW
_JaxRuntimeError = jax.errors.JaxRuntimeError
_ARRAY_TYPE = _compat.array_impl_type()  # jax.Array's concrete class (no array made at import)


_compat.exclude_from_user_frames(_user_line.PACKAGE_DIR)


def jit(fun: Callable | None = None, *, mode: "Mode | str | None" = None, overflow: str = "error",
        target: str = DEFAULT_TARGET, **jit_kwargs: Any) -> Callable:
    """`jax.jit`, narrowed: usable as `x64guard.jit(f)`, `@x64guard.jit` and
    `@x64guard.jit(mode="error")`. Accepts what `jax.jit` accepts.

    mode: allow (run full width, 64-bit results), warn (narrow), error (refuse any 64-bit
    use at trace time). None: the mode in force when called (`x64guard.mode`,
    `x64guard.set_mode`, $X64GUARD_MODE, else warn).
    target: the profile narrowed for (`x64guard.narrow`'s): on a Neuron target what
    neuronx-cc would still reject refuses (mode error) or warns (mode warn) before compiling.

    Returns a function (wrapping `fun`) with `.lower(*args, **kwargs)`; its
    `.narrowed_function` is the `NarrowedFunction` behind it.
    """
    if fun is None:
        return functools.partial(jit, mode=mode, overflow=overflow, target=target, **jit_kwargs)
    return NarrowedFunction(fun, mode=mode, overflow=overflow, jit_kwargs=jit_kwargs, target=target).function


# ----------------------------------------------------------------------------- statics

class _StaticArgs:
    """Splits a call into static and dynamic arguments the way jax.jit does."""

    def __init__(self, fun: Callable, argnums, argnames):
        self.argnums = _as_tuple(argnums)
        self.argnames = _as_tuple(argnames)
        try:
            self.signature = inspect.signature(fun)
        except (TypeError, ValueError):
            self.signature = None
        if self.signature is not None:
            positional = [p.name for p in self.signature.parameters.values()
                          if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
            self.argnums += tuple(positional.index(n) for n in self.argnames if n in positional)
            self.argnames += tuple(positional[i] for i in self.argnums if 0 <= i < len(positional))

    def split(self, args: tuple, kwargs: dict) -> tuple[tuple, dict, tuple]:
        """(dynamic args, dynamic kwargs, hashable static key)."""
        if not self.argnums and not self.argnames:
            return args, kwargs, ()
        static_pos = {i % len(args) for i in self.argnums if -len(args) <= i < len(args)}
        dyn_args = tuple(a for i, a in enumerate(args) if i not in static_pos)
        dyn_kwargs = {k: v for k, v in kwargs.items() if k not in self.argnames}
        static = (tuple((i, args[i]) for i in sorted(static_pos)),
                  tuple(sorted((k, v) for k, v in kwargs.items() if k in self.argnames)))
        return dyn_args, dyn_kwargs, static

    def merge(self, dyn_args: Sequence, dyn_kwargs: dict, static: tuple) -> tuple[list, dict]:
        static_pos, static_kw = static if static else ((), ())
        args = list(dyn_args)
        for i, value in static_pos:
            args.insert(i, value)
        return args, {**dyn_kwargs, **dict(static_kw)}


def _as_tuple(value) -> tuple:
    if value is None:
        return ()
    if isinstance(value, (int, str)):
        return (value,)
    return tuple(value)


# ----------------------------------------------------------------------------- inputs

def _is_python_scalar(x) -> bool:
    return isinstance(x, (bool, int, float, complex)) and not isinstance(x, np.generic)


# The width an input is traced at. Integer inputs are traced at 64 bits whatever width
# they arrive in: JAX with x64 on silently wraps a weakly typed Python int that an int32
# cannot hold (int32 + 2**40 gives + 0) where JAX with x64 off raises; traced at 64 bits
# the constant is visible in the module and refused. uint32 stays: it is what PRNG keys
# and bit manipulation use in x64 programs too. Floating inputs: see _OWN_WIDTH.
_WIDEN_FOR_TRACE = {narrow: wide for wide, narrow in NARROW_DTYPE.items() if narrow != np.dtype(np.uint32)}
# float32 and complex64 inputs are traced at their own width, as x32 JAX traces them:
# dtype-dependent library code (normal(key, shape, dtype=x.dtype), finfo(x.dtype)) then
# takes its 32-bit path. Measured on the corpus and the fuzz grammar (docs/jit.md, "Input
# widths"): never a different result, 5 fewer refusals; int32 at own width ran 3 programs
# that x32 JAX refuses (silently wrapped constants).
_OWN_WIDTH: frozenset = frozenset({np.dtype(np.float32), np.dtype(np.complex64)})


def _trace_dtype(dtype, weak: bool):
    """The dtype an input of `dtype` is traced at."""
    if _compat.is_extended_dtype(dtype):
        return dtype  # typed PRNG keys pass through unchanged
    dtype = np.dtype(dtype)
    if dtype in _OWN_WIDTH and not weak:
        return dtype
    return _WIDEN_FOR_TRACE.get(dtype, dtype)


def _trace_spec(x, dtype=None) -> jax.ShapeDtypeStruct:
    """How the 64-bit trace sees an input: its shape, the dtype it is traced at (`dtype`
    when given), weakly typed for Python scalars, with the sharding a JAX array carries."""
    if isinstance(x, (jax.Array, jax.core.Tracer)):
        aval = jax.typeof(x)
        # A sharding in the spec is an explicit one for the lowering (annotations that
        # slow XLA's compile down by ~15%): only for arrays spread over several devices.
        sharding = None if isinstance(x, jax.core.Tracer) or len(x.sharding.device_set) == 1 else x.sharding
        shape, own, weak = aval.shape, aval.dtype, aval.weak_type
    else:
        array = np.asarray(x)
        shape, own, weak, sharding = array.shape, array.dtype, _is_python_scalar(x), None
    return jax.ShapeDtypeStruct(shape, _trace_dtype(own, weak) if dtype is None else dtype,
                                weak_type=weak, sharding=sharding)


_WIDEST = {narrow: wide for wide, narrow in NARROW_DTYPE.items()}
# 64-bit numpy data traced at another width than its 32-bit counterpart (int64 and int32
# are both traced at 64 bits).
_WIDE_NUMPY = frozenset({np.dtype(np.float64), np.dtype(np.complex128), np.dtype(np.uint64)})


def _wide_numpy_leaves(leaves: Sequence) -> tuple[int, ...]:
    """Indices of float64/complex128/uint64 numpy inputs: JAX's C++ dispatch keys them as
    their 32-bit counterparts when x64 is off, but they are traced at 64 bits."""
    wide = []
    for i, leaf in enumerate(leaves):
        kind = type(leaf)
        if (kind is np.ndarray or isinstance(leaf, np.generic)) and leaf.dtype in _WIDE_NUMPY:
            wide.append(i)
    return tuple(wide)


_WIDE_FLOATS = frozenset({np.dtype(np.float64), np.dtype(np.complex128)})


def _wide_array_leaves(leaves: Sequence) -> tuple[int, ...]:
    """Indices of strongly typed float64/complex128 JAX arrays (a caller with x64 on): they
    are traced at 64 bits and converted before the program, as float64 numpy data is. A
    weakly typed one stays as it is (its trace differs)."""
    return tuple(i for i, leaf in enumerate(leaves)
                 if type(leaf) is _ARRAY_TYPE and leaf.dtype in _WIDE_FLOATS and not leaf.weak_type)


def _dispatch_dtype(x):
    """The dtype JAX's dispatch gives an input in the calling thread (numpy float64 is
    float32 with x64 off)."""
    return jax.typeof(x).dtype


def _widened_spec(spec: jax.ShapeDtypeStruct, uint32: bool = True) -> jax.ShapeDtypeStruct:
    """`spec` at 64 bits (uint32 too unless `uint32` is false): the fallback traces of code
    written for 64-bit inputs."""
    if _compat.is_extended_dtype(spec.dtype):
        return spec
    dtype = np.dtype(spec.dtype)
    if dtype not in _WIDEST or (dtype == np.uint32 and not uint32):
        return spec
    return jax.ShapeDtypeStruct(spec.shape, _WIDEST[dtype], weak_type=spec.weak_type, sharding=spec.sharding)


def _narrowed_spec(spec: jax.ShapeDtypeStruct) -> jax.ShapeDtypeStruct:
    """`spec` at its 32-bit width (x32 JAX's trace of the input)."""
    dtype = _narrow_dtype(spec.dtype)
    if dtype is None:
        return spec
    return jax.ShapeDtypeStruct(spec.shape, dtype, weak_type=spec.weak_type, sharding=spec.sharding)


def _narrow_dtype(dtype):
    """The 32-bit dtype for a 64-bit one, else None (typed keys included)."""
    if _compat.is_extended_dtype(dtype):
        return None
    return NARROW_DTYPE.get(np.dtype(dtype))


def _signature(x) -> tuple:
    """What the cache key needs of one input, cheaply (this runs on every call)."""
    if isinstance(x, jax.core.Tracer):  # before jax.Array: tracers are jax.Arrays too
        aval = jax.typeof(x)
        return (aval.shape, aval.dtype, aval.weak_type)
    if isinstance(x, jax.Array):
        return (x.shape, x.dtype, getattr(x, "weak_type", False), x.sharding)  # typed keys: no weak_type
    if isinstance(x, np.ndarray):
        return (x.shape, x.dtype)
    if _is_python_scalar(x):
        return (type(x),)
    return (np.shape(x), np.result_type(x))


def _to_narrow(x, dtype, path: str):
    """Cast one input to its narrowed dtype; concrete integers are range-checked."""
    if isinstance(x, jax.core.Tracer):
        return x if x.dtype == dtype else lax.convert_element_type(x, dtype)
    if isinstance(x, jax.Array):
        if x.dtype == dtype:
            return x
        _check_range(x, dtype, path)
        return _converted_outside(x, dtype)
    array = np.asarray(x)
    if array.dtype != dtype:
        _check_range(array, dtype, path)
        array = array.astype(dtype)
    return array


def _converted_outside(x, dtype):
    """A 64-bit input converted to the program's 32-bit dtype before the program, never
    inside it: a conversion fused into the compiled program changes XLA's code (FMA
    contraction: different bits from x32 JAX). numpy data is cast on the host, as JAX
    with x64 off casts it. A JAX array in host memory (the CPU backend) is cast there too
    (no XLA compile per input shape, unlike `x.astype`) and put back in its own sharding;
    one on an accelerator is converted there, by its own small XLA program (compiled once
    per shape and dtype, cached by JAX), not through the host: that would cost a
    device-to-host round trip on every call. Integers must have been range-checked."""
    if isinstance(x, jax.Array):
        devices = x.sharding.device_set
        if _on_accelerator(devices):
            with _compat.x64_enabled():
                return lax.convert_element_type(x, dtype)
        if len(devices) > 1:
            return jax.device_put(np.asarray(x).astype(dtype), x.sharding)
    return np.asarray(x).astype(dtype)  # one device: the executable places it (one transfer, not two)


def _on_accelerator(devices) -> bool:
    return any(d.platform != "cpu" for d in devices)


def _host_cast_leaves(leaves: list, wide: tuple) -> list:
    """`leaves` with the 64-bit numpy data at `wide` cast to its 32-bit dtype on the host."""
    leaves = list(leaves)
    for i in wide:
        leaves[i] = leaves[i].astype(NARROW_DTYPE[leaves[i].dtype])
    return leaves


def _check_range(x, dtype, path: str) -> None:
    if _compat.is_extended_dtype(dtype) or np.dtype(dtype).kind not in "iu" or np.size(x) == 0:
        return
    info = np.iinfo(dtype)
    with _compat.x64_enabled():
        lo, hi = int(np.min(x) if isinstance(x, np.ndarray) else jax.numpy.min(x)), \
            int(np.max(x) if isinstance(x, np.ndarray) else jax.numpy.max(x))
    if lo < info.min or hi > info.max:
        bad = lo if lo < info.min else hi
        finding = Finding("input-out-of-range", "error", "argument", path,
                          f"value {bad} does not fit in {np.dtype(dtype)}; x64guard never wraps inputs. Pass values in "
                          f"[{info.min}, {info.max}], or keep this function in 64 bits (mode='allow')")
        raise X64GuardError(f"x64guard.jit: argument {path}: {finding.message}", [finding])


def _keystr(path) -> str:
    """'args[1]["scale"]' / 'kwargs["n"]' for a leaf of the (dynamic args, kwargs) tree."""
    head, rest = path[0], path[1:]
    return ("args" if getattr(head, "idx", 0) == 0 else "kwargs") + jax.tree_util.keystr(rest)


# ----------------------------------------------------------------------------- callbacks

class _NarrowedCallbackResults:
    """A host callback's declared 64-bit results, narrowed on the host: floats rounded as
    x32 JAX rounds a float64 value a callback returns, integers range-checked (never
    wrapped). The callback itself is called with the 32-bit values x32 JAX would give it."""

    def __init__(self, callback: Callable, declared: tuple, narrowed: tuple, name: str):
        self.callback = callback
        self.declared = declared
        self.narrowed = narrowed
        self.name = name

    def __call__(self, *args):
        outs = list(self.callback(*args))
        if len(outs) != len(self.narrowed):
            return outs  # JAX's own check reports the count
        return [self._narrow(i, out, old, new) for i, (out, old, new)
                in enumerate(zip(outs, self.declared, self.narrowed))]

    def _narrow(self, i: int, value, declared, narrowed):
        if declared.dtype == narrowed.dtype:
            return value
        array = np.asarray(value)
        target = np.dtype(narrowed.dtype)
        if target.kind in "iu" and array.size and array.dtype.kind in "iub":
            info = np.iinfo(target)
            lo, hi = int(array.min()), int(array.max())
            if lo < info.min or hi > info.max:
                bad = lo if lo < info.min else hi
                raise _callback_failed(X64GuardError(
                    f"x64guard.jit: the callback {self.name} returned {bad} in its result #{i}, declared "
                    f"{np.dtype(declared.dtype)}, which does not fit in {target} (the type it has in the narrowed "
                    f"program); x64guard never wraps. Return values in [{info.min}, {info.max}], or keep this "
                    "function in 64 bits (mode='allow')",
                    [Finding("callback-result-out-of-range", "error", "callback", self.name,
                             f"result #{i} value {bad} does not fit in {target}")]))
        return array.astype(target)

    def __eq__(self, other) -> bool:
        return (type(other) is _NarrowedCallbackResults and self.callback == other.callback
                and self.declared == other.declared)

    def __hash__(self) -> int:
        return hash((self.callback, self.declared))


# X64GuardErrors raised inside host callbacks reach the caller as JAX runtime errors
# carrying their text; a call that sees one raises the X64GuardError itself.
_callback_errors: dict[str, X64GuardError] = {}
_callback_errors_lock = threading.Lock()


def _callback_failed(error: X64GuardError) -> X64GuardError:
    with _callback_errors_lock:
        if len(_callback_errors) > 64:
            _callback_errors.clear()
        _callback_errors[str(error)] = error
    return error


def _raise_callback_error(runtime_error: Exception) -> None:
    """Raise the X64GuardError a callback raised, if `runtime_error` carries one."""
    text = str(runtime_error)
    if "X64GuardError" not in text:
        return
    with _callback_errors_lock:
        message = next((m for m in _callback_errors if m in text), None)
        error = _callback_errors.pop(message, None)
    if error is not None:
        raise X64GuardError(str(error), error.findings) from runtime_error


def _callbacks_at_32_bits(closed_jaxpr):
    """The traced program with its host callbacks run at 32 bits (or None: none)."""
    return _compat.narrow_callback_equations(closed_jaxpr, _narrow_dtype, _NarrowedCallbackResults)


# ----------------------------------------------------------------------------- warnings

# A one-line function `lambda call, args, kwargs: call(*args, **kwargs)`; its code is
# re-labelled with the user's file and line, so that x64guard.narrow's warnings (issued
# at its caller, stacklevel=3) point at the user's calling line, with the user module's
# warning registry and filters, in any thread.
def _user_frame():
    """The innermost frame outside x64guard and JAX: the line that called x64guard.jit's
    function (or the library code that did)."""
    return _user_line.user_frame(_compat.excluded_source_dirs())


def _user_place() -> str:
    """'file:line' of the user's calling line, '?' when there is none."""
    frame = _user_frame()
    return f"{frame.f_code.co_filename}:{frame.f_lineno}" if frame is not None else "?"


def _trace_differs_message(difference, ran_x32: bool) -> str:
    user = _user_place()
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


def _identity_convert_finding(check: "_CrossCheck", callbacks_converted: bool) -> Finding | None:
    """An info finding when the narrowed program may differ from x32 JAX's by converts to
    the type their operand already has, which compute nothing (None when nothing says so):
    the traces convert weak-typed values made strong (or the reverse) in different places,
    which the module does not record; a library primitive's lowerings differ only by them;
    an equation's lowering converts one operand of two widths to the other's type; or
    x64guard.jit converted host callback operands to 32 bits (x32 JAX's are 32-bit already).
    Located at the equation of the first reason."""
    reasons = []  # (equation or None, what)
    if len(check.converts64) != len(check.converts32):
        reasons.append(((check.converts64 or check.converts32)[0],
                        f"the x64 trace holds {len(check.converts64)} conversions that change no type once narrowed "
                        f"(weak-typed values made strong), the x32 trace {len(check.converts32)}"))
    if check.converts_in_lowerings:
        reasons.append((check.converts_in_lowerings[0],
                        f"the library primitive {check.converts_in_lowerings[0].primitive.name} lowers with such "
                        "conversions at one width and not at the other"))
    if check.merged_widths:
        reasons.append((check.merged_widths[0],
                        f"{check.merged_widths[0].primitive.name} takes operands of two widths that narrow to one "
                        "type (its lowering converts one operand to the other's type)"))
    if callbacks_converted:
        reasons.append((None, "x64guard.jit converts host callback operands to 32 bits before the callback"))
    if not reasons:
        return None
    first = reasons[0][0]
    location = (_compat.equation_location(first) if first is not None else "") or _user_place()
    return Finding(Kind.IDENTITY_CONVERT, "info", "convert", location,
                   f"{'; '.join(what for _, what in reasons)}: the narrowed module may hold converts x32 JAX's "
                   "does not, or lack some it holds, each a convert to the type its operand has, which computes "
                   "nothing: the same program")


def _matched_constant_message(finding: Finding) -> str:
    user = _user_place()
    return (f"{user}: a float64 constant at {finding.location} equals a finfo(float64) expression "
            f"({finding.message.split(':')[0]}), but the function traced with x64 off holds its plain rounding "
            "(a literal, not the expression): x64guard runs the x32 program (JAX's trace with x64 off: x32 JAX's "
            "answer) instead of narrowing the x64 one [dtype-constant]")


def _same_lowering(eqn64, eqn32, converts_differ: list | None = None) -> bool:
    """A library primitive's equation of the x64 trace lowers, once narrowed, to the module
    its x32 counterpart lowers to (`canonical_text`: printed without locations, identity
    converts folded; where only those converts differ, eqn64 is added to
    `converts_differ`). Anything that fails to lower or to narrow is not the same."""
    try:
        text64 = _compat.lower_equation(eqn64, x64=True)
        text32 = _compat.lower_equation(eqn32, x64=False)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            narrowed = narrow(text64, mode=Mode.WARN).module
        reference, _ = modules.load(text32)
    except Exception:  # noqa: BLE001  (not provably the same: the caller runs x32's program)
        return False
    plain = [m.operation.get_asm(enable_debug_info=False) for m in (narrowed, reference)] \
        if converts_differ is not None else None
    same = canonical_text(narrowed) == canonical_text(reference)
    if same and plain is not None and plain[0] != plain[1]:
        converts_differ.append(eqn64)
    return same


def _replay_at_user_line(recorded) -> None:
    """Warnings recorded by catch_warnings, issued again where they were, through the
    user's filters and their module's registry."""
    frame = _user_frame()
    registry = frame.f_globals.setdefault("__warningregistry__", {}) if frame is not None else None
    for w in recorded:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, registry=registry)


def _warn_at_user_line(message: str) -> None:
    """One X64GuardWarning at the user's calling line (their module's registry and filters)."""
    from x64guard.errors import X64GuardWarning

    frame = _user_frame()
    if frame is None:
        warnings.warn(message, X64GuardWarning, stacklevel=2)
        return
    registry = frame.f_globals.setdefault("__warningregistry__", {})
    warnings.warn_explicit(f"x64guard: {message}", X64GuardWarning, frame.f_code.co_filename, frame.f_lineno,
                           module=frame.f_globals.get("__name__"), registry=registry)


def _narrow_at_user_line(module, **kwargs) -> NarrowResult:
    return _user_line.call_at_user_line(narrow, (module,), kwargs, _compat.excluded_source_dirs())


# ----------------------------------------------------------------------------- one program

class _NarrowedX64(NamedTuple):
    lowered: Any                 # JAX's Lowered of the x64 program
    convention: Any              # its calling convention (_compat.calling_convention)
    result: NarrowResult
    summary: list                # the narrowing's warnings, recorded
    callbacks_converted: bool    # host callbacks' 64-bit operands converted to 32 bits before them


class _CrossCheck(NamedTuple):
    traced32: Any                # the x32 trace (None: x32 JAX cannot trace the call)
    difference: Any              # the first _compat.TraceDifference, None when the traces agree
    converts64: tuple            # identity conversions the comparison skipped in the x64 trace
    converts32: tuple            # ... and in the x32 trace
    converts_in_lowerings: tuple  # library primitives whose two lowerings differ only by identity converts
    merged_widths: tuple         # x64 equations whose distinct operand dtypes narrow to one (float32 @ float64)


class _CompileAhead:
    """A first call's compile of the narrowed module, run in a worker thread while the
    calling thread runs the x32 cross-check (XLA compiles without holding the GIL, so the
    two overlap: the cross-check's trace and comparison cost no wall time). The worker
    runs with the caller's own JAX settings (`_compat.thread_config_overrides`). Its
    result is used only if the narrowed program is the one that runs; otherwise it is
    dropped (the compile finishes in the background: CPU spent, nothing else)."""

    def __init__(self, compile_program: Callable, overrides: tuple):
        self._outcome: tuple = ()
        self._thread = threading.Thread(target=self._run, args=(compile_program, overrides),
                                        name="x64guard-compile", daemon=False)
        self._thread.start()

    def _run(self, compile_program: Callable, overrides: tuple) -> None:
        try:
            with _compat.config_overrides(overrides):
                self._outcome = (compile_program(), None)
        except BaseException as error:  # noqa: BLE001  (raised in the caller's thread by result())
            self._outcome = (None, error)

    def result(self):
        self._thread.join()
        executable, error = self._outcome
        if error is not None:
            raise error
        return executable

    @staticmethod
    def start(compile_program: Callable) -> "_CompileAhead | None":
        """A compile started in a worker, or None (this JAX's settings cannot be carried
        over, or no thread could start): the program then compiles when first run."""
        overrides = _compat.thread_config_overrides()
        if overrides is None:
            return None
        try:
            return _CompileAhead(compile_program, overrides)
        except RuntimeError:  # no thread could start
            return None


@dataclasses.dataclass(eq=False)  # a primitive parameter: compared by identity
class _Program:
    """The narrowed program for one input signature, and how to call it."""

    name: str
    narrowed: NarrowResult
    owner: "NarrowedFunction"
    flat_fun: Callable                 # flat inputs -> flat outputs, the function traced
    in_tree: Any
    out_tree: Any
    trace_dtypes: tuple                # each flat input's dtype in the x64 trace
    trace_out_dtypes: tuple
    in_dtypes: tuple                   # each flat input's dtype in the narrowed program
    paths: tuple[str, ...]
    out_avals: tuple                   # narrowed
    effects: frozenset
    ordered_effects: tuple
    kept_var_idx: frozenset
    kept_in_avals: tuple               # narrowed
    in_shardings: tuple
    out_shardings: tuple
    num_devices: int
    host_callbacks: tuple
    keepalive: tuple
    in_avals: tuple                    # every flat input's, narrowed (dead inputs included)
    lowered: Any                       # JAX's Lowered of the x64 program: compiled with the narrowed module
    _bytecode: bytes | None = None
    _executables: dict = dataclasses.field(default_factory=dict)
    _compile_ahead: "_CompileAhead | None" = None  # the first call's compile, started before the cross-check
    _lock: Any = dataclasses.field(default_factory=threading.Lock)

    def __repr__(self) -> str:
        return f"<x64guard program {self.name}>"

    @property
    def bytecode(self) -> bytes:
        if self._bytecode is None:
            self._bytecode = self.narrowed.bytecode()
        return self._bytecode

    def narrow_inputs(self, flat_inputs: Sequence) -> list:
        return [_to_narrow(x, d, p) for x, d, p in zip(flat_inputs, self.in_dtypes, self.paths)]

    def bind(self, flat_narrowed: Sequence) -> list:
        return _call_p.bind(*flat_narrowed, program=self)

    def call_traced(self, flat_inputs: Sequence) -> Any:
        """Inside a trace (the dispatch jit, an outer jit, vmap, grad): bind, through the
        custom VJP when the program's effects allow one."""
        flat = self.narrow_inputs(flat_inputs)
        return self.out_tree.unflatten(self.differentiable(*flat))

    def executable(self):
        """The narrowed module compiled as JAX compiles the x64 lowering it came from
        (devices, shardings, donation, callbacks, effects): lowered once, compiled once.
        The one executable of this signature: the direct call and `.lower().compile()`
        run it, inputs that arrive at 64 bits converted before it (`run`)."""
        executable = self._executables.get(())
        if executable is None:
            with self._lock:
                executable = self._executables.get(())
                if executable is None:
                    ahead, self._compile_ahead = self._compile_ahead, None
                    executable = ahead.result() if ahead is not None else _compat.compile_with_avals(
                        self.lowered, self.narrowed.module, list(self.in_avals), self.out_avals)
                    self._executables[()] = executable
        return executable

    def run(self, flat_inputs: Sequence) -> tuple[Any, Any]:
        """Outside any trace: (outputs, what JAX's C++ dispatch needs to run later calls
        of this signature itself, or None)."""
        # What JAX's dispatch hands the program in the calling thread (numpy float64 data
        # is float32 with x64 off) is, input by input, the narrowed dtype or its 64-bit
        # counterpart (a caller with x64 on): those are converted outside the program.
        wide = [i for i, (x, n) in enumerate(zip(flat_inputs, self.in_dtypes)) if _dispatch_dtype(x) != n]
        executable = self.executable()
        if wide:
            flat_inputs = list(flat_inputs)
            for i in wide:
                flat_inputs[i] = _converted_outside(flat_inputs[i], self.in_dtypes[i])
        outs = executable.call(*flat_inputs)
        # No fast path for 64-bit arrays: JAX's C++ dispatch would hand them to the
        # program unconverted.
        fastpath = _compat.fastpath_data(executable, self.out_tree, flat_inputs, outs) \
            if self.num_devices == 1 and not wide else None
        return self.out_tree.unflatten(outs), fastpath

    @functools.cached_property
    def differentiable(self) -> Callable:
        return _differentiable(self)


def _abstract_eval(*avals, program: _Program):
    return program.out_avals, program.effects


def _lowering(ctx, *args, program: _Program):
    return _compat.emit_inlined_call(
        ctx, args, bytecode=program.bytecode, name=f"x64guard_{program.name}",
        kept_var_idx=program.kept_var_idx, ordered_effects=program.ordered_effects,
        host_callbacks=program.host_callbacks, keepalive=program.keepalive, in_avals=program.kept_in_avals,
        in_shardings=program.in_shardings, out_shardings=program.out_shardings, num_devices=program.num_devices)


def _batching(args, dims, *, program: _Program):
    """vmap: the narrowed program of the vmapped function (the primitive has no batched form)."""
    args = [x if d is None else _compat.moveaxis_to_front(x, d) for x, d in zip(args, dims)]
    in_axes = tuple(None if d is None else 0 for d in dims)
    flat_fun = program.flat_fun

    def make():
        return lambda *xs: jax.vmap(lambda *ys: tuple(flat_fun(*ys)), in_axes=in_axes)(*xs)

    batched = program.owner._derived(("vmap", flat_fun, in_axes), make, program.trace_dtypes)
    outs = batched(*args)
    return list(outs), [0] * len(outs)


_call_p = _compat.define_call_primitive("x64guard_call", _abstract_eval, _lowering, _batching)


def _differentiable(program: _Program) -> Callable:
    """`program.bind` on flat narrowed inputs, with a custom VJP whose backward pass
    narrows the x64 VJP of the traced function (when the program's effects allow a
    custom VJP: io_callback's do not, and JAX cannot differentiate those anyway)."""
    if not _compat.effects_allow_custom_vjp(program.effects):
        return lambda *flat: program.bind(flat)
    n_in = len(program.in_dtypes)
    flat_fun = program.flat_fun
    out_inexact = tuple(i for i, d in enumerate(program.trace_out_dtypes) if _is_inexact(d))

    @jax.custom_vjp
    def call(*flat):
        return program.bind(flat)

    def call_fwd(*flat):
        # `call`, not `bind`: higher-order differentiation differentiates fwd itself.
        return call(*flat), flat

    def call_bwd(primals, cotangents):
        differentiable = tuple(i for i, d in enumerate(program.trace_dtypes) if _is_inexact(d))

        def make_vjp():
            def vjp(*xs):
                inputs, cts = xs[:n_in], xs[n_in:]

                def partial_fun(*diff_inputs):
                    full = list(inputs)
                    for i, v in zip(differentiable, diff_inputs):
                        full[i] = v
                    outs = flat_fun(*full)
                    return tuple(outs[i] for i in out_inexact)

                _, pullback = jax.vjp(partial_fun, *(inputs[i] for i in differentiable))
                return pullback(tuple(cts))
            return vjp

        trace_dtypes = program.trace_dtypes + tuple(program.trace_out_dtypes[i] for i in out_inexact)
        vjp_fn = program.owner._derived(("vjp", flat_fun, differentiable, out_inexact), make_vjp, trace_dtypes)
        grads = vjp_fn(*primals, *(cotangents[i] for i in out_inexact))
        out = [np.zeros(np.shape(x), jax.dtypes.float0) for x in primals]
        for i, g in zip(differentiable, grads):
            out[i] = g
        return tuple(out)

    call.defvjp(call_fwd, call_bwd)
    return call


def _is_inexact(dtype) -> bool:
    return not _compat.is_extended_dtype(dtype) and jax.numpy.issubdtype(dtype, jax.numpy.inexact)


# ----------------------------------------------------------------------------- the function

class NarrowedFunction:
    """What `x64guard.jit` returns. Cached per input signature, static arguments and mode:
    a second call with the same signature neither retraces nor recompiles."""

    def __init__(self, fun: Callable, *, mode, overflow: str, jit_kwargs: dict,
                 trace_dtypes: tuple | None = None, target: str = DEFAULT_TARGET):
        self._fun = fun
        self._target = target
        self._mode = None if mode is None else resolve_mode(mode)
        self._overflow = resolve_overflow(overflow).value
        self._jit_kwargs = jit_kwargs
        self._trace_dtypes = trace_dtypes  # derived functions: the dtypes their primal was traced at
        self._statics = _StaticArgs(fun, jit_kwargs.get("static_argnums"), jit_kwargs.get("static_argnames"))
        self._jit64 = jax.jit(fun, **jit_kwargs)
        self._cache: dict[tuple, _Program] = {}
        self._lock = threading.Lock()
        self._derived_functions: dict[tuple, NarrowedFunction] = {}
        # Calls on arrays go through a C++ dispatcher like jax.jit's: a new signature runs
        # `_cache_miss` (specialize, compile the narrowed module, run), later calls of it
        # run from C++ without Python. Calls holding 64-bit numpy data go through a second
        # one whose argument 0 is static: which inputs those are (JAX's C++ cache does not
        # tell float64 from float32 numpy with x64 off, and they are traced at different
        # widths); the common case pays no static argument.
        name = f"x64guard_{getattr(fun, '__name__', 'fun')}"
        static_argnums = _as_tuple(jit_kwargs.get("static_argnums"))
        donate_argnums = _as_tuple(jit_kwargs.get("donate_argnums"))
        static_argnames = _as_tuple(jit_kwargs.get("static_argnames"))
        donate_argnames = _as_tuple(jit_kwargs.get("donate_argnames"))
        shift = lambda nums: tuple(i + 1 if i >= 0 else i for i in nums)  # noqa: E731
        # Distinct objects identify the two dispatchers in JAX's C++ cache.
        self._dispatch_keys = (lambda: None, lambda: None)
        self._dispatch = _compat.cpp_dispatcher(
            name, self._dispatch_keys[0], functools.partial(self._cache_miss, ()),
            static_argnums=static_argnums, static_argnames=static_argnames,
            donate_argnums=donate_argnums, donate_argnames=donate_argnames)
        self._dispatch_wide = _compat.cpp_dispatcher(
            name, self._dispatch_keys[1], self._cache_miss,
            static_argnums=(0,) + shift(static_argnums), static_argnames=static_argnames,
            donate_argnums=shift(donate_argnums), donate_argnames=donate_argnames)
        self.function = self._make_function()
        functools.update_wrapper(self, fun)

    def __repr__(self) -> str:
        return f"x64guard.jit({getattr(self._fun, '__name__', self._fun)!r})"

    def __call__(self, *args, **kwargs):
        return self.function(*args, **kwargs)

    def _make_function(self) -> Callable:
        """What x64guard.jit returns: a plain function (cheaper to call than an instance's
        __call__) that hands JAX arrays straight to the C++ dispatch. The mode is part
        of JAX's jit cache key: in mode allow, every call reaches _cache_miss, which runs
        the function full width."""
        dispatch, positional, general = self._dispatch, self._call_positional, self._call_general
        array_type = _ARRAY_TYPE

        def narrowed(*args, **kwargs):
            try:
                if not kwargs:
                    for leaf in args:
                        if type(leaf) is not array_type:
                            return positional(args)
                    # The steady state (a signature with 64-bit integer arrays never gets
                    # a fast path: every such call is range-checked in _cache_miss).
                    return dispatch(*args)
                return general(args, kwargs)
            except _JaxRuntimeError as exc:
                _raise_callback_error(exc)
                raise

        functools.update_wrapper(narrowed, self._fun)
        narrowed.lower = self.lower
        narrowed.narrowed_function = self
        return narrowed

    def _call_positional(self, args: tuple):
        """Positional arguments, some not JAX arrays: numpy data is looked at here, because
        JAX's dispatch keys 64-bit numpy data as its 32-bit counterpart when x64 is off."""
        wide_numpy = False
        for leaf in args:
            kind = type(leaf)
            if kind is _ARRAY_TYPE:
                continue
            if kind is not np.ndarray:
                return self._call_general(args, {})
            dtype = leaf.dtype
            if dtype in _WIDE_INTEGERS:
                return self._call_general(args, {})
            if dtype in _WIDE_NUMPY:
                wide_numpy = True
        if wide_numpy:
            wide = _wide_numpy_leaves(args)
            if (self._mode or current_mode()) is _ALLOW:  # full width: the data stays 64-bit
                return self._dispatch_wide(wide, *args)
            return self._dispatch_wide(wide, *_host_cast_leaves(args, wide))
        return self._dispatch(*args)

    def _call_general(self, args: tuple, kwargs: dict):
        dyn_args, dyn_kwargs, _ = self._statics.split(args, kwargs)
        leaves = jax.tree_util.tree_leaves((dyn_args, dyn_kwargs))
        if any(isinstance(leaf, jax.core.Tracer) for leaf in leaves):
            # Inside a trace (an outer jit, vmap, grad): bind there.
            mode = self._mode or current_mode()
            if mode is _ALLOW:
                with _compat.x64_enabled():
                    return self._jit64(*args, **kwargs)
            program, flat = self._specialize(args, kwargs, mode)
            return program.call_traced(flat)
        self._check_integer_inputs(dyn_args, dyn_kwargs, leaves)
        wide = _wide_numpy_leaves(leaves)
        if wide and (self._mode or current_mode()) is _ALLOW:  # full width: the data stays 64-bit
            return self._dispatch_wide(wide, *args, **kwargs)
        if wide:
            # Cast on the host before the dispatch (the program takes 32-bit inputs):
            # JAX's C++ path then runs later calls of this signature by itself.
            dyn_args, dyn_kwargs, static = self._statics.split(args, kwargs)
            flat, tree = jax.tree_util.tree_flatten((dyn_args, dyn_kwargs))
            dyn_args, dyn_kwargs = tree.unflatten(_host_cast_leaves(flat, wide))
            args, kwargs = self._statics.merge(dyn_args, dyn_kwargs, static)
            return self._dispatch_wide(wide, *args, **kwargs)
        return self._dispatch(*args, **kwargs)

    def _cache_miss(self, wide_leaves: tuple, *args, **kwargs):
        """A signature JAX's C++ dispatch has not run before (or one it may not run by
        itself): specialize on the arguments as given and run; returns the outputs and
        the fast path for the next calls."""
        mode = self._mode or current_mode()
        if mode is _ALLOW:  # full width, never a fast path (64-bit numpy data must stay 64-bit)
            with _compat.x64_enabled():
                return self._jit64(*args, **kwargs), None
        dyn_args, dyn_kwargs, static = self._statics.split(args, kwargs)
        flat, tree = jax.tree_util.tree_flatten((dyn_args, dyn_kwargs))
        wide_arrays = () if wide_leaves else _wide_array_leaves(flat)
        if wide_arrays:
            # Float64/complex128 JAX arrays of a caller with x64 on: converted before the
            # program, then run as float64 numpy data is, through the wide dispatcher,
            # whose C++ fast path serves the later calls of the converted signature (this
            # dispatcher cannot: it would hand the program the arrays unconverted).
            for i in wide_arrays:
                flat[i] = _converted_outside(flat[i], NARROW_DTYPE[flat[i].dtype])
            dyn_args, dyn_kwargs = tree.unflatten(flat)
            args, kwargs = self._statics.merge(dyn_args, dyn_kwargs, static)
            return self._dispatch_wide(wide_arrays, *args, **kwargs), None
        wide_integers = self._check_integer_inputs(dyn_args, dyn_kwargs, flat)
        program, flat = self._specialize(args, kwargs, mode, wide_leaves, compile_ahead=True)
        outputs, fastpath = program.run(flat)
        return outputs, None if wide_integers else fastpath

    def _check_integer_inputs(self, dyn_args: tuple, dyn_kwargs: dict, leaves: list) -> bool:
        """jax.jit would wrap (or, for Python ints, refuse with an OverflowError) 64-bit
        integers that do not fit: check concrete ones first, naming their path. Returns
        whether there were 64-bit integers to check."""
        for leaf in leaves:
            kind = type(leaf)
            if kind is int:
                if not -2**31 <= leaf < 2**31:
                    break
            elif getattr(leaf, "dtype", None) in _WIDE_INTEGERS:
                break
        else:
            return False
        # Something to check: the slow path names the argument.
        with_paths, _ = jax.tree_util.tree_flatten_with_path((dyn_args, dyn_kwargs))
        for path, leaf in with_paths:
            if type(leaf) is int:
                _check_range(np.asarray(leaf), np.dtype(np.int32), _keystr(path))
            elif getattr(leaf, "dtype", None) in _WIDE_INTEGERS:
                _check_range(leaf, NARROW_DTYPE[leaf.dtype], _keystr(path))
        return True

    def lower(self, *args, **kwargs) -> "Lowered":
        """The narrowed program for these arguments: `.as_text()`, `.findings`, `.compile()`."""
        mode = resolve_mode(self._mode)
        if mode is Mode.ALLOW:
            raise ValueError("x64guard.jit(...).lower: mode 'allow' does not narrow; use jax.jit(f).lower "
                             "with jax_enable_x64 for the full-width program")
        program, flat = self._specialize(args, kwargs, mode)
        return Lowered(program, flat, self._statics)

    # -- specialization ------------------------------------------------------------

    def _specialize(self, args: tuple, kwargs: dict, mode: Mode, wide_leaves: tuple = (),
                    compile_ahead: bool = False) -> tuple[_Program, list]:
        """The program for these arguments. wide_leaves: indices of flat inputs that were
        float64/complex128 numpy data before jax.jit's dispatch made them 32-bit: traced
        at 64 bits, as they were given."""
        dyn = self._statics.split(args, kwargs)
        leaves, in_tree = jax.tree_util.tree_flatten(dyn[:2])
        try:
            key = (mode, in_tree, tuple(map(_signature, leaves)), dyn[2], wide_leaves)
            program = self._cache.get(key)
        except TypeError as exc:
            raise TypeError(f"x64guard.jit: static arguments must be hashable, as for jax.jit: {exc}") from None
        if program is None:
            with self._lock:
                program = self._cache.get(key)
                if program is None:
                    with_paths, _ = jax.tree_util.tree_flatten_with_path(dyn[:2])
                    paths = tuple(_keystr(path) for path, _ in with_paths)
                    if self._trace_dtypes is not None:
                        specs = [_trace_spec(leaf, d) for leaf, d in zip(leaves, self._trace_dtypes)]
                    else:
                        specs = [_trace_spec(leaf) for leaf in leaves]
                        for i in wide_leaves:
                            specs[i] = _widened_spec(specs[i])
                    program = self._build(in_tree, specs, dyn[2], paths, mode, compile_ahead)
                    self._cache[key] = program
        return program, leaves

    def _build(self, in_tree, specs, static, paths, mode: Mode, compile_ahead: bool = False) -> _Program:
        spec_args, spec_kwargs = in_tree.unflatten(specs)
        args, kwargs = self._statics.merge(spec_args, spec_kwargs, static)
        try:
            traced = _compat.trace_x64(self._jit64, tuple(args), kwargs)
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
            candidates = [[_widened_spec(s, uint32=False) for s in specs], [_widened_spec(s) for s in specs],
                          [_narrowed_spec(s) for s in specs]]
            for widened in candidates:
                if any(all(w is t for w, t in zip(widened, before)) for before in tried):
                    continue
                tried.append(widened)
                spec_args, spec_kwargs = in_tree.unflatten(widened)
                args, kwargs = self._statics.merge(spec_args, spec_kwargs, static)
                try:
                    traced = _compat.trace_x64(self._jit64, tuple(args), kwargs)
                    break
                except Exception:
                    continue
            else:
                raise own_width_error from None
            specs = widened
        narrowed, ahead = None, None
        if compile_ahead:
            # A direct call: lower, narrow and start compiling before the cross-check, which
            # then runs while XLA compiles. What the narrowing raises is raised below, where
            # it was raised before the check existed.
            try:
                narrowed = self._narrowed_x64(traced, mode)
            except Exception as error:  # noqa: BLE001  (re-raised below unless x32's program runs)
                narrowed = error
            else:
                ahead = _CompileAhead.start(functools.partial(
                    _compat.compile_with_avals, narrowed.lowered, narrowed.result.module,
                    [_narrow_aval(a) for a in traced.jaxpr.in_avals],
                    tuple(_narrow_aval(a) for a in narrowed.convention.out_avals)))
        # The cross-check: the x32 trace of the same call. Equal (once narrowed): the x64
        # program is narrowed and run, proven to be x32 JAX's program. Different (library
        # code that decides by jax_enable_x64 or by the dtype while tracing): mode error
        # refuses; otherwise the x32 program itself runs (its answer is x32 JAX's by
        # construction), with one trace-differs warning in place of the narrowing summary.
        check = self._cross_check(traced, in_tree, specs, static)
        traced32, difference = check.traced32, check.difference
        if difference is not None and mode is not Mode.ERROR:
            fallback = Finding("trace-differs", "warning", difference.primitive, difference.location or "?",
                               _trace_differs_message(difference, ran_x32=True))
            traced, lowered, convention, result = self._x32_program(traced32, fallback, mode)
            ahead = None
        else:
            if narrowed is None:
                narrowed = self._narrowed_x64(traced, mode)
            elif isinstance(narrowed, Exception):
                raise narrowed
            lowered, convention, result = narrowed.lowered, narrowed.convention, narrowed.result
            matched = [f for f in result.findings if f.kind == "dtype-constant" and f.op in CONSTANT_OPS]
            if difference is None and traced32 is not None and matched:
                # The pass matched a constant's value to a finfo(float64) expression. The
                # traces being equal, x32 JAX's trace holds its plain rounding: a literal
                # that happens to equal the expression (TFP's owens_t coefficient
                # -0.99999999999999977 = -(1 - eps)), or a constant a lowering rule made.
                # x32's program is right in both cases.
                fallback = dataclasses.replace(matched[0], severity="warning",
                                               message=_matched_constant_message(matched[0]))
                traced, lowered, convention, result = self._x32_program(traced32, fallback, mode)
                ahead = None
            elif difference is not None:  # mode error, and the narrowing itself passed
                message = _trace_differs_message(difference, ran_x32=False)
                finding = Finding("trace-differs", "error", difference.primitive, difference.location or "?", message)
                raise X64GuardError(f"x64guard.jit: {message}", [finding])
            else:
                _replay_at_user_line(narrowed.summary)
                converts = _identity_convert_finding(check, narrowed.callbacks_converted)
                if converts is not None:
                    result.findings.append(converts)
        trace_dtypes = tuple(s.dtype for s in specs)
        trace_out_dtypes = tuple(a.dtype for a in convention.out_avals)
        name = getattr(self._fun, "__name__", "fun")
        return _Program(
            name=name if name.isidentifier() else "fun", narrowed=result, owner=self,
            flat_fun=self._flat_fun(in_tree, static), in_tree=in_tree, out_tree=traced.out_tree,
            trace_dtypes=trace_dtypes, trace_out_dtypes=trace_out_dtypes,
            in_dtypes=tuple(_narrow_dtype(d) or d for d in trace_dtypes), paths=paths,
            out_avals=tuple(_narrow_aval(a) for a in convention.out_avals),
            effects=convention.effects, ordered_effects=convention.ordered_effects,
            kept_var_idx=convention.kept_var_idx,
            kept_in_avals=tuple(_narrow_aval(a) for a in convention.in_avals),
            in_shardings=convention.in_shardings, out_shardings=convention.out_shardings,
            num_devices=convention.num_devices, host_callbacks=convention.host_callbacks,
            keepalive=convention.keepalive, lowered=lowered,
            in_avals=tuple(_narrow_aval(a) for a in traced.jaxpr.in_avals), _compile_ahead=ahead)

    def _narrowed_x64(self, traced, mode: Mode) -> "_NarrowedX64":
        """The x64 trace lowered and narrowed; the narrowing's summary warning recorded, not
        issued (it is issued only if this is the program that runs)."""
        callbacks = _callbacks_at_32_bits(traced.jaxpr)
        lowered = _compat.lower_traced(traced, callbacks)
        convention = _compat.calling_convention(lowered)
        # JAX's own cached module: narrow works on a clone.
        with warnings.catch_warnings(record=True) as summary:
            warnings.simplefilter("always")
            result = _narrow_at_user_line(convention.module, mode=mode, overflow=self._overflow,
                                          target=self._target)
        return _NarrowedX64(lowered, convention, result, summary, callbacks is not None)

    def _x32_program(self, traced32, fallback: Finding, mode: Mode):
        """The x32 trace lowered and run in place of the narrowed x64 one (its answer is x32
        JAX's by construction), `fallback` saying why, warned once at the user's line:
        (traced, lowered, calling convention, NarrowResult)."""
        lowered = _compat.lower_traced_x32(traced32)
        convention = _compat.calling_convention(lowered)
        # x32 JAX's own module still holds 64-bit values where JAX traces them with x64 off
        # (iota_2x32_shape's uint64 counters): narrowed, the pass computes them in 32 bits,
        # exactly (`rng-counters`), so that nothing 64-bit reaches the device. Its warnings
        # are issued only for a target profile (Neuron: what neuronx-cc would reject); the
        # fallback's own warning says what happened. If the pass refuses x32 JAX's module,
        # that module runs as it is: x32 JAX's program, 64-bit values and all.
        with warnings.catch_warnings(record=True) as recorded:
            warnings.simplefilter("always")
            try:
                result = narrow(convention.module, mode=mode, overflow=self._overflow, target=self._target)
            except X64GuardError:
                if self._target != DEFAULT_TARGET:
                    raise  # what the target rejects, as before
                result = narrow(convention.module, mode=Mode.ALLOW, overflow=self._overflow, target=self._target)
        if self._target != DEFAULT_TARGET:
            _replay_at_user_line(recorded)
        result.findings.append(fallback)
        _warn_at_user_line(fallback.message)
        return traced32, lowered, convention, result

    def _cross_check(self, traced, in_tree, specs, static) -> "_CrossCheck":
        """The function traced with x64 off too, on the inputs' 32-bit types, and compared
        with the x64 trace (`_CrossCheck`). A function x32 JAX cannot trace is not compared
        (no x32 trace, no difference: its narrowing is checked as before)."""
        narrow_specs = [_narrowed_spec(s) for s in specs]
        spec_args, spec_kwargs = in_tree.unflatten(narrow_specs)
        args, kwargs = self._statics.merge(spec_args, spec_kwargs, static)
        try:
            # Code written for x64 asks for float64 explicitly: with x64 off JAX warns that
            # it truncates (a UserWarning per request), which is this check's business, not
            # the user's. (catch_warnings is process-wide for its duration.)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                traced32 = _compat.trace_x32(self._jit64, tuple(args), kwargs)
        except Exception:  # noqa: BLE001  (x32 JAX raises here too: nothing to compare with)
            return _CrossCheck(None, None, (), (), (), ())
        converts64, converts32, in_lowerings, merged = [], [], [], []
        difference = _compat.first_trace_difference(
            traced.jaxpr, traced32.jaxpr, _narrow_dtype,
            functools.partial(_same_lowering, converts_differ=in_lowerings), skipped_converts=(converts64, converts32),
            merged_widths=merged)
        return _CrossCheck(traced32, difference, tuple(converts64), tuple(converts32), tuple(in_lowerings),
                           tuple(merged))

    def _flat_fun(self, in_tree, static) -> Callable:
        def flat_fun(*flat):
            dyn_args, dyn_kwargs = in_tree.unflatten(flat)
            args, kwargs = self._statics.merge(dyn_args, dyn_kwargs, static)
            return jax.tree_util.tree_leaves(self._fun(*args, **kwargs))
        return flat_fun

    def _derived(self, key: tuple, make: Callable[[], Callable], trace_dtypes: tuple) -> "NarrowedFunction":
        """A NarrowedFunction of a transformed flat function (its vmap or its VJP), with
        this one's mode and overflow, traced at the dtypes of the primal trace, made once
        per key."""
        with self._lock:
            derived = self._derived_functions.get(key)
            if derived is None:
                derived = self._derived_functions[key] = NarrowedFunction(
                    make(), mode=self._mode, overflow=self._overflow, jit_kwargs={}, trace_dtypes=trace_dtypes,
                    target=self._target)
        return derived


def _narrow_aval(aval):
    dtype = _narrow_dtype(aval.dtype)
    return aval if dtype is None else aval.update(dtype=dtype)


class Lowered:
    """The narrowed program for one signature."""

    def __init__(self, program: _Program, flat_inputs: list, statics: _StaticArgs):
        self._program = program
        self._flat_inputs = flat_inputs
        self._statics = statics

    @property
    def findings(self) -> list[Finding]:
        return self._program.narrowed.findings

    @property
    def changes(self) -> dict[str, int]:
        return self._program.narrowed.changes

    def as_text(self) -> str:
        return self._program.narrowed.text

    def compile(self) -> "Compiled":
        return Compiled(self._program, self._program.executable(), self._statics)


class Compiled:
    """A compiled narrowed program; call it with the same arguments as the function."""

    def __init__(self, program: _Program, executable, statics: _StaticArgs):
        self._program = program
        self._executable = executable
        self._statics = statics

    def __call__(self, *args, **kwargs):
        program = self._program
        dyn_args, dyn_kwargs, _ = self._statics.split(args, kwargs)
        leaves = jax.tree_util.tree_leaves((dyn_args, dyn_kwargs))
        return program.out_tree.unflatten(self._executable.call(*program.narrow_inputs(leaves)))

    def as_text(self) -> str:
        return self._executable.as_text()  # the compiled (optimized HLO) program
