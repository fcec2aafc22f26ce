"""The real-ecosystem table without pytest.

    PYTHONPATH=$PWD .venv/bin/python -m tests.ecosystem.run --table [-k SUBSTR] [--library NAME]
        [--no-slow] [--workers N] [--json PATH] [--inputs float64]
    PYTHONPATH=$PWD .venv/bin/python -m tests.ecosystem.run --list
    PYTHONPATH=$PWD .venv/bin/python -m tests.ecosystem.run --in-process NAME   (one program, no child)

Prints one row per program (program, library, outcome, cause, seconds, warnings, detail) and
the totals; exits 1 if any program is neither identical nor justifiably refused.
"""

from __future__ import annotations

import argparse
import os
import json
import sys
import time
from collections import Counter
from typing import Sequence

from tests.ecosystem.harness import CAUSES, OUTCOMES, Record
from tests.ecosystem.programs import all_programs


def select(programs, substring: str = "", library: str = "", slow: bool = True):
    return [p for p in programs if substring in p.name and library in p.library and (slow or not p.slow)]


def format_table(records: Sequence[Record], detail_width: int = 160) -> str:
    name_w = max([len(r.name) for r in records] + [7])
    lib_w = max([len(r.library) for r in records] + [7])
    cause_w = max([len(r.cause) for r in records] + [5])
    head = (f"{'program':<{name_w}}  {'library':<{lib_w}}  {'outcome':<9}  {'ok':<4}  {'cause':<{cause_w}}  "
            f"{'sec':>5}  {'warn':>4}  detail")
    lines = [head, "-" * len(head)]
    for r in records:
        detail = r.detail.replace("\n", " ")
        if detail_width and len(detail) > detail_width:
            detail = detail[:detail_width - 3] + "..."
        lines.append(f"{r.name:<{name_w}}  {r.library:<{lib_w}}  {r.outcome:<9}  {'yes' if r.ok else 'NO':<4}  "
                     f"{r.cause or '-':<{cause_w}}  {r.seconds:>5.1f}  {len(r.warnings):>4}  {detail}")
    return "\n".join(lines)


def format_totals(records: Sequence[Record]) -> str:
    outcomes = Counter(r.outcome for r in records)
    causes = Counter(r.cause for r in records if not r.ok)
    ok = sum(r.ok for r in records)
    by_library: dict[str, list[int]] = {}
    for r in records:
        by_library.setdefault(r.library, [0, 0])
        by_library[r.library][0] += r.ok
        by_library[r.library][1] += 1
    lines = [
        f"{len(records)} programs: {ok} ok (identical or justifiably refused), {len(records) - ok} not ok",
        "outcomes: " + ", ".join(f"{o} {outcomes[o]}" for o in OUTCOMES if outcomes[o]),
        "causes of the not-ok: " + (", ".join(f"{c} {causes[c]}" for c in CAUSES if causes[c]) or "none"),
        "by library (ok/total): " + ", ".join(f"{lib} {a}/{b}" for lib, (a, b) in by_library.items()),
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.ecosystem.run", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--table", action="store_true", help="run the programs (in child processes), print the table")
    action.add_argument("--list", action="store_true", help="list the programs and what each does")
    action.add_argument("--in-process", metavar="NAME", help="run one program in this process (debugging)")
    parser.add_argument("-k", default="", help="only programs whose name contains this")
    parser.add_argument("--library", default="", help="only programs of libraries whose name contains this")
    parser.add_argument("--no-slow", action="store_true", help="leave out the programs marked slow")
    parser.add_argument("--workers", type=int, default=None, help="child processes at a time (default 2)")
    parser.add_argument("--json", metavar="PATH", help="also write the records as JSON")
    parser.add_argument("--full-detail", action="store_true", help="do not shorten the detail column")
    parser.add_argument("--inputs", choices=("program", "float64"), default="program",
                        help="hand x64guard.jit the program's inputs, or their float32 leaves as float64 numpy "
                             "data (the reference always runs x32 JAX on the program's own)")
    ns = parser.parse_args(argv)
    if ns.inputs == "float64":  # read by each child's harness (tests/ecosystem/harness.py)
        os.environ["X64GUARD_ECOSYSTEM_INPUTS"] = "float64"

    programs = select(all_programs(), ns.k, ns.library, slow=not ns.no_slow)
    if ns.list:
        for p in programs:
            marks = (" [slow]" if p.slow else "") + (
                " [refusal: " + ",".join(p.refusal.kinds) + "]" if p.refusal else "")
            print(f"{p.name:<42} {p.library:<11} {p.what}{marks}")
        print(f"{len(programs)} programs")
        return 0
    if ns.in_process:
        from tests.ecosystem.harness import run_program
        from tests.ecosystem.programs import by_name

        record = run_program(by_name()[ns.in_process])
        print(format_table([record], detail_width=0))
        for w in record.warnings:
            print("warning:", w)
        return 0 if record.ok else 1

    from tests.ecosystem.runner import run_programs

    started = time.perf_counter()
    records = run_programs(programs, workers=ns.workers)
    print(format_table(records, detail_width=0 if ns.full_detail else 160))
    print()
    print(format_totals(records))
    print(f"wall time {time.perf_counter() - started:.0f} s")
    if ns.json:
        with open(ns.json, "w", encoding="utf-8") as out:
            json.dump([r.__dict__ for r in records], out, indent=1)
    return 0 if all(r.ok for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
