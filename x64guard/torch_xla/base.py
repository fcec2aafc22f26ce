"""What every module of the torch-xla front end uses: the dtype table, x64guard's counters,
the device."""

from __future__ import annotations

import functools

import torch
import torch_xla

from x64guard.passes.tables import NARROW_TORCH_DTYPE, TORCH_JAX_DTYPE, TORCH_MLIR_ELEMENT


BACKEND_NAME = "x64guard"

# What a 64-bit dtype becomes: the core's type table, on the torch side.
NARROW_DTYPE: dict[torch.dtype, torch.dtype] = {
    getattr(torch, wide): getattr(torch, narrow) for wide, narrow in NARROW_TORCH_DTYPE.items()}
INTEGER_NARROW = {wide for wide in NARROW_DTYPE if not (wide.is_floating_point or wide.is_complex)}
# The MLIR element type torch-xla lowers each torch dtype to, and the JAX dtype holding the
# same values (torch-xla's calls into JAX): the core's type table, keyed by torch dtype.
MLIR_ELEMENT: dict[torch.dtype, str] = {
    getattr(torch, name): mlir for name, mlir in TORCH_MLIR_ELEMENT.items() if hasattr(torch, name)}
JAX_DTYPE_NAME: dict[torch.dtype, str] = {
    getattr(torch, name): jax_name for name, jax_name in TORCH_JAX_DTYPE.items() if hasattr(torch, name)}

# How many times x64guard traced and narrowed a graph, built a program, and ran one.
COUNTERS = {"traces": 0, "programs": 0, "programs_shared": 0, "calls": 0, "boundary_casts": 0, "overflow_reads": 0}


def counters() -> dict[str, int]:
    """x64guard's own counts: graphs traced and narrowed (`traces`), programs compiled
    into torch-xla's cache (`programs`), traces whose narrowed module equalled a live
    program's but for locations and so reused it (`programs_shared`, e.g. after a dynamo
    recompile), narrowed calls (`calls`), 64-bit tensors cast at the boundary
    (`boundary_casts`), and calls whose overflow checks were read back from the device
    (`overflow_reads`: the inputs' magnitudes did not settle them). A steady state on
    small ids moves only `calls`."""
    return dict(COUNTERS)


def xla_device() -> torch.device:
    return torch_xla.device()


@functools.lru_cache(maxsize=None)
def excluded_source_dirs() -> tuple[str, ...]:
    """Directories whose frames are never the user's line: torch's (dynamo included) and
    torch-xla's."""
    from x64guard.user_place import module_dirs

    return module_dirs(torch, torch_xla)
