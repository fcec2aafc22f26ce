"""Everything x64guard needs from JAX beyond its stable API, in one place.

The MLIR bindings ship inside jaxlib and change between releases (method names, type
downcasting, walk semantics). x64guard is tested against the range below and says so
plainly when it meets another version, instead of failing somewhere deep inside a pass.
"""

from __future__ import annotations

import os

TESTED_JAX = ((0, 10, 0), (0, 11, 0))  # [low, high)
ALLOW_UNTESTED_ENV = "X64GUARD_ALLOW_UNTESTED_JAX"


def version_tuple(version: str) -> tuple[int, ...]:
    """(major, minor, micro) of a version string; a local part (+cu128) is ignored."""
    parts = []
    for piece in version.split("+")[0].split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def check_jax_version() -> None:
    import jax
    import jaxlib

    require_tested_versions(
        {"jax": jax.__version__, "jaxlib": jaxlib.__version__}, TESTED_JAX, ALLOW_UNTESTED_ENV,
        "x64guard is tested with {name} >= {low} and < {high}, but {name} {version} is installed. Its MLIR "
        "bindings change between releases; install a tested version (pip install 'jax>=0.10,<0.11' "
        "'jaxlib>=0.10,<0.11') or set {env}=1 to try anyway.")


def require_tested_versions(versions: dict[str, str], tested: tuple[tuple[int, ...], tuple[int, ...]],
                            allow_env: str, message: str) -> None:
    """ImportError(`message`) for the first package outside `tested` = [low, high),
    unless $`allow_env` is set. `message` may use {name} {version} {low} {high} {env}."""
    low, high = tested
    if os.environ.get(allow_env):
        return
    for name, version in versions.items():
        if not (low <= version_tuple(version) < high):
            raise ImportError(message.format(name=name, version=version, low=".".join(map(str, low)),
                                             high=".".join(map(str, high)), env=allow_env))


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
    context (both are needed: either alone gave stale results, see the notes)."""
    from jax._src import config

    if name in config.config_states:  # re-import (tests reload modules)
        return config.config_states[name]
    return config.enum_state(name, values, default, help=help,
                             include_in_jit_key=True, include_in_trace_context=True)


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


def exported_abstract_mesh(exported):
    """The abstract mesh an Exported's NamedShardings refer to, or None.
    (Exported keeps them in private fields; jax.export offers no public accessor.)"""
    for sharding in tuple(getattr(exported, "_in_named_shardings", ())) + tuple(
            getattr(exported, "_out_named_shardings", ())):
        if sharding is not None and getattr(sharding.mesh, "axis_names", ()):
            return sharding.mesh
    return None


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
