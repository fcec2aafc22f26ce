"""Large modules (a section of `make bench`; alone: `python -m bench.run --only large`).
Figures, not tests: nothing here fails. tests/reliability/test_large_modules.py runs small
versions of both with asserted limits.

  (a) peak memory of narrowing a module holding one 400 MB float64 constant (50M values,
      random, written as MLIR bytecode, and as text with a hex `dense<"0x...">` literal).
      Each figure comes from a child process that imports x64guard, records its RSS
      (/proc/self/status VmRSS, the baseline), reads the file and calls `x64guard.narrow`
      on it, then reports its peak RSS (VmHWM). Peak minus baseline, over the constant's
      400 MB: target <= 2.5x. Rows: the bytecode file as a path (the main figure: MLIR
      reads the file itself), the file's bytes (the caller's copy, the bindings' copy and
      the parsed module: 3x), the text file as str, and an `ir.Module` already parsed (the
      peak is reset after parsing with /proc/self/clear_refs, so the row shows what
      narrowing itself adds). Bytecode is vetted by x64guard's reader process first; its
      own peak is reported beside the row.
  (b) op-count scaling: `x64guard.narrow(ir.Module)` (clone + pass + verify) on the
      benchmark's unrolled x64 JAX program (bench/workload.py) at ~30,000 and ~200,000
      ops, best of N: time per op and the ratio 200k/30k (target <= 1.5: no quadratic
      behaviour). Also text -> text per op, and that nothing hits a recursion limit.

`run(runs)` prints this section and returns its figures; `summary(figures)` gives the
lines of the final table. `python -m bench.large [--mb 400] [--runs N]` runs it alone.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from bench.timing import best_of

ROOT = Path(__file__).resolve().parent.parent

TARGET_MEMORY_RATIO = 2.5   # (a) peak - baseline over the constant's size
TARGET_SCALING = 1.5        # (b) time per op at 200k ops over time per op at 30k ops
CONSTANT_MB = 400
SMALL_OPS, LARGE_OPS = 30_000, 200_000
OPS_PER_STEP = 28           # bench/workload.py: 28 ops per unrolled step
MB = 1_000_000


# --------------------------------------------------------------------------- (a) memory

def write_constant_module(path: Path, n_bytes: int, fmt: str, seed: int = 0) -> int:
    """A module returning one f64 constant of n_bytes // 8 random values; fmt 'text' (hex
    literal, streamed to the file in chunks) or 'bytecode'. Returns the element count."""
    n = n_bytes // 8
    rng = np.random.default_rng(seed)
    if fmt == "text":
        with open(path, "w") as out:
            out.write(f'func.func @main() -> tensor<{n}xf64> {{\n  %0 = stablehlo.constant dense<"0x')
            chunk = 1 << 22
            for start in range(0, n, chunk):
                out.write(rng.standard_normal(min(chunk, n - start)).tobytes().hex().upper())
            out.write(f'"> : tensor<{n}xf64>\n  return %0 : tensor<{n}xf64>\n}}\n')
        return n
    import jax  # noqa: F401  (loads the bindings)
    from jax.extend.mlir import ir

    from x64guard.io import modules
    values = rng.standard_normal(n)
    context = modules.make_context()
    with context, ir.Location.unknown():
        module = ir.Module.parse(f"func.func @main() -> tensor<{n}xf64> {{\n"
                                 f"  %0 = stablehlo.constant dense<0.0> : tensor<{n}xf64>\n"
                                 f"  return %0 : tensor<{n}xf64>\n}}")
        constant = module.body.operations[0].regions[0].blocks[0].operations[0]
        constant.attributes["value"] = ir.DenseElementsAttr.get(values, type=ir.F64Type.get(), shape=[n])
        del values
        with open(path, "wb") as out:
            module.operation.write_bytecode(out)
    return n


def _status_kb(field: str, pid: int | str = "self") -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def _reset_peak(pid: int | str = "self") -> None:
    with open(f"/proc/{pid}/clear_refs", "w") as clear:  # VmHWM := the current RSS
        clear.write("5")


def child_narrow(path: str, how: str) -> dict:
    """Runs in the child: baseline after imports, read + narrow, peak. JSON on stdout.
    Bytecode from bytes or a file is first read by x64guard's reader process
    (x64guard/io/isolated_reader.py): its own peak is measured too, from a baseline taken
    after it started on a tiny module."""
    warnings.simplefilter("ignore")
    import x64guard
    from x64guard.io import isolated_reader, modules
    reader_pid = None
    if how in ("bytes", "path"):
        x64guard.check(modules.to_bytecode(modules.load("func.func @main() { return }")[0]))  # start the reader
        reader_pid = isolated_reader.reader_pid()
        reader_baseline_kb = _status_kb("VmRSS", reader_pid)
        _reset_peak(reader_pid)
    gc.collect()
    baseline_kb = _status_kb("VmRSS")
    _reset_peak()
    start = time.perf_counter()
    if how == "module":
        module, _ = modules.load(Path(path), trusted=True)
        gc.collect()
        baseline_kb = _status_kb("VmRSS")
        _reset_peak()
        start = time.perf_counter()
        result = x64guard.narrow(module)
    elif how == "text":
        result = x64guard.narrow(Path(path).read_text())
    elif how == "path":
        result = x64guard.narrow(Path(path))
    else:
        result = x64guard.narrow(Path(path).read_bytes())
    seconds = time.perf_counter() - start
    peak_kb = _status_kb("VmHWM")
    figures = {"how": how, "baseline_kb": baseline_kb, "peak_kb": peak_kb, "seconds": seconds,
               "changes": result.changes}
    if reader_pid is not None:
        assert isolated_reader.reader_pid() == reader_pid, "the reader restarted"
        figures["reader_extra_kb"] = _status_kb("VmHWM", reader_pid) - reader_baseline_kb
    return figures


def measure_memory(path: Path, how: str, constant_bytes: int, timeout: float = 1800) -> dict:
    """Peak RSS of a child that narrows `path`, as a multiple of the constant's size (and
    the peak of x64guard's reader process, for bytecode, likewise)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "bench.large", "--child", str(path), how],
                          capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)
    if proc.returncode != 0:
        return {"how": how, "ok": False, "error": f"exit {proc.returncode}: {proc.stderr.strip()[-800:]}"}
    figures = json.loads(proc.stdout.strip().splitlines()[-1])
    figures["ok"] = True
    figures["extra_mb"] = (figures["peak_kb"] - figures["baseline_kb"]) * 1024 / MB
    figures["ratio"] = (figures["peak_kb"] - figures["baseline_kb"]) * 1024 / constant_bytes
    if "reader_extra_kb" in figures:
        figures["reader_ratio"] = figures["reader_extra_kb"] * 1024 / constant_bytes
    return figures


