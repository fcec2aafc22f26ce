"""Module equality, the first oracle of the corpus, the ecosystem suite and the foreign corpus:
the module x64guard narrows must be the module `jax.jit` lowers with x64 off, after normalising
SSA names and locations only. Types, attributes, op order and function structure must match.

The one normaliser: both modules are parsed and printed by the same MLIR printer without debug
information (locations gone; SSA names are the printer's own `%0`, `%c_1`, `%arg0`, which
depend only on the ops, so equal modules print equal text).

x32 JAX's own module may hold 64-bit values that no 32-bit target accepts: iota_2x32_shape's
uint64 counters (jax/_src/prng.py traces them in x32 too). x64guard computes those counters in
32 bits, exactly, and says so (`rng-counters`, info). The reference is then x32 JAX's module
with only the pass's idiom phase (the counter rule) and its generic type conversion applied,
none of its named rules (which could hide what they do to the x64 module):
`Comparison.reference_rewritten` says when.

Where the modules still differ, the difference must be named: by a finding of the narrowed
module (`EXPLAINED_BY`: an info finding of x64guard saying the result is the same), or by an
entry of the suite's own table of exceptions (library code that branches on
`jax_enable_x64` or the dtype, which no finding can see).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from x64guard.io import modules
from x64guard.passes import NarrowX64Pass
from x64guard.passes.patterns import CONVERT_TYPES

# Finding kinds that name a known, exact difference between the narrowed module and x32's
# (each an info finding of the pass): their presence explains a difference.
EXPLAINED_BY = {
    "rng-words": "64-bit random words drawn as x32 JAX draws them, built from the x64 program's ops",
    "rng-floats": "float64 uniforms built from 32-bit words as x32 JAX builds them, in other ops",
    "rng-randint": "randint's 64-bit arithmetic computed as in 32 bits, in other ops",
    "rng-draw": "a 64-bit rng_bit_generator draw made 32-bit from the same state",
    "rng-seed": "threefry_seed's high word: 0 as in x32 JAX, computed by other ops",
    "low-word-mask": "x & 0xFFFFFFFF before a 32-bit convert becomes x & -1",
    "dtype-constant": "a finfo(float64) value replaced by float32's (x32 JAX may fold it differently)",
    "shift-by-width": "an arithmetic shift by 63 (the sign fill) where x32 JAX's shifts by 31",
    "custom-call-renamed": "a LAPACK kernel renamed to its float32 twin (x32 JAX may call another)",
    "composite-restored": "a CHLO op restored from its composite",
    "identity-convert": "converts to the type their operand has (weak typing the module does not record, host "
                        "callback operands), which compute nothing; checked: the modules are equal once they are "
                        "folded (Comparison.identity_converts_only)",
}


# The exception tables (tests/*/module_exceptions.py) were measured with this JAX. On another
# release x32 JAX's own modules change (inlining, op order, new dtype-dependent lowerings),
# and a difference there is reported (a warning carrying the diff, in the test summary)
# rather than failed; the bit oracle behind it stays strict on every release.
MEASURED_WITH = "0.10.2"


class ModuleEqualityReport(UserWarning):
    """A module-equality difference on a JAX other than MEASURED_WITH."""


def strict() -> bool:
    import jax

    return jax.__version__ == MEASURED_WITH


def fail_or_report(message: str, fail) -> None:
    """`fail(message)` on the JAX the tables were measured with; a warning elsewhere."""
    if strict():
        fail(message)
    else:
        import warnings

        warnings.warn(ModuleEqualityReport(message), stacklevel=2)


def normalised(module) -> str:
    """`module` (text, bytes or ir.Module) printed without locations by one printer."""
    if not isinstance(module, (str, bytes)):
        return module.operation.get_asm(enable_debug_info=False)
    parsed, _ = modules.load(module, trusted=True)
    return parsed.operation.get_asm(enable_debug_info=False)


@dataclass
class Comparison:
    equal: bool
    reference_rewritten: bool = False  # x32's own module held 64-bit counters, rewritten alike
    diff: list[str] = field(default_factory=list)
    # Not equal, but equal once converts to the type their operand has (which compute
    # nothing) are folded on both sides: a difference the finding `identity-convert` names.
    identity_converts_only: bool = False

    def describe(self, limit: int = 12) -> str:
        return "\n".join(self.diff[:limit]) + (f"\n... ({len(self.diff) - limit} more)" if len(self.diff) > limit
                                               else "")


class _GenericConversionOnly(NarrowX64Pass):
    """The idiom phase, then the generic conversion only (the pass is frozen: a subclass
    names its rules)."""

    patterns = (CONVERT_TYPES,)


def _reference(x32_text: str) -> tuple[str, bool]:
    """x32 JAX's module, normalised; with its own 64-bit counters rewritten if it has any."""
    plain = normalised(x32_text)
    if not _has_wide(plain):
        return plain, False
    module, _ = modules.load(x32_text, trusted=True)
    result = _GenericConversionOnly().apply(module)
    if any(str(f.severity) == "error" for f in result.findings):
        return plain, False
    return normalised(module), True


def _has_wide(text: str) -> bool:
    return any(t in text for t in ("xui64>", "xi64>", "<ui64>", "<i64>", "xf64>", "<f64>"))


def compare(narrowed, x32_text: str) -> Comparison:
    """Compare x64guard's narrowed module with the module jax.jit lowered with x64 off."""
    got = normalised(narrowed)
    want, rewritten = _reference(x32_text)
    if got == want:
        return Comparison(True, rewritten)
    diff = [line for line in difflib.unified_diff(want.splitlines(), got.splitlines(), "x32 JAX", "x64guard",
                                                  lineterm="", n=0)
            if not line.startswith("@@")]
    return Comparison(False, rewritten, diff, _identity_converts_only(got, want))


def _identity_converts_only(got: str, want: str) -> bool:
    """The two normalised modules are equal once every convert to its operand's own type
    is folded (x64guard.passes.equality.canonical_text, on fresh parses of both)."""
    from x64guard.passes.equality import canonical_text

    got_module, _ = modules.load(got, trusted=True)
    want_module, _ = modules.load(want, trusted=True)
    return canonical_text(got_module) == canonical_text(want_module)


def explaining_kinds(findings) -> set[str]:
    """The kinds among `findings` that name an exact difference (EXPLAINED_BY)."""
    return {str(f.kind) for f in findings if str(f.kind) in EXPLAINED_BY and str(f.severity) == "info"}


@dataclass(frozen=True)
class KnownDifference:
    """A program whose narrowed module is not x32 JAX's, and why. `kind`: the finding that
    names the difference (the test requires it), or None where no finding can. `named_by`:
    who reports it: the pass on the lowered module ("narrow"), or "x64guard.jit" on the
    same function (library code that branches on the dtype while tracing, which no module
    records but the front end's cross-check of the two traces sees)."""

    kind: str | None
    why: str
    named_by: str = "narrow"


def counts(verdicts) -> dict[str, int]:
    """{'equal': n, 'equal-counters': n, 'named': n, 'differs': n} over an iterable of verdicts."""
    out: dict[str, int] = {}
    for verdict in verdicts:
        out[verdict] = out.get(verdict, 0) + 1
    return out
