"""Target profiles: what each accelerator keeps, refuses and reports, with neuronx-cc's
documented rejections (error codes, limits, flags).
"""

from __future__ import annotations

from dataclasses import dataclass



# What `TargetProfile.rng_state` may say about XLA's RngBitGenerator state, which is
# 64-bit words by definition (u64[2] or u64[3]; JAX bitcasts its uint32[4] rbg keys to it,
# torch-xla builds it from its int64 seed):
RNG_STATE_KEEP = "keep"      # the state, and the seed arithmetic that builds it, stay 64-bit
RNG_STATE_REFUSE = "refuse"  # draws from such a state are refused (rng-state): the target has no u64


@dataclass(frozen=True)
class TargetProfile:
    """What an accelerator accepts. `check` reports anything outside it; `narrow` keeps
    or refuses the RNG state as the profile says."""

    name: str
    description: str
    allow_64bit: bool = False
    allow_complex: bool = True
    # None: any custom_call target is accepted; otherwise only these (and their prefixes).
    known_custom_calls: frozenset[str] | None = None
    # RNG_STATE_KEEP or RNG_STATE_REFUSE (see above).
    rng_state: str = RNG_STATE_KEEP
    # JAX's own 64-bit idioms that are exact in 32 bits (iota_2x32_shape's uint64 counters
    # for fewer than 2**32 elements) are rewritten to 32 bits and reported as `info`.
    # False: `check` reports them as any other 64-bit type.
    exact_idioms_are_info: bool = True
    # AWS Neuron (issue 23): the chip ("trn1", "trn2") whose neuronx-cc rules apply (the
    # NEURON_RULES below), and the compiler flags the profile stands for (NEURON_CC_FLAGS
    # and --neuron-cc-flags are read after them). None: not a Neuron target.
    neuron_chip: str | None = None
    neuron_flags: str = ""
    # One line for `x64guard targets`, `--target` help and the text report's header.
    summary: str = ""


TARGET_PROFILES: dict[str, TargetProfile] = {
    "x32": TargetProfile(
        "x32",
        "no 64-bit element types, except the RNG state JAX's and torch-xla's own 32-bit programs use "
        "(XLA's RngBitGenerator u64[2] state); exact 64-bit idioms of JAX are info",
        summary="no 64-bit element types, except XLA's RNG state; JAX's exact 64-bit idioms are info"),
    "x32-strict": TargetProfile(
        "x32-strict",
        "no 64-bit element type at all: rng_bit_generator draws (jax.random rbg keys, torch-xla RNG) "
        "are refused, and JAX's exact 64-bit idioms are reported like any 64-bit type",
        rng_state=RNG_STATE_REFUSE, exact_idioms_are_info=False,
        summary="no 64-bit element types at all (RNG state and exact idioms included)"),
    # AWS Neuron (issue 23; docs/targets.md): neuronx-cc's documented rejections, as findings
    # whose kind is the compiler's own code (NEURON_RULES). Complex types and custom_call
    # targets are judged by those rules (EVRF004, EHCA005), not by the generic fields.
    "neuron-trn1": TargetProfile(
        "neuron-trn1",
        "AWS Trainium1/Inferentia2 (neuronx-cc --target trn1, Neuron 2.32 documentation): 64-bit integers "
        "are converted to 32 bits by the compiler without a range check, so they must be narrowed; "
        "neuronx-cc's documented rejections reported with their NCC_ codes",
        neuron_chip="trn1", summary="AWS Trainium1/Inferentia2: 64-bit integers must be narrowed; NCC_ codes"),
    "neuron-trn2": TargetProfile(
        "neuron-trn2",
        "AWS Trainium2 (neuronx-cc --target trn2) with the 2.32 defaults (--native-int64=default: 64-bit "
        "integers downcast to 32 bits; --implicit-integer-downcast=all: integer dot/scatter/collectives/pow "
        "downcast with a warning); NCC_ codes as for neuron-trn1",
        neuron_chip="trn2", summary="AWS Trainium2, neuronx-cc 2.32 defaults (64-bit integers downcast); NCC_ codes"),
    "neuron-trn2-int64": TargetProfile(
        "neuron-trn2-int64",
        "AWS Trainium2 with --native-int64=enabled --implicit-integer-downcast=none, the defaults the 2.32 "
        "release notes announce for the next release: int64 runs natively, integer dot/scatter/collectives/"
        "pow are hard errors",
        neuron_chip="trn2", neuron_flags="--native-int64=enabled --implicit-integer-downcast=none",
        summary="AWS Trainium2 with native int64 and no implicit integer downcast (the next release's defaults)"),
    "x64": TargetProfile("x64", "accepts everything (a host CPU or GPU)", allow_64bit=True,
                         summary="accepts everything (a host CPU or GPU); 64-bit uses are info"),
}
# `neuron`, the profile of x64guard before issue 23, is the current Neuron chip with the
# compiler's current defaults.
TARGET_ALIASES: dict[str, str] = {"neuron": "neuron-trn2"}
TARGET_PROFILES["neuron"] = TARGET_PROFILES[TARGET_ALIASES["neuron"]]
DEFAULT_TARGET = "x32"

