"""Every private JAX call x64guard makes, and nothing else: what x64guard needs from JAX
beyond its stable API (jax._src, jaxlib internals), in one place.

Each is commented with the JAX releases it was seen in. x64guard is tested with jax 0.10.x,
0.11.x and 0.12.x (x64guard/versions.py, `make test-matrix`) and says so plainly when it
meets another version, instead of failing somewhere deep inside a pass. What x64guard.jit
does with these calls lives beside this module (callbacks.py, primitive.py, trace_check.py).
The program's calls (calling convention, the call primitive, compiling, C++ dispatch) are
in _private_lowering.py. A call not marked otherwise is seen in jax 0.10.2, 0.11.2 and 0.12.0.1: the JAX-side suites
run on each (`make test-matrix`, tests/matrix/jax-*.txt).
"""

from __future__ import annotations

import functools
import gc
from typing import Any, NamedTuple


# ----------------------------------------------------------------------------- configuration

def x64_enabled():
    """A context manager: 64-bit types enabled for this thread only, restored on exit
    (also when an exception is raised). JAX's own thread-local state for
    jax_enable_x64; the global flag other threads see never changes. Public
    (`jax.enable_x64`): seen in jax 0.10.2, 0.11.2 and 0.12.0.1."""
    import jax

    return jax.enable_x64(True)


def x64_disabled():
    """`x64_enabled`'s counterpart: 64-bit types off for this thread only."""
    import jax

    return jax.enable_x64(False)


def register_enum_state(name: str, values: list[str], default: str, help: str):
    """A JAX configuration state that takes part in the jit cache key and the trace
    context (both are needed: either alone gave stale results, see the notes).

    `config.enum_state`, less its read of $NAME: JAX would take the raw variable (and
    refuse `ERROR`); the caller reads it itself and passes `default`, so that nobody has
    to rewrite the environment."""
    from jax._src import config

    if name in config.config_states:  # re-import (tests reload modules)
        return config.config_states[name]

    def parser(value):
        if type(value) is not str or value not in values:
            raise ValueError(f"new enum value must be in {values}, got {value} of type {type(value)}.")
        return value

    state = config.State[str](name, default, help, parser=parser,
                              include_in_jit_key=True, include_in_trace_context=True)
    config.config._contextmanager_flags.add(name)
    config.config.add_option(name, state, "enum", meta_args=[], meta_kwargs={"enum_values": values, "help": help})
    setattr(config.Config, name, property(lambda _: state.value))
    return state


def trace_context() -> tuple:
    """The values of JAX's configuration that key its jit caches (x64, matmul precision,
    `jax_accurate_erf_inv`, x64guard's mode, ...): what jax.jit's C++ dispatch misses on,
    hashable. `config.trace_context` (seen in jax 0.10.2, 0.11.2 and 0.12.0.1)."""
    from jax._src import config

    return config.trace_context()


def chain_persistent_cache_key(part) -> None:
    """Hash `part()` into the persistent compilation cache key, after whatever hook
    another library installed (the hook is a single global slot)."""
    from jax._src import cache_key

    previous = cache_key.custom_hook
    if getattr(previous, "_x64guard", False):
        return

    def hook() -> str:
        return f"{previous()}|{part()}"

    hook._x64guard = True  # type: ignore[attr-defined]
    cache_key.custom_hook = hook


def exclude_from_user_frames(path: str) -> None:
    """Keep x64guard's own frames out of the source locations JAX attaches to ops, so
    that findings point at the user's line, not at x64guard's call into jax."""
    from jax._src import traceback_util
    from jax.extend import source_info_util

    source_info_util.register_exclusion(path)
    traceback_util.register_exclusion(path)


# ----------------------------------------------------------------------------- tracing and lowering

def array_impl_type() -> type:
    """jax.Array's concrete class, without creating an array (which would start a backend)."""
    from jax._src.array import ArrayImpl

    return ArrayImpl


