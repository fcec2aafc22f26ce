"""Every private JAX call x64guard makes, and nothing else: what x64guard needs from JAX
beyond its stable API (jax._src, jaxlib internals), in one place.

Each is commented with the JAX releases it was seen in. x64guard is tested with jax 0.10.x,
0.11.x and 0.12.x (x64guard/versions.py, `make test-matrix`) and says so plainly when it
meets another version, instead of failing somewhere deep inside a pass. What x64guard.jit
does with these calls lives beside this module (callbacks.py, primitive.py, trace_check.py).
A call not marked otherwise is seen in jax 0.10.2, 0.11.2 and 0.12.0.1: the JAX-side suites
run on each (`make test-matrix`, tests/matrix/jax-*.txt).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
from typing import Any, NamedTuple, Sequence


# ----------------------------------------------------------------------------- configuration

def x64_enabled():
    """A context manager: 64-bit types enabled for this thread only, restored on exit
    (also when an exception is raised). JAX's own thread-local state for
    jax_enable_x64; the global flag other threads see never changes."""
    from jax._src import config

    return config.enable_x64(True)


def x64_disabled():
    """`x64_enabled`'s counterpart: 64-bit types off for this thread only."""
    from jax._src import config

    return config.enable_x64(False)


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
    from jax._src import source_info_util, traceback_util

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

    with config.enable_x64(True), config.use_simplified_jaxpr_constants(False):
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
    from jax._src import core

    return [c for c in getattr(traced, "_consts", ()) if isinstance(c, core.Tracer)]


def escaped_tracer_error(tracer, detail: str) -> Exception:
    """JAX's own UnexpectedTracerError for `tracer`, naming where it was made, as jax.jit
    raises it for a function that kept a value of an earlier trace (core.escaped_tracer_error:
    seen in jax 0.10.2, 0.11.2 and 0.12.0.1)."""
    from jax._src import core

    return core.escaped_tracer_error(tracer, detail)


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
    with config.enable_x64(True), config.use_simplified_jaxpr_constants(False):
        return traced.lower()


def _traced_with_jaxpr(traced, closed_jaxpr):
    """A new `stages.Traced` like `traced` with another jaxpr. Its constructor grows
    arguments between releases (0.10: meta_tys_flat, params, in_tree, out_tree, consts;
    0.11, 0.12: also fun_sourceinfo); each is read from the attribute of the same name,
    `_`-prefixed or not, so that a new argument is carried rather than dropped. An
    argument with no such attribute is a JAX we have not seen: refused, not guessed."""
    import inspect

    from jax._src import stages

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


@dataclasses.dataclass(frozen=True)
class CallingConvention:
    """How a lowered program's `main` is called, from the one lowering (no jax.export).

    main(*tokens for ordered_effects, *inputs[kept_var_idx]) -> (*tokens, *outputs)."""

    module: Any                    # JAX's own cached ir.Module: never mutate it
    in_avals: tuple                # the kept inputs' (after dead-input elimination)
    out_avals: tuple
    kept_var_idx: frozenset
    ordered_effects: tuple
    effects: frozenset             # ordered and unordered
    host_callbacks: tuple          # main's callbacks, by the index their custom_calls carry
    keepalive: tuple
    num_devices: int
    in_shardings: tuple            # concrete Sharding per kept input, or None
    out_shardings: tuple


def calling_convention(lowered) -> CallingConvention:
    from jax._src import sharding_impls

    lowering = lowered._lowering
    args = lowering.compile_args
    if lowering.const_args:
        # Not reached with JAX 0.10.2's defaults, nor with jax_use_simplified_jaxpr_constants
        # on (tried): a refusal that says what to do, should another setting reach it.
        from x64guard.errors import X64GuardError
        raise X64GuardError(
            f"x64guard.jit: JAX lowered this function with {len(lowering.const_args)} constant(s) hoisted into "
            "arguments of the compiled program, which x64guard.jit cannot narrow and pass; turn off the JAX setting "
            "that hoists them for this function, or narrow its lowering with x64guard.narrow("
            "jax.jit(f).lower(...).compiler_ir())")

    def concrete(shardings, n):
        shardings = tuple(shardings) if shardings is not None else (None,) * n
        return tuple(None if isinstance(s, sharding_impls.UnspecifiedValue) or s is None else s
                     for s in shardings)

    in_avals = tuple(args["global_in_avals"])
    out_avals = tuple(args["global_out_avals"])
    ordered = tuple(args["ordered_effects"])
    return CallingConvention(
        module=lowering.stablehlo(),
        in_avals=in_avals, out_avals=out_avals,
        kept_var_idx=frozenset(args["kept_var_idx"]),
        ordered_effects=ordered,
        effects=frozenset(ordered) | frozenset(args["unordered_effects"]),
        host_callbacks=tuple(args["host_callbacks"]), keepalive=tuple(args["keepalive"]),
        num_devices=int(args["num_devices"]),
        in_shardings=concrete(args["in_shardings"], len(in_avals)),
        out_shardings=concrete(args["out_shardings"], len(out_avals)))


