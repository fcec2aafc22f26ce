"""Random JAX programs as data, for differential fuzzing of x64guard.

A `Program` is a small AST: typed inputs, then `Node`s (an op name from `OPS`, the
indices of earlier values it reads, and static parameters), then the indices it returns.
Value indices count the inputs first (v0, v1, ...), then the nodes in order. Everything is
a frozen dataclass of plain Python data, so a failing example prints as code that can be
pasted into a regression test (`tests/reliability/test_fuzz_regressions.py`):

    Program(inputs=(Input('float64', (3,), seed=1),),
            nodes=(Node('sin', (0,)), Node('sum', (1,), (('axis', None),))),
            outputs=(2,))

`program.source()` shows the same program as the JAX code it stands for.

`programs()` is the hypothesis strategy. It draws ops over `OPS` (elementwise lax/jnp
ops, casts and bitcasts, reductions, shape ops, gathers/scatters, sorting, linear algebra,
control flow: cond, switch, fori_loop, while_loop, scan, map, vmap, checkpoint) on
int8..int64, uint8..uint64, bool, float16/bfloat16..float64 and complex64/complex128 values,
shapes from scalars and zero-size arrays up to 16 elements, plus constants (Python scalars
and numpy arrays, splat and dense, in range, at the 64-bit sentinels, and out of the 32-bit
range). Each candidate node is checked with `jax.eval_shape` twice: under x64 on the
64-bit avals and under x64 off on the 32-bit avals. A node is kept only when both trace
and agree (same shape, and the x32 dtype is the x64 dtype narrowed as JAX canonicalizes
it) -- so the programs never hit JAX's own x64/x32 promotion differences (uint64 + int64
-> float64) -- or, for *hazards* (out-of-range constants, width-changing bitcasts),
when x64 traces: those programs must be refused by x64guard (or, if narrowed, still be
bit-identical to x32 JAX).

Inputs trace with x64 on and off (the rules of tests/corpus/programs.py): their values fit
the 32-bit counterpart of their dtype, Python int constants fit int32 unless they are a
hazard, every op reads at least one traced value (so that JAX does not fold it on the host).
"""

from __future__ import annotations

import itertools
import math
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

import jax
import jax.numpy as jnp
import jax.scipy.special as jsp_special
from jax import lax

from tests.corpus.oracle import NARROW_DTYPE, to32, x64

# --------------------------------------------------------------------------------------
# dtypes

DTYPES: dict[str, np.dtype] = {
    name: np.dtype(getattr(jnp, name)) for name in (
        "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
        "float16", "bfloat16", "float32", "float64", "complex64", "complex128")}
WIDE = ("int64", "uint64", "float64", "complex128")
# Input dtypes, weighted toward the 64-bit ones (those are what x64guard changes).
INPUT_DTYPES = list(DTYPES) + list(WIDE) * 3
SHAPES: list[tuple[int, ...]] = [(), (), (1,), (3,), (4,), (5,), (0,), (2, 3), (3, 2), (4, 4), (2, 0),
                                 (16,), (2, 2, 2), (1, 4), (2, 1, 3), (2, 2), (3, 3)]


def narrow_dtype(dtype: np.dtype) -> np.dtype:
    dtype = np.dtype(dtype)
    return NARROW_DTYPE.get(dtype, dtype)


def is_bool(d: np.dtype) -> bool:
    return np.dtype(d) == np.bool_


def is_int(d: np.dtype) -> bool:
    return np.issubdtype(np.dtype(d), np.integer)


def is_float(d: np.dtype) -> bool:
    return np.issubdtype(np.dtype(d), np.floating)


def is_complex(d: np.dtype) -> bool:
    return np.issubdtype(np.dtype(d), np.complexfloating)


def ANY(d) -> bool:
    return True


def NUM(d) -> bool:
    return not is_bool(d)


def REAL(d) -> bool:
    return not is_complex(d)


def REALNUM(d) -> bool:
    return not is_bool(d) and not is_complex(d)


def INEXACT(d) -> bool:
    return is_float(d) or is_complex(d)


def FLOAT(d) -> bool:
    return is_float(d)


def INT(d) -> bool:
    return is_int(d)


def INTB(d) -> bool:
    return is_int(d) or is_bool(d)


def LINALG(d) -> bool:
    """What LAPACK kernels take: float32/64, complex64/128."""
    return np.dtype(d).name in ("float32", "float64", "complex64", "complex128")


# --------------------------------------------------------------------------------------
# the AST


@dataclass(frozen=True)
class Input:
    """A 64-bit-side input: dtype, shape, and the seed of its values (`special` mixes in
    nan/inf/-0/extremes). Values always fit the dtype's 32-bit counterpart."""

    dtype: str
    shape: tuple[int, ...]
    seed: int = 0
    special: bool = False

    def array(self) -> np.ndarray:
        return input_values(self)


@dataclass(frozen=True)
class Node:
    """`op` applied to earlier values `args` with static `params` ((name, value) pairs).
    Constants are ops too: Node('const', (), (('value', '2.5'), ('dtype', 'float64')))."""

    op: str
    args: tuple[int, ...] = ()
    params: tuple[tuple[str, Any], ...] = ()

    @property
    def p(self) -> dict[str, Any]:
        return dict(self.params)


@dataclass(frozen=True)
class Program:
    inputs: tuple[Input, ...]
    nodes: tuple[Node, ...]
    outputs: tuple[int, ...]

    def args(self) -> tuple[np.ndarray, ...]:
        """The 64-bit inputs (numpy arrays)."""
        return tuple(i.array() for i in self.inputs)

    def args32(self) -> list[np.ndarray]:
        return [to32(a) for a in self.args()]

    def fn(self) -> Callable:
        return build_fn(self)

    def slice(self, outputs: Sequence[int]) -> "Program":
        """The program restricted to what `outputs` depend on (inputs are all kept)."""
        n_in = len(self.inputs)
        keep: set[int] = set()
        stack = [i for i in outputs if i >= n_in]
        while stack:
            i = stack.pop()
            if i in keep:
                continue
            keep.add(i)
            stack.extend(a for a in self.nodes[i - n_in].args if a >= n_in)
        renumber = {i: i for i in range(n_in)}
        nodes = []
        for k, node in enumerate(self.nodes):
            if n_in + k in keep:
                renumber[n_in + k] = n_in + len(nodes)
                nodes.append(Node(node.op, tuple(renumber[a] for a in node.args), node.params))
        return Program(self.inputs, tuple(nodes), tuple(renumber[i] for i in outputs))

    @property
    def hazards(self) -> list[str]:
        """Why x64guard may (must) refuse this program: constants the 32-bit types cannot
        hold, width-changing bitcasts of 64-bit values."""
        found = []
        unsigned = any(x.dtype.startswith("uint") for x in self.inputs)
        for node in self.nodes:
            if node.op == "const" and const_is_hazard(node.p):
                found.append(f"constant {node.p['value']} ({node.p.get('dtype') or 'Python scalar'})")
            elif node.op == "const" and node.p.get("dtype") is None and unsigned and _negative_int(node.p["value"]):
                # A negative Python scalar meeting an unsigned value is promoted to uint64 under x64:
                # 2**64 - |c|, which uint32 cannot hold (x32 JAX wraps it to 2**32 - |c|).
                found.append(f"constant {node.p['value']} (Python scalar, promoted to an unsigned type)")
            elif OPS[node.op].hazard:
                found.append(node.op)
        return found

    def source(self) -> str:
        """The program as the JAX code it stands for (for reading, see `OPS` for each op)."""
        n_in = len(self.inputs)
        lines = [f"def f({', '.join(f'v{i}' for i in range(n_in))}):"
                 + "  # " + ", ".join(f"v{i}: {x.dtype}{list(x.shape)}{' special' if x.special else ''}"
                                      for i, x in enumerate(self.inputs))]
        for k, node in enumerate(self.nodes):
            lines.append(f"    v{n_in + k} = {OPS[node.op].render(node)}")
        lines.append(f"    return ({', '.join(f'v{i}' for i in self.outputs)},)")
        return "\n".join(lines)