def trace_x64(jitted, args: tuple, kwargs: dict):
    """`jitted.trace(*args, **kwargs)` with 64-bit types on for this thread only, and
    closed-over constants embedded in the program (not hoisted into extra arguments,
    which the calling convention below does not carry)."""
    from jax._src import config

    with x64_enabled(), config.use_simplified_jaxpr_constants(False):
        return jitted.trace(*args, **kwargs)


# ----------------------------------------------------------------------------- JAX's trace caches

def release_traces(fun) -> None:
    """Forget what JAX's trace caches hold for `fun`, an x64guard-owned wrapper
    (`functools.partial(user_fun)`), so that nothing else of the user's is touched; then
    collect Python's young generations (0 and 1), since a trace's objects can form cycles
    that hold its constants until the collector next runs (measured: the x32 retrace right
    after a trace-differs choice still got the x64 conversion; one generation-0 pass freed
    it. Right after building a 2M-parameter MLP's program (175 ms) it takes 0.45 ms, where
    a full collection takes 70-130 ms with flax and torch imported).

    Why: jaxlib converts a closed-over NumPy array to its traced constant once, in a cache
    keyed by the array alone, not by jax_enable_x64 (`canonicalize_value`'s weak-key,
    weak-value cache; jaxlib/py_values.cc SetTypedNdArrayType). While that conversion is
    alive, a trace at the other width gets it, the wrong width, and JAX lowers an
    ill-typed program ("op requires the same element type for all operands and results").
    JAX's caches of a trace (pe.trace_to_jaxpr and pjit._infer_params_cached, both
    weakref LRU caches keyed by the function) keep it alive as long as the function. An
    x64 trace left there would break the user's own later x32 jax.jit of any code
    closing over the same arrays, and the reverse. Seen in jax 0.10.2, 0.11.2 and
    0.12.0.1 (`evict_weakref` on both caches); probed by feature: where a cache lacks it,
    nothing is released (docs/limits.md)."""
    from jax._src import pjit
    from jax._src.interpreters import partial_eval as pe

    for cache in (getattr(pe, "trace_to_jaxpr", None), getattr(pjit, "_infer_params_cached", None)):
        evict = getattr(cache, "evict_weakref", None)
        if evict is not None:
            evict(fun)
    gc.collect(1)


def closed_over_tracers(traced) -> list:
    """The tracers a `Traced` closes over: values of another trace the function reached
    without taking them as arguments (kept by the function from an earlier trace, or of an
    enclosing transformation). jit's trace lifts them into extra leading arguments of its
    program (`Traced._consts`, from pjit's `pe.separate_consts` of tracer constants: seen in
    jax 0.10.2), which x64guard.jit's programs do not take. Each tracer's `val` is its
    variable in the trace that made it (DynamicJaxprTracer.val)."""
    import jax

    return [c for c in getattr(traced, "_consts", ()) if isinstance(c, jax.core.Tracer)]


def escaped_tracer_error(tracer, detail: str) -> Exception:
    """JAX's public UnexpectedTracerError for `tracer`, naming where it was made (the
    tracer's `_line_info`, read if present: seen in jax 0.10.2), as jax.jit raises it for a
    function that kept a value of an earlier trace."""
    import jax
    from jax.extend import source_info_util

    aval = getattr(tracer, "aval", None)
    what = aval.str_short() if hasattr(aval, "str_short") else type(tracer).__name__
    line_info = getattr(tracer, "_line_info", None)
    made = ""
    if line_info is not None:
        try:
            made = f" The leaked value was created on line {source_info_util.summarize(line_info)}."
        except Exception:  # noqa: BLE001  (where it was made is a courtesy)
            made = ""
    return jax.errors.UnexpectedTracerError(
        f"Encountered an unexpected tracer: a value with type {what} wrapped in a {type(tracer).__name__} escaped "
        f"the scope of the transformation that made it.{made} Detail: {detail}")


