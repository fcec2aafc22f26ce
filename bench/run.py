"""x64guard benchmark (`make bench`): figures, not tests. Nothing here fails on speed.

Parts: `import x64guard` against `import jax` in fresh interpreters (bench/imports.py);
the core pass against IREE (below); x64guard.jit against jax.jit (bench/jit.py:
first call, steady-state call, narrowed vs float64 run time);
x64guard.torch.set_default_int_dtype against stock PyTorch (bench/torch_int.py: eager
per-op overhead; skipped when torch is not installed); the torch-xla backend against
torch-xla's openxla (bench/torch_xla_bench.py; skipped without torch-xla); large modules
(bench/large.py: peak memory narrowing a 400 MB float64 constant, time per op at 30k vs
200k ops).

Core:
  (a) text -> text, end to end: x64guard in-process (read file, parse, narrow, print,
      write file) against IREE's C++ demotion passes run by `iree-opt` as a subprocess
      (which includes its process start-up; measured separately for context).
      Target: x64guard / IREE <= 1.0.
  (b) `x64guard.narrow` on an already-parsed ir.Module (clone + pass + verify), per op.
      Target: <= 5 us/op.
  (c) parse (`x64guard.io.modules.load`) and print of the same module, for reference.

The module is a ~33k-op x64 StableHLO program JAX lowers from a deep unrolled Python
loop (bench/workload.py), measured twice in the same run: with JAX's source locations
(`as_text(debug_info=True)`) and without any (`as_text()`: every op is a parser position;
findings are grouped per op and function). Both have the same targets. Timings are best of N after one warm-up, time.perf_counter.
Figures also go to bench-out/results.json.

The accelerator section (bench/gpu.py) measures x64 / x64guard / x32 on a GPU when
`jax.devices()` holds one, and says so when not.

Options: --runs N (default 5), --steps S (module size), --only import|core|jit|gpu|torch|torch_xla|large (one part),
--profile (cProfile of core (b) and of x64guard.jit's steady-state calls), --gpu-platform P and
--gpu-scale S (the accelerator section on another platform, e.g. cpu, at a fraction of its sizes).
"""

from __future__ import annotations

import argparse
import gc
import importlib.metadata
import json
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

from bench import gpu as gpu_bench
from bench import imports as import_bench
from bench import jit as jit_bench
from bench import large as large_bench
from bench import workload
from bench.timing import best_of

ROOT = Path(__file__).resolve().parent.parent

import x64guard  # noqa: E402
from x64guard.io import modules as xmlir  # noqa: E402

TARGET_RATIO = 1.0       # (a) x64guard / IREE, end to end
TARGET_US_PER_OP = 5.0   # (b)
DEMOTE_I64 = "--iree-input-conversion-demote-i64-to-i32"
DEMOTE_F64 = "--iree-input-conversion-demote-f64-to-f32"
SUBPROCESS_TIMEOUT = 300

# 64-bit element types left in MLIR text: any ui64/i64/f64 token (this module has no
# structural i64 such as `array<i64: ...>`, so every such token would be a miss).
SIXTY_FOUR = re.compile(r"\b(?:ui64|si64|i64|f64)\b")


# --------------------------------------------------------------------------- helpers

def version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def find_iree_opt() -> tuple[str | None, str]:
    """The native iree-opt executable shipped by iree-base-compiler (not the Python
    wrapper script in the venv's bin/, which would add a Python start-up)."""
    try:
        from iree.compiler.tools import binaries
    except ImportError as exc:
        return None, f"iree-base-compiler is not installed ({exc}); `make bench` installs it"
    try:
        return os.path.realpath(binaries.find_tool("iree-opt")), "iree.compiler.tools.binaries.find_tool"
    except ValueError:
        pass
    import iree.compiler
    candidate = Path(iree.compiler.__file__).parent / "_mlir_libs" / "iree-opt"
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return str(candidate), "iree/compiler/_mlir_libs"
    found = shutil.which("iree-opt", path=str(Path(sys.executable).parent))
    if found:
        return found, "venv bin/ (Python wrapper: includes a Python start-up)"
    return None, "iree-opt not found in the iree-base-compiler package"


def demote_flags(exe: str) -> tuple[list[str] | None, str]:
    """The demotion pass flags, checked against `iree-opt --help`."""
    proc = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=120)
    help_text = proc.stdout + proc.stderr
    flags = []
    for wanted, suffix in ((DEMOTE_I64, "demote-i64-to-i32"), (DEMOTE_F64, "demote-f64-to-f32")):
        if wanted in help_text:
            flags.append(wanted)
            continue
        other = re.findall(r"(--[\w-]*" + suffix + r")\b", help_text)
        if not other:
            return None, f"no *{suffix} pass in `iree-opt --help` (exit {proc.returncode})"
        flags.append(other[0])
    return flags, "checked in iree-opt --help"