def _negative_int(text: str) -> bool:
    import ast
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return False
    return isinstance(value, int) and not isinstance(value, bool) and value < 0


def input_values(spec: Input) -> np.ndarray:
    rng = np.random.default_rng(spec.seed)
    dtype = DTYPES[spec.dtype]
    shape = spec.shape
    size = int(np.prod(shape))
    if is_bool(dtype):
        return rng.random(shape) < 0.5
    if is_int(dtype):
        info = np.iinfo(narrow_dtype(dtype))
        lo, hi = (max(info.min, -50), min(info.max, 50))
        values = rng.integers(lo, hi + 1, size, dtype=np.int64)
        if spec.special and size:
            extremes = np.array([info.min, info.max, 0, -1 if info.min < 0 else 1, info.max // 3], np.int64)
            pick = rng.random(size) < 0.4
            values[pick] = rng.choice(extremes, int(pick.sum()))
        return values.astype(dtype).reshape(shape)
    base = dtype if not is_complex(dtype) else np.dtype(np.float64)
    parts = [rng.normal(0, 2.0, size) for _ in range(2 if is_complex(dtype) else 1)]
    if spec.special and size:
        extremes = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30, -1e-30, 3.0e38, 1e300, 5e-324, 0.5])
        for part in parts:
            pick = rng.random(size) < 0.4
            part[pick] = rng.choice(extremes, int(pick.sum()))
    with np.errstate(over="ignore"):
        if is_complex(dtype):  # part by part: `re + 1j * im` would lose -0.0 and inf beside nan
            values = np.empty(size, dtype)
            values.real, values.imag = parts[0], parts[1]
        else:
            values = parts[0].astype(base)
    return values.reshape(shape)


# --------------------------------------------------------------------------------------
# constants: values are strings (pasteable, no eval: parsed by int/float/complex)

INT_CONSTS = ["0", "1", "-1", "3", "7", "-128", "255", "65535", "2147483647", "-2147483648",
              "4294967295", "1099511627776", "-8589934592"]
FLOAT_CONSTS = ["0.0", "-0.0", "0.5", "2.5", "-3.75", "0.1", "1e-3", "1e30", "-1e30", "1e-40",
                "1e-50", "nan", "inf", "-inf", "3.4028234663852886e+38", "1e39", "-1e300", "1.7976931348623157e+308"]
COMPLEX_CONSTS = ["(1+2j)", "(-0.5+0j)", "1j", "(1e-50+3j)", "(1e300+1j)"]
CONST_DTYPES = [None, None, None, "int64", "uint64", "float64", "complex128", "int32", "float32",
                "int8", "uint8", "bool"]

INT32_RANGE = (-(2**31), 2**31 - 1)
UINT32_RANGE = (0, 2**32 - 1)
SENTINELS = {2**63 - 1, -(2**63), 2**64 - 1}
F32_MAX = float(np.finfo(np.float32).max)


def parse_number(text: str):
    """'7' -> 7, '2.5' -> 2.5, 'nan' -> nan, '(1+2j)' -> (1+2j). No eval."""
    text = text.strip()
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return complex(text)


def const_value(p: dict[str, Any]):
    """The Python scalar, or the numpy array a const node stands for."""
    value = parse_number(p["value"])
    dtype = p.get("dtype")
    if dtype is None:
        return value
    np_dtype = DTYPES[dtype]
    shape = tuple(p.get("shape", ()))
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if p.get("dense") and shape:
            size = int(np.prod(shape))
            ramp = np.arange(1, size + 1)
            if is_bool(np_dtype):
                return ((ramp % 2) == (value != 0)).reshape(shape)
            if is_int(np_dtype):
                v = int(value)  # large magnitudes step toward zero, small ones away from it
                values = [v - k % 3 if v > 2 else v + k % 3 if v < -2 or v >= 0 else v - k % 3 for k in range(size)]
                return np.array(values, dtype=object).astype(np_dtype).reshape(shape)
            return (np.full(size, value, dtype=np.complex128 if is_complex(np_dtype) else np.float64)
                    * np.linspace(1.0, 0.5, size)).astype(np_dtype).reshape(shape)
        if is_int(np_dtype):
            return np.full(shape, int(value), dtype=object).astype(np_dtype)
        return np.full(shape, value, dtype=np_dtype)


def const_fits(p: dict[str, Any]) -> bool:
    """Can the constant be written at all in its dtype (and for a Python int, in int64)?"""
    value = parse_number(p["value"])
    dtype = p.get("dtype")
    if dtype is None:
        return not isinstance(value, int) or -(2**63) <= value < 2**63
    np_dtype = DTYPES[dtype]
    if is_bool(np_dtype):
        return isinstance(value, int) and value in (0, 1)
    if is_int(np_dtype):
        info = np.iinfo(np_dtype)
        return isinstance(value, int) and info.min <= value <= info.max and not (
            p.get("dense") and (value + 2 > info.max and value <= 2 or value - 2 < info.min and value >= -2))
    if is_float(np_dtype):
        return not isinstance(value, complex)
    return True


def const_is_hazard(p: dict[str, Any]) -> bool:
    """A constant whose 64-bit value the 32-bit type cannot hold: x64guard must refuse it
    (unless JAX folds it away). Exact 64-bit sentinels are not hazards when written as
    iinfo/finfo of the dtype (ops `*_info`), but a raw numpy int64 max is (x32 JAX wraps it
    to -1 while x64guard maps sentinels to the 32-bit sentinel), so it is never generated."""
    value = parse_number(p["value"])
    dtype = p.get("dtype")
    parts = [value.real, value.imag] if isinstance(value, complex) else [value]
    if dtype is None or DTYPES[dtype].itemsize == 8 or dtype == "complex128":
        for v in parts:
            if isinstance(v, int):
                lo, hi = UINT32_RANGE if dtype == "uint64" else INT32_RANGE
                if not lo <= v <= hi:
                    return True
            elif math.isfinite(v) and abs(v) > F32_MAX:
                return True
    return False


