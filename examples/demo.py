"""x64guard demo: narrow a float64/int64 JAX program for an accelerator without 64-bit
types, run it, and compare it with what JAX computes when it traces with x64 off.

Run with `make demo`.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np

import x64guard


def simulate(positions, velocities, steps):
    """A small float64 particle simulation with an int64 step counter."""
    def step(i, state):
        x, v = state
        force = -jnp.sin(x) - 0.1 * v
        v = v + 0.01 * force
        x = x + 0.01 * v
        return x, v

    x, v = jax.lax.fori_loop(0, steps, step, (positions, velocities))
    energy = 0.5 * jnp.sum(v**2) + jnp.sum(1.0 - jnp.cos(x))
    fastest = jnp.argmax(jnp.abs(v))
    cov = jnp.cov(jnp.stack([x, v]))
    return energy, fastest, jnp.linalg.solve(cov + jnp.eye(2), jnp.ones(2))


def randomized(key, x):
    """Float64 random numbers: x64guard draws what JAX draws with x64 off."""
    return x + jax.random.uniform(key, x.shape)  # float64 under x64


def hand_made_floats(bits):
    """Float64 numbers built from 64-bit words x64guard cannot trace to a generator:
    narrowed, they would be garbage, so x64guard refuses them."""
    return jax.lax.bitcast_convert_type((bits >> np.uint64(12)) | np.uint64(0x3FF0000000000000), jnp.float64)


def trace_x64(fn, *args) -> str:
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        return jax.jit(fn).lower(*args).as_text(debug_info=True)
    finally:
        jax.config.update("jax_enable_x64", previous)


def main() -> None:
    positions = np.linspace(-1.0, 1.0, 8)
    velocities = np.cos(positions)
    steps = np.int64(100)

    print("== 1. trace the program with jax_enable_x64 (f64 / i64 everywhere)")
    text = trace_x64(simulate, positions, velocities, steps)
    print(f"   {text.count('f64')} mentions of f64, {text.count('i64')} of i64, "
          f"{text.count('lapack_d')} double-precision LAPACK calls")

    print("\n== 2. x64guard.narrow: what changed and where")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", x64guard.X64GuardWarning)
        result = x64guard.narrow(text)
    for w in caught:
        print(f"   warning: {w.message}")
    by_line: dict[str, list] = {}
    for finding in result.findings:
        where = finding.location
        by_line.setdefault(f"{where.file}:{where.line}" if where.has_file else str(where), []).append(finding)
    for where, findings in sorted(by_line.items()):
        ops = sorted({f.op.removeprefix("stablehlo.") for f in findings})
        what = sorted({f.message for f in findings if f.kind != "type-narrowed"})
        print(f"   {where}: {sum(f.count for f in findings):3} change(s) in {', '.join(ops)}"
              + (f"  [{'; '.join(what)}]" if what else ""))

    print("\n== 3. run it narrowed (x64guard.jit narrows this lowering and compiles it), and JAX's own x32 program")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", x64guard.X64GuardWarning)  # the summary printed in step 2
        narrowed = [np.asarray(o) for o in jax.tree_util.tree_leaves(
            x64guard.jit(simulate)(positions, velocities, steps))]
    args32 = (positions.astype(np.float32), velocities.astype(np.float32), np.int32(steps))
    reference = [np.asarray(o) for o in jax.tree_util.tree_leaves(jax.jit(simulate)(*args32))]
    for got, want in zip(narrowed, reference):
        same = got.dtype == want.dtype and got.tobytes() == want.tobytes()
        print(f"   {str(got.dtype):8} {np.array2string(got, precision=6):40} "
              f"{'bit-identical to x32 JAX' if same else 'DIFFERS from x32 JAX: ' + str(want)}")

    print("\n== 4. random numbers: jax.random's float64 draws become x32 JAX's draws")
    key = np.array([0, 7], dtype=np.uint32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", x64guard.X64GuardWarning)
        drawn = x64guard.narrow(trace_x64(randomized, key, positions))
        got = np.asarray(x64guard.jit(randomized)(key, positions))
    want = np.asarray(jax.jit(randomized)(key, positions.astype(np.float32)))
    print(f"   uniform draws {'have the same bits as x32 JAX' if got.tobytes() == want.tobytes() else 'DIFFER'}; "
          f"rewritten: {sorted({f.kind for f in drawn.findings if f.kind.startswith('rng')})}")
    try:
        x64guard.narrow(trace_x64(hand_made_floats, np.arange(4, dtype=np.uint64)))
    except x64guard.X64GuardError as error:
        for finding in error.findings:
            print(f"   refused: {finding}")

    print("\n== 5. x64guard.check --target neuron, without rewriting")
    report = x64guard.check(text, target="neuron")
    print(f"   ok={report.ok}; findings by kind: {report.counts_by_kind()}")


if __name__ == "__main__":
    main()
