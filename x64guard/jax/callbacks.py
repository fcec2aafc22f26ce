"""Host callbacks at 32 bits: jax.debug.print/callback, pure_callback, io_callback and
equinox's error_if run as x32 JAX runs them.

The traced x64 program is rewritten (`narrow_callback_equations`) so that each callback
receives what x32 JAX would give it and its declared 64-bit results come back narrowed
(`NarrowedCallbackResults`: floats rounded, integers range-checked), so the narrowed
module's callbacks carry only 32-bit types. An X64GuardError a callback raises reaches
the caller as a JAX runtime error; `raise_callback_error` raises the X64GuardError itself.
"""

from __future__ import annotations

import threading
from typing import Callable

import numpy as np

from x64guard.errors import X64GuardError
from x64guard.findings import Finding, Kind
from x64guard.jax import _private
from x64guard.jax.inputs import narrow_dtype


def callbacks_at_32_bits(closed_jaxpr):
    """The traced program with its host callbacks run at 32 bits (or None: none)."""
    return narrow_callback_equations(closed_jaxpr, narrow_dtype, NarrowedCallbackResults)


# ----------------------------------------------------------------------------- the jaxpr rewrite

def narrow_callback_equations(closed_jaxpr, narrow_dtype, wrap_results):
    """`closed_jaxpr` with every host callback run at 32 bits, or None if it has none to
    rewrite. Same signature, same effects: 64-bit operands are converted to their 32-bit
    dtype before the callback (what the narrowed program holds there anyway), declared
    64-bit results come back at 32 bits (`wrap_results(callback, declared, narrowed, name)`
    converts them on the host) and are converted back to the declared type for the rest
    of the x64 program, where narrowing makes those converts no-ops. Nested jaxprs (jit,
    cond, while, scan, custom_jvp/vjp, shard_map, remat) are rewritten too.

    narrow_dtype(dtype) -> the 32-bit dtype, or None if `dtype` stays.
    """
    rewriter = _CallbackRewriter(narrow_dtype, wrap_results)
    if not rewriter.jax.wraps_jaxpr:
        return rewriter.rewrite_jaxpr(closed_jaxpr)
    rewritten = rewriter.rewrite_jaxpr(closed_jaxpr.jaxpr)
    return None if rewritten is None else closed_jaxpr.replace(jaxpr=rewritten)


def callback_name(params: dict) -> str:
    """The user's function behind a callback equation, for messages."""
    callback = params.get("callback")
    inner = getattr(callback, "callback_func", None) or getattr(callback, "func", None) or callback
    name = getattr(inner, "__qualname__", None) or getattr(inner, "__name__", None) or repr(inner)
    return f"{getattr(inner, '__module__', None) or '?'}.{name}" if callable(inner) else str(name)


# The callback primitives rewritten, by name (jax.extend.core exports no callback
# primitive; the names are JAX's own: debug_callback and debug_print take operands only,
# pure_callback and io_callback operands and results; seen in jax 0.10.2, 0.11.2, 0.12.0.1).
CALLBACK_PRIMITIVES = frozenset({"debug_callback", "debug_print", "pure_callback", "io_callback"})


