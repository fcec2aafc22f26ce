"""The rewrite patterns of the narrowing pass: one generic type conversion, a few named rules."""

from x64guard.passes.patterns.check_ops import NarrowCheckExpectation
from x64guard.passes.patterns.casts import NarrowBitcastConvert, NarrowReducePrecision, RemoveIdentityConvert
from x64guard.passes.patterns.shifts import WarnShiftByWidth
from x64guard.passes.patterns.composites import RestoreChloComposite
from x64guard.passes.patterns.constants import NarrowCleanSplat, NarrowConstant
from x64guard.passes.patterns.custom_calls import NarrowCustomCall
from x64guard.passes.patterns.dtype_constants import ReplaceDtypeConstants
from x64guard.passes.patterns.generic import ConvertOpTypes
from x64guard.passes.patterns.rng import RefuseFloat64RandomBits, RefuseRngBitGenerator, RefuseWideRandomWords

# Named rules run before the generic conversion of the same op, in this order; the first
# that deals with an op completely ends the named rules for it.
SPECIAL_PATTERNS = (
    RefuseFloat64RandomBits(),
    NarrowCleanSplat(),
    ReplaceDtypeConstants(),
    NarrowConstant(),
    RemoveIdentityConvert(),
    NarrowBitcastConvert(),
    NarrowReducePrecision(),
    NarrowCustomCall(),
    RefuseRngBitGenerator(),
    RefuseWideRandomWords(),
    WarnShiftByWidth(),
    RestoreChloComposite(),
    NarrowCheckExpectation(),
)

__all__ = ["SPECIAL_PATTERNS", "ConvertOpTypes"]
