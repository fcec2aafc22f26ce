"""The narrowed program of one input signature (`Program`), how it compiles and runs, and
the objects `.lower()` returns (`Lowered`, `Compiled`).

The narrowed module is compiled with the x64 lowering's own compile arguments (devices,
shardings, donation, host callbacks, effects): no jax.export round trip, no second
lowering. A first call's compile starts in a worker thread (`CompileAhead`) while the
calling thread runs the cross-check.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from typing import Any, Callable, NamedTuple, Sequence

import jax

from x64guard.api import NarrowResult
from x64guard.findings import Finding
from x64guard.jax import _private_lowering
from x64guard.jax.inputs import StaticArgs, convert_leaves_outside, dispatch_dtype, to_narrow
from x64guard.jax.primitive import call_p, differentiable


class _CompileOutcome(NamedTuple):
    executable: Any
    error: "BaseException | None"


class CompileAhead:
    """A first call's compile of the narrowed module, run in a worker thread while the
    calling thread runs the x32 cross-check (XLA compiles without holding the GIL, so the
    two overlap: the cross-check's trace and comparison cost no wall time). The worker
    runs with the caller's own JAX settings (`_private_lowering.thread_config_overrides`). Its
    result is used only if the narrowed program is the one that runs; otherwise it is
    dropped (the compile finishes in the background: CPU spent, nothing else)."""

    def __init__(self, compile_program: Callable, overrides: tuple):
        self._outcome = _CompileOutcome(None, None)
        self._thread = threading.Thread(target=self._run, args=(compile_program, overrides),
                                        name="x64guard-compile", daemon=False)
        self._thread.start()

    def _run(self, compile_program: Callable, overrides: tuple) -> None:
        try:
            with _private_lowering.config_overrides(overrides):
                self._outcome = _CompileOutcome(compile_program(), None)
        except BaseException as error:  # noqa: BLE001  (raised in the caller's thread by result())
            self._outcome = _CompileOutcome(None, error)

    def result(self):
        self._thread.join()
        executable, error = self._outcome
        if error is not None:
            raise error
        return executable

    @staticmethod
    def start(compile_program: Callable) -> "CompileAhead | None":
        """A compile started in a worker, or None (this JAX's settings cannot be carried
        over, or no thread could start): the program then compiles when first run."""
        overrides = _private_lowering.thread_config_overrides()
        if overrides is None:
            return None
        try:
            return CompileAhead(compile_program, overrides)
        except RuntimeError:  # no thread could start
            return None


@dataclasses.dataclass(eq=False)  # a primitive parameter: compared by identity
class Program:
    """The narrowed program for one input signature, and how to call it."""

    name: str
    narrowed: NarrowResult
    derive: Callable                   # (key, make, trace_dtypes) -> the x64guard.jit function of a vmap or VJP
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
    _compile_ahead: "CompileAhead | None" = None  # the first call's compile, started before the cross-check
    _lock: Any = dataclasses.field(default_factory=threading.Lock)

    def __repr__(self) -> str:
        return f"<x64guard program {self.name}>"

    @property
    def bytecode(self) -> bytes:
        if self._bytecode is None:
            self._bytecode = self.narrowed.bytecode()
        return self._bytecode

    def narrow_inputs(self, flat_inputs: Sequence) -> list:
        return [to_narrow(x, d, p) for x, d, p in zip(flat_inputs, self.in_dtypes, self.paths)]

    def bind(self, flat_narrowed: Sequence) -> list:
        return call_p.bind(*flat_narrowed, program=self)

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
                    executable = ahead.result() if ahead is not None else _private_lowering.compile_with_avals(
                        self.lowered, self.narrowed.module, list(self.in_avals), self.out_avals)
                    self._executables[()] = executable
        return executable

    def run(self, flat_inputs: Sequence) -> tuple[Any, Any]:
        """Outside any trace: (outputs, what JAX's C++ dispatch needs to run later calls
        of this signature itself, or None)."""
        # What JAX's dispatch hands the program in the calling thread (numpy float64 data
        # is float32 with x64 off) is, input by input, the narrowed dtype or its 64-bit
        # counterpart (a caller with x64 on): those are converted outside the program.
        wide = [i for i, (x, n) in enumerate(zip(flat_inputs, self.in_dtypes)) if dispatch_dtype(x) != n]
        executable = self.executable()
        if wide:
            flat_inputs = list(flat_inputs)
            convert_leaves_outside(flat_inputs, wide, [self.in_dtypes[i] for i in wide])
        outs = executable.call(*flat_inputs)
        # No fast path for 64-bit arrays: JAX's C++ dispatch would hand them to the
        # program unconverted.
        fastpath = _private_lowering.fastpath_data(executable, self.out_tree, flat_inputs, outs) \
            if self.num_devices == 1 and not wide else None
        return self.out_tree.unflatten(outs), fastpath

    @functools.cached_property
    def differentiable(self) -> Callable:
        return differentiable(self)



class Lowered:
    """The narrowed program for one signature."""

    def __init__(self, program: Program, flat_inputs: list, statics: StaticArgs):
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

    def __init__(self, program: Program, executable, statics: StaticArgs):
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
