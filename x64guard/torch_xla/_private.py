"""Everything x64guard's torch-xla front end needs from torch-xla beyond its public API.

torch-xla has no public hook between its lowering and its compile. The calls below are
the ones torch-xla's own dynamo bridge, `call_jax` and StableHLO export use; they are
private (`torch_xla._XLAC`) and change between releases, so x64guard checks the version
at import (x64guard/versions.py) and says plainly when it meets another one.
"""

from __future__ import annotations

import contextlib
import functools
import re
import weakref
from typing import Iterator, Sequence

from x64guard.torch_xla.metrics import own_compiles

# seen in torch-xla 2.9.0: torch_xla._XLAC, the C++ bindings every call below goes through
def _xlac():
    import torch_xla

    return torch_xla._XLAC


@contextlib.contextmanager
def _process_flag(name: str, value: bool) -> Iterator[None]:
    """torch-xla's process-wide flag `name` (`_XLAC._get_/_set_<name>`) = `value`, restored on exit."""
    xlac = _xlac()
    previous = getattr(xlac, f"_get_{name}")()
    getattr(xlac, f"_set_{name}")(value)
    try:
        yield
    finally:
        getattr(xlac, f"_set_{name}")(previous)


# ----------------------------------------------------------------------------- the lazy graph

# seen in torch 2.9.0 / torch-xla 2.9.0: torch_xla._XLAC._get_stablehlo
def stablehlo_text(tensors: Sequence, device: str) -> str:
    """The StableHLO of the pending graph rooted at `tensors` (not serialized: nothing expanded)."""
    return _xlac()._get_stablehlo(list(tensors), device, [], False).decode("utf-8")


# seen in torch 2.9.0 / torch-xla 2.9.0: torch_xla._XLAC._get_stablehlo
def stablehlo_bytecode(tensors: Sequence, device: str) -> bytes:
    """The module as MLIR bytecode, which keeps the locations (`python_frames_recorded`'s stacks)."""
    return _xlac()._get_stablehlo(list(tensors), device, [], True)


# seen in torch 2.9.0 / torch-xla 2.9.0: torch_xla._XLAC._get_ir_debug, torch_xla._XLAC._set_ir_debug
@contextlib.contextmanager
def python_frames_recorded() -> Iterator[None]:
    """torch-xla records the Python stack of every IR node created meanwhile (its IR
    debugging, `FLAGS_torch_lazy_ir_debug`), and a lowering done meanwhile writes it into
    each op's location as `callsite(...)` (both need the flag). Process-wide: restored on exit. (`XLA_HLO_DEBUG`, which
    torch-xla's own export sets, is read once per process and cannot be turned on later.)"""
    with _process_flag("ir_debug", True):
        yield


# seen in torch 2.9.0 / torch-xla 2.9.0: torch_xla._XLAC._get_xla_handle_special_scalars, torch_xla._XLAC._set_xla_handle_special_scalars
@contextlib.contextmanager
def device_data_transfers() -> Iterator[None]:
    """0-dim tensors moved to the device meanwhile become device data, as any other
    tensor does: by default torch-xla turns a 0-dim tensor holding 0 or 1 (its "special
    scalars") into a constant of the graph instead, which would freeze the value of an
    input into a program. Process-wide: restored on exit."""
    with _process_flag("xla_handle_special_scalars", False):
        yield


# seen in torch 2.9.0 / torch-xla 2.9.0: torch_xla._XLAC._xla_get_rng_seed
def rng_seed(device: str) -> int:
    """torch-xla's running RNG seed for `device` (a host value: no device read)."""
    return int(_xlac()._xla_get_rng_seed(device))


# seen in torch 2.9.0 / torch-xla 2.9.0: torch_xla._XLAC._xla_set_rng_seed
def set_rng_seed(seed: int, device: str) -> None:
    """Set torch-xla's RNG seed for `device` (also drops pending seed arithmetic)."""
    _xlac()._xla_set_rng_seed(int(seed), device)


# seen in torch 2.9.0 / torch-xla 2.9.0: torch_xla._XLAC._get_xla_tensors_hlo
def hlo_text(tensors: Sequence) -> str:
    """The HLO text of the pending graph rooted at `tensors` (what torch-xla compiles)."""
    return _xlac()._get_xla_tensors_hlo(list(tensors))