def memory(constant_mb: int = CONSTANT_MB) -> dict:
    constant_bytes = constant_mb * MB
    rows = {}
    with tempfile.TemporaryDirectory(prefix="x64guard-large-") as tmp:
        for fmt, hows in (("bytecode", ("path", "bytes", "module")), ("text", ("text",))):
            path = Path(tmp) / ("const.mlirbc" if fmt == "bytecode" else "const.mlir")
            start = time.perf_counter()
            write_constant_module(path, constant_bytes, fmt)
            written = time.perf_counter() - start
            size = path.stat().st_size
            for how in hows:
                row = measure_memory(path, how, constant_bytes)
                row.update(file_mb=size / MB, write_s=written)
                rows[how] = row
                if row["ok"]:
                    reader = (f"; reader process +{row['reader_extra_kb'] * 1024 / MB:,.0f} MB = {row['reader_ratio']:.2f}x"
                              if "reader_ratio" in row else "")
                    print(f"    {how:6s} {fmt} file {size / MB:,.0f} MB: baseline {row['baseline_kb'] / 1024:,.0f} MiB, "
                          f"peak {row['peak_kb'] / 1024:,.0f} MiB, +{row['extra_mb']:,.0f} MB = {row['ratio']:.2f}x "
                          f"the constant{reader}; narrow {row['seconds']:.1f} s; changes {row['changes']}")
                else:
                    print(f"    {how:6s} {fmt}: FAILED: {row['error']}")
    return {"constant_mb": constant_mb, "rows": rows, "target": f"<= {TARGET_MEMORY_RATIO}",
            "met": rows["path"]["ok"] and rows["path"]["ratio"] <= TARGET_MEMORY_RATIO}


# --------------------------------------------------------------------------- (b) scaling

