"""A corpus of foreign-style modules: StableHLO generated from JAX the way StableHLO's own
test data was (stablehlo/testdata: one module per lax op x dtype, JAX test-case style),
generated at test time.

Three forms per op x dtype:
- `lowered`: `jax.jit(op).lower(...)` with x64 on, inputs as parameters (MLIR text, or MLIR
  bytecode for every other module). Elementwise ones are run narrowed on the CPU.
- `testdata`: inputs and the expected output embedded as constants, checked with StableHLO's
  test `check` dialect (`check.expect_almost_eq_const` / `check.expect_eq_const` ops and the
  `@check.expect_close` custom_call), as stablehlo/testdata modules are written.
- `dynamic`: `jax.export` with a symbolic dimension (`tensor<?x...>`, i64 dimension sizes,
  `shape_assertion` custom_calls), as a StableHLO portable artifact (VHLO bytecode).

The table is data: an `Op` names a function, its arity, the dtype kinds it accepts and the
input domain. `generate()` is deterministic (inputs seeded from the module name).
X64GUARD_FOREIGN_CORPUS=full adds more shapes (scalars, 2-d, empty) per op x dtype.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
import zlib
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import export, lax

from tests.corpus.oracle import x64
from x64guard.io import modules

# dtype kinds: f float64, i int64, u uint64, c complex128, b bool.
DTYPES = {"f": np.float64, "i": np.int64, "u": np.uint64, "c": np.complex128, "b": np.bool_}
DTYPE_NAMES = {"f": "float64", "i": "int64", "u": "uint64", "c": "complex128", "b": "bool"}


def _same_width_partner(dtype) -> np.dtype:
    """float64 <-> int64, uint64 -> int64 (and the same at 32 bits, as x32 JAX traces it)."""
    dtype = np.dtype(dtype)
    return np.dtype({"f": "int", "i": "float", "u": "int"}[dtype.kind] + str(8 * dtype.itemsize))


@dataclasses.dataclass(frozen=True)
class Op:
    name: str
    fn: Callable
    kinds: str                  # dtype kinds it accepts
    arity: int = 1
    elementwise: bool = True    # run narrowed on the CPU against x32 JAX
    domain: str = "any"         # any | positive | unit (|x| < 1) | ge1 | small (shift amounts, exponents)


OPS: list[Op] = [
    # unary, elementwise
    Op("abs", lax.abs, "fic"), Op("neg", lax.neg, "fic"), Op("sign", lax.sign, "fic"),
    Op("floor", lax.floor, "f"), Op("ceil", lax.ceil, "f"), Op("round", lax.round, "f"),
    Op("round_even", lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN), "f"),
    Op("is_finite", lax.is_finite, "f"), Op("exp", lax.exp, "fc"), Op("exp2", lax.exp2, "f"),
    Op("expm1", lax.expm1, "fc"), Op("log", lax.log, "fc", domain="positive"),
    Op("log1p", lax.log1p, "fc", domain="positive"), Op("sqrt", lax.sqrt, "fc", domain="positive"),
    Op("rsqrt", lax.rsqrt, "fc", domain="positive"), Op("cbrt", lax.cbrt, "f"),
    Op("tanh", lax.tanh, "fc"), Op("logistic", lax.logistic, "fc"),
    Op("sin", lax.sin, "fc"), Op("cos", lax.cos, "fc"), Op("tan", lax.tan, "fc", domain="unit"),
    Op("asin", lax.asin, "f", domain="unit"), Op("acos", lax.acos, "f", domain="unit"),
    Op("atan", lax.atan, "f"), Op("sinh", lax.sinh, "f"), Op("cosh", lax.cosh, "f"),
    Op("asinh", lax.asinh, "f"), Op("acosh", lax.acosh, "f", domain="ge1"), Op("atanh", lax.atanh, "f", domain="unit"),
    Op("erf", lax.erf, "f"), Op("erfc", lax.erfc, "f"), Op("erf_inv", lax.erf_inv, "f", domain="unit"),
    Op("lgamma", lax.lgamma, "f", domain="positive"), Op("digamma", lax.digamma, "f", domain="positive"),
    Op("integer_pow", lambda x: lax.integer_pow(x, 3), "fic"), Op("square", lax.square, "fic"),
    Op("real", lax.real, "c"), Op("imag", lax.imag, "c"), Op("conj", lax.conj, "c"),
    Op("not", lax.bitwise_not, "iub"), Op("population_count", lax.population_count, "iu"),
    Op("clz", lax.clz, "iu"),
    Op("convert_f32", lambda x: lax.convert_element_type(x, np.float32), "fiub"),
    Op("convert_i32", lambda x: lax.convert_element_type(x, np.int32), "fiub", domain="small"),
    Op("convert_f64", lambda x: lax.convert_element_type(x, jnp.float64), "iub"),
    Op("bitcast_same_width", lambda x: lax.bitcast_convert_type(x, _same_width_partner(x.dtype)), "fiu"),
    Op("reduce_precision", lambda x: lax.reduce_precision(x, 8, 7), "f"),
    # binary, elementwise
    Op("add", lax.add, "fic", 2), Op("sub", lax.sub, "fic", 2), Op("mul", lax.mul, "fic", 2),
    Op("div", lax.div, "fic", 2, domain="positive"), Op("rem", lax.rem, "fi", 2, domain="positive"),
    Op("max", lax.max, "fiub", 2), Op("min", lax.min, "fiub", 2), Op("pow", lax.pow, "fc", 2, domain="positive"),
    Op("atan2", lax.atan2, "f", 2), Op("nextafter", lax.nextafter, "f", 2),
    Op("and", lax.bitwise_and, "iub", 2), Op("or", lax.bitwise_or, "iub", 2), Op("xor", lax.bitwise_xor, "iub", 2),
    Op("shift_left", lax.shift_left, "iu", 2, domain="small"),
    Op("shift_right_logical", lax.shift_right_logical, "iu", 2, domain="small"),
    Op("shift_right_arithmetic", lax.shift_right_arithmetic, "iu", 2, domain="small"),
    Op("eq", lax.eq, "fiucb", 2), Op("ne", lax.ne, "fiucb", 2), Op("lt", lax.lt, "fiub", 2),
    Op("ge", lax.ge, "fiub", 2), Op("complex", lax.complex, "f", 2),
    Op("select", lambda x, y: lax.select(x > y, x, y), "fiu", 2),
    Op("clamp", lambda x, y: lax.clamp(lax.min(x, y), x, lax.max(x, y)), "fiu", 2),
    # reductions, shapes, indexing, control flow
    Op("reduce_sum", lambda x: jnp.sum(x), "fiuc", elementwise=False),
    Op("reduce_max", lambda x: jnp.max(x), "fiub", elementwise=False),
    Op("reduce_prod", lambda x: jnp.prod(x), "fic", elementwise=False),
    Op("argmax", lambda x: jnp.argmax(x), "fiu", elementwise=False),
    Op("cumsum", lambda x: jnp.cumsum(x), "fic", elementwise=False),
    Op("cummax", lambda x: lax.cummax(x), "fiu", elementwise=False),
    Op("sort", lambda x: jnp.sort(x), "fiu", elementwise=False),
    Op("argsort", lambda x: jnp.argsort(x), "fiu", elementwise=False),
    Op("top_k", lambda x: lax.top_k(x, 2)[0], "fi", elementwise=False),
    Op("rev", lambda x: lax.rev(x, (0,)), "fiucb", elementwise=False),
    Op("concatenate", lambda x, y: jnp.concatenate([x, y]), "fiucb", 2, elementwise=False),
    Op("pad", lambda x: lax.pad(x, jnp.zeros((), x.dtype), [(1, 2, 1)]), "fiuc", elementwise=False),
    Op("slice", lambda x: x[1:], "fiucb", elementwise=False),
    Op("dynamic_slice", lambda x: lax.dynamic_slice(x, (jnp.argmax(x) % 2,), (2,)), "fiu", elementwise=False),
    Op("dynamic_update_slice", lambda x, y: lax.dynamic_update_slice(x, y[:1], (jnp.argmin(jnp.abs(x)) % 2,)), "fiuc", 2,
       elementwise=False),
    Op("gather", lambda x: x[jnp.array([2, 0, 1])], "fiucb", elementwise=False),
    Op("scatter_add", lambda x, y: x.at[jnp.array([0, 2, 0])].add(y[:3]), "fiu", 2, elementwise=False),
    Op("iota_add", lambda x: x + lax.iota(x.dtype, x.shape[0]), "fiu", elementwise=False),
    Op("dot", lambda x, y: jnp.dot(x, y), "fic", 2, elementwise=False),
    Op("outer_dot_general", lambda x, y: lax.dot_general(x[:, None], y[None, :], (((1,), (0,)), ((), ()))), "fi", 2,
       elementwise=False),
    Op("fori_loop", lambda x: lax.fori_loop(0, 3, lambda i, a: a * 2 + i, x), "fi", elementwise=False),
    Op("cond", lambda x: lax.cond(jnp.sum(x) > 0, lambda a: a + 1, lambda a: a - 1, x), "fi", elementwise=False),
    Op("scan", lambda x: lax.scan(lambda c, a: (c + a, c * a), jnp.zeros((), x.dtype), x)[1], "fic",
       elementwise=False),
    Op("where", lambda x: jnp.where(x > x.mean().astype(x.dtype), x, jnp.zeros_like(x)), "fi", elementwise=False),
    Op("mean_var", lambda x: jnp.var(x) + jnp.mean(x), "f", elementwise=False),
    Op("logsumexp", lambda x: jax.nn.logsumexp(x), "f", elementwise=False),
    Op("softmax", lambda x: jax.nn.softmax(x), "f", elementwise=False),
    Op("fft", lambda x: jnp.fft.fft(x), "c", elementwise=False),
    Op("linalg_inv", lambda x: jnp.linalg.inv(x.reshape(2, 2) + 3 * jnp.eye(2, dtype=x.dtype)), "fc",
       elementwise=False),
    Op("cumlogsumexp", lambda x: lax.cumlogsumexp(x), "f", elementwise=False),
]

# The shape every op x dtype gets, and the extra shapes of X64GUARD_FOREIGN_CORPUS=full.
DEFAULT_SHAPE = (4,)
FULL_SHAPES = [(), (2, 4), (0,)]
# Ops whose function needs a 1-d operand of at least 4 elements.
_ONE_D_ONLY = {"rev", "pad", "slice", "dynamic_slice", "dynamic_update_slice", "gather", "scatter_add",
               "iota_add", "dot", "outer_dot_general", "top_k", "linalg_inv", "fft", "concatenate", "scan",
               "cumsum", "cummax", "sort", "argsort", "cumlogsumexp", "argmax", "softmax"}
# Ops whose jax.export with a symbolic dimension is part of the corpus (`dynamic` form).
DYNAMIC_OPS = {"abs", "exp", "add", "mul", "max", "and", "shift_right_logical", "eq", "convert_f32", "reduce_sum",
               "reduce_max", "cumsum", "sort", "rev", "concatenate", "pad", "where", "iota_add", "softmax",
               "dynamic_slice", "square", "not", "select", "sign"}


@dataclasses.dataclass
class ForeignModule:
    name: str                    # op.dtype.shape.form
    op: Op
    kind: str                    # dtype kind
    form: str                    # lowered | testdata | dynamic
    data: str | bytes            # what x64guard reads
    args: tuple[np.ndarray, ...]  # the 64-bit inputs
    trusted: bool = True
    exported: export.Exported | None = None  # the jax.export of the dynamic form

    @property
    def dtype(self) -> str:
        return DTYPE_NAMES[self.kind]


def _rng(name: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(name.encode()))


def make_input(rng: np.random.Generator, kind: str, shape: tuple, domain: str) -> np.ndarray:
    size = int(np.prod(shape)) if shape else 1
    if kind == "b":
        values = rng.random(size) < 0.5
    elif kind in ("i", "u"):
        if domain == "small":
            values = rng.integers(0, 40, size)       # shift amounts up to 39: beyond 32 too
        elif domain == "positive":
            values = rng.integers(1, 1000, size)
        else:
            values = rng.integers(0 if kind == "u" else -1000, 1000, size)
    else:
        if domain == "positive":
            real = rng.uniform(0.1, 10.0, size)
        elif domain == "unit":
            real = rng.uniform(-0.9, 0.9, size)
        elif domain == "ge1":
            real = rng.uniform(1.0, 10.0, size)
        elif domain == "small":
            real = rng.uniform(-100.0, 100.0, size)
        else:
            real = rng.normal(0.0, 3.0, size)
        values = real if kind == "f" else real + 1j * rng.uniform(0.1, 2.0, size)
    return np.asarray(values, DTYPES[kind]).reshape(shape)


def _shapes(op: Op) -> list[tuple]:
    shapes = [DEFAULT_SHAPE]
    if os.environ.get("X64GUARD_FOREIGN_CORPUS", "").strip().lower() == "full":
        shapes += [s for s in FULL_SHAPES if op.name not in _ONE_D_ONLY or len(s) == 1 and s[0] >= 4]
    return shapes


def names(forms: tuple[str, ...] = ("lowered", "testdata", "dynamic")) -> list[tuple[str, str, str]]:
    """(op, dtype kind, form) of every module `generate` makes, without making any (cheap:
    test ids are computed at collection)."""
    out = []
    for op in OPS:
        for kind in op.kinds:
            if "lowered" in forms:
                out.append((op.name, kind, "lowered"))
            if "testdata" in forms and op.elementwise:
                out.append((op.name, kind, "testdata"))
            if "dynamic" in forms and op.name in DYNAMIC_OPS:
                out.append((op.name, kind, "dynamic"))
    return out


def generate() -> list[ForeignModule]:
    """Every module of the corpus. Global JAX state is restored afterwards."""
    modules: list[ForeignModule] = []
    jax.clear_caches()
    with x64(True), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for op in OPS:
            for kind in op.kinds:
                for shape in _shapes(op):
                    try:
                        modules.extend(_for_op(op, kind, shape))
                    except Exception:  # noqa: BLE001
                        if shape == DEFAULT_SHAPE:
                            raise  # the table is wrong
                        # An extra shape JAX itself cannot trace the op for (max of an
                        # empty array): nothing for x64guard to read.
    jax.clear_caches()
    return modules


def _for_op(op: Op, kind: str, shape: tuple) -> list[ForeignModule]:
    suffix = "" if shape == DEFAULT_SHAPE else "." + ("x".join(map(str, shape)) or "scalar")
    base = f"{op.name}.{DTYPE_NAMES[kind]}{suffix}"
    rng = _rng(base)
    args = tuple(make_input(rng, kind, shape, op.domain) for _ in range(op.arity))
    out = []
    lowered = jax.jit(op.fn).lower(*args)
    text = lowered.as_text(debug_info=True)
    # Every other lowered module is read as MLIR bytecode rather than text.
    as_bytecode = zlib.crc32(base.encode()) % 2 == 1
    data: str | bytes = modules.to_bytecode(modules.load(text)[0]) if as_bytecode else text
    out.append(ForeignModule(f"{base}.lowered", op, kind, "lowered", data, args))
    if op.elementwise and shape == DEFAULT_SHAPE:
        expected = [np.asarray(r) for r in jax.tree_util.tree_leaves(jax.jit(op.fn)(*args))]
        out.append(ForeignModule(f"{base}.testdata", op, kind, "testdata", testdata_module(op.fn, args, expected[0]),
                                 args))
    if op.name in DYNAMIC_OPS and shape == DEFAULT_SHAPE:
        n = export.symbolic_shape("n", constraints=("n >= 4",))
        specs = [jax.ShapeDtypeStruct(n, a.dtype) for a in args]
        exported = export.export(jax.jit(op.fn))(*specs)
        out.append(ForeignModule(f"{base}.dynamic", op, kind, "dynamic", bytes(exported.mlir_module_serialized), args,
                                 trusted=False, exported=exported))
    return out


def generate_x32() -> dict[str, str]:
    """The same ops traced by JAX with x64 off (inputs of the 32-bit dtypes), as MLIR text:
    JAX's own 32-bit programs, which `check --target x32` must pass. A hook for more x32
    programs (random numbers: the x32 target profile's work) to join."""
    from tests.corpus.oracle import to32

    modules = {}
    jax.clear_caches()
    with x64(False), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for op in OPS:
            for kind in op.kinds:
                name = f"{op.name}.{DTYPE_NAMES[kind]}.x32"
                rng = _rng(name)
                args = tuple(to32(make_input(rng, kind, DEFAULT_SHAPE, op.domain)) for _ in range(op.arity))
                modules[name] = jax.jit(op.fn).lower(*args).as_text(debug_info=True)
    jax.clear_caches()
    return modules


def testdata_module(fn: Callable, args: tuple[np.ndarray, ...], expected: np.ndarray) -> str:
    """A stablehlo/testdata-style module: the inputs as constants, the op, and its expected
    output checked with the `check` dialect (an almost-equal op for floats, an equal op for
    the rest) and with the `@check.expect_close` custom_call on an expected constant."""
    lowered = jax.jit(lambda: fn(*[jnp.asarray(a) for a in args])).lower().as_text(debug_info=True)
    lines = lowered.splitlines()
    # The @main return: `return %N : tensor<...>` (the first return after @main's header).
    main = next(i for i, line in enumerate(lines) if "func.func public @main" in line)
    ret = next(i for i in range(main, len(lines)) if lines[i].strip().startswith("return "))
    returned = lines[ret].strip().split()[1]
    result_type = _tensor_type(expected)
    check_op = "check.expect_almost_eq_const" if expected.dtype.kind in "fc" else "check.expect_eq_const"
    indent = lines[ret][:len(lines[ret]) - len(lines[ret].lstrip())]
    checks = [
        f'{indent}"{check_op}"({returned}) {{value = {dense_literal(expected)}}} : ({result_type}) -> ()',
        f"{indent}%expected = stablehlo.constant {dense_literal(expected)}",
        f"{indent}stablehlo.custom_call @check.expect_close({returned}, %expected) {{has_side_effect = true}} : "
        f"({result_type}, {result_type}) -> ()",
    ]
    return "\n".join(lines[:ret] + checks + lines[ret:])


_MLIR_ELEMENT = {"float64": "f64", "float32": "f32", "int64": "i64", "int32": "i32", "uint64": "ui64",
                 "uint32": "ui32", "complex128": "complex<f64>", "complex64": "complex<f32>", "bool": "i1"}


def _tensor_type(a: np.ndarray) -> str:
    return "tensor<" + "".join(f"{d}x" for d in a.shape) + _MLIR_ELEMENT[str(a.dtype)] + ">"


def dense_literal(a: np.ndarray) -> str:
    """`dense<...> : tensor<...>` holding exactly `a`'s values (raw bytes in hex; booleans
    as a list, MLIR packs i1 differently)."""
    a = np.ascontiguousarray(a)
    if a.dtype == np.bool_:
        flat = ", ".join("true" if v else "false" for v in a.ravel())
        body = flat if a.ndim == 0 else f"[{flat}]" if a.ndim == 1 else None
        if body is None:
            raise ValueError("boolean literals beyond 1-d are not needed here")
        return f"dense<{body}> : {_tensor_type(a)}"
    return f'dense<"0x{a.tobytes().hex().upper()}"> : {_tensor_type(a)}'