def jaxpr_constants(closed_jaxpr) -> list:
    """Every constant value a traced jaxpr holds: its own consts, literals, and those of the
    jaxprs in its equations' parameters (pjit, cond, scan, while, custom_jvp ...),
    recursively. The consts live on ClosedJaxpr in 0.10, on Jaxpr itself in 0.11 and 0.12
    (jaxpr_internals); Jaxpr.eqns, JaxprEqn.params and core.Literal in all three."""
    internals = jaxpr_internals()
    jaxpr_types = (internals.Jaxpr, internals.ClosedJaxpr)
    found: list = []
    seen: set = set()

    def visit(item) -> None:
        if isinstance(item, jaxpr_types):
            if id(item) in seen:
                return
            seen.add(id(item))
            found.extend(getattr(item, "consts", ()))
            for eqn in (item.eqns if hasattr(item, "eqns") else item.jaxpr.eqns):
                found.extend(v.val for v in eqn.invars if isinstance(v, internals.Literal))
                for value in eqn.params.values():
                    visit(value)
        elif isinstance(item, (tuple, list)):
            for element in item:
                visit(element)

    visit(closed_jaxpr)
    return found


def lower_traced(traced, closed_jaxpr=None):
    """Lower a `Traced` (optionally with its jaxpr replaced by `closed_jaxpr`, which has
    the same signature) with 64-bit types on for this thread only."""
    from jax._src import config

    if closed_jaxpr is not None and closed_jaxpr is not traced.jaxpr:
        traced = _traced_with_jaxpr(traced, closed_jaxpr)
    with x64_enabled(), config.use_simplified_jaxpr_constants(False):
        return traced.lower()


def _traced_with_jaxpr(traced, closed_jaxpr):
    """A new `stages.Traced` like `traced` with another jaxpr. Its constructor grows
    arguments between releases (0.10: meta_tys_flat, params, in_tree, out_tree, consts;
    0.11, 0.12: also fun_sourceinfo); each is read from the attribute of the same name,
    `_`-prefixed or not, so that a new argument is carried rather than dropped. An
    argument with no such attribute is a JAX we have not seen: refused, not guessed."""
    import inspect

    from jax import stages  # public: the class jax.jit(f).trace returns (jax 0.10.2, 0.11.2, 0.12.0.1)

    arguments = []
    for name in list(inspect.signature(stages.Traced.__init__).parameters)[1:]:
        if name == "params":
            arguments.append(dict(traced._params, jaxpr=closed_jaxpr))
        elif hasattr(traced, "_" + name):
            arguments.append(getattr(traced, "_" + name))
        elif hasattr(traced, name):
            arguments.append(getattr(traced, name))
        else:
            from x64guard.errors import X64GuardError
            raise X64GuardError(
                f"x64guard.jit: this JAX's Traced takes an argument x64guard does not know ({name!r}); "
                "x64guard.jit cannot rebuild its trace. Use a tested JAX (0.10-0.12), or narrow the lowering "
                "with x64guard.narrow(jax.jit(f).lower(...).compiler_ir())")
    return stages.Traced(*arguments)


def is_extended_dtype(dtype) -> bool:
    """PRNG key types (key<fry>, key<rbg>) and other dtypes numpy cannot interpret."""
    import jax

    return jax.dtypes.issubdtype(dtype, jax.dtypes.extended)


# ----------------------------------------------------------------------------- jaxprs

class JaxprInternals(NamedTuple):
    """What rewriting (callbacks.py) and comparing (trace_check.py) jaxprs needs of
    jax._src: the jaxpr classes, equation building, the convert primitive."""

    Jaxpr: type
    ClosedJaxpr: type        # 0.10: wraps a Jaxpr (`.jaxpr`) and its consts; 0.11: an alias
    wraps_jaxpr: bool        # of Jaxpr, which carries its consts; 0.12: the name is gone
    Var: type
    DropVar: type
    Literal: type
    AbstractValue: type
    new_jaxpr_eqn: Any       # core.new_jaxpr_eqn(invars, outvars, primitive, params, effects, source_info, ctx)
    convert_p: Any           # convert_element_type_p: params new_dtype, weak_type, sharding
    WrappedFun: type         # linear_util.WrappedFun: rules in custom_jvp/vjp parameters
    summarize: Any           # source_info_util.summarize(source_info) -> 'file:line (function)'