def is_extended_dtype(dtype) -> bool:
    """PRNG key types (key<fry>, key<rbg>) and other dtypes numpy cannot interpret."""
    from jax._src import dtypes

    return dtypes.issubdtype(dtype, dtypes.extended)


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
    convert_p: Any           # lax.convert_element_type_p: params new_dtype, weak_type, sharding
    WrappedFun: type         # linear_util.WrappedFun: rules in custom_jvp/vjp parameters
    summarize: Any           # source_info_util.summarize(source_info) -> 'file:line (function)'


@functools.cache
def jaxpr_internals() -> JaxprInternals:
    from jax._src import core, linear_util, source_info_util
    from jax._src.lax import lax as lax_internal

    closed_type = getattr(core, "ClosedJaxpr", core.Jaxpr)
    return JaxprInternals(
        Jaxpr=core.Jaxpr, ClosedJaxpr=closed_type, wraps_jaxpr=closed_type is not core.Jaxpr, Var=core.Var,
        DropVar=core.DropVar, Literal=core.Literal, AbstractValue=core.AbstractValue,
        new_jaxpr_eqn=core.new_jaxpr_eqn, convert_p=lax_internal.convert_element_type_p,
        WrappedFun=linear_util.WrappedFun, summarize=source_info_util.summarize)


def callback_primitives() -> dict:
    """The callback primitives x64guard.jit rewrites, by name: debug_callback and
    debug_print (operands only), pure_callback and io_callback (operands and results)."""
    from jax._src import callback, debugging

    return {"debug_callback": debugging.debug_callback_p, "debug_print": debugging.debug_print_p,
            "pure_callback": callback.pure_callback_p, "io_callback": callback.io_callback_p}


# ----------------------------------------------------------------------------- the call primitive

# The custom_call targets of host callbacks: each names its Python function by an index
# into the module's callback list (`mhlo.backend_config = {index = N : ui64}`).
PYTHON_CALLBACK_TARGETS = ("xla_ffi_python_cpu_callback", "xla_ffi_partitioned_python_cpu_callback",
                            "xla_ffi_python_gpu_callback", "xla_ffi_partitioned_python_gpu_callback")


def define_call_primitive(name: str, abstract_eval, lowering, batching):
    """A primitive that calls a narrowed program: effectful abstract eval, its lowering
    rule for every platform, an impl that jit-compiles it, and a batching rule."""
    import functools

    from jax._src import core, dispatch
    from jax._src.interpreters import batching as batching_lib
    from jax._src.interpreters import mlir as mlir_lib

    primitive = core.Primitive(name)
    primitive.multiple_results = True
    primitive.def_effectful_abstract_eval(abstract_eval)
    primitive.def_impl(functools.partial(dispatch.apply_primitive, primitive))
    mlir_lib.register_lowering(primitive, lowering)
    batching_lib.primitive_batchers[primitive] = batching
    dispatch.prim_requires_devices_during_lowering.add(primitive)  # host callbacks need the backend
    return primitive


def moveaxis_to_front(x, axis: int):
    from jax._src.interpreters import batching as batching_lib

    return batching_lib.moveaxis(x, axis, 0)


class InliningInternals(NamedTuple):
    """What inlining a narrowed module into the calling program's lowering needs
    (primitive.py's `emit_inlined_call`), beside the caller's lowering (`CallerLowering`)."""

    ir: Any                  # jaxlib's MLIR bindings, as JAX's lowering uses them
    func_dialect: Any
    lift_meshes: Any         # sdy-lift-inlined-meshes on a module


@functools.cache
def inlining_internals() -> InliningInternals:
    from jax._src.lib.mlir import ir
    from jax._src.lib.mlir.dialects import func as func_dialect

    return InliningInternals(ir=ir, func_dialect=func_dialect, lift_meshes=_lift_meshes)


