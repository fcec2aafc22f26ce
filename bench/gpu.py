"""x64guard.jit on an accelerator (`make bench`'s GPU section; issue 21 item 5).

When `jax.devices()` holds a GPU: three workloads a user runs at float64 (an MLP train
step, an RK4 `lax.scan`, a `linalg.solve`), each as

  x64     jax.jit with x64 on, float64 arrays on the device (the program x64guard replaces),
  guard   x64guard.jit with x64 on, the same float64 arrays,
  x32     jax.jit with x64 off, float32 arrays (the oracle),

steady-state (median of N calls after warm-up) and first call (trace + compile + run) in
one run, printed as times and ratios. Each side's first call runs in a fresh process, so
none shares another's compilation cache. Then the bits: x64guard's outputs against x32
JAX's, in a process started with XLA's deterministic flags (XLA's GPU reductions and
autotuning choose by timing otherwise, and x32 JAX itself is not reproducible across
processes then: docs/jit.md, bits on a GPU), and with the default flags, for context.

Without a GPU the section says so and measures nothing. `--platform cpu --scale 0.02`
runs the same code on the CPU (tests/bench/test_gpu.py checks that it works end to end).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

DETERMINISTIC_FLAGS = "--xla_gpu_deterministic_ops=true --xla_gpu_autotune_level=0"
WORKLOADS = ("mlp_train_step", "rk4_scan", "linalg_solve")

# One child process: one side's first call and steady state of one workload, or every
# side's outputs for the bit comparison. Prints one JSON line.
_CHILD = r'''
import hashlib, json, os, statistics, sys, time, warnings
warnings.simplefilter("ignore")
import numpy as np
import jax, jax.numpy as jnp
import x64guard

workload, side, scale, calls = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
platform = os.environ.get("X64GUARD_BENCH_PLATFORM") or None
device = jax.devices(platform)[0] if platform else jax.devices()[0]

def mlp_train_step(params, x, y):
    def loss(p):
        h = x
        for w, b in p[:-1]:
            h = jnp.tanh(h @ w + b)
        w, b = p[-1]
        return jnp.mean((h @ w + b - y) ** 2)
    value, grads = jax.value_and_grad(loss)(params)
    return value, jax.tree.map(lambda p, g: p - 1e-3 * g, params, grads)

def rk4_scan(y0, k):
    def f(y):
        return -k * y + jnp.sin(y) * 0.1
    def step(y, _):
        h = 0.01
        a = f(y); b = f(y + h / 2 * a); c = f(y + h / 2 * b); d = f(y + h * c)
        return y + h / 6 * (a + 2 * b + 2 * c + d), None
    return jax.lax.scan(step, y0, None, length=200)[0]

def linalg_solve(a, b):
    return jnp.linalg.solve(a, b)

def inputs():
    rng = np.random.default_rng(0)
    if workload == "mlp_train_step":
        batch, width = max(8, int(4096 * scale)), max(8, int(2048 * scale))
        dims = [max(8, int(1024 * scale)), width, width, width, 16]
        params = [(rng.standard_normal((i, o)) / np.sqrt(i), np.zeros(o)) for i, o in zip(dims[:-1], dims[1:])]
        return mlp_train_step, (params, rng.standard_normal((batch, dims[0])), rng.standard_normal((batch, 16)))
    if workload == "rk4_scan":
        n = max(8, int(4_000_000 * scale))
        return rk4_scan, (rng.standard_normal(n), rng.uniform(0.5, 2.0, n))
    m = max(8, int(4096 * scale))
    return linalg_solve, (rng.standard_normal((m, m)) + m * np.eye(m), rng.standard_normal((m, 64)))

fn, host = inputs()
x64 = side != "x32"
jax.config.update("jax_enable_x64", x64)   # the user's setting, before any array is made
narrow = {np.dtype("float64"): np.float32}
data = host if x64 else jax.tree.map(lambda a: a.astype(narrow.get(a.dtype, a.dtype)), host)
args = jax.device_put(data, device)        # on the device, as a user holds them
jax.block_until_ready(args)
jitted = x64guard.jit(fn) if side == "guard" else jax.jit(fn)

start = time.perf_counter()
out = jax.block_until_ready(jitted(*args))
first = time.perf_counter() - start
if calls:
    for _ in range(3):
        jax.block_until_ready(jitted(*args))
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        jax.block_until_ready(jitted(*args))
        times.append(time.perf_counter() - start)
    steady = statistics.median(times)
else:
    steady = None
leaves = [np.asarray(a) for a in jax.tree.leaves(out)]
print(json.dumps({"first_s": first, "steady_s": steady, "device": device.device_kind,
                  "outputs": [[str(a.dtype), a.shape, hashlib.sha256(a.tobytes()).hexdigest()] for a in leaves]}))
'''


def has_gpu() -> bool:
    import jax

    try:
        return bool(jax.devices("gpu"))
    except RuntimeError:  # no GPU backend in this jaxlib
        return False


def _child(workload: str, side: str, scale: float, calls: int, platform: str | None, xla_flags: str | None) -> dict:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    if platform:
        env["X64GUARD_BENCH_PLATFORM"] = platform
        env["JAX_PLATFORMS"] = platform
    if xla_flags is not None:
        env["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + xla_flags).strip()
    proc = subprocess.run([sys.executable, "-c", _CHILD, workload, side, str(scale), str(calls)],
                          capture_output=True, text=True, env=env, timeout=900)
    if proc.returncode:
        raise RuntimeError(f"bench/gpu.py: {workload} {side} failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _bits_equal(workload: str, scale: float, platform: str | None, xla_flags: str) -> bool:
    guard = _child(workload, "guard", scale, 0, platform, xla_flags)["outputs"]
    x32 = _child(workload, "x32", scale, 0, platform, xla_flags)["outputs"]
    return guard == x32


def run(calls: int = 20, scale: float = 1.0, platform: str | None = None, workloads=WORKLOADS) -> dict:
    """The section's figures ({} and a line saying so when there is no GPU and no
    platform was named)."""
    if platform is None and not has_gpu():
        print("\n(gpu) no GPU among jax.devices(): the accelerator section measured nothing "
              "(docs/jit.md has the H200 figures)")
        return {}
    figures: dict = {}
    print(f"\n(gpu) x64 jax.jit / x64guard.jit / x32 jax.jit on {platform or 'gpu'}, scale {scale}: median of "
          f"{calls} steady calls; first call in a fresh process each; bits against x32 JAX under "
          f"XLA_FLAGS='{DETERMINISTIC_FLAGS}' and with default flags")
    print(f"    {'workload':16s} {'x64':>10s} {'guard':>10s} {'x32':>10s} {'x64/guard':>9s} {'guard/x32':>9s}   "
          f"first call s (x64, guard, x32)  guard/x32 first   bits (deterministic, default)")
    for workload in workloads:
        sides = {side: _child(workload, side, scale, calls, platform, None) for side in ("x64", "guard", "x32")}
        deterministic = _bits_equal(workload, scale, platform, DETERMINISTIC_FLAGS)
        default = _bits_equal(workload, scale, platform, "")
        steady = {side: r["steady_s"] for side, r in sides.items()}
        first = {side: r["first_s"] for side, r in sides.items()}
        row = {"steady_s": steady, "first_s": first, "x64_over_guard": steady["x64"] / steady["guard"],
               "guard_over_x32": steady["guard"] / steady["x32"], "first_guard_over_x32": first["guard"] / first["x32"],
               "bits_deterministic": deterministic, "bits_default": default, "device": sides["guard"]["device"]}
        figures[workload] = row
        print(f"    {workload:16s} {steady['x64'] * 1e3:8.2f}ms {steady['guard'] * 1e3:8.2f}ms "
              f"{steady['x32'] * 1e3:8.2f}ms {row['x64_over_guard']:8.2f}x {row['guard_over_x32']:8.3f}x   "
              f"{first['x64']:.2f} {first['guard']:.2f} {first['x32']:.2f}{'':15s} {row['first_guard_over_x32']:.3f}"
              f"{'':13s} {'identical' if deterministic else 'DIFFERENT'}, "
              f"{'identical' if default else 'different'}")
    return figures


def summary(figures: dict) -> list[str]:
    if not figures:
        return ["  gpu: no GPU in this run"]
    return [f"  gpu {name}: guard / x32 steady {row['guard_over_x32']:.3f}, first {row['first_guard_over_x32']:.3f}; "
            f"x64 / guard {row['x64_over_guard']:.2f}x; bits under deterministic flags "
            f"{'identical' if row['bits_deterministic'] else 'DIFFERENT'} ({row['device']})"
            for name, row in figures.items()]
