"""Everything x64guard needs from JAX beyond its stable API, in one place.

The MLIR bindings ship inside jaxlib and change between releases (method names, type
downcasting, walk semantics). x64guard is tested against the range below and says so
plainly when it meets another version, instead of failing somewhere deep inside a pass.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from typing import Any, Callable, Sequence

def compile_stablehlo(module, platform: str = "cpu"):
    """Compile a StableHLO module (text or ir.Module) for one device of `platform`.

    JAX has no public hook between its lowering and its compile; this uses the same
    backend call JAX's own dispatch uses. Returns (executable, device).
    """
    import jax.extend.backend
    from jax._src import compiler
    from jax._src.lib import xla_client

    backend = jax.extend.backend.get_backend(platform)
    device = backend.devices()[0]
    options = compiler.get_compile_options(num_replicas=1, num_partitions=1, backend=backend)
    text = module if isinstance(module, str) else module.operation.get_asm(enable_debug_info=True)
    return backend.compile_and_load(text, xla_client.DeviceList((device,)), options), device


def run_compiled(executable, device, args) -> list:
    """Run what `compile_stablehlo` returned on numpy inputs; numpy outputs."""
    import jax
    import numpy as np

    inputs = [jax.device_put(np.asarray(a), device) for a in args]
    return [np.asarray(out) for out in executable.execute(inputs)]


def x64_enabled():
    """A context manager: 64-bit types enabled for this thread only, restored on exit
    (also when an exception is raised). JAX's own thread-local state for
    jax_enable_x64; the global flag other threads see never changes."""
    from jax._src import config

    return config.enable_x64(True)


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


def portable_artifact_target() -> str:
    """The StableHLO version jax.export serializes for (four weeks of compatibility)."""
    from jax.extend.mlir.dialects import stablehlo

    return stablehlo.get_version_from_compatibility_requirement(
        stablehlo.StablehloCompatibilityRequirement.WEEK_4)


def exclude_from_user_frames(path: str) -> None:
    """Keep x64guard's own frames out of the source locations JAX attaches to ops, so
    that findings point at the user's line, not at x64guard's call into jax."""
    from jax._src import source_info_util, traceback_util

    source_info_util.register_exclusion(path)
    traceback_util.register_exclusion(path)


def register_mhlo(context) -> None:
    """MHLO, for modules converted from XLA's optimized HLO (mhlo.fusion, ...): jaxlib
    ships the dialect but jax.extend does not expose it."""
    from jaxlib.mlir.dialects import mhlo

    mhlo.register_mhlo_dialect(context)


def hlo_text_to_proto(text: str) -> bytes:
    """A serialized HloModuleProto from HLO text (jaxlib parses HLO text only privately)."""
    from jaxlib import _hlo

    return _hlo.hlo_module_from_text(text).as_serialized_hlo_module_proto()


def stablehlo_to_xla_computation(module: "str | bytes"):
    """An XlaComputation from StableHLO (text or bytecode): the way back to HLO."""
    from jaxlib._jax import mlir as jaxlib_mlir

    return jaxlib_mlir.mlir_module_to_xla_computation(module, use_tuple_args=False, return_tuple=False)


# ----------------------------------------------------------------------------- x64guard.jit
# What x64guard.jit needs from JAX's internals: one traced and lowered x64 program, its
# calling convention, host callbacks rewritten to run at 32 bits, and a primitive whose
# lowering inlines the narrowed module into whatever program calls it.


def array_impl_type() -> type:
    """jax.Array's concrete class, without creating an array (which would start a backend)."""
    from jax._src.array import ArrayImpl

    return ArrayImpl


@functools.lru_cache(maxsize=None)
def excluded_source_dirs() -> tuple[str, ...]:
    """Directories whose frames are never 'the user's line': JAX's and jaxlib's."""
    import jax
    import jaxlib

    from x64guard._user_line import module_dirs

    return module_dirs(jax, jaxlib)


def trace_x64(jitted, args: tuple, kwargs: dict):
    """`jitted.trace(*args, **kwargs)` with 64-bit types on for this thread only, and
    closed-over constants embedded in the program (not hoisted into extra arguments,
    which the calling convention below does not carry)."""
    from jax._src import config

    with config.enable_x64(True), config.use_simplified_jaxpr_constants(False):
        return jitted.trace(*args, **kwargs)


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


