"""x64guard.jit: trace with 64-bit types for one function, run it narrowed.

`x64guard.jit(f)` traces `f` with jax_enable_x64 on for that trace only (thread-local,
restored on exit), lowers it once, narrows the lowering with the core pass and compiles
the narrowed module with the x64 lowering's own compile arguments (program.py). A C++
dispatcher like jax.jit's runs later calls of a signature without Python (this module).

It composes like any JAX function: inside an outer `jax.jit`, under `jax.vmap` and under
`jax.grad` (primitive.py). Host callbacks run at 32 bits (callbacks.py). Inputs:
float32/complex64 data is traced at its own width, integers and 64-bit data at 64 bits
(inputs.py). Each signature's program is built, cross-checked against the x32 trace, by
build.py (trace_check.py compares the traces).

Only adapts: all narrowing is `x64guard.narrow`.
"""

from __future__ import annotations

import functools
import threading
from typing import Any, Callable, NamedTuple

import jax
import numpy as np

from x64guard.jax import _private, _private_lowering, mode_key
from x64guard.jax.build import FunctionSettings, SaidOnce, build_program
from x64guard.jax.callbacks import raise_callback_error
from x64guard.jax.inputs import (ARRAY_TYPE, NARROW_DTYPE, WIDE_INTEGERS, WIDE_NUMPY, StaticArgs, StaticKey,
                                 as_tuple, check_range, convert_leaves_outside, converts_on_host, host_cast_leaves, keystr, signature,
                                 trace_spec, wide_array_leaves, wide_numpy_leaves, widened_spec)
from x64guard.jax.program import Compiled, Lowered, Program
from x64guard.modes import Mode, resolve_mode, resolve_overflow
from x64guard.passes.tables import DEFAULT_TARGET
from x64guard.settings import current_mode

__all__ = ["jit", "NarrowedFunction", "Lowered", "Compiled"]

mode_key.register()  # JAX's jit and persistent cache keys include the mode from here on

_ALLOW = Mode.ALLOW
_JaxRuntimeError = jax.errors.JaxRuntimeError


class _ProgramKey(NamedTuple):
    """What makes two calls the same program."""

    mode: Mode
    in_tree: Any
    signatures: tuple            # each flat input's `signature`
    static: "StaticKey | tuple"
    wide_leaves: tuple           # flat inputs that were 64-bit numpy data before the dispatch
    # JAX's configuration as its jit caches key it: a flag that changes a lowering (jax
    # 0.12's jax_accurate_erf_inv) makes another program, as for jax.jit.
    context: tuple