# ---- AWS Neuron (issue 23): neuronx-cc's documented rejections ------------------------------
# Read from the Neuron SDK 2.32 documentation (aws-neuron/aws-neuron-sdk; compiler 2.27),
# never run against neuronx-cc (it is not installable here). One row per finding kind:
# the compiler's own code (`NCC_...`, the SARIF rule id) or, for what jax-neuronx documents
# without a code, a `neuron-...` kind. `downcast`: the --implicit-integer-downcast mode that
# turns the rejection into a downcast with a warning (None: always an error).
_ERROR_CODES = "compiler/error-codes/{}.rst"
_JAX_KNOWN_ISSUES = "frameworks/jax/setup/jax-neuronx-known-issues.rst"


@dataclass(frozen=True)
class NeuronRule:
    kind: str        # "NCC_EVRF035" or "neuron-cond": a `findings.Kind` value
    ops: str         # the StableHLO ops it looks at (documentation)
    trigger: str     # what neuronx-cc rejects
    fix: str         # the documented fix
    doc: str         # the page of aws-neuron/aws-neuron-sdk it comes from
    downcast: str | None = None


NEURON_RULES: tuple[NeuronRule, ...] = (
    NeuronRule("NCC_ESFH002", "stablehlo.constant", "a ui64 constant whose value does not fit in 32 bits",
               "use 32-bit constants (x64guard narrow does, range-checked)", _ERROR_CODES.format("ESFH002")),
    NeuronRule("NCC_EVRF035", "stablehlo.dot, stablehlo.dot_general",
               "a dot with integer operands (int64 on every chip; int32 on trn2 and later, trn1 only warns)",
               "cast the operands to a float type, or compile with --implicit-integer-downcast=dot",
               _ERROR_CODES.format("EVRF035"), downcast="dot"),
    NeuronRule("NCC_EVRF060", "stablehlo.scatter",
               "a scatter that combines (add, multiply, min, max) integer values; an overwriting scatter is fine",
               "cast to a float type, or compile with --implicit-integer-downcast=scatter",
               _ERROR_CODES.format("EVRF060"), downcast="scatter"),
    NeuronRule("NCC_EVRF016", "stablehlo.scatter", "a scatter that combines boolean values",
               "cast to f32/bf16 before the scatter", _ERROR_CODES.format("EVRF016")),
    NeuronRule("NCC_EVRF061", "stablehlo.all_reduce", "an all-reduce of integer values",
               "cast to a float type, or compile with --implicit-integer-downcast=all_reduce",
               _ERROR_CODES.format("EVRF061"), downcast="all_reduce"),
    NeuronRule("NCC_EVRF063", "stablehlo.reduce_scatter", "a reduce-scatter of integer values",
               "cast to a float type, or compile with --implicit-integer-downcast=reduce_scatter",
               _ERROR_CODES.format("EVRF063"), downcast="reduce_scatter"),
    NeuronRule("NCC_EVRF062", "stablehlo.power", "an int64 power",
               "narrow it to int32 (x64guard narrow), cast to a float type, or compile with "
               "--implicit-integer-downcast=pow", _ERROR_CODES.format("EVRF062"), downcast="pow"),
    NeuronRule("NCC_EVRF022", "stablehlo.shift_right_arithmetic",
               "a shift-right-arithmetic whose operand is not s32, u32 or f32",
               "make the operand 32-bit (x64guard narrow does for int64)", _ERROR_CODES.format("EVRF022")),
    NeuronRule("NCC_EVRF013", "chlo.top_k, custom_call @TopK", "TopK on integer input",
               "cast the input to a float type", _ERROR_CODES.format("EVRF013")),
    NeuronRule("NCC_EVRF014", "chlo.top_k, custom_call @TopK", "TopK with k > 16384",
               "use a smaller k (or split the dimension)", _ERROR_CODES.format("EVRF014")),
    NeuronRule("NCC_EVRF004", "any op", "complex values (complex128 always; complex64 outside the ops the "
               "2.32 release notes list)", "split into real and imaginary parts (jnp.real/jnp.imag)",
               _ERROR_CODES.format("EVRF004")),
    NeuronRule("NCC_EVRF006", "stablehlo.rng_bit_generator",
               "an rng_bit_generator with an explicit algorithm (THREE_FRY, PHILOX)",
               "use the framework's default RNG (jax.random with rbg keys: algorithm DEFAULT)",
               _ERROR_CODES.format("EVRF006")),
    NeuronRule("NCC_EHCA005", "stablehlo.custom_call",
               "a custom_call target that is not one of Neuron's (NEURON_CUSTOM_CALLS)",
               "use a recognised target, or express the computation in StableHLO ops",
               _ERROR_CODES.format("EHCA005")),
    NeuronRule("NCC_EUOC002", "stablehlo.triangular_solve (NEURON_UNSUPPORTED_OPS)",
               "an operator neuronx-cc does not support", "rewrite it (a triangular solve: through an inverse)",
               _ERROR_CODES.format("EUOC002")),
    NeuronRule("NCC_EMOD025", "any op", "a dynamic dimension (bounded or not), or set_dimension_size",
               "use static shapes: pad or bucket to fixed sizes", _ERROR_CODES.format("EMOD025")),
    NeuronRule("NCC_EVRF010", "stablehlo.convolution", "a convolution with both input and kernel dilation",
               "use only input or only kernel dilation, or dilate by hand", _ERROR_CODES.format("EVRF010")),
    NeuronRule("NCC_EVRF011", "stablehlo.convolution", "a strided convolution with input dilation",
               "remove the stride or the input dilation (upsample and downsample separately)",
               _ERROR_CODES.format("EVRF011")),
    NeuronRule("NCC_EVRF017", "stablehlo.reduce_window", "a reduce_window with base dilation > 1",
               "use base dilation 1 (dilate by hand)", _ERROR_CODES.format("EVRF017")),
    NeuronRule("NCC_EVRF018", "stablehlo.reduce_window", "a reduce_window with window dilation > 1",
               "use window dilation 1 (dilate by hand)", _ERROR_CODES.format("EVRF018")),
    NeuronRule("NCC_EVRF019", "stablehlo.reduce_window", "a reduce_window with other than one input and "
               "one initial value", "split it into single-input reduce_windows", _ERROR_CODES.format("EVRF019")),
    # jax-neuronx's known issues: documented without a code.
    NeuronRule("neuron-cond", "stablehlo.case, stablehlo.if", "lax.cond / lax.switch",
               "compute both branches and jnp.where / lax.select between them", _JAX_KNOWN_ISSUES),
    NeuronRule("neuron-dynamic-while", "stablehlo.while",
               "a while loop without a static trip count (only counted loops are supported)",
               "use lax.fori_loop/lax.scan with constant bounds", _JAX_KNOWN_ISSUES),
    NeuronRule("neuron-host-callback", "stablehlo.custom_call (host callback targets)",
               "a host callback (jax.pure_callback, io_callback, jax.debug.print)",
               "move the callback out of the jitted function", _JAX_KNOWN_ISSUES),
    NeuronRule("neuron-sort-comparator", "stablehlo.sort",
               "a sort comparator other than one LT/LE/GT/GE compare (JAX's multi-key comparator)",
               "sort on one key (argsort, then gather)", _JAX_KNOWN_ISSUES),
    NeuronRule("neuron-reduce-precision", "stablehlo.reduce_precision", "reduce_precision",
               "cast to the narrower type and back (astype)", _JAX_KNOWN_ISSUES),
    NeuronRule("neuron-variadic-reduce", "stablehlo.reduce", "a reduction of several inputs at once "
               "(jnp.argmax/argmin lower to one)", "reduce each input on its own (argmax: max, then a "
               "compare and a min of an iota)", _JAX_KNOWN_ISSUES),
    NeuronRule("neuron-threefry", "func.call @threefry2x32", "jax.random's threefry kernel: \"not completely "
               "supported\" (a warning)", "jax.config.update('jax_default_prng_impl', 'rbg')", _JAX_KNOWN_ISSUES),
)
NEURON_RULE: dict[str, NeuronRule] = {row.kind: row for row in NEURON_RULES}

