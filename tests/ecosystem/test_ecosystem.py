"""The real-ecosystem suite: programs written the way flax (linen, nnx), optax, equinox,
diffrax, numpyro and blackjax users write them, each run as x32 `jax.jit` (the reference)
and as `x64guard.jit` under x64 (the candidate), in child processes.

First check: the module x64guard.jit narrows must be the module jax.jit lowers with x64 off
(tests/module_equality.py), or a difference named in tests/ecosystem/module_exceptions.py.
Every program must be bit-identical to the reference, or refused for the reason its
`Refusal` gives (and x32 JAX must indeed not give the 64-bit program's answer). A failure
message carries the outcome, the root-cause class and the detail (see harness.py); the
same table without pytest: `python -m tests.ecosystem.run --table`.
"""

from __future__ import annotations

import re

import pytest

from tests import module_equality
from tests.ecosystem.module_exceptions import MODULE_EXCEPTIONS
from tests.ecosystem.programs import all_programs
from tests.ecosystem.runner import run_programs
from tests.sample import SAMPLED_OUT, in_ecosystem_sample

pytestmark = pytest.mark.ecosystem

PROGRAMS = all_programs()


@pytest.fixture(scope="module")
def records(request) -> dict:
    """Records of the programs selected in this session (after -k / -m), run once, in
    children, two at a time."""
    wanted = {item.callspec.params["program"].name for item in request.session.items
              if getattr(item, "originalname", None) == "test_program" and item.module is request.module}
    selected = [p for p in PROGRAMS if p.name in wanted]
    return {r.name: r for r in run_programs(selected)}


@pytest.mark.parametrize("program", [pytest.param(p, id=p.name, marks=([pytest.mark.slow] if p.slow else [])
                                                  + ([] if in_ecosystem_sample(p.name) else [SAMPLED_OUT]))
                                     for p in PROGRAMS])
def test_program(program, records):
    record = records[program.name]
    check_module_equality(program, record)
    check_warnings(program, record)
    if not record.ok:
        pytest.fail(f"{program.name} ({program.library}: {program.what}): {record.outcome}, cause {record.cause}: "
                    f"{record.detail}", pytrace=False)
    if not record.has_64bit:
        pytest.fail(f"{program.name}: its x64 lowering holds no 64-bit value type, so it tests nothing",
                    pytrace=False)


# The narrowing summary: "narrowed 26 types (f64->f32 x18, ...) at 14 places[; 2 lossy change(s) follow]".
_SUMMARY = re.compile(r"x64guard: narrowed \d+ types .* at \d+ places?(?:; (\d+) lossy change)?")
# Said at INFO on the `x64guard` logger, never warned (issue 37 item 4): x32 JAX's program ran,
# so its answer is x32 JAX's; mode error refuses.
_NEVER_WARNED = ("[trace-differs]", "[trace-failed]")


def expected_warnings(program, record) -> int:
    """The X64GuardWarnings one call of the program may emit: `program.warnings` where the
    program names it; else the narrowing summary (once: the x64 program was narrowed and
    ran) plus the lossy changes it announces, or none (x32 JAX's own program ran)."""
    if program.warnings is not None:
        return program.warnings
    summaries = [m for m in map(_SUMMARY.search, record.warnings) if m]
    if not summaries:
        return 0
    return 1 + int(summaries[0].group(1) or 0)


def check_warnings(program, record) -> None:
    """Warnings summarise once per call, and say only what the user must hear (issue 37)."""
    never = [w for w in record.warnings if any(kind in w for kind in _NEVER_WARNED)]
    if never:
        pytest.fail(f"{program.name}: warned what is said at INFO: {never}", pytrace=False)
    summaries = [w for w in record.warnings if _SUMMARY.search(w)]
    want = expected_warnings(program, record)
    if len(summaries) > 1 or len(record.warnings) != want:
        pytest.fail(f"{program.name}: {len(record.warnings)} X64GuardWarnings, expected {want}: {record.warnings}",
                    pytrace=False)


def _kinds(verdict: str) -> list[str]:
    """The finding kinds a verdict lists ('differs; findings: a, b' -> ['a', 'b'])."""
    return verdict.partition("findings: ")[2].split(", ")


def check_module_equality(program, record) -> None:
    """The first check of a program x64guard narrowed: its module is x32 JAX's, or a named
    difference (the finding that names it present)."""
    if record.outcome not in ("identical", "wrong"):
        return  # refused or broken: nothing narrowed to compare
    verdict, known = record.module_equality, MODULE_EXCEPTIONS.get(program.name)

    def fail(message: str) -> None:
        module_equality.fail_or_report(message, lambda m: pytest.fail(m, pytrace=False))

    if verdict in ("equal", "equal-counters") or verdict.startswith("identity-converts"):
        if known is not None:
            fail(f"{program.name}: listed in tests/ecosystem/module_exceptions.py ({known.why}), but its "
                 f"narrowed module now equals x32 JAX's ({verdict}): remove the entry")
        if verdict.startswith("identity-converts") and "identity-convert" not in _kinds(verdict):
            fail(f"{program.name}: differs from x32 JAX's module only by converts to the same type, but "
                 f"x64guard.jit reported no identity-convert finding ({verdict}):\n{record.module_diff}")
        return
    if "trace-differs" in _kinds(verdict):
        # x64guard.jit ran x32 JAX's own trace, lowered as x64guard.jit lowers it (constants
        # embedded: quadax_grad_through_quadgk forwards an input through a call where
        # jax.jit's lowering returns it directly); its bits are checked below.
        if known is not None:
            fail(f"{program.name}: listed in tests/ecosystem/module_exceptions.py ({known.why}), but x64guard.jit "
                 "runs x32 JAX's own trace (trace-differs): remove the entry")
        return
    if known is None:
        fail(f"{program.name}: the narrowed module is not the module jax.jit lowers with x64 off ({verdict}):\n"
             f"{record.module_diff}")
        return
    if known.kind is not None and known.kind not in _kinds(verdict):
        fail(f"{program.name}: differs from x32 JAX's module for the reason {known.kind!r} names, but "
             f"narrowing reported no such finding ({verdict})")