class CallerLowering:
    """The lowering rule's view of the program it is called in: JAX's
    `LoweringRuleContext` (`ctx`) and its `ModuleContext`, whose attributes x64guard reads
    and calls only here (module_context.context/module/symbol_table/axis_context/
    host_callbacks/add_host_callback/add_keepalive; ctx.tokens_in/set_tokens_out/avals_out;
    mlir.merge_mlir_modules, mlir.TokenSet)."""

    def __init__(self, ctx):
        self._ctx = ctx
        self._module = ctx.module_context

    @property
    def mlir_context(self):
        return self._module.context

    @property
    def avals_out(self) -> Sequence:
        return self._ctx.avals_out

    def num_devices(self) -> int:
        """The calling program's device count, from its axis context."""
        from jax._src import sharding_impls

        axis_context = self._module.axis_context
        if isinstance(axis_context, sharding_impls.ShardingContext):
            return axis_context.num_devices
        if isinstance(axis_context, sharding_impls.SPMDAxisContext):
            return axis_context.mesh.size
        return 1

    def add_keepalive(self, value) -> None:
        self._module.add_keepalive(value)

    def add_host_callback(self, callback) -> int:
        """Register a host callback with the calling program; its index in their list."""
        self._module.add_host_callback(callback)
        return len(self._module.host_callbacks) - 1

    def merge(self, submodule, name: str) -> str:
        """Merge `submodule`'s functions into the calling module (renamed, private); the
        symbol its main now has."""
        from jax._src.interpreters import mlir as mlir_lib

        return mlir_lib.merge_mlir_modules(self._module.module, name, submodule,
                                           dst_symtab=self._module.symbol_table)

    def token_in(self, effect):
        return self._ctx.tokens_in.get(effect)

    def set_tokens_out(self, tokens: dict) -> None:
        from jax._src.interpreters import mlir as mlir_lib

        self._ctx.set_tokens_out(mlir_lib.TokenSet(tokens))

    def with_sharding(self, x, aval, sharding):
        """`x` annotated with `sharding` (None: as it is)."""
        if sharding is None:
            return x
        from jax._src import config
        from jax._src.export import _export

        return _export.wrap_with_sharding(self._ctx, x, aval, sharding, use_shardy=config.use_shardy_partitioner.value)


def _lift_meshes(submodule) -> None:
    from jax._src.lib.mlir import passmanager

    with submodule.context:
        passmanager.PassManager.parse("builtin.module(sdy-lift-inlined-meshes)").run(submodule.operation)


def effects_allow_custom_vjp(effects) -> bool:
    from jax._src import effects as effects_lib

    return not effects_lib.custom_derivatives_allowed_effects.filter_not_in(effects)


# ----------------------------------------------------------------------------- compiling, dispatching from C++

class ConfigOverride(NamedTuple):
    state: Any               # a config State (callable as a context manager)
    value: Any               # the value this thread set for itself


def thread_config_overrides() -> "tuple[ConfigOverride, ...] | None":
    """The JAX settings this thread has set for itself (`with jax.enable_x64(...)`,
    `with jax.default_device(...)`, any config State used as a context manager), as
    (state, value) records for another thread that works on its behalf: a compile reads
    such settings (optimization effort, the persistent cache's). None where this JAX keeps
    them in another layout: the caller then compiles in its own thread.
    (Config._value_holders, State.get_local, config_ext.unset: seen in jax 0.10.2, 0.11.2
    and 0.12.0.1.)"""
    from jax._src import config

    unset = getattr(getattr(config, "config_ext", None), "unset", None)
    holders = getattr(config.config, "_value_holders", None)
    if unset is None or not isinstance(holders, dict):
        return None
    overrides = []
    for holder in holders.values():
        get_local = getattr(holder, "get_local", None)
        if get_local is not None and callable(holder):
            value = get_local()
            if value is not unset:
                overrides.append(ConfigOverride(holder, value))
    return tuple(overrides)


@contextlib.contextmanager
def config_overrides(overrides: "tuple[ConfigOverride, ...]"):
    """Set `overrides` (from `thread_config_overrides`) as this thread's own settings."""
    with contextlib.ExitStack() as stack:
        for state, value in overrides:
            stack.enter_context(state(value))
        yield


def compile_with_avals(lowered, module, in_avals: Sequence, out_avals: Sequence):
    """Compile `module` (a rewrite of `lowered`'s own module) the way JAX compiles
    `lowered`: same devices, shardings, donation, host callbacks and effects, with the
    types of every flat input (`in_avals`, dead ones included) and of the outputs
    replaced. No second lowering."""
    from jax._src.interpreters import pxla

    lowering = lowered._lowering
    args = dict(lowering.compile_args)
    kept = sorted(args["kept_var_idx"])
    args["global_in_avals"] = [in_avals[i] for i in kept]
    args["global_out_avals"] = list(out_avals)
    info = args.get("all_args_info")
    if info is not None:
        args["all_args_info"] = info._replace(in_avals=list(in_avals))
    computation = pxla.MeshComputation(
        lowering._name, module, lowering.const_args, lowering._donated_invars, lowering._platforms,
        lowering._compiler_options_kvs, lowering._device_list, **args)
    return computation.compile()