# -- host callbacks at 32 bits -----------------------------------------------------------

def callback_primitives() -> dict:
    """The callback primitives x64guard.jit rewrites, by name: debug_callback and
    debug_print (operands only), pure_callback and io_callback (operands and results)."""
    from jax._src import callback, debugging

    return {"debug_callback": debugging.debug_callback_p, "debug_print": debugging.debug_print_p,
            "pure_callback": callback.pure_callback_p, "io_callback": callback.io_callback_p}


def callback_name(params: dict) -> str:
    """The user's function behind a callback equation, for messages."""
    callback = params.get("callback")
    inner = getattr(callback, "callback_func", None) or getattr(callback, "func", None) or callback
    name = getattr(inner, "__qualname__", None) or getattr(inner, "__name__", None) or repr(inner)
    return f"{getattr(inner, '__module__', None) or '?'}.{name}" if callable(inner) else str(name)


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
    from jax._src import core
    from jax._src.lax import lax as lax_internal

    # 0.10: a ClosedJaxpr wraps a Jaxpr (`.jaxpr`) and its consts. 0.11: ClosedJaxpr is an
    # alias of Jaxpr, which carries its consts; 0.12: the alias is gone.
    closed_type = getattr(core, "ClosedJaxpr", core.Jaxpr)
    wraps_jaxpr = closed_type is not core.Jaxpr
    jaxpr_types = (core.Jaxpr, closed_type)
    by_primitive = {p: name for name, p in callback_primitives().items()}
    convert_p = lax_internal.convert_element_type_p

    def convert(atom, aval, eqn):
        var = core.Var(aval)
        params = dict(new_dtype=aval.dtype, weak_type=aval.weak_type, sharding=None)
        return var, core.new_jaxpr_eqn([atom], [var], convert_p, params, frozenset(), eqn.source_info, eqn.ctx)

    def narrowed_aval(aval):
        dtype = narrow_dtype(aval.dtype) if hasattr(aval, "dtype") else None
        return None if dtype is None else aval.update(dtype=dtype)

    def rewrite_callback(eqn, name):
        new_eqns, invars = [], []
        for atom in eqn.invars:
            target = narrowed_aval(atom.aval)
            if target is None:
                invars.append(atom)
            else:
                var, conv = convert(atom, target, eqn)
                new_eqns.append(conv)
                invars.append(var)
        params = dict(eqn.params)
        outvars, after = list(eqn.outvars), []
        if "result_avals" in params:
            declared = tuple(params["result_avals"])
            narrowed = tuple(narrowed_aval(a) or a for a in declared)
            if narrowed != declared:
                params["result_avals"] = narrowed
                params["callback"] = wrap_results(params["callback"], declared, narrowed, callback_name(eqn.params))
                outvars = []
                for out, old, new in zip(eqn.outvars, declared, narrowed):
                    if old == new:
                        outvars.append(out)
                        continue
                    var = core.Var(new.update(weak_type=out.aval.weak_type) if hasattr(out, "aval") else new)
                    outvars.append(var)
                    if not isinstance(out, core.DropVar):
                        after.append(core.new_jaxpr_eqn(
                            [var], [out], convert_p, dict(new_dtype=out.aval.dtype, weak_type=out.aval.weak_type,
                                                          sharding=None),
                            frozenset(), eqn.source_info, eqn.ctx))
        if not new_eqns and not after and params == eqn.params:
            return None
        return [*new_eqns, eqn.replace(invars=invars, outvars=outvars, params=params), *after]

    def rewrite_param(value):
        if wraps_jaxpr and isinstance(value, closed_type):
            jaxpr = rewrite_jaxpr(value.jaxpr)
            return None if jaxpr is None else value.replace(jaxpr=jaxpr)
        if isinstance(value, core.Jaxpr):
            return rewrite_jaxpr(value)
        if isinstance(value, tuple) and any(isinstance(v, jaxpr_types) for v in value):
            rewritten = [rewrite_param(v) for v in value]
            if all(r is None for r in rewritten):
                return None
            return tuple(v if r is None else r for v, r in zip(value, rewritten))
        return None

    def rewrite_jaxpr(jaxpr):
        eqns, changed = [], False
        for eqn in jaxpr.eqns:
            name = by_primitive.get(eqn.primitive)
            if name is not None:
                replacement = rewrite_callback(eqn, name)
                if replacement is not None:
                    eqns.extend(replacement)
                    changed = True
                    continue
            new_params = {}
            for key, value in eqn.params.items():
                rewritten = rewrite_param(value)
                if rewritten is not None:
                    new_params[key] = rewritten
            if new_params:
                eqns.append(eqn.replace(params={**eqn.params, **new_params}))
                changed = True
            else:
                eqns.append(eqn)
        return jaxpr.replace(eqns=eqns) if changed else None

    if not wraps_jaxpr:
        return rewrite_jaxpr(closed_jaxpr)
    rewritten = rewrite_jaxpr(closed_jaxpr.jaxpr)
    return None if rewritten is None else closed_jaxpr.replace(jaxpr=rewritten)