# --------------------------------------------------------------------------------------
# ops


@dataclass(frozen=True)
class OpSpec:
    name: str
    arity: int
    kinds: tuple[Callable[[np.dtype], bool], ...]
    fn: Callable[..., Any]                        # fn(params: dict, *operands)
    template: str                                 # how the node reads in `Program.source`
    params: Callable[..., tuple] | None = None    # params(draw, avals) -> ((name, value), ...)
    min_ndim: int = 0
    nonempty: bool = False                        # no zero-size operand
    hazard: bool = False                          # may only trace under x64 (refusal expected)
    weight: int = 2

    def render(self, node: Node) -> str:
        names = [f"v{i}" for i in node.args]
        return self.template.format(*names, **{k: _show(v) for k, v in node.params})


def _show(v) -> str:
    return repr(v) if not isinstance(v, str) else v


OPS: dict[str, OpSpec] = {}


def op(name, arity, kinds, fn, template, params=None, **kw) -> None:
    if not isinstance(kinds, tuple):
        kinds = (kinds,) * arity
    OPS[name] = OpSpec(name, arity, kinds, fn, template, params, **kw)


def unary(name, f, kinds=NUM, template=None, **kw):
    op(name, 1, kinds, lambda p, x: f(x), template or f"{name}({{0}})", **kw)


def binary(name, f, kinds=NUM, template=None, **kw):
    op(name, 2, kinds, lambda p, x, y: f(x, y), template or f"{name}({{0}}, {{1}})", **kw)


# elementwise, unary
unary("neg", jnp.negative, NUM, "jnp.negative({0})")
unary("abs", jnp.abs, NUM, "jnp.abs({0})")
unary("sign", jnp.sign, NUM, "jnp.sign({0})")
for _name in ("sin", "cos", "tan", "tanh", "arctan", "arcsinh", "sinh", "exp", "exp2", "expm1", "log", "log1p",
              "sqrt", "cbrt", "floor", "ceil", "trunc", "square", "reciprocal", "log2"):
    _kinds = FLOAT if _name in ("cbrt", "floor", "ceil", "trunc", "log2", "exp2", "arcsinh") else (
        NUM if _name == "square" else INEXACT)
    unary(_name, getattr(jnp, _name), _kinds, f"jnp.{_name}({{0}})")
unary("rsqrt", lax.rsqrt, INEXACT, "lax.rsqrt({0})")
unary("erf", jsp_special.erf, FLOAT, "jax.scipy.special.erf({0})")
unary("erfc", jsp_special.erfc, FLOAT, "jax.scipy.special.erfc({0})")
unary("lgamma", lax.lgamma, FLOAT, "lax.lgamma({0})", weight=1)
unary("sigmoid", jax.nn.sigmoid, FLOAT, "jax.nn.sigmoid({0})")
unary("relu", jax.nn.relu, FLOAT, "jax.nn.relu({0})  # custom_jvp")
unary("softplus", jax.nn.softplus, FLOAT, "jax.nn.softplus({0})")
unary("gelu", jax.nn.gelu, FLOAT, "jax.nn.gelu({0})")
unary("conj", jnp.conj, NUM, "jnp.conj({0})")
unary("real", jnp.real, NUM, "jnp.real({0})")
unary("imag", jnp.imag, NUM, "jnp.imag({0})")
unary("angle", jnp.angle, INEXACT, "jnp.angle({0})")
unary("isnan", jnp.isnan, ANY, "jnp.isnan({0})")
unary("isfinite", jnp.isfinite, ANY, "jnp.isfinite({0})")
unary("logical_not", jnp.logical_not, ANY, "jnp.logical_not({0})")
unary("invert", jnp.invert, INTB, "jnp.invert({0})")
unary("popcount", lax.population_count, INT, "lax.population_count({0})")
unary("clz", lax.clz, INT, "lax.clz({0})")
unary("nan_to_num", jnp.nan_to_num, INEXACT, "jnp.nan_to_num({0})  # finfo(dtype).max sentinels")
unary("int_max_clip", lambda x: jnp.minimum(x, jnp.iinfo(x.dtype).max), INT,
      "jnp.minimum({0}, jnp.iinfo({0}.dtype).max)")
unary("int_min_where", lambda x: jnp.where(x > 0, x, jnp.iinfo(x.dtype).min), INT,
      "jnp.where({0} > 0, {0}, jnp.iinfo({0}.dtype).min)")
unary("float_max_clip", lambda x: jnp.clip(x, jnp.finfo(x.dtype).min, jnp.finfo(x.dtype).max), FLOAT,
      "jnp.clip({0}, jnp.finfo({0}.dtype).min, jnp.finfo({0}.dtype).max)")
unary("add_iota", lambda x: x + jnp.arange(x.shape[-1]), NUM, "{0} + jnp.arange({0}.shape[-1])  # i64 iota",
      min_ndim=1)
unary("mul_linspace", lambda x: x * jnp.linspace(0.0, 1.0, x.shape[-1]), NUM,
      "{0} * jnp.linspace(0.0, 1.0, {0}.shape[-1])", min_ndim=1)
unary("zeros_like", lambda x: jnp.zeros_like(x) + x, ANY, "jnp.zeros_like({0}) + {0}", weight=1)

# elementwise, binary
for _name, _kinds in (("add", ANY), ("subtract", NUM), ("multiply", ANY), ("divide", NUM),
                      ("floor_divide", REALNUM), ("remainder", REALNUM), ("maximum", ANY), ("minimum", ANY),
                      ("arctan2", FLOAT), ("hypot", FLOAT), ("logaddexp", FLOAT), ("copysign", FLOAT),
                      ("nextafter", FLOAT), ("fmod", REALNUM), ("power", INEXACT),
                      ("bitwise_and", INTB), ("bitwise_or", INTB), ("bitwise_xor", INTB),
                      ("left_shift", INT), ("right_shift", INT),
                      ("less", REAL), ("less_equal", REAL), ("equal", ANY), ("not_equal", ANY),
                      ("greater", REAL), ("greater_equal", REAL), ("logical_and", ANY), ("logical_or", ANY)):
    binary(_name, getattr(jnp, _name), _kinds, f"jnp.{_name}({{0}}, {{1}})")
binary("shift_right_logical", lax.shift_right_logical, INT, "lax.shift_right_logical({0}, {1})", weight=1)
binary("lax_complex", lax.complex, FLOAT, "lax.complex({0}, {1})", weight=1)
op("where", 3, (ANY, ANY, ANY), lambda p, c, x, y: jnp.where(c, x, y), "jnp.where({0}, {1}, {2})")
op("clip", 3, (REALNUM, REALNUM, REALNUM), lambda p, x, lo, hi: jnp.clip(x, lo, hi), "jnp.clip({0}, {1}, {2})",
   weight=1)