# seen in torch 2.9.0 / torch-xla 2.9.0: torch_xla._XLAC._get_tensors_xla_device_data_node
def graph_inputs(tensors: Sequence) -> tuple[list[int], list]:
    """(tensor ids, tensors holding the data) of the device-data parameters of the graph
    rooted at `tensors`, in the order of the lowered module's parameters."""
    ids, values = _xlac()._get_tensors_xla_device_data_node(list(tensors))
    return list(ids), list(values)


# seen in torch 2.9.0 / torch-xla 2.9.0: torch_xla._XLAC._unique_id_for_ir_and_data
def data_id_function():
    """`data_id` itself, unwrapped: it runs once per 64-bit parameter on every call."""
    return _xlac()._unique_id_for_ir_and_data


def data_id(tensor) -> str:
    """An identity for a tensor's pending IR or device data: two tensors sharing a device
    buffer have the same one, and any write (in place or not) gives a new one."""
    return data_id_function()(tensor)


# seen in torch 2.9.0 / torch-xla 2.9.0 (only through the calls of this module it uses)
def buffer_id(tensor) -> "str | None":
    """The identity of the device buffer a tensor holds, in the form the parameters of a
    lowered graph report it (`data_id` of an unsynced upload names its IR node instead),
    or None when the tensor is not exactly one device buffer."""
    _, values = graph_inputs([tensor])
    if len(values) != 1:
        return None
    return data_id(values[0])


# seen in torch 2.9.0 / torch-xla 2.9.0: torch_xla._XLAC._xla_get_tensor_id
def tensor_id(tensor) -> int:
    return _xlac()._xla_get_tensor_id(tensor)


# seen in torch 2.9.0 / torch-xla 2.9.0: torch_xla._XLAC._xla_get_tensor_id
def is_xla_tensor(tensor) -> bool:
    """Whether torch-xla holds `tensor` (a tensor whose device is "xla" may also be one of
    dynamo's fake tensors, or a functional wrapper, kept alive by its caches)."""
    try:
        _xlac()._xla_get_tensor_id(tensor)
    except RuntimeError:
        return False
    return True


# seen in torch 2.9.0 / torch-xla 2.9.0: torch_xla._XLAC._check_tensor_need_materialization, torch_xla._XLAC._check_device_tensor_need_materialization
def needs_materialization(tensors: Sequence) -> list[bool]:
    """Which tensors hold pending IR (not yet device data)."""
    return list(_xlac()._check_tensor_need_materialization(list(tensors)))


def pending_count(device: str) -> int:
    """How many live XLA tensors on `device` hold pending IR (a flag each, no IR text)."""
    return sum(_xlac()._check_device_tensor_need_materialization(device))


# seen in torch 2.9.0 / torch-xla 2.9.0: torch_xla._XLAC._xla_sync_multi
def materialize(tensors: Sequence, device: str) -> None:
    """Execute the pending graph of `tensors` only (other live tensors keep theirs)."""
    if tensors:
        _xlac()._xla_sync_multi(list(tensors), [device], wait=True, sync_xla_data=True)


# seen in torch 2.9.0 / torch-xla 2.9.0: torch_xla._XLAC._get_seed_info_id
def seed_id() -> int:
    """The tensor id of torch-xla's RNG seed when it enters a graph as device data."""
    return _xlac()._get_seed_info_id()


# seen in torch 2.9.0 / torch-xla 2.9.0: torch_xla._XLAC._get_xla_all_numbers_special_scalars, torch_xla._XLAC._set_xla_all_numbers_special_scalars
@contextlib.contextmanager
def inline_scalars() -> Iterator[None]:
    """Python numbers become `stablehlo.constant`s instead of device-data parameters
    while tracing (what torch-xla's StableHLO export does), so the core pass sees, checks
    and narrows their values. A process-wide torch-xla flag: restored on exit."""
    with _process_flag("xla_all_numbers_special_scalars", True):
        yield


# ----------------------------------------------------------------------------- user computations

# seen in torch-xla 2.9.0 with jaxlib as pinned by x64guard: jaxlib._jax.mlir
def stablehlo_to_hlo_proto(module_text: str) -> bytes:
    """A serialized HloModuleProto from StableHLO text, its results returned as a tuple
    (what `_xla_user_computation` unpacks into tensors). jaxlib's converter, private:
    x64guard/bindings.py's `stablehlo_to_xla_computation` returns no tuple."""
    from jaxlib._jax import mlir as jaxlib_mlir

    computation = jaxlib_mlir.mlir_module_to_xla_computation(module_text, use_tuple_args=False, return_tuple=True)
    return computation.as_serialized_hlo_module_proto()


