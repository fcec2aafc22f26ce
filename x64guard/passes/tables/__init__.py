"""The data the narrowing pass is driven by: small tables beside small pure functions.

Kept in the spirit of JAX's ``jax/_src/dtypes.py`` (``_dtype_to_32bit_dtype``): adding a
type, a sentinel, a LAPACK kernel or a target is one entry here, not new code. One module
per kind of table; every name is importable from `x64guard.passes.tables`.

| module | tables |
|---|---|
| `element_types` | the type table and every dtype map derived from it; sentinels |
| `ops` | constants, torch-xla's spellings, CHLO ops x32 JAX may expand itself, custom_call targets, type-attribute-free ops, the `check` dialect |
| `targets` | target profiles, neuronx-cc's documented rejections |
| `idioms` | hypot, half-significand, log_ndtr and random-number constants |
| `dtype_constants` | `finfo(float64)` expressions and their x32 values |
"""

from __future__ import annotations

from x64guard.passes.tables.element_types import (  # noqa: F401
    ElementType, ELEMENT_TYPES, ELEMENT_TYPE, NARROW_ELEMENT_TYPE, NUMPY_DTYPE, INTEGER_NUMPY_DTYPE,
    NARROW_NUMPY_DTYPE, NARROW_TORCH_DTYPE, TORCH_MLIR_ELEMENT, TORCH_JAX_DTYPE, INTEGER_RANGE,
    numpy_narrowed, torch_narrowed, INTEGER_SENTINELS, FLOAT64_MAX, FLOAT32_MAX, FLOAT_SENTINELS,
)
from x64guard.passes.tables.ops import (  # noqa: F401
    CONSTANT_OPS, Spelling, CUSTOM_CALL_SPELLINGS, CustomCallPolicy, TYPE_GENERIC_CUSTOM_CALLS,
    TYPE_GENERIC_CUSTOM_CALL_PATTERN, HOST_CALLBACK_CUSTOM_CALLS, COMPILED_KERNEL_CUSTOM_CALLS,
    IRREGULAR_CUSTOM_CALL_RENAMES, DTYPE_NAMED_COMPUTATIONS, narrowed_custom_call_target, custom_call_policy,
    TYPE_ATTR_FREE_DIALECTS, TYPE_ATTR_FREE_OPS, never_has_type_attributes, CHECK_DIALECT_OPS,
    X32_EXPANDED_CHLO,
)
from x64guard.passes.tables.targets import (  # noqa: F401
    RNG_STATE_KEEP, RNG_STATE_REFUSE, TargetProfile, TARGET_PROFILES, TARGET_ALIASES, DEFAULT_TARGET,
    NeuronRule, NEURON_RULES, NEURON_RULE, NEURON_CUSTOM_CALLS, XLA_SHARDING_CUSTOM_CALLS,
    NEURON_UNSUPPORTED_OPS, NEURON_COMPLEX64_OPS, NEURON_TOPK_MAX_K, NEURON_SORT_COMPARISONS,
    NEURON_DOWNCAST_OPS, NEURON_DEFAULT_FLAGS, NEURON_FLAGS_ENV,
)
from x64guard.passes.tables.idioms import (  # noqa: F401
    FLOAT64_ONE_BITS, HYPOT_SCALES, HALF_SIGNIFICAND_MASKS, LOG_NDTR_SEGMENTS, THREEFRY_KEY_PARITY,
    THREEFRY_ROTATIONS, RNG_IDIOMS, RNG_WORD_PAIR, COUNTER_LIMIT, LOW_WORD_MASK,
)
from x64guard.passes.tables.dtype_constants import (  # noqa: F401
    DtypeConstant, FINFO_EXPRESSIONS, FINFO_MULTIPLES, DTYPE_CONSTANTS_F64, DTYPE_CONSTANT_VALUES_F64,
    DTYPE_CONSTANT_NARROW_VALUES, DTYPE_MULTIPLE_BASES, DTYPE_MULTIPLE_BOUND, DTYPE_CONSTANT_RANGES,
    dtype_constant,
)
