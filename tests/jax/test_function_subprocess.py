"""x64guard.jit where a fresh process is needed: 8 simulated devices for sharded
programs, and a temporary persistent compilation cache directory."""

import pytest

from tests.support import child


def run_child(code: str, env_extra: dict) -> dict:
    return child.run_json(code, env=env_extra, timeout=600)


SHARDED = """
    import json, warnings
    warnings.simplefilter("ignore")
    import numpy as np, jax, jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec as P
    import x64guard
    from tests.corpus.oracle import bit_identical

    assert len(jax.devices()) == 8
    from jax.sharding import AxisType
    mesh = jax.make_mesh((4, 2), ("data", "model"), axis_types=(AxisType.Auto, AxisType.Auto))
    in_s = NamedSharding(mesh, P("data", "model"))
    out_s = NamedSharding(mesh, P("data", None))

    def dense(x, w, offsets):
        return jnp.tanh(x @ w) + offsets[:, None].astype(x.dtype), jnp.argmax(x, axis=1)

    x = np.random.default_rng(0).standard_normal((8, 16))
    w = np.random.default_rng(1).standard_normal((16, 4))
    offsets = np.arange(8, dtype=np.int64)
    narrowed = x64guard.jit(dense, in_shardings=(in_s, None, None), out_shardings=(out_s, None))
    xs = jax.device_put(x, in_s)  # float32 on the devices (x64 is off)
    (y, idx) = narrowed(xs, w, offsets)
    ref = jax.jit(dense, in_shardings=(in_s, None, None), out_shardings=(out_s, None))(
        jax.device_put(x.astype(np.float32), in_s), w.astype(np.float32), offsets.astype(np.int32))
    result = {
        "dense_dtypes": [str(y.dtype), str(idx.dtype)],
        "dense_sharding": str(y.sharding.spec),
        "dense_identical": bool(bit_identical(np.asarray(y), np.asarray(ref[0])))
                           and bool(bit_identical(np.asarray(idx), np.asarray(ref[1]))),
    }

    shard_map = jax.shard_map
    def collective(a, b):
        def body(ab, bb):
            total = jax.lax.psum(ab.sum(), "data")
            gathered = jax.lax.all_gather(bb, "data", tiled=True)
            return ab * 2 + total, gathered
        return shard_map(body, mesh=mesh, in_specs=(P("data"), P("data")), out_specs=(P("data"), P()),
                         check_vma=False)(a, b)

    ints = np.arange(16, dtype=np.int64) * 1000
    floats = np.linspace(0, 1, 16)
    (a, g) = x64guard.jit(collective)(ints, floats)
    (ra, rg) = jax.jit(collective)(ints.astype(np.int32), floats.astype(np.float32))
    result["shard_map_dtypes"] = [str(a.dtype), str(g.dtype)]
    result["shard_map_identical"] = bool(bit_identical(np.asarray(a), np.asarray(ra))) and bool(
        bit_identical(np.asarray(g), np.asarray(rg)))
    # Inside an outer jit on the same devices: the narrowed module is inlined there.
    outer = jax.jit(lambda a, b, c: narrowed(a, b, c)[0] * 2, in_shardings=(in_s, None, None))
    got = outer(xs, w.astype(np.float32), offsets.astype(np.int32))
    want = jax.jit(lambda a, b, c: dense(a, b, c)[0] * 2, in_shardings=(in_s, None, None))(
        jax.device_put(x.astype(np.float32), in_s), w.astype(np.float32), offsets.astype(np.int32))
    result["nested_identical"] = bool(bit_identical(np.asarray(got), np.asarray(want)))
    # Inside an outer jit on one device: refused clearly (not an XLA error).
    try:
        jax.jit(lambda a, b: x64guard.jit(collective)(a, b)[0] + 1)(ints.astype(np.int32), floats.astype(np.float32))
        result["nested_shard_map"] = "ran"
    except ValueError as exc:
        result["nested_shard_map"] = str(exc)
    lowered = x64guard.jit(collective).lower(ints, floats).as_text()
    result["collectives_narrowed"] = ("all_reduce" in lowered or "all-reduce" in lowered) and "i64" not in lowered.split("func.func")[1]
    print(json.dumps(result))
"""


def test_sharded_programs_on_eight_devices():
    result = run_child(SHARDED, {"XLA_FLAGS": "--xla_force_host_platform_device_count=8", "JAX_PLATFORMS": "cpu"})
    assert result["dense_dtypes"] == ["float32", "int32"]
    assert result["dense_sharding"] == "P('data', None)"
    assert result["dense_identical"]
    assert result["shard_map_dtypes"] == ["int32", "float32"]
    assert result["shard_map_identical"]
    assert result["nested_identical"]
    assert "lowered for 8 devices" in result["nested_shard_map"] and "lowered for 1" in result["nested_shard_map"]


PERSISTENT = """
    import json, sys, warnings
    warnings.simplefilter("ignore")
    import numpy as np, jax, jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)
    jax.config.update("jax_compilation_cache_dir", sys.argv[1] if len(sys.argv) > 1 else CACHE)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    import x64guard
    hits = []
    jax.monitoring.register_event_listener(lambda e, **kw: hits.append(e) if e == "/jax/compilation_cache/cache_hits" else None)
    inner = x64guard.jit(lambda x: jnp.sin(x) * 3.0)
    outer = jax.jit(lambda x: inner(x) + 1)
    x = np.linspace(0, 1, 5)
    with x64guard.mode(MODE):
        y = outer(x)
    print(json.dumps({"dtype": str(y.dtype), "hits": len(hits), "values": np.asarray(y).astype(float).tolist()}))
"""


def test_persistent_cache_never_serves_one_mode_for_the_other(tmp_path):
    def run(mode):
        code = PERSISTENT.replace("CACHE", repr(str(tmp_path))).replace("MODE", repr(mode))
        return run_child(code, {"JAX_PLATFORMS": "cpu"})

    full = run("allow")
    assert full["dtype"] == "float64" and full["hits"] == 0
    narrowed = run("warn")
    assert narrowed["dtype"] == "float32"
    assert narrowed["values"] != full["values"]  # computed in float32, not served from the f64 entry
    again = run("warn")
    assert again["hits"] >= 1 and again["values"] == narrowed["values"]  # the cache does work
    full_again = run("allow")
    assert full_again["dtype"] == "float64" and full_again["values"] == full["values"]


def test_cache_key_hook_includes_the_mode():
    code = """
        import json
        import x64guard
        from jax._src import cache_key
        x64guard.jit  # the JAX front end, loaded on first use, puts the mode in JAX's cache keys
        out = {}
        for m in ("allow", "warn"):
            with x64guard.mode(m):
                out[m] = cache_key.custom_hook()
        print(json.dumps(out))
    """
    out = run_child(code, {})
    assert "x64guard_mode=allow" in out["allow"] and "x64guard_mode=warn" in out["warn"]


def test_import_creates_no_array_and_starts_no_backend():
    code = """
        import json, sys
        import x64guard, x64guard.jax
        from jax._src import xla_bridge
        fn = x64guard.jit(lambda x: x * 2)  # wrapping a function starts nothing either
        print(json.dumps({"backends": sorted(xla_bridge._backends)}))
    """
    out = run_child(code, {"JAX_PLATFORMS": "cpu"})
    assert out["backends"] == []
