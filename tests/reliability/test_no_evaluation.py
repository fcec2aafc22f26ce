"""Nothing in x64guard evaluates or unpickles its input.

Statically: no module of the package calls eval/exec/compile/__import__, imports pickle,
marshal, shelve, dill, cloudpickle or yaml, or loads with numpy/torch loaders (which can
unpickle). Spawning processes is allowed only where it is the feature (`x64guard gate`
runs the user's command; `isolated_reader` starts x64guard's own bytecode reader, a fixed
command that receives the input as data on a pipe). At run time the hostile-input children watch with an audit hook
(tests/reliability/hostile.py, FORBIDDEN_AUDIT_EVENTS); the command line is watched here.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "x64guard"

FORBIDDEN_CALLS = {"eval", "exec", "compile", "__import__", "breakpoint", "input"}
FORBIDDEN_MODULES = {"pickle", "cPickle", "_pickle", "marshal", "shelve", "dill", "cloudpickle", "yaml", "joblib"}
FORBIDDEN_ATTRIBUTE_CALLS = {("ast", "literal_eval"), ("np", "load"), ("numpy", "load"), ("torch", "load"),
                             ("os", "system"), ("os", "popen")}
SUBPROCESS_ALLOWED = {"cli/gate.py", "io/isolated_reader.py"}


def _violations(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    rel = path.relative_to(PACKAGE).as_posix()
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for name in names:
                root = name.split(".")[0]
                if root in FORBIDDEN_MODULES or (root == "subprocess" and rel not in SUBPROCESS_ALLOWED):
                    found.append(f"{rel}:{node.lineno}: imports {name}")
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in FORBIDDEN_CALLS:
                found.append(f"{rel}:{node.lineno}: calls {func.id}()")
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and \
                    (func.value.id, func.attr) in FORBIDDEN_ATTRIBUTE_CALLS:
                found.append(f"{rel}:{node.lineno}: calls {func.value.id}.{func.attr}()")
            if isinstance(func, ast.Attribute) and func.attr in ("loads", "load") and isinstance(func.value, ast.Name) \
                    and func.value.id in FORBIDDEN_MODULES:
                found.append(f"{rel}:{node.lineno}: calls {func.value.id}.{func.attr}()")
    return found


def test_the_package_never_evaluates_or_unpickles():
    sources = sorted(PACKAGE.rglob("*.py"))
    assert len(sources) > 10
    found = [v for path in sources for v in _violations(path)]
    assert not found, "\n".join(found)


CLI_AUDIT = textwrap.dedent('''
    import json, sys, warnings
    warnings.simplefilter("ignore")
    from x64guard.cli.app import main
    good, *files = sys.argv[1:]
    import contextlib, io
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        main(["check", good]); main(["narrow", good, "-o", good + ".out.mlir"])   # warm-up: lazy imports
    events = []
    import traceback
    where = {}
    FORBIDDEN = ("exec", "compile", "pickle.find_class", "marshal.loads", "marshal.load", "os.system",
                 "subprocess.Popen", "os.posix_spawn", "os.exec", "ctypes.dlopen")
    def hook(event, args):
        # Lazy imports of x64guard's own modules exec their code: not input.
        if event in FORBIDDEN and not any("importlib._bootstrap" in f.filename for f in traceback.extract_stack()):
            events.append(event)
            if event not in where:
                frames = traceback.extract_stack()[:-1]
                where[event] = " <- ".join(f"{Path(f.filename).name}:{f.lineno}" for f in frames[::-1][:6]) + \
                    " [" + str(args)[:120] + "]"

    from pathlib import Path
    sys.addaudithook(hook)
    codes = []
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        for path in files:
            for argv in (["check", path], ["narrow", path, "-o", path + ".out"]):
                try:
                    codes.append(main(argv))
                except SystemExit as exc:
                    codes.append(exc.code)
    print(json.dumps({"events": sorted(set(events)), "where": where, "codes": codes}))
''')


def test_the_command_line_reads_input_without_evaluating_it(hostile_seeds, tmp_path):
    from tests.reliability import hostile
    seeds = hostile.read_seeds(hostile_seeds)
    files = []
    for name, blob in seeds.items():
        path = tmp_path / name.replace(":", "_")
        path.write_bytes(blob)
        files.append(str(path))
    for index in range(40):  # mutated inputs of every kind (none of these crash the bindings)
        desc, data = hostile.make_case({k: v for k, v in seeds.items() if k.startswith("text:")}, 99, index)
        path = tmp_path / f"mutated{index}.mlir"
        path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8", "surrogateescape"))
        files.append(str(path))
    hlo = tmp_path / "module.hlo.txt"
    hlo.write_text("HloModule m\nENTRY e { p = f64[2] parameter(0) ROOT n = f64[2] negate(p) }\n")
    files.append(str(hlo))
    proc = subprocess.run([sys.executable, "-c", CLI_AUDIT, files[0], *files], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["events"] == [], f"audit events while the command line read input: {report['where']}"
    assert set(report["codes"]) <= {0, 1, 2}