@functools.cache
def jaxpr_internals() -> JaxprInternals:
    """All public since jax.extend (jax.extend.core, .core.primitives, .linear_util,
    .source_info_util; jax.core.AbstractValue): the same objects as jax._src's in 0.10.2."""
    import jax
    from jax.extend import core, linear_util, source_info_util
    from jax.extend.core import primitives

    closed_type = getattr(core, "ClosedJaxpr", core.Jaxpr)
    return JaxprInternals(
        Jaxpr=core.Jaxpr, ClosedJaxpr=closed_type, wraps_jaxpr=closed_type is not core.Jaxpr, Var=core.Var,
        DropVar=core.DropVar, Literal=core.Literal, AbstractValue=jax.core.AbstractValue,
        new_jaxpr_eqn=core.new_jaxpr_eqn, convert_p=primitives.convert_element_type_p,
        WrappedFun=linear_util.WrappedFun, summarize=source_info_util.summarize)


# ----------------------------------------------------------------------------- the cross-check (trace_check.py)

def trace_x32(jitted, args: tuple, kwargs: dict):
    """`jitted.trace(*args, **kwargs)` with 64-bit types off for this thread only (what
    jax.jit with x64 off traces), constants embedded as in `trace_x64`."""
    from jax._src import config

    with x64_disabled(), config.use_simplified_jaxpr_constants(False):
        return jitted.trace(*args, **kwargs)


def lower_traced_x32(traced):
    """Lower an x32 `Traced` (from `trace_x32`) with 64-bit types off for this thread only."""
    from jax._src import config

    with x64_disabled(), config.use_simplified_jaxpr_constants(False):
        return traced.lower()

@functools.lru_cache(maxsize=1)
def public_primitive_ids() -> frozenset:
    """ids of the primitives JAX lists publicly (`jax.extend.core.primitives`, public: 175 on
    jax 0.12, the common ones), which `jax_primitive_ids` would find too, without its scan of
    every JAX module (9 ms of a fresh process's first call). The module holds them: ids stay."""
    from jax.extend.core import Primitive, primitives

    return frozenset(id(v) for v in vars(primitives).values() if isinstance(v, Primitive))


def jax_primitive_ids() -> frozenset:
    """ids of the Primitive objects JAX's own modules define (module attributes of jax.*),
    among the modules imported so far (core.Primitive: jax 0.10.2, 0.11.2, 0.12.0.1)."""
    import sys

    from jax.extend.core import Primitive

    found = set()
    for name, module in list(sys.modules.items()):
        if module is None or not (name == "jax" or name.startswith(("jax.", "jaxlib."))):
            continue
        for value in list(getattr(module, "__dict__", {}).values()):
            if isinstance(value, Primitive):
                found.add(id(value))
    return frozenset(found)


def lower_equation(eqn, x64: bool) -> str:
    """MLIR text of one equation lowered on its own (its operands as arguments, its
    literals as constants), with jax_enable_x64 set to `x64` while it lowers (eqn.invars,
    core.Literal, Primitive.bind and config.enable_x64: seen in jax 0.10.2, 0.11.2 and
    0.12.0.1)."""
    import jax
    from jax.extend.core import Literal

    variables = [v for v in eqn.invars if not isinstance(v, Literal)]

    def equation(*values):
        it = iter(values)
        operands = [v.val if isinstance(v, Literal) else next(it) for v in eqn.invars]
        out = eqn.primitive.bind(*operands, **eqn.params)
        return tuple(out) if eqn.primitive.multiple_results else out

    specs = [jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype) for v in variables]
    with jax.enable_x64(x64):
        return jax.jit(equation).lower(*specs).as_text()


def equation_location(eqn) -> str:
    """An equation's source line, as JAX summarizes it ('' when unknown;
    source_info_util.summarize: seen in jax 0.10.2, 0.11.2 and 0.12.0.1)."""
    from jax.extend import source_info_util

    try:
        return source_info_util.summarize(eqn.source_info)
    except Exception:  # noqa: BLE001
        return ""