# seen in torch 2.9.0 / torch-xla 2.9.0: torch_xla._XLAC._xla_op_computation_from_module_proto
def computation_from_proto(name: str, proto: bytes):
    """An XlaComputation torch-xla can call as an op of its lazy graph."""
    return _xlac()._xla_op_computation_from_module_proto(name, proto)


# seen in torch 2.9.0 / torch-xla 2.9.0: torch_xla._XLAC._xla_user_computation
def call_computation(name: str, inputs: Sequence, computation) -> list:
    """The computation as a lazy graph op (nothing executed); `name`: 'xla::something'."""
    return list(_xlac()._xla_user_computation(name, list(inputs), computation))


# seen in torch 2.9.0 / torch-xla 2.9.0: torch_xla._XLAC._xla_create_placeholder_tensor, torch_xla.core.xla_builder
def placeholder(shape: Sequence[int], dtype):
    """A device-data tensor with no buffer, for staging a graph: reading it aborts the
    process, so it is only ever an input of a user computation (never of torch ops)."""
    from torch_xla.core import xla_builder

    xla_type = xla_builder.Op.from_torch_type(dtype)
    return _xlac()._xla_create_placeholder_tensor(xla_builder.mkshape(xla_type, tuple(shape)).shape)


# seen in torch 2.9.0 / torch-xla 2.9.0: torch._has_compatible_shallow_copy_type
def takes_device_data(tensor) -> bool:
    """Whether `replace_data` can give `tensor` a plain XLA tensor's data: PyTorch's check for `.data =`
    (a wrapper subclass or a functional tensor refuses it: "incompatible tensor type"; torch 2.9)."""
    import torch

    # one empty host-made tensor per dtype and device: made on the device, it would be pending IR
    key = (tensor.dtype, tensor.device)
    plain = _EMPTY_PLAIN.get(key)
    if plain is None:
        plain = _EMPTY_PLAIN.setdefault(key, torch.empty(0, dtype=tensor.dtype).to(tensor.device))
    return torch._has_compatible_shallow_copy_type(tensor, plain)


_EMPTY_PLAIN: dict = {}


# seen in torch 2.9.0: Tensor._fix_weakref (torch.utils.weak's WeakIdRef calls it for the same reason)
def owned(tensor):
    """`tensor`, which a weak reference or the garbage collector gave back, owned by Python
    again. PyTorch keeps a tensor's Python object alive from C++ once Python drops it while
    C++ still holds the tensor (autograd's saved tensors): a reference revived from there
    must say so, or C++ frees the tensor under the live object ("Deallocating Tensor that
    still has live PyObject references") and a later `.data =` on it fails ("incompatible
    tensor type"). Measured with the Python subclass GuardedTensor on DeBERTa-v2."""
    if tensor is not None:
        tensor._fix_weakref()
    return tensor


class TensorRef(weakref.ref):
    """A weak reference to a tensor whose call gives the tensor `owned`."""

    __slots__ = ()

    def __call__(self):
        return owned(super().__call__())


# seen in torch 2.9.0 / torch-xla 2.9.0 (only through the calls of this module it uses)
def replace_data(tensor, source) -> None:
    """`tensor` takes `source`'s device data (and drops its pending IR); what
    `x64guard.torch_xla.sync` does with each result of a narrowed lazy graph. (Public
    API; torch-xla's own `_replace_xla_tensor` keeps the tensor's view base, whose pending
    IR then grew from step to step: the graph of step k held steps 0..k.)"""
    tensor.data = source


# seen in torch 2.9.0 / torch-xla 2.9.0: torch_xla._XLAC._get_graph_hash
def graph_hash(tensors: Sequence) -> bytes:
    return _xlac()._get_graph_hash(list(tensors))


# seen in torch 2.9.0 / torch-xla 2.9.0: torch_xla._XLAC._xla_warm_up_cache
def warm_up(tensors: Sequence) -> None:
    """Compile the graph rooted at `tensors` into torch-xla's computation cache."""
    with own_compiles():
        _xlac()._xla_warm_up_cache(list(tensors), [])