# custom_call targets neuronx-cc recognises (EHCA005's page), and those consumed before the
# module reaches neuronx-cc: sharding annotations (XLA's SPMD partitioner) and jax.export's
# shape assertions (JAX's shape refinement).
NEURON_CUSTOM_CALLS: frozenset[str] = frozenset({
    "AwsNeuronErf", "AwsNeuronGelu", "AwsNeuronGeluApprxTanh", "AwsNeuronGeluBackward", "AwsNeuronSilu",
    "AwsNeuronSiluBackward", "AwsNeuronRmsNorm", "AwsNeuronSoftmax", "AwsNeuronSoftmaxBackward",
    "AwsNeuronCollectiveMatmul", "AwsNeuronIntMatmult", "AwsNeuronArgMax", "AwsNeuronArgMin", "AwsNeuronTopK",
    "AwsNeuronDropoutMaskV1", "AwsNeuronCustomNativeKernel", "AwsNeuronCustomOp", "AwsNeuronDevicePrint",
    "ResizeNearest", "ResizeBilinear", "ResizeNearestGrad", "AwsNeuronLNCShardingConstraint",
    "AwsNeuronTransferWithStaticRing", "AwsNeuronModuleMarkerStart-Forward", "AwsNeuronModuleMarkerStart-Backward",
    "AwsNeuronModuleMarkerEnd-Forward", "AwsNeuronModuleMarkerEnd-Backward", "NeuronBoundaryMarker-Start",
    "NeuronBoundaryMarker-End",
})
XLA_SHARDING_CUSTOM_CALLS: frozenset[str] = frozenset({"Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape",
                                                      "shape_assertion"})