def _p_integer_pow(draw, avals):
    from hypothesis import strategies as st
    return (("n", draw(st.sampled_from([0, 1, 2, 3, 5, -1, -2]))),)


op("integer_pow", 1, NUM, lambda p, x: lax.integer_pow(x, p["n"]), "lax.integer_pow({0}, {n})", _p_integer_pow)


def _p_reduce_precision(draw, avals):
    from hypothesis import strategies as st
    return (("exponent_bits", draw(st.sampled_from([2, 5, 8, 11]))),
            ("mantissa_bits", draw(st.sampled_from([0, 3, 10, 23, 30, 52]))))


op("reduce_precision", 1, FLOAT, lambda p, x: lax.reduce_precision(x, p["exponent_bits"], p["mantissa_bits"]),
   "lax.reduce_precision({0}, {exponent_bits}, {mantissa_bits})", _p_reduce_precision)


def _p_round(draw, avals):
    from hypothesis import strategies as st
    return (("decimals", draw(st.sampled_from([0, 0, 1, 2]))),)


op("round", 1, REALNUM, lambda p, x: jnp.round(x, p["decimals"]), "jnp.round({0}, {decimals})", _p_round)


# casts
def _p_dtype(draw, avals):
    from hypothesis import strategies as st
    return (("dtype", draw(st.sampled_from(list(DTYPES) + list(WIDE)))),)


op("astype", 1, ANY, lambda p, x: x.astype(DTYPES[p["dtype"]]), "{0}.astype(jnp.{dtype})", _p_dtype, weight=4)
op("convert_element_type", 1, ANY, lambda p, x: lax.convert_element_type(x, DTYPES[p["dtype"]]),
   "lax.convert_element_type({0}, jnp.{dtype})", _p_dtype, weight=1)


def _same_width(dtype: np.dtype) -> list[str]:
    return [n for n, d in DTYPES.items() if d.itemsize == np.dtype(dtype).itemsize and not is_bool(d)
            and not is_complex(d) and n != np.dtype(dtype).name]


def _p_bitcast(draw, avals):
    from hypothesis import strategies as st
    choices = _same_width(avals[0].dtype) or ["int8"]
    return (("dtype", draw(st.sampled_from(choices))),)


def _p_bitcast_width(draw, avals):
    from hypothesis import strategies as st
    return (("dtype", draw(st.sampled_from(["int32", "uint32", "float32", "uint8", "int16"]))),)


op("bitcast", 1, REALNUM, lambda p, x: lax.bitcast_convert_type(x, DTYPES[p["dtype"]]),
   "lax.bitcast_convert_type({0}, jnp.{dtype})", _p_bitcast)
op("bitcast_width", 1, lambda d: REALNUM(d) and np.dtype(d).itemsize == 8,
   lambda p, x: lax.bitcast_convert_type(x, DTYPES[p["dtype"]]),
   "lax.bitcast_convert_type({0}, jnp.{dtype})  # width changes: must be refused", _p_bitcast_width,
   hazard=True, weight=1)


# reductions
def _p_axis(draw, avals, allow_none=True):
    from hypothesis import strategies as st
    ndim = len(avals[0].shape)
    return (("axis", draw(st.sampled_from(([None] if allow_none else []) + list(range(ndim))))),)


def _p_axis_int(draw, avals):
    return _p_axis(draw, avals, allow_none=False)


for _name, _kinds in (("sum", ANY), ("prod", ANY), ("max", ANY), ("min", ANY), ("mean", NUM), ("any", ANY),
                      ("all", ANY), ("argmax", REAL), ("argmin", REAL), ("count_nonzero", ANY),
                      ("nansum", NUM), ("ptp", REALNUM)):
    op(_name, 1, _kinds, (lambda f: lambda p, x: f(x, axis=p["axis"]))(getattr(jnp, _name)),
       f"jnp.{_name}({{0}}, axis={{axis}})", _p_axis)


def _p_var(draw, avals):
    from hypothesis import strategies as st
    return _p_axis(draw, avals) + (("ddof", draw(st.sampled_from([0, 1]))),)


op("var", 1, NUM, lambda p, x: jnp.var(x, axis=p["axis"], ddof=p["ddof"]), "jnp.var({0}, axis={axis}, ddof={ddof})",
   _p_var)
op("std", 1, REALNUM, lambda p, x: jnp.std(x, axis=p["axis"]), "jnp.std({0}, axis={axis})", _p_axis, weight=1)
op("logsumexp", 1, FLOAT, lambda p, x: jsp_special.logsumexp(x, axis=p["axis"]),
   "jax.scipy.special.logsumexp({0}, axis={axis})", _p_axis)
op("norm", 1, INEXACT, lambda p, x: jnp.linalg.norm(x), "jnp.linalg.norm({0})", weight=1)
for _name in ("cumsum", "cumprod"):
    op(_name, 1, NUM, (lambda f: lambda p, x: f(x, axis=p["axis"]))(getattr(jnp, _name)),
       f"jnp.{_name}({{0}}, axis={{axis}})", _p_axis)
op("cummax", 1, REAL, lambda p, x: lax.cummax(x, axis=p["axis"]), "lax.cummax({0}, axis={axis})", _p_axis_int,
   min_ndim=1)
op("cumlogsumexp", 1, FLOAT, lambda p, x: lax.cumlogsumexp(x, axis=p["axis"]), "lax.cumlogsumexp({0}, axis={axis})",
   _p_axis_int, min_ndim=1, weight=1)
op("softmax", 1, FLOAT, lambda p, x: jax.nn.softmax(x, axis=-1), "jax.nn.softmax({0}, axis=-1)", min_ndim=1)


def _p_window(draw, avals):
    from hypothesis import strategies as st
    n = avals[0].shape[0]
    return (("size", draw(st.integers(1, max(1, n)))),)


op("reduce_window_sum", 1, NUM,
   lambda p, x: lax.reduce_window(x, jnp.zeros((), x.dtype), lax.add, (p["size"],) + (1,) * (x.ndim - 1),
                                  (1,) * x.ndim, "VALID"),
   "lax.reduce_window({0}, 0, lax.add, ({size}, 1...), (1...), 'VALID')", _p_window, min_ndim=1, nonempty=True,
   weight=1)