# seen in torch 2.9.0 / torch-xla 2.9.0: torch_xla._XLAC._run_cached_graph
def run_cached(graph: bytes, inputs: Sequence) -> list:
    """Run a graph `warm_up` compiled, inputs in parameter order, as torch-xla's dynamo backend does."""
    return list(_xlac()._run_cached_graph(graph, list(inputs)))


# ----------------------------------------------------------------------------- export

# seen in torch 2.9.0 / torch-xla 2.9.0: torch_xla.stablehlo
def decompose_exported(exported_program):
    """The exported program decomposed as torch-xla's StableHLO export does (ATen's and its own)."""
    from torch_xla import stablehlo

    return stablehlo._run_decompositions(exported_program)


# seen in torch 2.9.0 / torch-xla 2.9.0: torch_xla.stablehlo
def export_interpreter(graph_module, device):
    """torch-xla's FX interpreter for exported graphs: moves tensors that factory ops
    create to the XLA device, wraps Python floats as torch-xla's export does."""
    from torch_xla import stablehlo

    return stablehlo.XLAExportInterpreter(graph_module, device, set(), None)


# ----------------------------------------------------------------------------- the lazy loop

# tensors of one IR node (device data) left out by torch-xla, not formatted and dropped here:
# a Falcon step's report took 0.8 ms with threshold 0 (23 such tensors), 0.015 ms with 1
_PENDING_NODES = 1
_REPORT_TENSOR = re.compile(r"^Tensor: id=(\d+), shape=(.+?), device=.*?, ir_nodes=(\d+)")


# seen in torch 2.9.0 / torch-xla 2.9.0: torch_xla._XLAC._xla_tensors_report
def pending_tensor_report(device: str) -> list[tuple[int, str]]:
    """(tensor id, shape) of every live XLA tensor holding pending IR on `device`, from torch-xla's
    report (2.9: a `Tensor: id=N, shape=f32[3]{0}, device=CPU:0, ir_nodes=K` header per tensor of
    more than `nodes_threshold` IR nodes, then its IR: about 60 us a tensor)."""
    text = _xlac()._xla_tensors_report(_PENDING_NODES, device)
    matches = (_REPORT_TENSOR.match(line) for line in text.splitlines())
    return [(int(m.group(1)), m.group(2)) for m in matches if m is not None and int(m.group(3)) > 1]


# seen in torch 2.9.0 / torch-xla 2.9.0: torch_xla._XLAC._xla_tensors_report
def pending_tensor_ir(device: str) -> dict[int, tuple[str, str]]:
    """torch-xla tensor id -> (shape, IR text) of every live XLA tensor holding pending IR on
    `device` (`pending_tensor_report`'s report; the IR names each node's type, `s64[2,5]{1,0} aten::mul`)."""
    text = _xlac()._xla_tensors_report(_PENDING_NODES, device)
    found: dict[int, tuple[str, str]] = {}
    header, lines = None, []
    for line in text.splitlines() + ["Tensor: id=-1, shape=, device=, ir_nodes=0"]:
        match = _REPORT_TENSOR.match(line)
        if match is None:
            lines.append(line)
            continue
        if header is not None and int(header.group(3)) > 1:   # one node: device data, nothing to compute
            found[int(header.group(1))] = (header.group(2), "\n".join(lines))
        header, lines = match, []
    return found


# ----------------------------------------------------------------------------- dynamo backends, ATen

# seen in torch 2.9.0: torch._dynamo.backends.common.aot_autograd (the route of PyTorch's
# custom-backend guide, and of torch-xla's `openxla`)
def aot_autograd(**compilers):
    from torch._dynamo.backends.common import aot_autograd as make
    return make(**compilers)


# seen in torch 2.9.0: torch._dynamo.lookup_backend, torch._dynamo.register_backend (in torch._dynamo's
# __all__, the custom-backend guide's; torch.compiler.list_backends is their public neighbour)
def dynamo_backend(name: str):
    import torch._dynamo
    return torch._dynamo.lookup_backend(name)


def register_dynamo_backend(name: str, compiler_fn) -> None:
    import torch._dynamo
    torch._dynamo.register_backend(compiler_fn=compiler_fn, name=name)