def run_tool(cmd: list[str]) -> tuple[float, float, subprocess.CompletedProcess]:
    """Wall time and child CPU time (user + sys) of one subprocess run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, timeout=SUBPROCESS_TIMEOUT)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, proc


def time_tool(cmd: list[str], runs: int, out: Path | None = None) -> dict:
    """Best-of-N wall time of a subprocess after one warm-up; any failure is reported."""
    walls, cpus = [], []
    for i in range(runs + 1):
        if out is not None and out.exists():
            out.unlink()
        wall, cpu, proc = run_tool(cmd)
        if proc.returncode != 0 or (out is not None and (not out.exists() or out.stat().st_size == 0)):
            err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
            return {"ok": False, "returncode": proc.returncode,
                    "error": "; ".join(err[:5]) or "no output file written"}
        if i:  # run 0 is the warm-up
            walls.append(wall)
            cpus.append(cpu)
    stderr = proc.stderr.decode("utf-8", "replace")
    notes = [line.strip() for line in stderr.splitlines() if line.startswith("WARNING")]
    return {"ok": True, "best_s": min(walls), "runs_s": walls, "cpu_s_of_best": cpus[walls.index(min(walls))],
            "stderr_warnings": notes}


def sixty_four_left(text: str) -> int:
    return len(SIXTY_FOUR.findall(text))


def fmt_s(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds:.3f} s"


def met(ok: bool | None) -> str:
    return "n/a" if ok is None else ("MET" if ok else "NOT MET")


# --------------------------------------------------------------------------- main

def core(args: argparse.Namespace, runs: int, locations: bool = True) -> tuple[dict, list[str]]:
    """The core pass against IREE on the module with or without locations: prints its
    section; returns (figures, summary lines)."""
    # 1. The module -------------------------------------------------------------------
    start = time.perf_counter()
    text = workload.lower_x64(args.steps, locations=locations)
    trace_s = time.perf_counter() - start
    module, _ = xmlir.load(text)
    n_ops = workload.count_ops(module)
    module_label = "with locations" if locations else "without locations"
    print(f"\n[module {module_label}] jax.jit(f).lower(...).as_text(debug_info={locations}), x64 on for the trace only: "
          f"{args.steps} unrolled steps, {n_ops:,} ops, {len(text):,} chars, "
          f"{sixty_four_left(text):,} 64-bit type tokens, traced in {trace_s:.2f} s")

    results: dict = {"module": {"ops": n_ops, "chars": len(text), "steps": args.steps, "trace_s": trace_s,
                                "locations": locations}}

    with tempfile.TemporaryDirectory(prefix="x64guard-bench-") as tmp:
        tmp = Path(tmp)
        src = tmp / "in.mlir"
        src.write_text(text)

        # 2. (a) x64guard, end to end in-process ------------------------------------------
        ours_out = tmp / "x64guard.mlir"

        def x64guard_text_to_text():
            narrowed = x64guard.narrow(src.read_text())
            ours_out.write_text(narrowed.text)

        ours_best, ours_runs = best_of(x64guard_text_to_text, runs)
        narrowed_text = ours_out.read_text()
        left = sixty_four_left(narrowed_text)
        print(f"\n(a) x64guard text->text (in-process: read file, parse, narrow incl. verify, print with "
              f"locations, write file; excludes interpreter start-up and imports): best {fmt_s(ours_best)} "
              f"({ours_best / n_ops * 1e6:.2f} us/op); runs " + " ".join(f"{t:.3f}" for t in ours_runs))
        # What a fresh process pays before x64guard can run: the `import` part (bench/imports.py).

        # 2. (a) IREE -----------------------------------------------------------------------
        iree = {"found": False}
        exe, how = find_iree_opt()
        if exe is None:
            print(f"(a) IREE: not measured: {how}")
            iree["error"] = how
        else:
            iree.update(found=True, exe=exe, located_by=how)
            flags, flag_note = demote_flags(exe)
            if flags is None:
                print(f"(a) IREE: not measured: {flag_note}")
                iree["error"] = flag_note
            else:
                iree["flags"] = flags
                iree_out = tmp / "iree.mlir"
                base = [exe, "--allow-unregistered-dialect", *flags]
                # As briefed (iree-opt prints without locations by default) and like for like
                # with x64guard (locations kept in the output too).
                plain = time_tool([*base, str(src), "-o", str(iree_out)], runs, iree_out)
                debug = time_tool([*base, "--mlir-print-debuginfo", str(src), "-o", str(iree_out)], runs,
                                  iree_out)
                trivial = tmp / "trivial.mlir"
                trivial.write_text("module {}\n")
                startup = time_tool([exe, "--allow-unregistered-dialect", *flags, str(trivial), "-o",
                                     str(tmp / "trivial.out.mlir")], runs)
                iree.update(plain=plain, debuginfo=debug, startup=startup)
                print(f"(a) IREE iree-opt ({exe}, {how}; flags {' '.join(flags)})")
                for label, res in (("as briefed, output without locations", plain),
                                   ("--mlir-print-debuginfo, output with locations", debug),
                                   ("start-up: same flags on `module {}`", startup)):
                    if res["ok"]:
                        print(f"    {label}: best {fmt_s(res['best_s'])} wall "
                              f"(child CPU {res['cpu_s_of_best']:.3f} s); runs "
                              + " ".join(f"{t:.3f}" for t in res["runs_s"]))
                    else:
                        print(f"    {label}: FAILED (exit {res['returncode']}): {res['error']}")
                if debug["ok"]:
                    iree_text = iree_out.read_text()
                    iree_module, _ = xmlir.load(iree_text)
                    iree["output"] = {"ops": workload.count_ops(iree_module),
                                      "sixty_four_tokens_left": sixty_four_left(iree_text)}
                    print(f"    IREE output: {iree['output']['ops']:,} ops, "
                          f"{iree['output']['sixty_four_tokens_left']} 64-bit type tokens left; "
                          f"its stderr: {len(debug['stderr_warnings'])} warning(s)"
                          + (f", first: {debug['stderr_warnings'][0].split(';')[0]}" if debug["stderr_warnings"] else ""))

        # 3. (b) narrow on an already-parsed module --------------------------------------
        b_best, b_runs = best_of(lambda: x64guard.narrow(module), runs)
        print(f"\n(b) x64guard.narrow(ir.Module) (clone + pass + verify): best {fmt_s(b_best)} = "
              f"{b_best / n_ops * 1e6:.2f} us/op; runs " + " ".join(f"{t:.3f}" for t in b_runs))

        # 4. (c) parse and print, for reference ------------------------------------------
        parse_best, _ = best_of(lambda: xmlir.load(text), runs)
        result = x64guard.narrow(module)
        print_best, _ = best_of(lambda: xmlir.to_text(result.module), runs)
        print(f"(c) parse (x64guard.io.modules.load of the text): best {fmt_s(parse_best)} = "
              f"{parse_best / n_ops * 1e6:.2f} us/op; print (narrowed, with locations): "
              f"best {fmt_s(print_best)} = {print_best / n_ops * 1e6:.2f} us/op")

        # 5. What x64guard changed, and a sanity check --------------------------------------
        print(f"\nx64guard changes: {dict(sorted(result.changes.items()))}; "
              f"narrowed text: {sixty_four_left(narrowed_text)} 64-bit type tokens left "
              f"({'OK' if left == 0 else 'NOT OK'}), {len(narrowed_text):,} chars")

        if args.profile:
            import cProfile
            import pstats
            profiler = cProfile.Profile()
            profiler.enable()
            x64guard.narrow(module)
            profiler.disable()
            print("\ncProfile of one x64guard.narrow(ir.Module), top 15 by tottime:")
            pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(15)

    # Summary ---------------------------------------------------------------------------
    iree_best = iree["debuginfo"]["best_s"] if iree.get("debuginfo", {}).get("ok") else None
    iree_plain = iree["plain"]["best_s"] if iree.get("plain", {}).get("ok") else None
    startup_s = iree["startup"]["best_s"] if iree.get("startup", {}).get("ok") else None
    ratio = ours_best / iree_best if iree_best else None
    ratio_plain = ours_best / iree_plain if iree_plain else None
    b_us = b_best / n_ops * 1e6
    results.update({
        "a_text_to_text": {"x64guard_s": ours_best, "x64guard_runs_s": ours_runs,
                           "iree": iree,
                           "iree_s": iree_best, "iree_no_locations_s": iree_plain,
                           "iree_startup_s": startup_s, "ratio": ratio, "ratio_vs_no_locations": ratio_plain,
                           "target": f"<= {TARGET_RATIO}", "met": None if ratio is None else ratio <= TARGET_RATIO},
        "b_narrow_module": {"best_s": b_best, "runs_s": b_runs, "us_per_op": b_us,
                            "target": f"<= {TARGET_US_PER_OP}", "met": b_us <= TARGET_US_PER_OP},
        "c_parse": {"best_s": parse_best, "us_per_op": parse_best / n_ops * 1e6},
        "c_print": {"best_s": print_best, "us_per_op": print_best / n_ops * 1e6},
        "changes": result.changes,
        "sanity": {"sixty_four_tokens_left": left, "ok": left == 0},
    })

    lines = [f"  core pass (module {module_label}: {n_ops:,} ops)"]
    if ratio is not None:
        lines.append(f"  (a) text->text  x64guard {ours_best:.2f} s  IREE {iree_best:.2f} s  ratio {ratio:.2f}  "
                     f"target <= {TARGET_RATIO}  {met(ratio <= TARGET_RATIO)}")
        extra = f"      (IREE start-up alone {startup_s:.3f} s" if startup_s is not None else "      ("
        if ratio_plain is not None:
            extra += f"; IREE without locations in its output {iree_plain:.2f} s, ratio {ratio_plain:.2f}"
        lines.append(extra + ")")
    else:
        lines.append(f"  (a) text->text  x64guard {ours_best:.2f} s  IREE n/a  ratio n/a  "
                     f"target <= {TARGET_RATIO}  n/a")
    lines.append(f"  (b) narrow(ir.Module)  {b_us:.2f} us/op  target <= {TARGET_US_PER_OP:g}  "
                 f"{met(b_us <= TARGET_US_PER_OP)}")
    lines.append(f"  (c) parse  {parse_best:.2f} s ({parse_best / n_ops * 1e6:.1f} us/op)   "
                 f"print  {print_best:.2f} s ({print_best / n_ops * 1e6:.1f} us/op)")
    lines.append(f"  changes {dict(sorted(result.changes.items()))}  64-bit left in output: {left}  "
                 f"{'OK' if left == 0 else 'NOT OK'}")
    return results, lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="timed runs per figure (best is kept)")
    parser.add_argument("--steps", type=int, default=workload.DEFAULT_STEPS, help="unrolled loop steps")
    parser.add_argument("--only", choices=("import", "core", "jit", "gpu", "torch", "torch_xla", "large"),
                        help="run one part: import time, the core pass, x64guard.jit, x64guard.jit on a GPU, "
                             "x64guard.torch, the torch-xla backend or large modules")
    parser.add_argument("--gpu-platform", help="run the GPU section on this JAX platform instead (e.g. cpu)")
    parser.add_argument("--gpu-scale", type=float, default=1.0, help="the GPU section's sizes, times this")
    parser.add_argument("--profile", action="store_true",
                        help="cProfile narrow(ir.Module) and x64guard.jit steady-state calls, top 15 by tottime")
    parser.add_argument("--json", type=Path, default=ROOT / "bench-out" / "results.json")
    args = parser.parse_args(argv)
    runs = max(1, args.runs)
    warnings.simplefilter("ignore", x64guard.X64GuardWarning)
    t_bench = time.perf_counter()
    halves = (args.only,) if args.only else ("import", "core", "jit", "gpu", "torch", "torch_xla", "large")

    env = {"python": platform.python_version(), "jax": version("jax"), "jaxlib": version("jaxlib"),
           "iree-base-compiler": version("iree-base-compiler"), "x64guard": x64guard.__version__,
           "cpus": os.cpu_count(), "runs": runs, "halves": "+".join(halves)}
    print("x64guard benchmark: " + ", ".join(f"{k} {v}" for k, v in env.items()))

    results: dict = {"env": env}
    summary: list[str] = []
    if "import" in halves:
        results["import"] = import_bench.run(runs)
        summary += import_bench.summary(results["import"])
    if "core" in halves:
        core_results, core_lines = core(args, runs, locations=True)
        results.update(core_results)
        summary += core_lines
        results["no_locations"], core_lines = core(args, runs, locations=False)
        summary += core_lines
    if "jit" in halves:
        results["jit"] = jit_bench.run(runs, profile=args.profile)
        summary += jit_bench.summary(results["jit"])
    if "gpu" in halves:
        results["gpu"] = gpu_bench.run(scale=args.gpu_scale, platform=args.gpu_platform)
        summary += gpu_bench.summary(results["gpu"])
    if "torch" in halves:
        try:
            from bench import torch_int as torch_bench  # needs torch
        except ImportError as exc:
            print(f"\n[x64guard.torch] not measured: {exc}")
        else:
            results["torch"] = torch_bench.run(runs)
            summary += torch_bench.summary(results["torch"])

    if "torch_xla" in halves:
        from bench import torch_xla_bench  # skips itself without torch-xla
        results["torch_xla"] = torch_xla_bench.run(runs)
        summary += torch_xla_bench.summary(results["torch_xla"])
    if "large" in halves:
        results["large"] = large_bench.run(runs)
        summary += large_bench.summary(results["large"])

    print(f"\nx64guard bench (best of {runs})")
    print("\n".join(summary))

    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=2, default=str) + "\n")
    print(f"  figures written to {args.json.relative_to(ROOT) if args.json.is_relative_to(ROOT) else args.json}"
          f"  (bench took {time.perf_counter() - t_bench:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
