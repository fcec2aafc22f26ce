"""The private JAX calls of x64guard.jit's program: its calling convention, the
`x64guard_call` primitive and its lowering into a calling program, the compile with the x64
lowering's own arguments, and the C++ dispatcher. The rest (configuration, traces, jaxprs)
is in _private.py; both are the one place x64guard.jit touches JAX beyond its stable API.

A call not marked otherwise is seen in jax 0.10.2, 0.11.2 and 0.12.0.1.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from typing import Any, NamedTuple, Sequence


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
    import jax

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
        # Not a Sharding (JAX's UNSPECIFIED marker, or None): none given.
        return tuple(s if isinstance(s, jax.sharding.Sharding) else None for s in shardings)

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


# ----------------------------------------------------------------------------- the call primitive

# The custom_call targets of host callbacks: each names its Python function by an index
# into the module's callback list (`mhlo.backend_config = {index = N : ui64}`).
PYTHON_CALLBACK_TARGETS = ("xla_ffi_python_cpu_callback", "xla_ffi_partitioned_python_cpu_callback",
                            "xla_ffi_python_gpu_callback", "xla_ffi_partitioned_python_gpu_callback")


def define_call_primitive(name: str, abstract_eval, lowering, batching):
    """A primitive that calls a narrowed program: effectful abstract eval, its lowering
    rule for every platform, an impl that jit-compiles it, and a batching rule."""
    from jax._src import dispatch
    from jax.extend.core import Primitive
    from jax.interpreters import batching as batching_lib
    from jax.interpreters import mlir as mlir_lib

    primitive = Primitive(name)
    primitive.multiple_results = True
    primitive.def_effectful_abstract_eval(abstract_eval)
    primitive.def_impl(functools.partial(dispatch.apply_primitive, primitive))
    mlir_lib.register_lowering(primitive, lowering)
    batching_lib.primitive_batchers[primitive] = batching
    dispatch.prim_requires_devices_during_lowering.add(primitive)  # host callbacks need the backend
    return primitive


class InliningInternals(NamedTuple):
    """What inlining a narrowed module into the calling program's lowering needs
    (primitive.py's `emit_inlined_call`), beside the caller's lowering (`CallerLowering`)."""

    ir: Any                  # jaxlib's MLIR bindings, as JAX's lowering uses them
    func_dialect: Any
    lift_meshes: Any         # sdy-lift-inlined-meshes on a module


@functools.cache
def inlining_internals() -> InliningInternals:
    from jax.extend.mlir import ir
    from jax.extend.mlir.dialects import func as func_dialect

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
        """The calling program's device count, from its axis context: a ShardingContext's
        `num_devices`, an SPMDAxisContext's `mesh.size` (jax 0.10.2, 0.11.2, 0.12.0.1),
        read by attribute so that their private module is not needed."""
        axis_context = self._module.axis_context
        count = getattr(axis_context, "num_devices", None)
        if isinstance(count, int):
            return count
        mesh = getattr(axis_context, "mesh", None)
        return mesh.size if mesh is not None else 1

    def add_keepalive(self, value) -> None:
        self._module.add_keepalive(value)

    def add_host_callback(self, callback) -> int:
        """Register a host callback with the calling program; its index in their list."""
        self._module.add_host_callback(callback)
        return len(self._module.host_callbacks) - 1

    def merge(self, submodule, name: str) -> str:
        """Merge `submodule`'s functions into the calling module (renamed, private); the
        symbol its main now has."""
        from jax.interpreters import mlir as mlir_lib

        return mlir_lib.merge_mlir_modules(self._module.module, name, submodule,
                                           dst_symtab=self._module.symbol_table)

    def token_in(self, effect):
        return self._ctx.tokens_in.get(effect)

    def set_tokens_out(self, tokens: dict) -> None:
        from jax.interpreters import mlir as mlir_lib

        self._ctx.set_tokens_out(mlir_lib.TokenSet(tokens))

    def with_sharding(self, x, aval, sharding):
        """`x` annotated with `sharding` (None: as it is)."""
        if sharding is None:
            return x
        from jax._src import config
        from jax._src.export import _export

        return _export.wrap_with_sharding(self._ctx, x, aval, sharding, use_shardy=config.use_shardy_partitioner.value)


def _lift_meshes(submodule) -> None:
    from jax.extend.mlir import passmanager

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