# shapes
def _factorizations(size: int) -> list[tuple[int, ...]]:
    if size == 0:
        return [(0,), (0, 3), (2, 0), (1, 0, 2)]
    shapes = [(size,), (1, size), (size, 1)]
    for a in range(2, size):
        if size % a == 0:
            shapes.append((a, size // a))
            for b in range(2, size // a):
                if (size // a) % b == 0:
                    shapes.append((a, b, size // a // b))
    return shapes


def _p_reshape(draw, avals):
    from hypothesis import strategies as st
    size = int(np.prod(avals[0].shape))
    return (("shape", draw(st.sampled_from(_factorizations(size) + ([()] if size == 1 else [])))),)


op("reshape", 1, ANY, lambda p, x: jnp.reshape(x, p["shape"]), "jnp.reshape({0}, {shape})", _p_reshape)


def _p_perm(draw, avals):
    from hypothesis import strategies as st
    return (("perm", draw(st.sampled_from(list(itertools.permutations(range(len(avals[0].shape))))))),)


op("transpose", 1, ANY, lambda p, x: jnp.transpose(x, p["perm"]), "jnp.transpose({0}, {perm})", _p_perm, min_ndim=2)
op("expand_dims", 1, ANY, lambda p, x: jnp.expand_dims(x, 0), "jnp.expand_dims({0}, 0)", weight=1)
op("broadcast_to", 1, ANY, lambda p, x: jnp.broadcast_to(x, (2,) + x.shape), "jnp.broadcast_to({0}, (2,) + {0}.shape)",
   weight=1)
op("concatenate", 2, (ANY, ANY), lambda p, x, y: jnp.concatenate([x, y], axis=p["axis"]),
   "jnp.concatenate([{0}, {1}], axis={axis})", _p_axis_int, min_ndim=1)
op("stack", 2, (ANY, ANY), lambda p, x, y: jnp.stack([x, y]), "jnp.stack([{0}, {1}])", weight=1)


def _p_slice(draw, avals):
    from hypothesis import strategies as st
    n = avals[0].shape[0]
    start = draw(st.integers(0, n))
    stop = draw(st.integers(start, n))
    return (("start", start), ("stop", stop), ("stride", draw(st.sampled_from([1, 1, 2]))))


op("slice", 1, ANY, lambda p, x: lax.slice_in_dim(x, p["start"], p["stop"], p["stride"]),
   "lax.slice_in_dim({0}, {start}, {stop}, {stride})", _p_slice, min_ndim=1)
op("flip", 1, ANY, lambda p, x: jnp.flip(x, p["axis"]), "jnp.flip({0}, {axis})", _p_axis)


def _p_roll(draw, avals):
    from hypothesis import strategies as st
    return (("shift", draw(st.integers(-3, 5))),) + _p_axis(draw, avals)


op("roll", 1, ANY, lambda p, x: jnp.roll(x, p["shift"], p["axis"]), "jnp.roll({0}, {shift}, {axis})", _p_roll)


def _p_pad(draw, avals):
    from hypothesis import strategies as st
    return (("lo", draw(st.integers(0, 2))), ("hi", draw(st.integers(0, 2))),
            ("mode", draw(st.sampled_from(["constant", "constant", "edge", "reflect", "wrap"]))))


op("pad", 1, ANY, lambda p, x: jnp.pad(x, [(p["lo"], p["hi"])] * x.ndim, mode=p["mode"]),
   "jnp.pad({0}, [({lo}, {hi})] * {0}.ndim, mode={mode!r})", _p_pad, min_ndim=1)
op("tile", 1, ANY, lambda p, x: jnp.tile(x, 2), "jnp.tile({0}, 2)", weight=1)
op("repeat", 1, ANY, lambda p, x: jnp.repeat(x, 2, axis=0 if x.ndim else None), "jnp.repeat({0}, 2, axis=0)",
   weight=1)


def _p_dyn_size(draw, avals):
    from hypothesis import strategies as st
    return (("size", draw(st.integers(0, avals[0].shape[0]))),)


op("dynamic_slice", 2, (ANY, INT), lambda p, x, s: lax.dynamic_slice_in_dim(x, jnp.sum(s), p["size"], axis=0),
   "lax.dynamic_slice_in_dim({0}, jnp.sum({1}), {size}, axis=0)", _p_dyn_size, min_ndim=1)
op("dynamic_update_slice", 2, (ANY, INT),
   lambda p, x, s: lax.dynamic_update_slice_in_dim(x, jnp.flip(lax.slice_in_dim(x, 0, p["size"]), 0), jnp.sum(s), 0),
   "lax.dynamic_update_slice_in_dim({0}, jnp.flip({0}[:{size}], 0), jnp.sum({1}), 0)", _p_dyn_size, min_ndim=1)


def _p_take(draw, avals):
    from hypothesis import strategies as st
    return _p_axis(draw, avals) + (("mode", draw(st.sampled_from(["clip", "wrap", "fill"]))),)


op("take", 2, (ANY, INT), lambda p, x, i: jnp.take(x, i, axis=p["axis"], mode=p["mode"]),
   "jnp.take({0}, {1}, axis={axis}, mode={mode!r})  # mode='fill' fills with the dtype's sentinel", _p_take,
   weight=3)
op("take_along_axis", 2, (ANY, INT), lambda p, x, i: jnp.take_along_axis(x, i, axis=-1, mode="clip"),
   "jnp.take_along_axis({0}, {1}, axis=-1, mode='clip')", min_ndim=1, weight=1)


def _p_scatter(draw, avals):
    from hypothesis import strategies as st
    return (("method", draw(st.sampled_from(["set", "add", "multiply", "min", "max"]))),
            ("mode", draw(st.sampled_from(["drop", "clip"]))))


op("scatter", 3, (ANY, INT, ANY),
   lambda p, x, i, y: getattr(x.at[i], p["method"])(y, mode=p["mode"]),
   "{0}.at[{1}].{method}({2}, mode={mode!r})", _p_scatter, min_ndim=1, weight=3)
op("sort", 1, ANY, lambda p, x: jnp.sort(x, axis=-1), "jnp.sort({0}, axis=-1)", min_ndim=1)
op("argsort", 1, REAL, lambda p, x: jnp.argsort(x, axis=-1, stable=True), "jnp.argsort({0}, stable=True)",
   min_ndim=1)


def _p_top_k(draw, avals):
    from hypothesis import strategies as st
    n = avals[0].shape[-1]
    return (("k", draw(st.integers(0, n))), ("which", draw(st.sampled_from([0, 1]))))


op("top_k", 1, REAL, lambda p, x: lax.top_k(x, p["k"])[p["which"]], "lax.top_k({0}, {k})[{which}]", _p_top_k,
   min_ndim=1)


def _p_side(draw, avals):
    from hypothesis import strategies as st
    return (("side", draw(st.sampled_from(["left", "right"]))),)


op("searchsorted", 2, (REALNUM, REALNUM), lambda p, a, v: jnp.searchsorted(jnp.sort(a.ravel()), v, side=p["side"]),
   "jnp.searchsorted(jnp.sort({0}.ravel()), {1}, side={side!r})", _p_side)

# linear algebra
binary("matmul", jnp.matmul, NUM, "jnp.matmul({0}, {1})", weight=1)
op("gram", 1, NUM, lambda p, x: x @ x.T if x.ndim == 2 else jnp.dot(x, x), "{0} @ {0}.T", min_ndim=1)
op("outer", 2, (NUM, NUM), lambda p, x, y: jnp.outer(x, y), "jnp.outer({0}, {1})")
op("convolve", 2, (INEXACT, INEXACT), lambda p, x, y: jnp.convolve(x, y), "jnp.convolve({0}, {1})", min_ndim=1,
   nonempty=True, weight=1)
op("einsum_trace", 1, NUM, lambda p, x: jnp.einsum("ii->", x), "jnp.einsum('ii->', {0})", min_ndim=2, weight=1)


# linear algebra through LAPACK custom_calls (x64guard renames lapack_d*/z* to s*/c*)
def _square(x):
    return x.ndim == 2 and x.shape[0] == x.shape[1]


def _spd(x):
    return x @ jnp.conj(x.T) + 4 * jnp.eye(x.shape[0], dtype=x.dtype)


op("inv", 1, LINALG, lambda p, x: jnp.linalg.inv(x), "jnp.linalg.inv({0})", min_ndim=2)
op("det", 1, LINALG, lambda p, x: jnp.linalg.det(x), "jnp.linalg.det({0})", min_ndim=2)
op("solve", 2, (LINALG, LINALG), lambda p, a, b: jnp.linalg.solve(a, b), "jnp.linalg.solve({0}, {1})", min_ndim=2)
op("cholesky", 1, LINALG, lambda p, x: jnp.linalg.cholesky(_spd(x)), "jnp.linalg.cholesky({0} @ {0}.T.conj() + 4 * I)",
   min_ndim=2)
op("eigh", 1, LINALG, lambda p, x: jnp.linalg.eigh(x + jnp.conj(x.T))[0], "jnp.linalg.eigh({0} + {0}.T.conj())[0]",
   min_ndim=2)
op("svd", 1, LINALG, lambda p, x: jnp.linalg.svd(x, compute_uv=False), "jnp.linalg.svd({0}, compute_uv=False)",
   min_ndim=2)
op("qr", 1, LINALG, lambda p, x: jnp.linalg.qr(x)[1], "jnp.linalg.qr({0})[1]", min_ndim=2)


# more lowering paths: dot with a preferred type, FFTs, one-hot, bincount, nonzero, interp,
# associative scan, approximate top-k (a type-generic custom_call), float_power (float64
# whatever the input under x64), iota of an explicit 64-bit dtype
op("dot_preferred", 2, (REALNUM, REALNUM),
   lambda p, x, y: jnp.dot(x, y, preferred_element_type=DTYPES[p["dtype"]]),
   "jnp.dot({0}, {1}, preferred_element_type=jnp.{dtype})",
   lambda draw, avals: (("dtype", draw(__import__("hypothesis").strategies.sampled_from(
       ["float64", "int64", "float32", "complex128"]))),), weight=1)
op("fft", 1, INEXACT, lambda p, x: jnp.fft.fft(x), "jnp.fft.fft({0})", min_ndim=1, nonempty=True)
op("rfft", 1, FLOAT, lambda p, x: jnp.fft.rfft(x), "jnp.fft.rfft({0})", min_ndim=1, nonempty=True, weight=1)
op("ifft2", 1, INEXACT, lambda p, x: jnp.fft.ifft2(x), "jnp.fft.ifft2({0})", min_ndim=2, nonempty=True, weight=1)
op("one_hot", 1, INT, lambda p, x: jax.nn.one_hot(x, 4), "jax.nn.one_hot({0}, 4)", weight=1)
op("bincount", 1, INT, lambda p, x: jnp.bincount(jnp.ravel(x) % 5, length=5), "jnp.bincount(jnp.ravel({0}) % 5, length=5)",
   weight=1)
op("nonzero", 1, ANY, lambda p, x: jnp.nonzero(jnp.ravel(x), size=3, fill_value=-1)[0],
   "jnp.nonzero(jnp.ravel({0}), size=3, fill_value=-1)[0]", weight=1)
op("interp", 2, (FLOAT, FLOAT), lambda p, x, xp: jnp.interp(x, jnp.sort(jnp.ravel(xp)), jnp.ravel(xp)),
   "jnp.interp({0}, jnp.sort(jnp.ravel({1})), jnp.ravel({1}))", weight=1)
op("associative_scan", 1, NUM, lambda p, x: lax.associative_scan(jnp.add, x, axis=0),
   "lax.associative_scan(jnp.add, {0}, axis=0)", min_ndim=1, weight=1)
op("approx_max_k", 1, lambda d: np.dtype(d).name in ("float32", "float64"),
   lambda p, x: lax.approx_max_k(x, 1)[p["which"]], "lax.approx_max_k({0}, 1)[{which}]",
   lambda draw, avals: (("which", draw(__import__("hypothesis").strategies.sampled_from([0, 1]))),),
   min_ndim=1, nonempty=True, weight=1)
op("float_power", 2, REALNUM, lambda p, x, y: jnp.float_power(x, y), "jnp.float_power({0}, {1})", weight=1)
op("iota64", 1, NUM, lambda p, x: x + lax.iota(jnp.int64, x.shape[-1]).astype(x.dtype),
   "{0} + lax.iota(jnp.int64, {0}.shape[-1]).astype({0}.dtype)", min_ndim=1, weight=1)
op("cumsum_int64", 1, NUM, lambda p, x: jnp.cumsum(x, dtype=jnp.int64), "jnp.cumsum({0}, dtype=jnp.int64)", weight=1)
op("conv2d", 2, (LINALG, LINALG),
   lambda p, x, w: lax.conv_general_dilated(x[None, None], w[None, None], (1, 1), "SAME")[0, 0],
   "lax.conv_general_dilated({0}[None, None], {1}[None, None], (1, 1), 'SAME')[0, 0]", min_ndim=2, nonempty=True,
   weight=1)


# random numbers drawn at 32 bits in an x64 program (float64 sampling is refused, by design)
def _key(seed: int):
    return jax.random.wrap_key_data(np.array([0, seed], np.uint32))


def _p_seed(draw, avals):
    from hypothesis import strategies as st
    return (("seed", draw(st.integers(0, 2**16))),)


op("random_uniform", 1, ANY, lambda p, x: jax.random.uniform(_key(p["seed"]), x.shape, jnp.float32),
   "jax.random.uniform(key({seed}), {0}.shape, jnp.float32)", _p_seed)
op("random_normal", 1, ANY, lambda p, x: jax.random.normal(_key(p["seed"]), x.shape, jnp.float32) + x,
   "jax.random.normal(key({seed}), {0}.shape, jnp.float32) + {0}", _p_seed)
op("random_randint", 1, ANY, lambda p, x: jax.random.randint(_key(p["seed"]), x.shape, -5, 10, jnp.int32),
   "jax.random.randint(key({seed}), {0}.shape, -5, 10, jnp.int32)", _p_seed, weight=1)
op("random_fold_in", 1, INT,
   lambda p, x: jax.random.bits(jax.random.fold_in(_key(p["seed"]), jnp.sum(x)), (2,), jnp.uint32),
   "jax.random.bits(jax.random.fold_in(key({seed}), jnp.sum({0})), (2,), jnp.uint32)", _p_seed, weight=1)
op("random_permutation", 1, ANY, lambda p, x: jax.random.permutation(_key(p["seed"]), x, axis=0),
   "jax.random.permutation(key({seed}), {0}, axis=0)", _p_seed, min_ndim=1, weight=1)
# A key made from a Python int inside the x64 trace: threefry_seed masks the int64 seed with
# 0xFFFFFFFF, an int64 constant int32 cannot hold; x64guard knows the idiom (the mask is -1 in
# int32, as x32 JAX traces it) and narrows it. A hazard: refused, or identical.
op("random_prng_key", 1, ANY, lambda p, x: jax.random.bits(jax.random.PRNGKey(p["seed"]), x.shape, jnp.uint32),
   "jax.random.bits(jax.random.PRNGKey({seed}), {0}.shape, jnp.uint32)  # refused: seed mask", _p_seed,
   hazard=True, weight=1)


# control flow. Branch bodies are small same-dtype functions named in BODIES.
def _keep(f):
    return lambda v: f(v).astype(v.dtype)


BODIES: dict[str, tuple[Callable, Callable]] = {
    "double": (lambda v: v + v, ANY),
    "square": (lambda v: v * v, ANY),
    "neg": (lambda v: -v, NUM),
    "abs": (jnp.abs, NUM),
    "sin": (jnp.sin, INEXACT),
    "exp": (jnp.exp, INEXACT),
    "invert": (jnp.invert, INTB),
    "halve": (lambda v: v // 2, REALNUM),
    "sum_bcast": (lambda v: v + jnp.sum(v), ANY),
}


def body(name: str) -> Callable:
    return _keep(BODIES[name][0])


def _bodies_for(dtype) -> list[str]:
    return [n for n, (_, k) in BODIES.items() if k(dtype)]


def _p_branches(n):
    def draw_params(draw, avals):
        from hypothesis import strategies as st
        names = _bodies_for(avals[-1].dtype) or ["double"]
        return (("branches", tuple(draw(st.sampled_from(names)) for _ in range(n))),)
    return draw_params


def _p_loop(draw, avals):
    from hypothesis import strategies as st
    names = _bodies_for(avals[-1].dtype) or ["double"]
    return (("body", draw(st.sampled_from(names))), ("n", draw(st.integers(0, 4))))


def _pred(p):
    return jnp.real(jnp.sum(p)) > 0


def _cond(params, p, x):
    a, b = params["branches"]
    return lax.cond(_pred(p), body(a), body(b), x)


def _switch(params, s, x):
    index = jnp.real(jnp.sum(s)).astype(jnp.int32)  # out-of-range indices are clamped
    return lax.switch(index, [body(b) for b in params["branches"]], x)


def _fori(params, x):
    f = body(params["body"])
    return lax.fori_loop(0, params["n"], lambda i, v: f(v + (i % 3).astype(v.dtype)), x)


def _while(params, x):
    f = body(params["body"])

    def cond(c):
        i, v = c
        return (i < params["n"]) & (jnp.real(jnp.sum(v)).astype(jnp.float32) < 1e6)

    return lax.while_loop(cond, lambda c: (c[0] + 1, f(c[1])), (0, x))[1]


def _p_scan(draw, avals):
    from hypothesis import strategies as st
    return (("combine", draw(st.sampled_from(["add", "multiply", "maximum", "subtract"]))),)


def _scan(params, xs):
    combine = getattr(jnp, params["combine"])

    def step(c, x):
        c = combine(c, x).astype(c.dtype)
        return c, c

    carry, ys = lax.scan(step, jnp.zeros(xs.shape[1:], xs.dtype), xs)
    return ys


op("cond", 2, (ANY, ANY), _cond, "lax.cond(jnp.real(jnp.sum({0})) > 0, {branches}[0], {branches}[1], {1})",
   _p_branches(2), weight=3)
op("switch", 2, (NUM, ANY), _switch, "lax.switch(jnp.real(jnp.sum({0})).astype(jnp.int32), {branches}, {1})",
   _p_branches(3), weight=3)
op("fori_loop", 1, ANY, _fori, "lax.fori_loop(0, {n}, lambda i, v: {body}(v + (i % 3).astype(v.dtype)), {0})",
   _p_loop, weight=3)
op("while_loop", 1, ANY, _while,
   "lax.while_loop(lambda c: (c[0] < {n}) & (real(sum(c[1])) < 1e6), lambda c: (c[0] + 1, {body}(c[1])), (0, {0}))[1]",
   _p_loop, weight=3)
op("scan", 1, ANY, _scan, "lax.scan(lambda c, x: 2 * (jnp.{combine}(c, x),), zeros({0}.shape[1:]), {0})[1]", _p_scan,
   min_ndim=1, weight=3)
op("map", 1, ANY, lambda p, x: lax.map(body(p["branches"][0]), x), "lax.map({branches}[0], {0})", _p_branches(1),
   min_ndim=1)
op("vmap_sum", 1, ANY, lambda p, x: jax.vmap(lambda r: jnp.sum(r * r))(x), "jax.vmap(lambda r: jnp.sum(r * r))({0})",
   min_ndim=1)
op("checkpoint", 1, ANY, lambda p, x: jax.checkpoint(body(p["branches"][0]))(x), "jax.checkpoint({branches}[0])({0})",
   _p_branches(1), weight=1)


# constants
def _const(params):
    return const_value(params)


def _render_const(node: Node) -> str:
    p = node.p
    if p.get("dtype") is None:
        return f"{p['value']}  # Python scalar"
    kind = "dense" if p.get("dense") else "full"
    return f"np.{kind}({tuple(p.get('shape', ()))}, {p['value']}, np.{p['dtype']})"


OPS["const"] = OpSpec("const", 0, (), lambda p: _const(p), "", None, weight=0)
object.__setattr__(OPS["const"], "render", _render_const)

N_OPS = len(OPS) - 1   # grammar size, const excluded


# --------------------------------------------------------------------------------------
# building and checking programs


def build_fn(program: Program) -> Callable:
    """The JAX function a program stands for (fresh numpy constants on every call)."""
    n_in = len(program.inputs)

    def f(*inputs):
        values: list[Any] = list(inputs)
        for node in program.nodes:
            values.append(apply(node, [values[i] for i in node.args]))
        return tuple(values[i] for i in program.outputs)

    assert n_in >= 0
    return f


def apply(node: Node, operands: Sequence[Any]):
    spec = OPS[node.op]
    return spec.fn(node.p, *operands)


@dataclass
class Value:
    aval64: Any                 # jax.ShapeDtypeStruct under x64, or None for a constant
    aval32: Any                 # ... under x32; None when the value is a hazard (x32 cannot trace it)
    const: Any = None           # the Python/numpy constant for const nodes
    is_const: bool = False
    tainted: bool = False       # depends on a hazard

    @property
    def dtype(self):
        return self.aval64.dtype

    @property
    def shape(self):
        return self.aval64.shape


def _struct(x) -> Any:
    if isinstance(x, jax.ShapeDtypeStruct):
        return x
    return jax.ShapeDtypeStruct(np.shape(x), jnp.result_type(x), weak_type=isinstance(x, (int, float, complex)))


def eval_node(node: Node, operands: list[Value], wide: bool):
    """The output aval of `node` (x64 on if `wide`), or raise what JAX raises."""
    traced = [i for i, v in enumerate(operands) if not v.is_const]
    structs = [(v.aval64 if wide else v.aval32) for v in operands if not v.is_const]

    def f(*xs):
        it = iter(xs)
        ops = [next(it) if not v.is_const else v.const for v in operands]
        return apply(node, ops)

    assert traced or not operands
    with x64(wide), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = jax.eval_shape(f, *structs)
    if not isinstance(out, jax.ShapeDtypeStruct):
        raise TypeError(f"{node.op} returned {type(out).__name__}")
    return out


def consistent(a64, a32) -> bool:
    return a64.shape == a32.shape and narrow_dtype(a64.dtype) == np.dtype(a32.dtype)


# --------------------------------------------------------------------------------------
# the hypothesis strategy

def programs(min_ops: int = 3, max_ops: int = 8, hazards: bool = True):
    """A strategy of `Program`s (see the module docstring)."""
    from hypothesis import strategies as st

    @st.composite
    def strategy(draw):
        n_inputs = draw(st.integers(1, 3))
        inputs = tuple(Input(draw(st.sampled_from(INPUT_DTYPES)), draw(st.sampled_from(SHAPES)),
                             draw(st.integers(0, 2**16)), draw(st.booleans()))
                       for _ in range(n_inputs))
        values: list[Value] = []
        for spec in inputs:
            dtype = DTYPES[spec.dtype]
            values.append(Value(jax.ShapeDtypeStruct(spec.shape, dtype),
                                jax.ShapeDtypeStruct(spec.shape, narrow_dtype(dtype))))
        nodes: list[Node] = []
        n_ops = draw(st.integers(min_ops, max_ops))
        names = [n for n in OPS if n != "const" and (hazards or not OPS[n].hazard)]
        weights = [OPS[n].weight for n in names]
        weighted = [n for n, w in zip(names, weights) for _ in range(w)]
        attempts = 0
        while len(nodes) < n_ops and attempts < n_ops * 12:
            attempts += 1
            if draw(st.integers(0, 9)) == 0:
                node, value = _draw_const(draw, hazards)
                if node is not None:
                    nodes.append(node)
                    values.append(value)
                continue
            usable = [n for n in weighted if _first_operand_candidates(OPS[n], values)]
            if not usable:
                continue
            name = draw(st.sampled_from(usable))
            made = _draw_node(draw, name, values)
            if made is not None:
                nodes.append(made[0])
                values.append(made[1])
        if not nodes:
            nodes.append(Node("neg", (0,)) if NUM(values[0].dtype) else Node("logical_not", (0,)))
            values.append(None)
        used = {i for node in nodes for i in node.args}
        n_in = len(inputs)
        outputs = tuple(i for i in range(n_in, n_in + len(nodes)) if i not in used)
        return Program(inputs, tuple(nodes), outputs)

    return strategy()


def _draw_const(draw, hazards: bool):
    from hypothesis import strategies as st
    dtype = draw(st.sampled_from(CONST_DTYPES))
    pool = INT_CONSTS if dtype is None or is_int(DTYPES[dtype]) or is_bool(DTYPES[dtype]) else FLOAT_CONSTS
    if dtype is None:
        pool = draw(st.sampled_from([INT_CONSTS, FLOAT_CONSTS, COMPLEX_CONSTS]))
    elif is_complex(DTYPES[dtype]):
        pool = COMPLEX_CONSTS + FLOAT_CONSTS
    elif is_bool(DTYPES[dtype]):
        pool = ["0", "1"]
    value = draw(st.sampled_from(pool))
    params: list[tuple[str, Any]] = [("value", value), ("dtype", dtype)]
    if dtype is not None:
        shape = draw(st.sampled_from([(), (), (3,), (4,), (2, 2)]))
        params.append(("shape", shape))
        if shape and draw(st.booleans()):
            params.append(("dense", True))
    p = dict(params)
    if not const_fits(p) or (dtype is not None and is_int(DTYPES[dtype]) and parse_number(value) in SENTINELS):
        return None, None
    hazard = const_is_hazard(p)
    if hazard and not hazards:
        return None, None
    c = const_value(p)
    with x64(True):
        aval = _struct(c)
    node = Node("const", (), tuple(params))
    return node, Value(aval, None if hazard else aval, const=c, is_const=True, tainted=hazard)


def _first_operand_candidates(spec: OpSpec, values: list[Value]) -> list[int]:
    if not spec.kinds:
        return []
    kind = spec.kinds[0]
    return [i for i, v in enumerate(values) if v is not None and kind(v.dtype) and len(v.shape) >= spec.min_ndim
            and (not spec.nonempty or int(np.prod(v.shape)) > 0)]


def _draw_node(draw, name: str, values: list[Value]):
    from hypothesis import strategies as st
    spec = OPS[name]
    operands: list[int] = []
    for position, kind in enumerate(spec.kinds):
        candidates = (_first_operand_candidates(spec, values) if position == 0 else
                      [i for i, v in enumerate(values) if v is not None and kind(v.dtype)
                       and (not spec.nonempty or int(np.prod(v.shape)) > 0)])
        if not candidates:
            return None
        # Prefer recent values (deeper programs), but any earlier one may be read.
        operands.append(draw(st.sampled_from(candidates[::-1])))
    chosen = [values[i] for i in operands]
    if chosen and all(v.is_const for v in chosen):
        return None  # JAX would fold it on the host; not a program x64guard sees
    try:
        params = spec.params(draw, [v.aval64 for v in chosen]) if spec.params else ()
    except (ValueError, IndexError):
        return None
    node = Node(name, tuple(operands), tuple(params))
    try:
        a64 = eval_node(node, chosen, wide=True)
    except Exception:
        return None
    tainted = spec.hazard or any(v.tainted for v in chosen)
    a32 = None
    if not tainted:
        try:
            a32 = eval_node(node, chosen, wide=False)
        except Exception:
            return None
        if not consistent(a64, a32):
            return None
    if int(np.prod(a64.shape)) > 64:
        return None
    return node, Value(a64, a32, tainted=tainted)


__all__ = ["Program", "Input", "Node", "OPS", "N_OPS", "programs", "DTYPES", "WIDE", "build_fn"]
