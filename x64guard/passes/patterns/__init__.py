"""The rewrite patterns of the narrowing pass: one generic type conversion, a few named
rules, and the rules of the idiom phase. The tables below are the registry: a rule not
listed here never runs (tests/passes/test_golden.py checks that each named rule and the
generic one has a golden case in tests/passes/golden/rules, or names where it is tested)."""

from x64guard.passes.patterns.check_ops import NarrowCheckExpectation
from x64guard.passes.patterns.casts import ConvertOutOfRange, NarrowBitcastConvert, RemoveIdentityConvert
from x64guard.passes.patterns.spellings import NarrowScalarCompare, RespellCustomCall
from x64guard.passes.patterns.shifts import WarnShiftByWidth, WidthDependentCount
from x64guard.passes.patterns.composites import RestoreChloComposite, WarnX32Expansion
from x64guard.passes.patterns.constants import NarrowCleanSplat, NarrowConstant
from x64guard.passes.patterns.counters import CounterSplit, LowWordMask
from x64guard.passes.patterns.custom_calls import NarrowCustomCall
from x64guard.passes.patterns.dtype_constants import ReplaceDtypeConstants
from x64guard.passes.patterns.generic import ConvertOpTypes
from x64guard.passes.patterns.half_significand import HalfSignificandMask
from x64guard.passes.patterns.hypot import HypotScale
from x64guard.passes.patterns.identities import FoldWholeArrayScatter
from x64guard.passes.patterns.log_ndtr import LogNdtrSegments
from x64guard.passes.patterns.random_bits import (RbgWideDraw, ReshapedRandomWords, ThreefryWords,
                                                  ThreefryWordsOriginal, XlaRandintWords)
from x64guard.passes.patterns.random_values import JaxFloatsFromBits, RandintMultiplier, XlaFloatsFromBits
from x64guard.passes.patterns.rng import RefuseFloat64RandomBits, RefuseWideRandomWords
from x64guard.passes.patterns.rng_state import KeepRngState, KeepStateSignature

# Phase 1 (passes/idioms.py): idioms rewritten into the form x32 JAX traces, each rule over
# the whole module in this order (floats and randint read the words the first rules make).
IDIOM_PATTERNS = (
    RespellCustomCall(),  # first: torch-xla's spellings, read as the ops the other rules know
    NarrowScalarCompare(),
    XlaRandintWords(),
    RbgWideDraw(),
    ThreefryWords(),
    ThreefryWordsOriginal(),
    ReshapedRandomWords(),
    JaxFloatsFromBits(),
    XlaFloatsFromBits(),
    RandintMultiplier(),
    CounterSplit(),
    LowWordMask(),
    KeepRngState(),
    HypotScale(),
    HalfSignificandMask(),
    LogNdtrSegments(),
)

# Phase 2: named rules run before the generic conversion of the same op, in this order;
# the first that deals with an op completely ends the named rules for it. The generic
# conversion (CONVERT_TYPES) then runs on every op.
SPECIAL_PATTERNS = (
    NarrowCleanSplat(),  # first: most constants; a clean splat is never the bits of 1.0 (out of ui32's range)
    RefuseFloat64RandomBits(),
    ReplaceDtypeConstants(),
    NarrowConstant(),
    ConvertOutOfRange(),  # reports only: before the rule that deals with every convert
    RemoveIdentityConvert(),
    NarrowBitcastConvert(),
    NarrowCustomCall(),
    RefuseWideRandomWords(),
    WarnShiftByWidth(),
    WidthDependentCount(),
    WarnX32Expansion(),
    RestoreChloComposite(),
    FoldWholeArrayScatter(),
    NarrowCheckExpectation(),
    KeepStateSignature(),
)
CONVERT_TYPES = ConvertOpTypes()

__all__ = ["IDIOM_PATTERNS", "SPECIAL_PATTERNS", "CONVERT_TYPES", "ConvertOpTypes"]
