"""`import x64guard` against `import jax`, each in a fresh interpreter (python -m bench.run --only import).

`import x64guard` loads neither JAX nor torch (issue 13): its cost should be a small
fraction of `import jax`, measured in the same run as the baseline. For context: the bare
interpreter start-up, and the first use of the core (`x64guard.narrow`, which loads the
pass and JAX's MLIR bindings), which a program pays once, when it narrows something.

Target: import x64guard / import jax <= 0.10 (both including the interpreter start-up).
"""

from __future__ import annotations

import json
import subprocess
import sys

from bench.timing import best_of

TARGET_RATIO = 0.10
SUBPROCESS_TIMEOUT = 300

CASES = {
    "interpreter": "pass",
    "import jax": "import jax",
    "import x64guard": "import x64guard",
    "import x64guard + first use of x64guard.narrow": "import x64guard; x64guard.narrow",
}

# What a bare `import x64guard` left loaded, checked in the same run (a figure is only
# worth reporting if the import is still the quiet one).
_LOADED = ("import json, sys, x64guard; print(json.dumps(sorted(m for m in ('jax', 'jaxlib', 'numpy', 'torch', "
           "'torch_xla', 'x64guard.jax.function', 'x64guard.api') if m in sys.modules)))")


def _fresh(code: str) -> None:
    subprocess.run([sys.executable, "-c", code], check=True, timeout=SUBPROCESS_TIMEOUT)


def run(runs: int) -> dict:
    print("\n[import] fresh interpreter per run (python -c ...), best of", runs)
    figures = {}
    for label, code in CASES.items():
        best, times = best_of(lambda code=code: _fresh(code), runs)
        figures[label] = {"best_s": best, "runs_s": times}
        print(f"    {label:48} best {best * 1e3:7.1f} ms; runs " + " ".join(f"{t * 1e3:.0f}" for t in times))
    loaded = json.loads(subprocess.run([sys.executable, "-c", _LOADED], check=True, capture_output=True, text=True,
                                       timeout=SUBPROCESS_TIMEOUT).stdout)
    print(f"    heavy modules loaded by `import x64guard`: {loaded or 'none'}")
    ratio = figures["import x64guard"]["best_s"] / figures["import jax"]["best_s"]
    return {"cases": figures, "loaded_by_import": loaded, "ratio_vs_import_jax": ratio,
            "target": f"<= {TARGET_RATIO}", "met": ratio <= TARGET_RATIO and not loaded}


def summary(results: dict) -> list[str]:
    cases = results["cases"]
    ours, jax_s = cases["import x64guard"]["best_s"], cases["import jax"]["best_s"]
    first_use = cases["import x64guard + first use of x64guard.narrow"]["best_s"]
    return [f"  import  `import x64guard` {ours * 1e3:.0f} ms  `import jax` {jax_s * 1e3:.0f} ms  "
            f"ratio {results['ratio_vs_import_jax']:.3f}  target <= {TARGET_RATIO}  "
            f"{'MET' if results['met'] else 'NOT MET'}",
            f"          (interpreter alone {cases['interpreter']['best_s'] * 1e3:.0f} ms; with the first use of "
            f"x64guard.narrow {first_use * 1e3:.0f} ms; loaded by the import: {results['loaded_by_import'] or 'none'})"]