def fastpath_data(executable, out_tree, args_flat, outs_flat):
    """What JAX's C++ dispatch needs to run later calls of this signature without
    Python (None when it cannot: effects, host callbacks, non-array outputs)."""
    from jax._src import pjit

    return pjit._get_fastpath_data(executable, out_tree, args_flat, outs_flat, (), [], None, [])


def cpp_dispatcher(name: str, key, cache_miss, *, static_argnums: tuple, static_argnames: tuple,
                   donate_argnums: tuple, donate_argnames: tuple):
    """A jax.jit-style callable whose C++ dispatch runs cached signatures and calls
    `cache_miss(*args, **kwargs) -> (outputs, fastpath_data or None)` for new ones.
    `key` identifies the function in JAX's C++ cache (unique per dispatcher)."""
    from jax._src import pjit, traceback_util, tree_util
    from jax._src.interpreters import pxla
    from jax._src.lib import _jax

    @traceback_util.api_boundary
    def miss(*args, **kwargs):
        outs, fastpath = cache_miss(*args, **kwargs)
        return outs, fastpath, False

    cache_key = pxla.JitGlobalCppCacheKeys(
        donate_argnums=donate_argnums, donate_argnames=donate_argnames, device=None, backend=None,
        in_shardings_treedef=None, in_shardings_leaves=None, out_shardings_treedef=None,
        out_shardings_leaves=None, in_layouts_treedef=None, in_layouts_leaves=None,
        out_layouts_treedef=None, out_layouts_leaves=None, compiler_options_kvs=None)
    return _jax.pjit(name, key, miss, static_argnums, static_argnames, cache_key, tree_util.dispatch_registry,
                     pxla.cc_shard_arg, pjit._get_cpp_global_cache(cache_key.contains_explicit_attributes))


# ----------------------------------------------------------------------------- the cross-check (trace_check.py)

def trace_x32(jitted, args: tuple, kwargs: dict):
    """`jitted.trace(*args, **kwargs)` with 64-bit types off for this thread only (what
    jax.jit with x64 off traces), constants embedded as in `trace_x64`."""
    from jax._src import config

    with config.enable_x64(False), config.use_simplified_jaxpr_constants(False):
        return jitted.trace(*args, **kwargs)


def lower_traced_x32(traced):
    """Lower an x32 `Traced` (from `trace_x32`) with 64-bit types off for this thread only."""
    from jax._src import config

    with config.enable_x64(False), config.use_simplified_jaxpr_constants(False):
        return traced.lower()

def jax_primitive_ids() -> frozenset:
    """ids of the Primitive objects JAX's own modules define (module attributes of jax.*),
    among the modules imported so far (core.Primitive: jax 0.10.2, 0.11.2, 0.12.0.1)."""
    import sys

    from jax._src import core

    found = set()
    for name, module in list(sys.modules.items()):
        if module is None or not (name == "jax" or name.startswith(("jax.", "jaxlib."))):
            continue
        for value in list(getattr(module, "__dict__", {}).values()):
            if isinstance(value, core.Primitive):
                found.add(id(value))
    return frozenset(found)


def lower_equation(eqn, x64: bool) -> str:
    """MLIR text of one equation lowered on its own (its operands as arguments, its
    literals as constants), with jax_enable_x64 set to `x64` while it lowers (eqn.invars,
    core.Literal, Primitive.bind and config.enable_x64: seen in jax 0.10.2, 0.11.2 and
    0.12.0.1)."""
    import jax

    from jax._src import config, core

    variables = [v for v in eqn.invars if not isinstance(v, core.Literal)]

    def equation(*values):
        it = iter(values)
        operands = [v.val if isinstance(v, core.Literal) else next(it) for v in eqn.invars]
        out = eqn.primitive.bind(*operands, **eqn.params)
        return tuple(out) if eqn.primitive.multiple_results else out

    specs = [jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype) for v in variables]
    with config.enable_x64(x64):
        return jax.jit(equation).lower(*specs).as_text()


def equation_location(eqn) -> str:
    """An equation's source line, as JAX summarizes it ('' when unknown;
    source_info_util.summarize: seen in jax 0.10.2, 0.11.2 and 0.12.0.1)."""
    from jax._src import source_info_util

    try:
        return source_info_util.summarize(eqn.source_info)
    except Exception:  # noqa: BLE001
        return ""