class _CallbackRewriter:
    """One rewrite of a jaxpr and its nested jaxprs; each method returns None when it
    changed nothing."""

    def __init__(self, narrow_dtype, wrap_results):
        self.jax = _private.jaxpr_internals()
        self.narrow_dtype = narrow_dtype
        self.wrap_results = wrap_results
        self.jaxpr_types = (self.jax.Jaxpr, self.jax.ClosedJaxpr)

    def rewrite_jaxpr(self, jaxpr):
        eqns, changed = [], False
        for eqn in jaxpr.eqns:
            if eqn.primitive.name in CALLBACK_PRIMITIVES:
                replacement = self.rewrite_callback(eqn)
                if replacement is not None:
                    eqns.extend(replacement)
                    changed = True
                    continue
            new_params = {}
            for key, value in eqn.params.items():
                rewritten = self.rewrite_param(value)
                if rewritten is not None:
                    new_params[key] = rewritten
            if new_params:
                eqns.append(eqn.replace(params={**eqn.params, **new_params}))
                changed = True
            else:
                eqns.append(eqn)
        return jaxpr.replace(eqns=eqns) if changed else None

    def rewrite_param(self, value):
        if self.jax.wraps_jaxpr and isinstance(value, self.jax.ClosedJaxpr):
            jaxpr = self.rewrite_jaxpr(value.jaxpr)
            return None if jaxpr is None else value.replace(jaxpr=jaxpr)
        if isinstance(value, self.jax.Jaxpr):
            return self.rewrite_jaxpr(value)
        if isinstance(value, tuple) and any(isinstance(v, self.jaxpr_types) for v in value):
            rewritten = [self.rewrite_param(v) for v in value]
            if all(r is None for r in rewritten):
                return None
            return tuple(v if r is None else r for v, r in zip(value, rewritten))
        return None

    def rewrite_callback(self, eqn):
        """[converts of its operands, the callback, converts of its results back], or None."""
        before, invars = self._narrowed_operands(eqn)
        params = dict(eqn.params)
        outvars, after = list(eqn.outvars), []
        if "result_avals" in params:
            declared = tuple(params["result_avals"])
            narrowed = tuple(self._narrowed_aval(a) or a for a in declared)
            if narrowed != declared:
                params["result_avals"] = narrowed
                params["callback"] = self.wrap_results(params["callback"], declared, narrowed,
                                                       callback_name(eqn.params))
                outvars, after = self._widened_results(eqn, declared, narrowed)
        if not before and not after and params == eqn.params:
            return None
        return [*before, eqn.replace(invars=invars, outvars=outvars, params=params), *after]

    def _narrowed_operands(self, eqn) -> tuple[list, list]:
        """(converts to 32 bits, the callback's new operands)."""
        converts, invars = [], []
        for atom in eqn.invars:
            target = self._narrowed_aval(atom.aval)
            if target is None:
                invars.append(atom)
            else:
                var = self.jax.Var(target)
                converts.append(self._convert(atom, var, target, eqn))
                invars.append(var)
        return converts, invars

    def _widened_results(self, eqn, declared: tuple, narrowed: tuple) -> tuple[list, list]:
        """(the callback's new outputs, converts of them back to the declared types)."""
        outvars, converts = [], []
        for out, old, new in zip(eqn.outvars, declared, narrowed):
            if old == new:
                outvars.append(out)
                continue
            var = self.jax.Var(new.update(weak_type=out.aval.weak_type) if hasattr(out, "aval") else new)
            outvars.append(var)
            if not isinstance(out, self.jax.DropVar):
                converts.append(self._convert(var, out, out.aval, eqn))
        return outvars, converts

    def _convert(self, source, out, aval, eqn):
        params = dict(new_dtype=aval.dtype, weak_type=aval.weak_type, sharding=None)
        return self.jax.new_jaxpr_eqn([source], [out], self.jax.convert_p, params, frozenset(), eqn.source_info,
                                      eqn.ctx)

    def _narrowed_aval(self, aval):
        dtype = self.narrow_dtype(aval.dtype) if hasattr(aval, "dtype") else None
        return None if dtype is None else aval.update(dtype=dtype)


# ----------------------------------------------------------------------------- results on the host

class NarrowedCallbackResults:
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
                    [Finding(Kind.CALLBACK_RESULT_OUT_OF_RANGE, "error", "callback", self.name,
                             f"result #{i} value {bad} does not fit in {target}")]))
        return array.astype(target)

    def __eq__(self, other) -> bool:
        return (type(other) is NarrowedCallbackResults and self.callback == other.callback
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


def raise_callback_error(runtime_error: Exception) -> None:
    """Raise the X64GuardError a callback raised, if `runtime_error` carries one."""
    text = str(runtime_error)
    if "X64GuardError" not in text:
        return
    with _callback_errors_lock:
        message = next((m for m in _callback_errors if m in text), None)
        error = _callback_errors.pop(message, None)
    if error is not None:
        raise X64GuardError(str(error), error.findings) from runtime_error
