"""The `x64guard_call` primitive: how a narrowed program composes with JAX.

Inside an outer `jax.jit` its lowering rule inlines the narrowed module into the calling
program (`emit_inlined_call`); under `jax.vmap` its batching rule narrows the vmapped
function; under `jax.grad` a custom VJP narrows the x64 VJP (`differentiable`).
The lowering rule works on what JAX hands it (`ctx`) through `_private_lowering.CallerLowering`,
which holds every read of JAX's lowering context.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import jax
import numpy as np

from x64guard.jax import _private, _private_lowering

if TYPE_CHECKING:
    from x64guard.jax.program import Program


def _abstract_eval(*avals, program: "Program"):
    return program.out_avals, program.effects


def _lowering(ctx, *args, program: "Program"):
    return emit_inlined_call(
        ctx, args, bytecode=program.bytecode, name=f"x64guard_{program.name}",
        kept_var_idx=program.kept_var_idx, ordered_effects=program.ordered_effects,
        host_callbacks=program.host_callbacks, keepalive=program.keepalive, in_avals=program.kept_in_avals,
        in_shardings=program.in_shardings, out_shardings=program.out_shardings, num_devices=program.num_devices)


def _batching(args, dims, *, program: "Program"):
    """vmap: the narrowed program of the vmapped function (the primitive has no batched form)."""
    args = [x if d is None else jax.numpy.moveaxis(x, d, 0) for x, d in zip(args, dims)]
    in_axes = tuple(None if d is None else 0 for d in dims)
    flat_fun = program.flat_fun

    def make():
        return lambda *xs: jax.vmap(lambda *ys: tuple(flat_fun(*ys)), in_axes=in_axes)(*xs)

    batched = program.derive(("vmap", flat_fun, in_axes), make, program.trace_dtypes)
    outs = batched(*args)
    return list(outs), [0] * len(outs)


call_p = _private_lowering.define_call_primitive("x64guard_call", _abstract_eval, _lowering, _batching)


# ----------------------------------------------------------------------------- inlining

def emit_inlined_call(ctx, args, *, bytecode: bytes, name: str, kept_var_idx, ordered_effects,
                      host_callbacks, keepalive, in_avals, in_shardings, out_shardings, num_devices: int):
    """The lowering rule's body: parse the narrowed module into the caller's MLIR context,
    merge its functions (renamed, private), give its host callbacks indices in the caller's
    list, thread the ordered-effect tokens, and call its main."""
    mlir = _private_lowering.inlining_internals()
    caller = _private_lowering.CallerLowering(ctx)
    caller_devices = caller.num_devices()
    if num_devices > 1 and caller_devices != num_devices:
        raise ValueError(
            f"x64guard.jit: {name.removeprefix('x64guard_')} was lowered for {num_devices} devices (its shardings or a "
            f"shard_map) and is called inside a program lowered for {caller_devices}; call it outside that program, "
            f"or give the outer jax.jit shardings on the same {num_devices} devices")
    with caller.mlir_context:
        submodule = mlir.ir.Module.parse(bytecode)
    if host_callbacks:
        _renumber_host_callbacks(submodule, host_callbacks, caller)
    for value in keepalive:
        caller.add_keepalive(value)
    if num_devices > 1:
        mlir.lift_meshes(submodule)
    main = mlir.ir.SymbolTable(submodule.operation)["main"]
    callee_type = main.type
    symbol = caller.merge(submodule, name)
    kept = [x for i, x in enumerate(args) if i in kept_var_idx]
    if num_devices > 1:  # in_avals, in_shardings: of the kept inputs
        kept = [caller.with_sharding(x, aval, s) for x, aval, s in zip(kept, in_avals, in_shardings)]
    operands = [caller.token_in(effect) for effect in ordered_effects] + kept
    call = mlir.func_dialect.CallOp(callee_type.results, mlir.ir.FlatSymbolRefAttr.get(symbol), operands)
    results = list(call.results)
    if ordered_effects:
        caller.set_tokens_out({effect: results[i] for i, effect in enumerate(ordered_effects)})
        results = results[len(ordered_effects):]
    if num_devices > 1:
        results = [caller.with_sharding(x, aval, s) for x, aval, s in zip(results, caller.avals_out, out_shardings)]
    return results


def _renumber_host_callbacks(submodule, host_callbacks, caller: "_private_lowering.CallerLowering") -> None:
    """Host callback custom_calls name their Python function by an index into the
    module's callback list (`mhlo.backend_config = {index = N : ui64}`): register ours
    with the calling module and rewrite the indices (through the pass's Rewriter, like
    every other change x64guard makes to a module)."""
    from x64guard.passes.rewriter import Rewriter

    ir = _private_lowering.inlining_internals().ir
    new_index = {}
    for i, callback in enumerate(host_callbacks):
        new_index[i] = caller.add_host_callback(callback)
    rewriter = Rewriter()

    def visit(op):
        if op.name == "stablehlo.custom_call" and \
                ir.StringAttr(op.attributes["call_target_name"]).value in _private_lowering.PYTHON_CALLBACK_TARGETS:
            config = ir.DictAttr(op.attributes["mhlo.backend_config"])
            entries = {config[i].name: config[i].attr for i in range(len(config))}
            ui64 = ir.IntegerType.get_unsigned(64)
            entries["index"] = ir.IntegerAttr.get(ui64, new_index[ir.IntegerAttr(entries["index"]).value])
            rewriter.set_attribute(op, "mhlo.backend_config", ir.DictAttr.get(entries))
        return ir.WalkResult.ADVANCE

    with submodule.context:
        submodule.operation.walk(visit)


# ----------------------------------------------------------------------------- differentiation

def differentiable(program: "Program") -> Callable:
    """`program.bind` on flat narrowed inputs, with a custom VJP whose backward pass
    narrows the x64 VJP of the traced function (when the program's effects allow a
    custom VJP: io_callback's do not, and JAX cannot differentiate those anyway)."""
    if not _private_lowering.effects_allow_custom_vjp(program.effects):
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
        vjp_fn = program.derive(("vjp", flat_fun, differentiable, out_inexact), make_vjp, trace_dtypes)
        grads = vjp_fn(*primals, *(cotangents[i] for i in out_inexact))
        out = [np.zeros(np.shape(x), jax.dtypes.float0) for x in primals]
        for i, g in zip(differentiable, grads):
            out[i] = g
        return tuple(out)

    call.defvjp(call_fwd, call_bwd)
    return call


def _is_inexact(dtype) -> bool:
    return not _private.is_extended_dtype(dtype) and jax.numpy.issubdtype(dtype, jax.numpy.inexact)
