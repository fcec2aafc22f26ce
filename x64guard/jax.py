"""x64guard.jit: trace with 64-bit types for one function, run it narrowed.

`x64guard.jit(f)` traces `f` with jax_enable_x64 on for that trace only (thread-local,
restored on exit), exports it with `jax.export`, narrows the exported StableHLO with the
core pass, and calls the narrowed program through `Exported.call`, so that it composes
like any JAX function: inside an outer `jax.jit`, under `jax.vmap` (a batching rule that
narrows the vmapped function), and under `jax.grad` (a VJP that narrows the x64 VJP).

Only adapts: all narrowing is `x64guard.narrow`.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
import threading
from typing import Any, Callable, Sequence

import jax
import numpy as np
from jax import export as jax_export
from jax import lax

from x64guard import _compat
from x64guard.api import NarrowResult, narrow
from x64guard.errors import X64GuardError
from x64guard.findings import Finding
from x64guard.modes import Mode, resolve_mode, resolve_overflow
from x64guard.settings import current_mode
from x64guard.passes.tables import NUMPY_DTYPE

# The numpy side of the type map: what an input or output dtype becomes.
NARROW_DTYPE: dict[np.dtype, np.dtype] = {
    np.dtype(np.int64): np.dtype(np.int32), np.dtype(np.uint64): np.dtype(np.uint32),
    np.dtype(np.float64): np.dtype(np.float32), np.dtype(np.complex128): np.dtype(np.complex64),
}
assert {str(k) for k in NARROW_DTYPE} <= {str(v) for v in NUMPY_DTYPE.values()}

_WIDE_INTEGERS = frozenset({np.dtype(np.int64), np.dtype(np.uint64)})
_ALLOW = Mode.ALLOW
_ARRAY_TYPE = type(jax.numpy.zeros(()))  # jax.Array's concrete class
# Types that are pytree leaves for sure: a call made only of these needs no flattening.
_LEAF_TYPES = frozenset({_ARRAY_TYPE, np.ndarray, int, float, bool, complex})


class _NeedsPythonPath(Exception):
    """Raised inside the dispatch jit for a program lowered for several devices."""


_compat.exclude_from_user_frames(os.path.dirname(os.path.abspath(__file__)) + os.sep)


def jit(fun: Callable | None = None, *, mode: "Mode | str | None" = None, overflow: str = "error",
        **jit_kwargs: Any) -> "NarrowedFunction | Callable[[Callable], NarrowedFunction]":
    """`jax.jit`, narrowed: usable as `x64guard.jit(f)`, `@x64guard.jit` and
    `@x64guard.jit(mode="error")`. Accepts what `jax.jit` accepts.

    mode: allow (run full width, 64-bit results), warn (narrow), error (refuse any 64-bit
    use at trace time). None: the mode in force when called (`x64guard.mode`,
    `x64guard.set_mode`, $X64GUARD_MODE, else warn).
    """
    if fun is None:
        return functools.partial(jit, mode=mode, overflow=overflow, **jit_kwargs)
    return NarrowedFunction(fun, mode=mode, overflow=overflow, jit_kwargs=jit_kwargs)


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


# Inputs are traced at 64 bits whatever width they arrive in (jax.jit may already have
# canonicalized float64 numpy inputs to float32): the function is traced as the x64
# program it is. Two reasons: lax-level code mixes inputs with Python floats that x64
# makes float64 (lax.clamp(-1.0, x_f32, 1.0) fails to trace), and JAX with x64 on
# silently wraps a weakly typed Python int an int32 cannot hold (int32 + 2**40 gives
# + 0) where JAX with x64 off raises; at 64 bits the constant is visible and refused.
# uint32 stays: it is what PRNG keys and bit manipulation use in x64 programs too.
_WIDEN_FOR_TRACE = {narrow: wide for wide, narrow in NARROW_DTYPE.items() if narrow != np.dtype(np.uint32)}


def _spec64(x) -> jax.ShapeDtypeStruct:
    """How the 64-bit trace sees an input: its shape, its dtype widened to 64 bits,
    weakly typed for Python scalars, with the sharding a JAX array carries."""
    if isinstance(x, (jax.Array, jax.core.Tracer)):
        aval = jax.typeof(x)
        sharding = None if isinstance(x, jax.core.Tracer) else x.sharding
        shape, dtype, weak = aval.shape, np.dtype(aval.dtype), aval.weak_type
    else:
        array = np.asarray(x)
        shape, dtype, weak, sharding = array.shape, array.dtype, _is_python_scalar(x), None
    return jax.ShapeDtypeStruct(shape, _WIDEN_FOR_TRACE.get(dtype, dtype), weak_type=weak, sharding=sharding)


def _signature(x) -> tuple:
    """What the cache key needs of one input, cheaply (this runs on every call)."""
    if isinstance(x, jax.core.Tracer):  # before jax.Array: tracers are jax.Arrays too
        aval = jax.typeof(x)
        return (aval.shape, aval.dtype, aval.weak_type)
    if isinstance(x, jax.Array):
        return (x.shape, x.dtype, x.weak_type, x.sharding)
    if isinstance(x, np.ndarray):
        return (x.shape, x.dtype)
    if _is_python_scalar(x):
        return (type(x),)
    return (np.shape(x), np.result_type(x))


def _to_narrow(x, dtype: np.dtype, path: str):
    """Cast one input to its narrowed dtype; concrete integers are range-checked."""
    if isinstance(x, jax.core.Tracer):
        return x if x.dtype == dtype else lax.convert_element_type(x, dtype)
    if isinstance(x, jax.Array):
        if x.dtype == dtype:
            return x
        _check_range(x, dtype, path)
        with _compat.x64_enabled():
            return x.astype(dtype)
    array = np.asarray(x)
    if array.dtype != dtype:
        _check_range(array, dtype, path)
        array = array.astype(dtype)
    return array


def _check_range(x, dtype: np.dtype, path: str) -> None:
    if dtype.kind not in "iu" or np.size(x) == 0:
        return
    info = np.iinfo(dtype)
    with _compat.x64_enabled():
        lo, hi = int(np.min(x) if isinstance(x, np.ndarray) else jax.numpy.min(x)), \
            int(np.max(x) if isinstance(x, np.ndarray) else jax.numpy.max(x))
    if lo < info.min or hi > info.max:
        bad = lo if lo < info.min else hi
        finding = Finding("input-out-of-range", "error", "argument", path,
                          f"value {bad} does not fit in {dtype}; x64guard never wraps inputs. Pass values in "
                          f"[{info.min}, {info.max}], or keep this function in 64 bits (mode='allow')")
        raise X64GuardError(f"x64guard.jit: argument {path}: {finding.message}", [finding])


def _keystr(path) -> str:
    """'args[1]["scale"]' / 'kwargs["n"]' for a leaf of the (dynamic args, kwargs) tree."""
    head, rest = path[0], path[1:]
    return ("args" if getattr(head, "idx", 0) == 0 else "kwargs") + jax.tree_util.keystr(rest)


# ----------------------------------------------------------------------------- one signature

@dataclasses.dataclass
class _Specialization:
    """Everything for one input signature: the narrowed program and how to call it."""

    narrowed: NarrowResult
    exported: jax_export.Exported
    in_tree: Any
    in_dtypes: tuple[np.dtype, ...]
    paths: tuple[str, ...]
    call_flat: Callable  # flat narrowed inputs -> flat outputs; differentiable, batchable

    def call(self, flat_inputs: list) -> Any:
        narrowed = [_to_narrow(x, d, p) for x, d, p in zip(flat_inputs, self.in_dtypes, self.paths)]
        return self.exported.out_tree.unflatten(self.call_flat(*narrowed))


def _narrow_avals(avals) -> tuple:
    return tuple(a.update(dtype=NARROW_DTYPE.get(np.dtype(a.dtype), a.dtype)) for a in avals)


def _narrow_exported(exported: jax_export.Exported, module, mode: Mode, overflow: str
                     ) -> tuple[jax_export.Exported, NarrowResult]:
    """The exported function with `module` (the same function's jit lowering) narrowed
    in place of its serialized module.

    Why not narrow `exported`'s own module: jax.export serializes for forward
    compatibility, which expands CHLO ops (erf, lgamma, erf_inv, complex functions, ...)
    into float64-specific decompositions; narrowed, those compute the float64 algorithm
    in float32, not what JAX computes with x64 off. The jit lowering keeps CHLO ops;
    narrowed first and serialized after, they expand for float32, as in x32 JAX.
    """
    _check_same_calling_convention(exported, module)
    result = narrow(module, mode=mode, overflow=overflow)
    narrowed = dataclasses.replace(
        exported,
        in_avals=_narrow_avals(exported.in_avals),
        out_avals=_narrow_avals(exported.out_avals),
        mlir_module_serialized=result.portable_artifact(_compat.portable_artifact_target()),
        _get_vjp=None)  # differentiation goes through NarrowedFunction's own VJP
    return narrowed, result


class NarrowedFunction:
    """What `x64guard.jit` returns. Cached per input signature, static arguments and mode:
    a second call with the same signature neither retraces nor recompiles."""

    def __init__(self, fun: Callable, *, mode, overflow: str, jit_kwargs: dict):
        self._fun = fun
        self._mode = None if mode is None else resolve_mode(mode)
        self._overflow = resolve_overflow(overflow).value
        self._jit_kwargs = jit_kwargs
        self._statics = _StaticArgs(fun, jit_kwargs.get("static_argnums"), jit_kwargs.get("static_argnames"))
        self._jit64 = jax.jit(fun, **jit_kwargs)
        self._cache: dict[tuple, _Specialization] = {}
        self._lock = threading.Lock()
        self._batched: dict[tuple, NarrowedFunction] = {}
        # Narrowed calls go through one jax.jit of `_traced_call`: JAX's C++ dispatch does
        # the cache lookup, so a steady-state call costs about what a jax.jit call costs.
        # Programs lowered for several devices (shardings, shard_map) take the Python path,
        # which places the call on their devices.
        self._dispatch: Callable | None = None
        if not any(k in jit_kwargs for k in ("in_shardings", "out_shardings")):
            self._dispatch = jax.jit(self._traced_call, static_argnums=jit_kwargs.get("static_argnums"),
                                     static_argnames=jit_kwargs.get("static_argnames"),
                                     donate_argnums=jit_kwargs.get("donate_argnums"),
                                     donate_argnames=jit_kwargs.get("donate_argnames"))
        functools.update_wrapper(self, fun)

    def __repr__(self) -> str:
        return f"x64guard.jit({getattr(self._fun, '__name__', self._fun)!r})"

    def __call__(self, *args, **kwargs):
        mode = self._mode or current_mode()
        if mode is _ALLOW:
            with _compat.x64_enabled():
                return self._jit64(*args, **kwargs)
        dispatch = self._dispatch
        if dispatch is not None and not kwargs:
            # The steady state: positional arrays (JAX or numpy) with no 64-bit integers
            # to range-check.
            for leaf in args:
                kind = type(leaf)
                if (kind is not _ARRAY_TYPE and kind is not np.ndarray) or leaf.dtype in _WIDE_INTEGERS:
                    break
            else:
                try:
                    return dispatch(*args)
                except _NeedsPythonPath:
                    self._dispatch = dispatch = None
        if dispatch is not None and self._check_integer_inputs(args, kwargs):
            try:
                return dispatch(*args, **kwargs)
            except _NeedsPythonPath:
                self._dispatch = None
        specialization, flat = self._specialize(args, kwargs, mode)
        return specialization.call(flat)

    def _traced_call(self, *args, **kwargs):
        """The body of the dispatch jit: specialize on the tracers' types and call."""
        specialization, flat = self._specialize(args, kwargs, self._mode or current_mode())
        if specialization.exported.nr_devices != 1:
            raise _NeedsPythonPath()
        return specialization.call(flat)

    def _check_integer_inputs(self, args: tuple, kwargs: dict) -> bool:
        """jax.jit would wrap (or, for Python ints, refuse with an OverflowError) 64-bit
        integers that do not fit: check concrete ones first, naming their path.
        Returns whether the dispatch jit may take these inputs: uint64 numpy data would
        reach its trace as uint32, which is not widened back (see _WIDEN_FOR_TRACE)."""
        dyn_args, dyn_kwargs, _ = self._statics.split(args, kwargs)
        dispatchable = True
        leaves = dyn_args if not dyn_kwargs else (*dyn_args, *dyn_kwargs.values())
        if not all(type(leaf) in _LEAF_TYPES for leaf in leaves):  # containers: flatten
            leaves = jax.tree_util.tree_leaves((dyn_args, dyn_kwargs))
        for leaf in leaves:
            kind = type(leaf)
            if kind is int:
                if not -2**31 <= leaf < 2**31:
                    break
            elif getattr(leaf, "dtype", None) in _WIDE_INTEGERS and not isinstance(leaf, jax.core.Tracer):
                break
        else:
            return dispatchable
        # Something to check: the slow path names the argument.
        with_paths, _ = jax.tree_util.tree_flatten_with_path((dyn_args, dyn_kwargs))
        for path, leaf in with_paths:
            if isinstance(leaf, jax.core.Tracer):
                continue
            dtype = np.dtype(np.int64) if type(leaf) is int else np.dtype(getattr(leaf, "dtype", np.float64))
            if dtype in _WIDE_INTEGERS or type(leaf) is int:
                _check_range(leaf if type(leaf) is not int else np.asarray(leaf), NARROW_DTYPE[dtype], _keystr(path))
            if dtype == np.dtype(np.uint64) and not isinstance(leaf, jax.Array):
                dispatchable = False
        return dispatchable

    def lower(self, *args, **kwargs) -> "Lowered":
        """The narrowed program for these arguments: `.as_text()`, `.findings`, `.compile()`."""
        mode = resolve_mode(self._mode)
        if mode is Mode.ALLOW:
            raise ValueError("x64guard.jit(...).lower: mode 'allow' does not narrow; use jax.jit(f).lower "
                             "with jax_enable_x64 for the full-width program")
        specialization, flat = self._specialize(args, kwargs, mode)
        return Lowered(specialization, flat, self._statics)

    # -- specialization ------------------------------------------------------------

    def _specialize(self, args: tuple, kwargs: dict, mode: Mode) -> tuple[_Specialization, list]:
        dyn = self._statics.split(args, kwargs)
        leaves, in_tree = jax.tree_util.tree_flatten(dyn[:2])
        try:
            key = (mode, in_tree, tuple(map(_signature, leaves)), dyn[2])
            specialization = self._cache.get(key)
        except TypeError as exc:
            raise TypeError(f"x64guard.jit: static arguments must be hashable, as for jax.jit: {exc}") from None
        if specialization is None:
            with self._lock:
                specialization = self._cache.get(key)
                if specialization is None:
                    with_paths, _ = jax.tree_util.tree_flatten_with_path(dyn[:2])
                    paths = tuple(_keystr(path) for path, _ in with_paths)
                    specs = [_spec64(leaf) for leaf in leaves]
                    specialization = self._build(in_tree, specs, dyn[2], paths, mode)
                    self._cache[key] = specialization
        return specialization, leaves

    def _build(self, in_tree, specs, static, paths, mode: Mode) -> _Specialization:
        spec_args, spec_kwargs = in_tree.unflatten(specs)
        args, kwargs = self._statics.merge(spec_args, spec_kwargs, static)
        with _compat.x64_enabled():
            exported = jax_export.export(self._jit64)(*args, **kwargs)
            module = self._jit64.lower(*args, **kwargs).compiler_ir("stablehlo")  # JAX's own: narrow clones it
        narrowed_exported, result = _narrow_exported(exported, module, mode, self._overflow)
        in_dtypes = tuple(np.dtype(a.dtype) for a in narrowed_exported.in_avals)
        flat_fun = self._flat_fun(in_tree, static)
        call_flat = _differentiable_batchable_call(self, narrowed_exported, flat_fun, mode)
        return _Specialization(result, narrowed_exported, in_tree, in_dtypes, paths,
                               _jit_on_exported_devices(call_flat, narrowed_exported, specs))

    def _flat_fun(self, in_tree, static) -> Callable:
        def flat_fun(*flat):
            dyn_args, dyn_kwargs = in_tree.unflatten(flat)
            args, kwargs = self._statics.merge(dyn_args, dyn_kwargs, static)
            return jax.tree_util.tree_leaves(self._fun(*args, **kwargs))
        return flat_fun

    def _derived(self, key: tuple, make: Callable[[], Callable]) -> "NarrowedFunction":
        """A NarrowedFunction of a transformed flat function (its vmap or its VJP),
        with this one's mode and overflow, made once per key."""
        with self._lock:
            derived = self._batched.get(key)
            if derived is None:
                derived = self._batched[key] = NarrowedFunction(
                    make(), mode=self._mode, overflow=self._overflow, jit_kwargs={})
        return derived


def _jit_on_exported_devices(call_flat: Callable, exported: jax_export.Exported, specs) -> Callable:
    """jax.jit of the call, on as many devices as the program was lowered for.

    A program lowered for several devices (in/out shardings, shard_map) must be called
    from a computation on that many devices: its shardings are placed on the mesh of the
    inputs when they carry one, else on the first devices, in JAX's order.
    """
    n = exported.nr_devices
    if n <= 1:
        return jax.jit(call_flat)
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    mesh = next((s.sharding.mesh for s in specs if isinstance(getattr(s, "sharding", None), NamedSharding)
                 and s.sharding.mesh.size == n), None)
    if mesh is None:
        abstract = _compat.exported_abstract_mesh(exported)
        devices = np.array(jax.devices()[:n])
        if abstract is not None:
            mesh = Mesh(devices.reshape(abstract.axis_sizes), abstract.axis_names, axis_types=abstract.axis_types)
        else:
            mesh = Mesh(devices, ("x64guard_devices",))
    replicated = NamedSharding(mesh, PartitionSpec())
    in_shardings = tuple(s or replicated for s in exported.in_shardings_jax(mesh))
    out_shardings = tuple(s or replicated for s in exported.out_shardings_jax(mesh))
    return jax.jit(call_flat, in_shardings=in_shardings, out_shardings=out_shardings)


def _check_same_calling_convention(exported: jax_export.Exported, module) -> None:
    main = next(op for op in module.body.operations
                if op.operation.name == "func.func" and op.operation.attributes["sym_name"].value == "main")
    n_args = len(main.regions[0].blocks[0].arguments)
    if exported.ordered_effects or exported.uses_global_constants or n_args != len(exported.module_kept_var_idx):
        raise X64GuardError(
            "x64guard.jit supports functions without ordered effects (io_callback, debug prints with "
            "ordered=True) and without shape polymorphism; narrow this function's lowering with "
            "x64guard.narrow instead, or keep it in 64 bits (mode='allow')")


def _differentiable_batchable_call(owner: NarrowedFunction, exported, flat_fun: Callable, mode: Mode):
    """exported.call on flat arguments, wrapped so that JAX can transform it:

    - vmap: a batching rule that narrows `vmap(flat_fun)` (Exported.call has none);
    - grad: a custom VJP whose backward pass narrows the x64 VJP of `flat_fun`.
    The VJP sits outside the batching rule: the other way round, JAX cannot linearize.
    """
    from jax.custom_batching import custom_vmap

    n_in = len(exported.in_avals)
    out_avals = exported.out_avals

    @custom_vmap
    def primal(*flat):
        return _call_exported_flat(exported, flat)

    @primal.def_vmap
    def primal_batched(axis_size, in_batched, *flat):
        in_axes = tuple(0 if b else None for b in in_batched)
        batched = owner._derived(("vmap", flat_fun, in_axes),
                                 lambda: lambda *xs: jax.vmap(lambda *ys: tuple(flat_fun(*ys)), in_axes=in_axes)(*xs))
        outs = batched(*flat)
        return tuple(outs), (True,) * len(outs)

    @jax.custom_vjp
    def call(*flat):
        return primal(*flat)

    def call_fwd(*flat):
        # `call`, not `primal`: higher-order differentiation differentiates fwd itself
        # (jax.export's Exported.call does the same).
        return call(*flat), flat

    def call_bwd(primals, cotangents):
        differentiable = tuple(i for i, x in enumerate(primals) if jax.numpy.issubdtype(x.dtype, jax.numpy.inexact))
        with_ct = tuple(i for i, a in enumerate(out_avals) if jax.numpy.issubdtype(a.dtype, jax.numpy.inexact))

        def make_vjp():
            def vjp(*xs):
                inputs, cts = xs[:n_in], xs[n_in:]

                def partial_fun(*diff_inputs):
                    full = list(inputs)
                    for i, v in zip(differentiable, diff_inputs):
                        full[i] = v
                    outs = flat_fun(*full)
                    return tuple(outs[i] for i in with_ct)

                _, pullback = jax.vjp(partial_fun, *(inputs[i] for i in differentiable))
                return pullback(tuple(cts))
            return vjp

        vjp_fn = owner._derived(("vjp", flat_fun, differentiable, with_ct), make_vjp)
        grads = vjp_fn(*primals, *(cotangents[i] for i in with_ct))
        out = [np.zeros(np.shape(x), jax.dtypes.float0) for x in primals]
        for i, g in zip(differentiable, grads):
            out[i] = g
        return tuple(out)

    call.defvjp(call_fwd, call_bwd)
    return call


def _call_exported_flat(exported, flat) -> tuple:
    args, kwargs = exported.in_tree.unflatten(flat)
    return tuple(jax.tree_util.tree_leaves(exported.call(*args, **kwargs)))


class Lowered:
    """The narrowed program for one signature."""

    def __init__(self, specialization: _Specialization, flat_inputs: list, statics: _StaticArgs):
        self._specialization = specialization
        self._flat_inputs = flat_inputs
        self._statics = statics

    @property
    def findings(self) -> list[Finding]:
        return self._specialization.narrowed.findings

    @property
    def changes(self) -> dict[str, int]:
        return self._specialization.narrowed.changes

    def as_text(self) -> str:
        return self._specialization.narrowed.text

    def compile(self) -> "Compiled":
        s = self._specialization
        narrowed = [_to_narrow(x, d, p) for x, d, p in zip(self._flat_inputs, s.in_dtypes, s.paths)]
        return Compiled(s, s.call_flat.lower(*narrowed).compile(), self._statics)


class Compiled:
    """A compiled narrowed program; call it with the same arguments as the function."""

    def __init__(self, specialization: _Specialization, executable, statics: _StaticArgs):
        self._specialization = specialization
        self._executable = executable
        self._statics = statics

    def __call__(self, *args, **kwargs):
        s = self._specialization
        dyn_args, dyn_kwargs, _ = self._statics.split(args, kwargs)
        leaves = jax.tree_util.tree_leaves((dyn_args, dyn_kwargs))
        narrowed = [_to_narrow(x, d, p) for x, d, p in zip(leaves, s.in_dtypes, s.paths)]
        return s.exported.out_tree.unflatten(self._executable(*narrowed))

    def as_text(self) -> str:
        return self._executable.as_text()