# seen in torch 2.9.0: torch._C.DisableTorchFunctionSubclass, what Tensor.__torch_function__
# runs an op under (a GuardedTensor op without that method's generator and lookups)
def plain_torch_function_type():
    import torch
    return torch._C.DisableTorchFunctionSubclass


# seen in torch 2.9.0: torch._C._dispatch_has_kernel_for_dispatch_key
def has_kernel(op_name: str, dispatch_key: str) -> bool:
    import torch
    return torch._C._dispatch_has_kernel_for_dispatch_key(op_name, dispatch_key)


# seen in torch 2.9.0: torch._ops.OpOverload (the class of torch.ops.aten.add.default)
def is_op_overload(target) -> bool:
    import torch
    return isinstance(target, torch._ops.OpOverload)


# seen in torch 2.9.0: torch._refs.bucketize, torch._decomp.decompositions._weight_norm_interface
def reference_bucketize(x, boundaries, *, out_int32=False, right=False):
    import torch._refs
    return torch._refs.bucketize(x, boundaries, out_int32=out_int32, right=right)


def decomposed_weight_norm_interface(v, g, dim=0):
    from torch._decomp import decompositions
    return decompositions._weight_norm_interface(v, g, dim)


# ----------------------------------------------------------------------------- dynamo

# seen in torch 2.9.0 / torch-xla 2.9.0: torch._dynamo.callback_handler, torch._dynamo.convert_frame._compile
def compiling_frame():
    """(the backend, the code object) dynamo is compiling a frame for, when called from
    inside one of dynamo's compile callbacks (`torch._dynamo.callback_handler`), else
    (None, None). Seen in torch 2.9.0: the callbacks run inside
    `torch._dynamo.convert_frame._compile`, whose arguments `code` and `compiler_fn` are the
    frame's code and the backend wrapped by dynamo (`WrapBackendDebug._torchdynamo_orig_backend`)
    and by torch.compile (`_TorchCompileWrapper.compiler_fn`); unwrapped here."""
    import sys

    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "_compile" and code.co_filename.endswith("convert_frame.py"):
            break
        frame = frame.f_back
    if frame is None:
        return None, None
    backend, code = frame.f_locals.get("compiler_fn"), frame.f_locals.get("code")
    for _ in range(8):   # a few layers of wrappers at most
        inner = getattr(backend, "_torchdynamo_orig_backend", None) or getattr(backend, "compiler_fn", None) or \
            getattr(backend, "func", None)   # functools.partial
        if inner is None or inner is backend:
            break
        backend = inner
    return backend, code


# seen in torch 2.9.0 / torch-xla 2.9.0: torch._dynamo, torch._dynamo.utils
def dynamo_records() -> tuple[list, dict[str, int]]:
    """(dynamo's graph-break reasons so far: `GraphCompileReason`s with `.reason` and
    `.user_stack`; what it gave up on, code it could not trace, with counts: its
    `counters['unimplemented']`), as torch 2.9.0 records them."""
    from torch._dynamo import utils

    return utils.graph_break_reasons, dict(utils.counters["unimplemented"])


# seen in torch 2.9.0 / torch-xla 2.9.0: torch._dynamo.callback.callback_handler, torch._dynamo.reset
def compile_callbacks(start, end) -> None:
    """Register `start` and `end` (each called with dynamo's CallbackArgs) around every frame
    dynamo compiles, once: torch._dynamo.reset() clears them, so callers arm them again."""
    from torch._dynamo.callback import callback_handler as handler
    if start not in handler.start_callbacks:
        handler.register_start_callback(start)
    if end not in handler.end_callbacks:
        handler.register_end_callback(end)


# seen in torch-xla 2.9.0: torch_xla.distributed.parallel_loader.ParallelLoader._exception_queue
def parallel_loader_error(parallel) -> "BaseException | None":
    """The exception a ParallelLoader's transfer thread stopped on (its per-device loader
    raises it the same way at the end of the stream), or None."""
    errors = getattr(parallel, "_exception_queue", None)
    return None if errors is None or errors.empty() else errors.get()


# seen in torch-xla 2.9.0: torch_xla._XLAC._xla_get_cpu_tensors (what xm._maybe_convert_to_cpu calls)
def cpu_tensors(tensors: Sequence) -> list:
    """XLA tensors read back to the host in one transfer (one wait, not one per tensor)."""
    return list(_xlac()._xla_get_cpu_tensors(list(tensors)))
