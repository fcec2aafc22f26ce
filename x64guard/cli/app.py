"""The `x64guard` command: check, narrow, gate, targets.

Exit status: 0 clean; 1 findings at or above --fail-on (check, gate), a refusal (narrow)
or a failed command (gate); 2 unreadable input or a usage error, with a one-line reason
on stderr (`x64guard: error: ...`). A traceback is printed only with X64GUARD_DEBUG=1.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2
EXIT_INTERRUPTED = 130
DEBUG_ENV = "X64GUARD_DEBUG"


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error in one line (and exits 2)."""

    def error(self, message: str):
        from x64guard.cli.dump import UsageError
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def _target_names() -> list[str]:
    from x64guard.passes.tables import TARGET_PROFILES
    return list(TARGET_PROFILES)


def target_lines() -> list[str]:
    """One line per target profile: its name and summary; an alias names its profile."""
    from x64guard.passes.tables import DEFAULT_TARGET, TARGET_ALIASES, TARGET_PROFILES

    width = max(map(len, TARGET_PROFILES))
    lines = []
    for name, profile in TARGET_PROFILES.items():
        text = f"alias of {TARGET_ALIASES[name]}" if name in TARGET_ALIASES else profile.summary
        lines.append(f"{name.ljust(width)}  {text}" + (" (default)" if name == DEFAULT_TARGET else ""))
    return lines


def build_parser() -> argparse.ArgumentParser:
    import x64guard
    from x64guard.cli.formats import FORMATS
    from x64guard.cli.results import SEVERITIES

    targets = _target_names()
    target_help = "target profile (default: x32; `x64guard targets` describes each)"
    parser = _Parser(prog="x64guard", description=(
        "Check and narrow 64-bit StableHLO modules (JAX x64, torch-xla int64) for accelerators "
        "without 64-bit types."),
        epilog="Exit status: 0 clean, 1 findings at or above --fail-on (or a refusal, or a failed "
               "gated command), 2 unreadable input or usage error.")
    parser.add_argument("--version", action="version", version=f"x64guard {x64guard.__version__}")
    sub = parser.add_subparsers(dest="subcommand", metavar="{check,narrow,gate,targets}", parser_class=_Parser)

    def reporting(p: argparse.ArgumentParser) -> None:
        p.add_argument("--target", default="x32", choices=targets, help=target_help)
        _neuron_flags(p)
        p.add_argument("--format", default="text", choices=FORMATS,
                       help="text for people, json for scripts, sarif for code scanning, github for "
                            "workflow annotations (default: text)")
        p.add_argument("--fail-on", default="error", choices=list(reversed(SEVERITIES)),
                       help="exit 1 when a finding is at least this severe (default: error)")
        p.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE instead of stdout")
        p.add_argument("--color", default="auto", choices=["auto", "always", "never"],
                       help="colour the text report (auto: on a terminal, unless NO_COLOR is set)")

    check = sub.add_parser("check", help="report every 64-bit use and every blocker, per file",
                           description="Check MLIR text (.mlir), MLIR bytecode and StableHLO portable "
                                       "artifacts (.mlirbc, .bc), HLO text or protos, serialized jax.export "
                                       "artifacts, and torch-xla graph dumps; directories are searched.")
    check.add_argument("paths", nargs="+", metavar="PATH", help="files or directories ('-': standard input)")
    reporting(check)

    narrow = sub.add_parser("narrow", help="write the narrowed module in the input's format",
                            description="Narrow i64/ui64/f64/complex<f64> to 32 bits exactly as JAX's x32 mode "
                                        "does, or refuse. The summary of changes goes to stderr.")
    narrow.add_argument("input", metavar="IN", help="the module to narrow ('-': standard input)")
    narrow.add_argument("-o", "--output", metavar="OUT", required=True, help="where to write it ('-': stdout)")
    narrow.add_argument("--mode", choices=["allow", "warn", "error"], default=None,
                        help="allow: keep 64-bit types (report only); warn: narrow (default, or "
                             "$X64GUARD_MODE); error: refuse any 64-bit use")
    narrow.add_argument("--overflow", choices=["error", "saturate", "wrap"], default="error",
                        help="constants a 32-bit type cannot hold (default: error)")
    narrow.add_argument("--target", default="x32", choices=targets,
                        help=target_help + "; on a neuron-* target what neuronx-cc would still reject is "
                                           "listed after narrowing")
    _neuron_flags(narrow)

    gate = sub.add_parser("gate", help="run a command with JAX's IR dump on; check every module it compiled",
                          usage="x64guard gate [options] -- CMD [ARGS...]",
                          description="Run CMD (a test suite) with JAX_DUMP_IR_TO (and torch-xla's graph dump, "
                                      "where torch-xla is installed) pointed at a temporary directory, then check "
                                      "every module it compiled. Exit 1 if CMD failed or a module does not pass.")
    reporting(gate)
    gate.add_argument("--keep", metavar="DIR", help="dump into DIR (empty or new) and keep it")
    sub.add_parser("targets", help="list the target profiles, one line each",
                   description="The target profiles --target takes (x64guard/passes/tables/targets.py).")
    return parser