# -- the call primitive --------------------------------------------------------------------

_PYTHON_CALLBACK_TARGETS = ("xla_ffi_python_cpu_callback", "xla_ffi_partitioned_python_cpu_callback",
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


def emit_inlined_call(ctx, args, *, bytecode: bytes, name: str, kept_var_idx, ordered_effects,
                      host_callbacks, keepalive, in_avals, in_shardings, out_shardings, num_devices: int):
    """The lowering rule's body: parse the narrowed module into the caller's MLIR context,
    merge its functions (renamed, private), give its host callbacks indices in the caller's
    list, thread the ordered-effect tokens, and call its main."""
    from jax._src.interpreters import mlir as mlir_lib
    from jax._src.lib.mlir import ir
    from jax._src.lib.mlir.dialects import func as func_dialect

    module_context = ctx.module_context
    caller_devices = _num_devices(module_context.axis_context)
    if num_devices > 1 and caller_devices != num_devices:
        raise ValueError(
            f"x64guard.jit: {name.removeprefix('x64guard_')} was lowered for {num_devices} devices (its shardings or a "
            f"shard_map) and is called inside a program lowered for {caller_devices}; call it outside that program, "
            f"or give the outer jax.jit shardings on the same {num_devices} devices")
    with module_context.context:
        submodule = ir.Module.parse(bytecode)
    if host_callbacks:
        _renumber_host_callbacks(submodule, host_callbacks, module_context)
    for value in keepalive:
        module_context.add_keepalive(value)
    if num_devices > 1:
        _lift_meshes(submodule)
    main = ir.SymbolTable(submodule.operation)["main"]
    callee_type = main.type
    symbol = mlir_lib.merge_mlir_modules(module_context.module, name, submodule,
                                         dst_symtab=module_context.symbol_table)
    kept = [x for i, x in enumerate(args) if i in kept_var_idx]
    if num_devices > 1:  # in_avals, in_shardings: of the kept inputs
        kept = [_with_sharding(ctx, x, aval, s) for x, aval, s in zip(kept, in_avals, in_shardings)]
    operands = [ctx.tokens_in.get(effect) for effect in ordered_effects] + kept
    call = func_dialect.CallOp(callee_type.results, ir.FlatSymbolRefAttr.get(symbol), operands)
    results = list(call.results)
    if ordered_effects:
        tokens = {effect: results[i] for i, effect in enumerate(ordered_effects)}
        ctx.set_tokens_out(mlir_lib.TokenSet(tokens))
        results = results[len(ordered_effects):]
    if num_devices > 1:
        results = [_with_sharding(ctx, x, aval, s) for x, aval, s in zip(results, ctx.avals_out, out_shardings)]
    return results


def _num_devices(axis_context) -> int:
    from jax._src import sharding_impls

    if isinstance(axis_context, sharding_impls.ShardingContext):
        return axis_context.num_devices
    if isinstance(axis_context, sharding_impls.SPMDAxisContext):
        return axis_context.mesh.size
    return 1


def _renumber_host_callbacks(submodule, host_callbacks, module_context) -> None:
    """Host callback custom_calls name their Python function by an index into the
    module's callback list (`mhlo.backend_config = {index = N : ui64}`): register ours
    with the calling module and rewrite the indices."""
    from jax._src.lib.mlir import ir

    new_index = {}
    for i, callback in enumerate(host_callbacks):
        module_context.add_host_callback(callback)
        new_index[i] = len(module_context.host_callbacks) - 1
    ui64 = ir.IntegerType.get_unsigned(64)

    def visit(op):
        if op.name == "stablehlo.custom_call" and \
                ir.StringAttr(op.attributes["call_target_name"]).value in _PYTHON_CALLBACK_TARGETS:
            config = ir.DictAttr(op.attributes["mhlo.backend_config"])
            entries = {config[i].name: config[i].attr for i in range(len(config))}
            entries["index"] = ir.IntegerAttr.get(ui64, new_index[ir.IntegerAttr(entries["index"]).value])
            op.attributes["mhlo.backend_config"] = ir.DictAttr.get(entries)
        return ir.WalkResult.ADVANCE

    with submodule.context:
        submodule.operation.walk(visit)


def _lift_meshes(submodule) -> None:
    from jax._src.lib.mlir import passmanager

    with submodule.context:
        passmanager.PassManager.parse("builtin.module(sdy-lift-inlined-meshes)").run(submodule.operation)


def _with_sharding(ctx, x, aval, sharding):
    from jax._src.export import _export

    if sharding is None:
        return x
    from jax._src import config

    return _export.wrap_with_sharding(ctx, x, aval, sharding, use_shardy=config.use_shardy_partitioner.value)


def effects_allow_custom_vjp(effects) -> bool:
    from jax._src import effects as effects_lib

    return not effects_lib.custom_derivatives_allowed_effects.filter_not_in(effects)


# -- compiling the narrowed module directly, dispatching from C++ --------------------------

def thread_config_overrides() -> "tuple | None":
    """The JAX settings this thread has set for itself (`with jax.enable_x64(...)`,
    `with jax.default_device(...)`, any config State used as a context manager), as
    (state, value) pairs for another thread that works on its behalf: a compile reads
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
                overrides.append((holder, value))
    return tuple(overrides)


@contextlib.contextmanager
def config_overrides(overrides: tuple):
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


# -- what XLA is given (tests) --------------------------------------------------------------

def recording_compiles():
    """A context manager yielding a list that receives (module name, serialized
    CompileOptions) of every XLA compile JAX starts inside it (jax.jit's and x64guard.jit's:
    both go through compiler.compile_or_get_cached; seen in jax 0.10.2). For tests that
    compare what XLA is given."""
    import contextlib

    from jax._src import compiler
    from jax._src.lib.mlir import ir

    @contextlib.contextmanager
    def recording():
        original = compiler.compile_or_get_cached
        records: list = []

        def compile_or_get_cached(backend, computation, devices, compile_options, *args, **kwargs):
            name = ir.StringAttr(computation.operation.attributes["sym_name"]).value
            records.append((name, compile_options.SerializeAsString()))
            return original(backend, computation, devices, compile_options, *args, **kwargs)

        compiler.compile_or_get_cached = compile_or_get_cached
        try:
            yield records
        finally:
            compiler.compile_or_get_cached = original

    return recording()


# -- the cross-check: the x64 trace against the x32 trace ----------------------------------

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


@dataclasses.dataclass(frozen=True)
class TraceDifference:
    """The first equation where the x64 trace is not the x32 trace once narrowed."""

    primitive: str       # the x64 trace's equation ('end of program' when one trace is longer)
    location: str        # its source line (the user's or the library's), '' if unknown
    x64: str             # the equation as the x64 trace has it (one line)
    x32: str             # the x32 trace's counterpart
    # A library's own primitive whose lowering (narrowed) is not x32's: its equations may
    # look alike, what it lowers to does not.
    lowering: bool = False


# Primitives whose lowering rule itself branches on the operand dtype (jax/_src/lax/special.py
# in jax 0.10.2: coefficient tables, iteration counts, finfo tolerances): equal equations
# that lower to different programs.
LOWERED_BY_DTYPE = frozenset({"bessel_i0e", "regularized_incomplete_beta", "igamma", "igammac", "igamma_grad_a"})


@functools.cache
def lowered_by_dtype_here() -> frozenset:
    """LOWERED_BY_DTYPE, plus `lgamma` where the running JAX lowers float32 lgamma with its
    own expansion and float64 to `chlo.lgamma` (seen in 0.12; 0.10 and 0.11 lower both to
    chlo.lgamma). Probed by lowering it, not read from a version."""
    import jax
    import numpy as np

    from jax._src import config

    with config.enable_x64(False):
        text = jax.jit(jax.lax.lgamma).lower(np.float32(1.5)).as_text()
    return LOWERED_BY_DTYPE | ({"lgamma"} if "chlo.lgamma" not in text else frozenset())


def is_lowered_by_dtype(name: str) -> bool:
    """`name in lowered_by_dtype_here()`, with the lgamma probe (a lowering: 40 ms in a
    fresh process, most of the cross-check's cost) run only when an lgamma is met."""
    return name in LOWERED_BY_DTYPE or (name == "lgamma" and name in lowered_by_dtype_here())


def _jax_primitives() -> frozenset:
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


_primitive_owner_cache: dict = {}
# (len(sys.modules) when JAX's modules were last scanned, the ids found): scanned again
# only for an unknown primitive after more modules were imported.
_jax_primitive_scan: list = [-1, frozenset()]


def is_library_primitive(primitive) -> bool:
    """True for a primitive no JAX module defines: a library's own (equinox's
    filter_primitive family: lineax's linear_solve, optimistix's, diffrax's helpers).
    Its lowering runs the library's Python when the program is lowered, under that trace's
    x64 setting, so its equation says nothing of the program it lowers to (lineax's
    BiCGStab tests `omega == 0` under x64 and `omega < 1e-16` otherwise, inside it).
    JAX's own primitives lower from the equation alone. Decided once per primitive; a
    JAX primitive this misses is compared by its lowering too (slower, never wrong)."""
    import sys

    known = _primitive_owner_cache.get(id(primitive))
    if known is None or known[0] is not primitive:
        scan = _jax_primitive_scan
        if id(primitive) not in scan[1] and len(sys.modules) != scan[0]:
            scan[:] = [len(sys.modules), _jax_primitives()]
        known = _primitive_owner_cache[id(primitive)] = (primitive, id(primitive) not in scan[1])
    return known[1]


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


def first_trace_difference(closed64, closed32, narrow_dtype, same_lowering: "Callable | None" = None,
                           skipped_converts: "tuple[list, list] | None" = None,
                           merged_widths: "list | None" = None) -> "TraceDifference | None":
    """None when the x64 jaxpr is the x32 jaxpr once every 64-bit dtype is narrowed
    (`narrow_dtype(dtype)` -> its 32-bit dtype or None) and values are compared at 32 bits:
    same equations in the same order, same operands, parameters (nested jaxprs compared
    the same way), literals and constants. Identity conversions after narrowing (int32 ->
    int64, float64 -> float32 of a float64 value, weak-type changes) are skipped on both
    sides: they are exactly what narrowing folds. Weak types and shardings are not
    compared; Python callables in parameters (custom_jvp's rules) are not compared. An
    equation of LOWERED_BY_DTYPE with a 64-bit operand is a difference. A library's own
    primitive (`is_library_primitive`) is compared by what it lowers to:
    `same_lowering(eqn64, eqn32)` (without it, such an equation is a difference).
    `skipped_converts`: two lists, given to receive the identity conversions skipped in the
    x64 trace and in the x32 trace (equations, nested jaxprs included). `merged_widths`: a
    list, given to receive the x64 trace's equations whose operands have distinct dtypes
    that narrowing makes one (a float32 @ float64 dot_general: its lowering converts
    operands to one type, which narrowed is a convert to the same type x32 JAX's lacks)."""
    import jax
    import numpy as np

    from jax._src import core, linear_util, source_info_util
    from jax._src.lax import lax as lax_internal

    convert_p = lax_internal.convert_element_type_p

    def dtype32(dtype):
        try:
            narrowed = narrow_dtype(dtype)
        except TypeError:
            return dtype
        return dtype if narrowed is None else np.dtype(narrowed)

    def aval_key(aval):
        if hasattr(aval, "shape") and hasattr(aval, "dtype"):
            return ("aval", tuple(aval.shape), str(dtype32(aval.dtype)))
        return ("aval", type(aval).__name__)

    def value_key(value, aval=None):
        dtype = getattr(aval, "dtype", None)
        if dtype is None or is_extended_dtype(dtype):
            return ("value", repr(value))
        array = np.asarray(value, dtype=dtype)
        target = dtype32(dtype)
        with np.errstate(all="ignore"):
            narrowed = array.astype(target)
        return ("value", str(target), narrowed.shape, narrowed.tobytes())

    class Differs(Exception):
        def __init__(self, difference):
            self.difference = difference

    def line(eqn) -> str:
        text = str(eqn).strip().splitlines()
        return text[0][:200] if text else eqn.primitive.name

    def differs(eqn64, eqn32, lowering: bool = False):
        location = source_info_util.summarize(eqn64.source_info) if eqn64 is not None else ""
        if eqn64 is None and eqn32 is not None:
            location = source_info_util.summarize(eqn32.source_info)
        raise Differs(TraceDifference(eqn64.primitive.name if eqn64 is not None else "end of program",
                                      location, line(eqn64) if eqn64 is not None else "(nothing)",
                                      line(eqn32) if eqn32 is not None else "(nothing)", lowering))

    def identity_convert(eqn) -> bool:
        if eqn.primitive is not convert_p:
            return False
        (source,), (out,) = eqn.invars, eqn.outvars
        return dtype32(source.aval.dtype) == dtype32(out.aval.dtype)

    # 0.10: ClosedJaxpr wraps a Jaxpr and its consts; 0.11: an alias of Jaxpr, which holds
    # its consts (`.jaxpr` is itself); 0.12: the name is gone.
    closed_type = getattr(core, "ClosedJaxpr", core.Jaxpr)

    def param_equal(a, b) -> bool:
        if isinstance(a, closed_type) and isinstance(b, closed_type):
            compare_closed(a, b)
            return True
        if isinstance(a, core.Jaxpr) and isinstance(b, core.Jaxpr):
            compare_jaxpr(a, b, consts64=(), consts32=())
            return True
        if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
            return len(a) == len(b) and all(param_equal(x, y) for x, y in zip(a, b))
        if isinstance(a, core.AbstractValue) and isinstance(b, core.AbstractValue):
            return aval_key(a) == aval_key(b)
        if isinstance(a, tree_def_type) and isinstance(b, tree_def_type):
            return tree_def_equal(a, b)
        if type(a) is type(b) and isinstance(a, jax.ShapeDtypeStruct):
            return tuple(a.shape) == tuple(b.shape) and str(dtype32(a.dtype)) == str(dtype32(b.dtype))
        if isinstance(a, np.dtype) or isinstance(b, np.dtype):
            try:
                return str(dtype32(np.dtype(a))) == str(dtype32(np.dtype(b)))
            except TypeError:
                return a == b
        if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
            return value_key(a, np.asarray(a)) == value_key(b, np.asarray(b))
        if isinstance(a, linear_util.WrappedFun) and isinstance(b, linear_util.WrappedFun) or (
                callable(a) and callable(b) and not isinstance(a, type)):
            return True  # rules and thunks: what they produce is traced and compared elsewhere
        try:
            return bool(a == b)
        except Exception:  # noqa: BLE001
            return repr(a) == repr(b)

    # A custom primitive's pytree structure (equinox's filter_primitive: `treedef`) holds
    # static metadata such as ShapeDtypeStructs of its operands, float64 in one trace and
    # float32 in the other: compared node by node, their data as parameters are
    # (PyTreeDef.node_data/children: seen in jax 0.10.2, 0.11.2 and 0.12.0.1).
    tree_def_type = jax.tree_util.PyTreeDef

    def tree_def_equal(a, b) -> bool:
        if a.num_nodes != b.num_nodes or a.num_leaves != b.num_leaves:
            return False
        data_a, data_b = a.node_data(), b.node_data()
        if (data_a is None) != (data_b is None):
            return False
        if data_a is not None and (data_a[0] is not data_b[0] or not param_equal(data_a[1], data_b[1])):
            return False
        children_a, children_b = a.children(), b.children()
        return len(children_a) == len(children_b) and all(map(tree_def_equal, children_a, children_b))

    def compare_jaxpr(j64, j32, consts64, consts32) -> None:
        env64, env32 = {}, {}
        if len(j64.invars) != len(j32.invars) or len(j64.constvars) != len(j32.constvars):
            differs(j64.eqns[0] if j64.eqns else None, j32.eqns[0] if j32.eqns else None)
        for i, (a, b) in enumerate(zip(j64.invars, j32.invars)):
            env64[a], env32[b] = ("in", i), ("in", i)
        for i, (a, b) in enumerate(zip(j64.constvars, j32.constvars)):
            env64[a] = value_key(consts64[i], a.aval) if i < len(consts64) else ("const", i)
            env32[b] = value_key(consts32[i], b.aval) if i < len(consts32) else ("const", i)

        def kept(jaxpr, env, side: int):
            """The equations that are not identity conversions; those alias their operand
            (and are counted: `skipped_converts`)."""
            eqns = []
            for e in jaxpr.eqns:
                if identity_convert(e):
                    env[("alias", e.outvars[0])] = e.invars[0]
                    if skipped_converts is not None:
                        skipped_converts[side].append(e)
                else:
                    eqns.append(e)
            return eqns

        def key(env, atom):
            while not isinstance(atom, core.Literal) and ("alias", atom) in env:
                atom = env[("alias", atom)]
            if isinstance(atom, core.Literal):
                return value_key(atom.val, atom.aval)
            return env.get(atom, ("var", id(atom)))

        eqns64, eqns32 = kept(j64, env64, 0), kept(j32, env32, 1)
        for n in range(max(len(eqns64), len(eqns32))):
            e64 = eqns64[n] if n < len(eqns64) else None
            e32 = eqns32[n] if n < len(eqns32) else None
            if e64 is None or e32 is None:
                differs(e64, e32)
            lowered_by_dtype = is_lowered_by_dtype(e64.primitive.name) and any(
                str(dtype32(a.aval.dtype)) != str(a.aval.dtype) for a in e64.invars if hasattr(a.aval, "dtype"))
            if (lowered_by_dtype or e64.primitive is not e32.primitive or len(e64.invars) != len(e32.invars)
                    or len(e64.outvars) != len(e32.outvars)
                    or [key(env64, a) for a in e64.invars] != [key(env32, a) for a in e32.invars]
                    or [aval_key(v.aval) for v in e64.outvars] != [aval_key(v.aval) for v in e32.outvars]
                    or e64.params.keys() != e32.params.keys()):
                differs(e64, e32)
            if merged_widths is not None:
                # Floating operands only: mixed index widths (a gather's int64 indices beside
                # int32 values) lower to no convert.
                operand_dtypes = [a.aval.dtype for a in e64.invars if hasattr(a.aval, "dtype")
                                  and not is_extended_dtype(a.aval.dtype) and np.issubdtype(a.aval.dtype, np.inexact)]
                if len(set(map(str, operand_dtypes))) > len({str(dtype32(d)) for d in operand_dtypes}):
                    merged_widths.append(e64)
            if is_library_primitive(e64.primitive):
                if same_lowering is None or not same_lowering(e64, e32):
                    differs(e64, e32, lowering=True)
                for j, (a, b) in enumerate(zip(e64.outvars, e32.outvars)):
                    env64[a], env32[b] = ("eqn", n, j), ("eqn", n, j)
                continue
            for name in e64.params:
                try:
                    same = param_equal(e64.params[name], e32.params[name])
                except Differs:
                    raise
                if not same:
                    differs(e64, e32)
            for j, (a, b) in enumerate(zip(e64.outvars, e32.outvars)):
                env64[a], env32[b] = ("eqn", n, j), ("eqn", n, j)
        outs64 = [key(env64, a) for a in j64.outvars]
        outs32 = [key(env32, a) for a in j32.outvars]
        if outs64 != outs32:
            differs(eqns64[-1] if eqns64 else None, eqns32[-1] if eqns32 else None)

    def compare_closed(c64, c32) -> None:
        compare_jaxpr(c64.jaxpr, c32.jaxpr, c64.consts, c32.consts)

    try:
        compare_closed(closed64, closed32)
    except Differs as found:
        return found.difference
    return None