def jit(fun: Callable | None = None, *, mode: "Mode | str | None" = None, overflow: str = "error",
        target: str = DEFAULT_TARGET, **jit_kwargs: Any) -> Callable:
    """`jax.jit`, narrowed: usable as `x64guard.jit(f)`, `@x64guard.jit` and
    `@x64guard.jit(mode="error")`. Accepts what `jax.jit` accepts.

    Args:
        mode: allow (run full width, 64-bit results), warn (narrow), error (refuse any 64-bit
            use at trace time). None: the mode in force when called (`x64guard.mode`,
            `x64guard.set_mode`, $X64GUARD_MODE, else warn).
        overflow: error | saturate | wrap, for constants the 32-bit type cannot hold.
        target: the profile narrowed for (`x64guard.narrow`'s): on a Neuron target what
            neuronx-cc would still reject refuses (mode error) or warns (mode warn) before
            compiling.

    Returns:
        A function (wrapping `fun`) with `.lower(*args, **kwargs)`; its `.narrowed_function`
        is the `NarrowedFunction` behind it.
    """
    if fun is None:
        return functools.partial(jit, mode=mode, overflow=overflow, target=target, **jit_kwargs)
    return NarrowedFunction(fun, mode=mode, overflow=overflow, jit_kwargs=jit_kwargs, target=target).function



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
        self._statics = StaticArgs(fun, jit_kwargs.get("static_argnums"), jit_kwargs.get("static_argnames"))
        self._jit64 = jax.jit(fun, **jit_kwargs)  # mode allow: the function as JAX runs it
        # The traces that build programs go through a wrapper of our own: JAX's trace
        # caches key on the function, and build_program makes them forget these traces
        # without touching what they hold for `fun` itself (_private.release_traces).
        self._traced_fun = functools.partial(fun)
        self._jit_traced = jax.jit(self._traced_fun, **jit_kwargs)
        self._cache: dict[_ProgramKey, Program] = {}
        # What building a program needs of this function (build.py reads nothing else of it).
        self._settings = FunctionSettings(
            fun=fun, traced_fun=self._traced_fun, jit_traced=self._jit_traced, statics=self._statics,
            overflow=self._overflow, target=self._target, flat_fun=self._flat_fun, derive=self._derived,
            said_once=SaidOnce())
        self._lock = threading.Lock()
        self._built_before_converting: set = set()  # signatures of float64 JAX arrays built ahead
        self._derived_functions: dict[tuple, NarrowedFunction] = {}
        # Calls on arrays go through a C++ dispatcher like jax.jit's: a new signature runs
        # `_cache_miss` (specialize, compile the narrowed module, run), later calls of it
        # run from C++ without Python. Calls holding 64-bit numpy data go through a second
        # one whose argument 0 is static: which inputs those are (JAX's C++ cache does not
        # tell float64 from float32 numpy with x64 off, and they are traced at different
        # widths); the common case pays no static argument.
        name = f"x64guard_{getattr(fun, '__name__', 'fun')}"
        static_argnums = as_tuple(jit_kwargs.get("static_argnums"))
        donate_argnums = as_tuple(jit_kwargs.get("donate_argnums"))
        static_argnames = as_tuple(jit_kwargs.get("static_argnames"))
        donate_argnames = as_tuple(jit_kwargs.get("donate_argnames"))
        shift = lambda nums: tuple(i + 1 if i >= 0 else i for i in nums)  # noqa: E731
        # Distinct objects identify the two dispatchers in JAX's C++ cache.
        self._dispatch_keys = (lambda: None, lambda: None)
        self._dispatch = _private_lowering.cpp_dispatcher(
            name, self._dispatch_keys[0], functools.partial(self._cache_miss, ()),
            static_argnums=static_argnums, static_argnames=static_argnames,
            donate_argnums=donate_argnums, donate_argnames=donate_argnames)
        self._dispatch_wide = _private_lowering.cpp_dispatcher(
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
        array_type = ARRAY_TYPE

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
                raise_callback_error(exc)
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
            if kind is ARRAY_TYPE:
                continue
            if kind is not np.ndarray:
                return self._call_general(args, {})
            dtype = leaf.dtype
            if dtype in WIDE_INTEGERS:
                return self._call_general(args, {})
            if dtype in WIDE_NUMPY:
                wide_numpy = True
        if wide_numpy:
            wide = wide_numpy_leaves(args)
            if (self._mode or current_mode()) is _ALLOW:  # full width: the data stays 64-bit
                return self._dispatch_wide(wide, *args)
            return self._dispatch_wide(wide, *host_cast_leaves(args, wide))
        return self._dispatch(*args)

    def _call_general(self, args: tuple, kwargs: dict):
        dyn_args, dyn_kwargs, _ = self._statics.split(args, kwargs)
        leaves = jax.tree_util.tree_leaves((dyn_args, dyn_kwargs))
        if any(isinstance(leaf, jax.core.Tracer) for leaf in leaves):
            # Inside a trace (an outer jit, vmap, grad): bind there.
            mode = self._mode or current_mode()
            if mode is _ALLOW:
                with _private.x64_enabled():
                    return self._jit64(*args, **kwargs)
            program, flat = self._specialize(args, kwargs, mode)
            return program.call_traced(flat)
        self._check_integer_inputs(dyn_args, dyn_kwargs, leaves)
        wide = wide_numpy_leaves(leaves)
        if wide and (self._mode or current_mode()) is _ALLOW:  # full width: the data stays 64-bit
            return self._dispatch_wide(wide, *args, **kwargs)
        if wide:
            # Cast on the host before the dispatch (the program takes 32-bit inputs):
            # JAX's C++ path then runs later calls of this signature by itself.
            dyn_args, dyn_kwargs, static = self._statics.split(args, kwargs)
            flat, tree = jax.tree_util.tree_flatten((dyn_args, dyn_kwargs))
            dyn_args, dyn_kwargs = tree.unflatten(host_cast_leaves(flat, wide))
            args, kwargs = self._statics.merge(dyn_args, dyn_kwargs, static)
            return self._dispatch_wide(wide, *args, **kwargs)
        return self._dispatch(*args, **kwargs)

    def _cache_miss(self, wide_leaves: tuple, *args, **kwargs):
        """A signature JAX's C++ dispatch has not run before (or one it may not run by
        itself): specialize on the arguments as given and run; returns the outputs and
        the fast path for the next calls."""
        mode = self._mode or current_mode()
        if mode is _ALLOW:  # full width, never a fast path (64-bit numpy data must stay 64-bit)
            with _private.x64_enabled():
                return self._jit64(*args, **kwargs), None
        dyn_args, dyn_kwargs, static = self._statics.split(args, kwargs)
        flat, tree = jax.tree_util.tree_flatten((dyn_args, dyn_kwargs))
        wide_arrays = () if wide_leaves else wide_array_leaves(flat)
        if wide_arrays:
            # Float64/complex128 JAX arrays of a caller with x64 on: converted before the
            # program, then run as float64 numpy data is, through the wide dispatcher,
            # whose C++ fast path serves the later calls of the converted signature (this
            # dispatcher cannot: it would hand the program the arrays unconverted).
            dtypes = [NARROW_DTYPE[flat[i].dtype] for i in wide_arrays]
            self._build_before_converting(flat, tree, static, wide_arrays, dtypes, mode)
            convert_leaves_outside(flat, wide_arrays, dtypes)
            dyn_args, dyn_kwargs = tree.unflatten(flat)
            args, kwargs = self._statics.merge(dyn_args, dyn_kwargs, static)
            return self._dispatch_wide(wide_arrays, *args, **kwargs), None
        wide_integers = self._check_integer_inputs(dyn_args, dyn_kwargs, flat)
        program, flat = self._specialize(args, kwargs, mode, wide_leaves, compile_ahead=True)
        outputs, fastpath = program.run(flat)
        return outputs, None if wide_integers else fastpath

    def _build_before_converting(self, flat: list, tree, static, wide: tuple, dtypes: list, mode: Mode) -> None:
        """A new signature whose float64 JAX arrays convert on the host: its program is
        built and its compile started first, so that the conversion runs while XLA
        compiles (a first call then costs the conversion no wall time). The conversion's
        numpy results are stood in for by zero-strided arrays of their shape and dtype,
        which make the same program key as they will."""
        # A hint, not a cache key: a false hit only loses the overlap (the dispatch builds
        # the program), so it is kept cheap, since every call of the signature passes here.
        try:
            seen = (mode, tree, static, tuple((flat[i].shape, flat[i].dtype) for i in wide))
            if seen in self._built_before_converting or not all(converts_on_host(flat[i]) for i in wide):
                return
        except TypeError:  # unhashable static arguments: _specialize says so, later
            return
        stand_ins = list(flat)
        for i, dtype in zip(wide, dtypes):
            stand_ins[i] = np.broadcast_to(np.zeros((), dtype), flat[i].shape)
        dyn_args, dyn_kwargs = tree.unflatten(stand_ins)
        self._check_integer_inputs(dyn_args, dyn_kwargs, stand_ins)
        args, kwargs = self._statics.merge(dyn_args, dyn_kwargs, static)
        self._specialize(tuple(args), kwargs, mode, wide, compile_ahead=True)
        self._built_before_converting.add(seen)  # later calls of it: converted, then dispatched

    def _check_integer_inputs(self, dyn_args: tuple, dyn_kwargs: dict, leaves: list) -> bool:
        """jax.jit would wrap (or, for Python ints, refuse with an OverflowError) 64-bit
        integers that do not fit: check concrete ones first, naming their path. Returns
        whether there were 64-bit integers to check."""
        for leaf in leaves:
            kind = type(leaf)
            if kind is int:
                if not -2**31 <= leaf < 2**31:
                    break
            elif getattr(leaf, "dtype", None) in WIDE_INTEGERS:
                break
        else:
            return False
        # Something to check: the slow path names the argument.
        with_paths, _ = jax.tree_util.tree_flatten_with_path((dyn_args, dyn_kwargs))
        for path, leaf in with_paths:
            if type(leaf) is int:
                check_range(np.asarray(leaf), np.dtype(np.int32), keystr(path))
            elif getattr(leaf, "dtype", None) in WIDE_INTEGERS:
                check_range(leaf, NARROW_DTYPE[leaf.dtype], keystr(path))
        return True

    def lower(self, *args, **kwargs) -> "Lowered":
        """The narrowed program for these arguments: `.as_text()`, `.findings`, `.compile()`."""
        mode = resolve_mode(self._mode)
        if mode is Mode.ALLOW:
            raise ValueError("x64guard.jit(...).lower: mode 'allow' does not narrow; use jax.jit(f).lower "
                             "with jax_enable_x64 for the full-width program")
        # 64-bit numpy data as the direct call hands it over (cast on the host, its indices
        # part of the key), so that a call and a lower of one signature share one program
        # (one build: the user's Python is not run again).
        dyn_args, dyn_kwargs, static = self._statics.split(args, kwargs)
        flat, tree = jax.tree_util.tree_flatten((dyn_args, dyn_kwargs))
        wide = wide_numpy_leaves(flat)
        if wide:
            dyn_args, dyn_kwargs = tree.unflatten(host_cast_leaves(flat, wide))
            args, kwargs = self._statics.merge(dyn_args, dyn_kwargs, static)
        program, flat = self._specialize(tuple(args), kwargs, mode, wide)
        return Lowered(program, flat, self._statics)

    # -- specialization ------------------------------------------------------------

    def _specialize(self, args: tuple, kwargs: dict, mode: Mode, wide_leaves: tuple = (),
                    compile_ahead: bool = False) -> tuple[Program, list]:
        """The program for these arguments. wide_leaves: indices of flat inputs that were
        float64/complex128 numpy data before jax.jit's dispatch made them 32-bit: traced
        at 64 bits, as they were given."""
        dyn = self._statics.split(args, kwargs)
        leaves, in_tree = jax.tree_util.tree_flatten(dyn[:2])
        try:
            key = _ProgramKey(mode, in_tree, tuple(map(signature, leaves)), dyn.static, wide_leaves,
                              _private.trace_context())
            program = self._cache.get(key)
        except TypeError as exc:
            raise TypeError(f"x64guard.jit: static arguments must be hashable, as for jax.jit: {exc}") from None
        if program is None:
            with self._lock:
                program = self._cache.get(key)
                if program is None:
                    with_paths, _ = jax.tree_util.tree_flatten_with_path(dyn[:2])
                    paths = tuple(keystr(path) for path, _ in with_paths)
                    program = build_program(self._settings, in_tree, self._trace_specs(leaves, wide_leaves),
                                            dyn.static, paths, mode, compile_ahead)
                    self._cache[key] = program
        return program, leaves

    def _trace_specs(self, leaves: list, wide_leaves: tuple) -> list:
        """How each flat input is traced (derived functions: at their primal's dtypes)."""
        if self._trace_dtypes is not None:
            return [trace_spec(leaf, d) for leaf, d in zip(leaves, self._trace_dtypes)]
        specs = [trace_spec(leaf) for leaf in leaves]
        for i in wide_leaves:
            specs[i] = widened_spec(specs[i])
        return specs

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