def _neuron_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--neuron-cc-flags", metavar="FLAGS", default=None,
                   help="neuronx-cc's flags for a neuron-* target, written with '=': --neuron-cc-flags='--native-int64=enabled "
                        "--implicit-integer-downcast=none' (default: $NEURON_CC_FLAGS when set)")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return _main(argv)
    except KeyboardInterrupt:
        print("x64guard: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_USAGE
    except Exception as exc:  # the one place exceptions become exit status 2
        from x64guard.cli.dump import UsageError
        from x64guard.cli.inputs import InputError

        if os.environ.get(DEBUG_ENV):
            traceback.print_exc()
        if isinstance(exc, (UsageError, InputError)):
            reason = str(exc)
        else:
            reason = f"internal error: {type(exc).__name__}: {_first_line(exc)}"
            if not os.environ.get(DEBUG_ENV):
                reason += f" (set {DEBUG_ENV}=1 for a traceback)"
        print(f"x64guard: error: {reason}", file=sys.stderr)
        return EXIT_USAGE


def _main(argv: list[str]) -> int:
    command: list[str] = []
    if argv[:1] == ["gate"]:
        if "--" in argv:
            split = argv.index("--")
            argv, command = argv[:split], argv[split + 1:]
        elif any(a in ("-h", "--help") for a in argv):
            pass
        else:
            from x64guard.cli.dump import UsageError
            raise UsageError("gate needs the command after `--`, e.g. x64guard gate -- pytest -q")
    args = build_parser().parse_args(argv)
    if args.subcommand is None:
        from x64guard.cli.dump import UsageError
        raise UsageError("give a command: check, narrow, gate or targets (see `x64guard --help`)")
    if args.subcommand == "targets":
        print("\n".join(target_lines()))
        return EXIT_OK
    if args.subcommand == "check":
        return _check(args)
    if args.subcommand == "narrow":
        return _narrow(args)
    return _gate(args, command)


def _check(args) -> int:
    from x64guard.cli.inputs import discover
    from x64guard.cli.results import Run, check_file, merge_repeated_compilations
    from x64guard.cli.term import Progress

    files = discover(args.paths)
    stdin_data = sys.stdin.buffer.read() if "-" in files else None
    run = Run("check", args.target, args.fail_on)
    progress = Progress(len(files))
    try:
        for index, path in enumerate(files):
            progress(index, path)
            run.files.append(check_file(path, args.target, stdin_data if path == "-" else None,
                                        all_positions=args.format in ("json", "sarif"),
                                        neuron_cc_flags=args.neuron_cc_flags))
    finally:
        progress.close()
    run.files = merge_repeated_compilations(run.files)  # a kept `gate` dump reads as the gate read it
    return _emit(run, args)


def _gate(args, command: list[str]) -> int:
    from x64guard.cli.gate import run_gate
    from x64guard.cli.term import Progress

    # A machine-readable report on stdout must not mix with the command's own output.
    separate = args.output is None and args.format in ("json", "sarif")
    run = run_gate(command, target=args.target, fail_on=args.fail_on, keep=args.keep,
                   command_stdout=sys.stderr if separate else None, progress_factory=Progress,
                   neuron_cc_flags=args.neuron_cc_flags)
    return _emit(run, args)


def _emit(run, args) -> int:
    from x64guard.cli.formats import render, verdict
    from x64guard.cli.inputs import write_atomically
    from x64guard.cli.term import Style, wants_colour

    for file in run.errors:
        print(f"x64guard: error: {file.path}: {file.error}", file=sys.stderr)
    if args.output and args.output != "-":
        write_atomically(args.output, render(run, args.format).encode("utf-8"))
        print(verdict(run, Style(wants_colour(sys.stderr, args.color))), file=sys.stderr)
    else:
        text = render(run, args.format, Style(wants_colour(sys.stdout, args.color)), reasons_on_stderr=True)
        sys.stdout.write(text)
        sys.stdout.flush()
    return run.exit_code()


def _narrow(args) -> int:
    import x64guard
    from x64guard.api import narrow_module
    from x64guard.cli.inputs import (FORMAT_NAMES, STDIN, InputError, name_parse_error, narrowed_bytes, read_bytes,
                                     read_units, write_atomically, writable)

    # A file is read by path (bytecode: by MLIR itself, after the reader process vetted it).
    units = read_units(args.input, read_bytes(args.input) if args.input == STDIN else None)
    unit = units[0]
    if len(units) > 1 or not writable(unit):
        raise InputError(unit.display, f"x64guard narrow writes one module in its input's format; a "
                                       f"{FORMAT_NAMES[unit.format]} cannot be written back (use `x64guard "
                                       "check` on it, or narrow the module inside it)")
    part = "the module"
    results = []

    def narrow(data, what: str = "the module"):
        nonlocal part
        part = what
        # The findings are printed below, placed as `check` places them: nothing to warn.
        results.append(narrow_module(data, mode=args.mode, overflow=args.overflow, target=args.target,
                                     neuron_cc_flags=args.neuron_cc_flags))
        return results[-1]

    try:
        result = narrow(unit.data)
        data = narrowed_bytes(unit, result, narrow)
    except x64guard.X64GuardError as exc:
        where = "" if part == "the module" else f" ({part})"
        print(f"x64guard: refused: {unit.display}{where}: {_first_line(exc)}", file=sys.stderr)
        _print_findings(unit, exc.findings)
        print(f"x64guard: nothing written to {args.output}", file=sys.stderr)
        return EXIT_FINDINGS
    except ValueError as exc:  # unreadable module
        reason = str(exc).removeprefix("x64guard: ").splitlines()[0]
        raise InputError(unit.display, name_parse_error(reason, unit.display)) from None
    write_atomically(args.output, data)
    extra = f" with its {len(results) - 1} VJP module(s)" if len(results) > 1 else ""
    print(f"{result.summary()}; wrote {FORMAT_NAMES[unit.format]}{extra} to {args.output}"
          f" (mode {result.mode.value})", file=sys.stderr)
    for narrowed in results:
        _print_findings(unit, [f for f in narrowed.findings if str(f.severity) != "info"])
    return EXIT_OK


def _print_findings(unit, findings) -> None:
    """Findings on stderr, each placed as `check` places it (`model.mlir:3:5`, `@main op #4`)."""
    from x64guard.cli.formats import finding_line
    from x64guard.cli.results import ModuleResult
    from x64guard.cli.term import Style, wants_colour

    module, style, shown = ModuleResult(unit, list(findings)), Style(wants_colour(sys.stderr)), set()
    for finding in findings:
        print("  " + finding_line(module, finding, style, shown), file=sys.stderr)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError:
        pass