def scaling(runs: int) -> dict:
    from bench import workload

    import x64guard
    from x64guard.io import modules

    out = {}
    for target in (SMALL_OPS, LARGE_OPS):
        steps = round(target / OPS_PER_STEP)
        start = time.perf_counter()
        text = workload.lower_x64(steps)
        trace_s = time.perf_counter() - start
        module, _ = modules.load(text)
        n_ops = workload.count_ops(module)
        x64guard.narrow(module)  # warm-up
        narrow_s, narrow_runs = best_of(lambda: x64guard.narrow(module), runs, warmup=0)
        text_s, _ = best_of(lambda: x64guard.narrow(text).text, max(1, runs // 2), warmup=0)
        out[target] = {"steps": steps, "ops": n_ops, "chars": len(text), "trace_s": trace_s,
                       "narrow_s": narrow_s, "narrow_runs_s": narrow_runs, "narrow_us_per_op": narrow_s / n_ops * 1e6,
                       "text_to_text_s": text_s, "text_us_per_op": text_s / n_ops * 1e6,
                       "recursion_limit": sys.getrecursionlimit()}
        print(f"    {n_ops:,} ops ({steps} steps, {len(text) / MB:.1f} M chars, traced in {trace_s:.1f} s): "
              f"narrow(ir.Module) best {narrow_s:.3f} s = {narrow_s / n_ops * 1e6:.2f} us/op "
              f"(runs {' '.join(f'{t:.3f}' for t in narrow_runs)}); text->text {text_s:.3f} s = "
              f"{text_s / n_ops * 1e6:.2f} us/op")
        del module, text
        gc.collect()
    small, large = out[SMALL_OPS], out[LARGE_OPS]
    ratio = large["narrow_us_per_op"] / small["narrow_us_per_op"]
    ratio_text = large["text_us_per_op"] / small["text_us_per_op"]
    print(f"    per-op time {large['ops']:,} / {small['ops']:,} ops: narrow {ratio:.2f}  "
          f"(text->text {ratio_text:.2f})  target <= {TARGET_SCALING}  {'MET' if ratio <= TARGET_SCALING else 'NOT MET'}")
    return {"small": small, "large": large, "ratio": ratio, "ratio_text_to_text": ratio_text,
            "target": f"<= {TARGET_SCALING}", "met": ratio <= TARGET_SCALING}


# --------------------------------------------------------------------------- section

def run(runs: int, constant_mb: int = CONSTANT_MB) -> dict:
    runs = max(1, runs)
    start = time.perf_counter()
    warnings.simplefilter("ignore")
    print(f"\n[large modules]")
    print(f"(a) peak memory narrowing a {constant_mb} MB float64 constant (child process: VmHWM - VmRSS after "
          f"imports; target <= {TARGET_MEMORY_RATIO}x the constant)")
    figures = {"a_memory": memory(constant_mb)}
    print(f"(b) narrow(ir.Module) time per op at ~{SMALL_OPS:,} and ~{LARGE_OPS:,} ops (bench/workload.py), best of {runs}")
    figures["b_scaling"] = scaling(runs)
    figures["section_s"] = time.perf_counter() - start
    print(f"    (large-module section took {figures['section_s']:.0f} s)")
    return figures


def summary(figures: dict) -> list[str]:
    a, b = figures["a_memory"], figures["b_scaling"]
    lines = ["  large modules"]
    row = a["rows"].get("path", {})
    if row.get("ok"):
        others = ", ".join(f"{how} {r['ratio']:.2f}x" for how, r in a["rows"].items() if how != "path" and r.get("ok"))
        lines.append(f"  (a) {a['constant_mb']} MB f64 constant: peak +{row['extra_mb']:,.0f} MB = {row['ratio']:.2f}x  "
                     f"target <= {TARGET_MEMORY_RATIO}  {'MET' if a['met'] else 'NOT MET'}")
        lines.append(f"      (a bytecode file in; reader process {row.get('reader_ratio', float('nan')):.2f}x; "
                     f"also {others})")
    else:
        lines.append(f"  (a) {a['constant_mb']} MB f64 constant: FAILED ({row.get('error', 'no figure')[:120]})")
    lines.append(f"  (b) {b['large']['ops']:,} ops {b['large']['narrow_us_per_op']:.2f} us/op vs {b['small']['ops']:,} ops "
                 f"{b['small']['narrow_us_per_op']:.2f} us/op: ratio {b['ratio']:.2f}  target <= {TARGET_SCALING}  "
                 f"{'MET' if b['met'] else 'NOT MET'}")
    return lines


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        print(json.dumps(child_narrow(sys.argv[2], sys.argv[3])))
        sys.exit(0)
    parser = argparse.ArgumentParser(description="x64guard large-module benchmark")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--mb", type=int, default=CONSTANT_MB, help="size of the float64 constant")
    ns = parser.parse_args()
    result = run(ns.runs, ns.mb)
    print("\n" + "\n".join(summary(result)))