# Operators neuronx-cc does not support (EUOC002; the page's example).
NEURON_UNSUPPORTED_OPS: frozenset[str] = frozenset({"stablehlo.triangular_solve"})

# complex64 ops the 2.32 release notes name (the notes add "about 30"; only the named ones
# are listed, so a complex64 op outside them is reported), and ops that only carry values.
NEURON_COMPLEX64_OPS: frozenset[str] = frozenset({
    "stablehlo.add", "stablehlo.multiply", "stablehlo.dot_general", "stablehlo.exponential", "stablehlo.sine",
    "stablehlo.reshape", "stablehlo.slice",
    "func.func", "func.return", "func.call", "stablehlo.return",
})

NEURON_TOPK_MAX_K = 16384                       # EVRF014
NEURON_SORT_COMPARISONS = frozenset({"LT", "LE", "GT", "GE"})
NEURON_DOWNCAST_OPS: tuple[str, ...] = ("dot", "scatter", "all_reduce", "reduce_scatter", "pow")
# What neuronx-cc 2.27 (Neuron 2.32) does without flags: int64 downcast, the integer-datapath
# ops downcast with a warning. --native-int64 only exists on trn2 and later.
NEURON_DEFAULT_FLAGS = "--native-int64=default --implicit-integer-downcast=all"
NEURON_FLAGS_ENV = "NEURON_CC_FLAGS"
