"""Hostile input for x64guard: mutations of valid MLIR text, bytecode and portable artifacts.

`make_case(seeds, run_seed, index)` is a pure function of its arguments: the parent test,
the child processes that run the cases and anyone reproducing a failure regenerate exactly
the same bytes. Mutations: byte and bit flips, truncation, duplicated / deleted / swapped
sections, splices of two inputs, MLIR tokens inserted at random, numbers replaced by extreme
ones, element types swapped for exotic ones, deep nesting (regions, types, attributes,
brackets, locations, modules), very long identifiers, strings and locations, non-UTF-8
bytes, NUL bytes, a BOM, and bytecode header/varint corruption.

Nesting of angle brackets stays at depths the MLIR parser survives today
(`FUZZ_ANGLE_DEPTHS`); the depths that still crash it are in test_open_bugs.py.

`python -m tests.reliability.hostile child SEEDS_DIR FAMILY RUN_SEED START STOP` runs cases in a
child process: for each case it prints `START <index>` on stderr first (so that the parent
can name the case that killed it) and one JSON line on stdout with each API's outcome.
"""

from __future__ import annotations

import json
import os
import random
import re
import sys
from pathlib import Path

# Nesting depths for the random mutations. x64guard refuses text nested deeper than
# modules.MAX_NESTING in {([ before the MLIR parser (which recurses on the C stack) sees it;
# '<' is not counted yet, so nested tuple types stay shallow here (test_open_bugs.py has
# the deep ones).
FUZZ_DEPTHS = (1, 2, 10, 100, 999, 1000, 1001, 5000, 50000)
FUZZ_ANGLE_DEPTHS = (1, 2, 8, 50, 200)

TOKENS = [
    "{", "}", "(", ")", "<", ">", "[", "]", ",", ":", "=", "->", "%", "%0", "%arg0", "^bb0", "^bb1(%a: tensor<f64>):",
    "@main", "func.func", "module", "return", "stablehlo.constant", "stablehlo.add", "stablehlo.while",
    "stablehlo.custom_call @lapack_dgesdd_ffi", "stablehlo.bitcast_convert", "stablehlo.composite \"chlo.erf\"",
    "tensor<", "tensor<?xf64>", "tensor<*xf64>", "tensor<0xf64>", "tensor<4x?xi64>", "complex<f64>", "ui64", "si64",
    "i64", "f64", "f128", "f80", "i1024", "index", "!stablehlo.token", "tuple<f64, i64>", "vector<4xf64>",
    "memref<4xf64>", "dense<", "dense<\"0x", "dense_resource<blob>", "dense<(1.0, 2.0)>", "array<i64: 1, 2>",
    "#loc", "loc(", "loc(unknown)", "loc(\"a\":1:2)", "#stablehlo.", "{-#", "#-}", "dialect_resources", "\"", "\\",
    "0x7FF8000000000000", "9223372036854775807", "-9223372036854775808", "18446744073709551615",
    "1.7976931348623157e+308", "nan", "inf", "\x00", "\xff", "// comment\n", "\n", " ", "\t",
]
EXTREME_NUMBERS = [
    "0", "-0", "-0.0", "1e999", "-1e999", "1e-400", "nan", "inf", "0x7FF0000000000001", "0xFFFFFFFFFFFFFFFFFF",
    "18446744073709551616", "-9223372036854775809", "340282366920938463463374607431768211456",
    "9" * 400, "0." + "0" * 400 + "1", "1" * 5000, "-" + "7" * 1000, "2147483648", "4294967296",
]
EXOTIC_TYPES = [
    "f128", "f80", "bf16", "f16", "f8E4M3FN", "i128", "i65", "i0", "ui1", "si64", "index", "tuple<f64, i64>",
    "vector<4xf64>", "complex<i64>", "complex<f16>", "!unknown.type", "!stablehlo.token", "none", "f64x",
]
BAD_UTF8 = [b"\xff", b"\xfe\xff", b"\xc0\x80", b"\xed\xa0\x80", b"\x80", b"\xc3", b"\xf4\x90\x80\x80",
            b"\xe2\x82", b"\xf0\x9f\x98"]


def _flip_bytes(rng, data: bytes, n: int) -> bytes:
    out = bytearray(data)
    for _ in range(n):
        if not out:
            break
        i = rng.randrange(len(out))
        out[i] ^= rng.randrange(1, 256)
    return bytes(out)


def _flip_bits(rng, data: bytes, n: int) -> bytes:
    out = bytearray(data)
    for _ in range(n):
        if not out:
            break
        i = rng.randrange(len(out))
        out[i] ^= 1 << rng.randrange(8)
    return bytes(out)


def _section(rng, data: bytes, max_fraction: float = 0.25) -> tuple[int, int]:
    if len(data) < 2:
        return 0, len(data)
    length = rng.randrange(1, max(2, int(len(data) * max_fraction)))
    start = rng.randrange(0, max(1, len(data) - length))
    return start, start + length


def _nest(kind: str, depth: int) -> str:
    """A module nested `depth` levels deep in one way (built by repetition: linear time)."""
    if kind == "regions":
        body = '"t.wrap"() ({ ' * depth + '"t.leaf"() : () -> ()' + ' }) : () -> ()' * depth
        return f"func.func @main(%x: tensor<f64>) -> tensor<f64> {{ {body} return %x : tensor<f64> }}"
    if kind == "case":
        opens = [f'%r{d} = "stablehlo.case"(%i) ({{ ' for d in range(depth - 1, -1, -1)]
        closes = [f" }}) : (tensor<i32>) -> tensor<i64> stablehlo.return %r{d} : tensor<i64>" for d in range(depth)]
        inner = "".join(opens) + "stablehlo.return %x : tensor<i64>" + "".join(closes)
        return (f"func.func @main(%i: tensor<i32>, %x: tensor<i64>) -> tensor<i64> {{ %r = \"stablehlo.case\"(%i) "
                f"({{ {inner} }}) : (tensor<i32>) -> tensor<i64> return %r : tensor<i64> }}")
    if kind == "tuple":
        t = "tuple<" * depth + "f64" + ", i64>" * depth
        return f"func.func @main(%x: {t}) -> {t} {{ return %x : {t} }}"
    if kind == "dense":
        return ("func.func @main() -> tensor<f64> { %0 = stablehlo.constant dense<" + "[" * depth + "1.0"
                + "]" * depth + "> : tensor<f64> return %0 : tensor<f64> }")
    if kind == "attr":
        return "func.func @main() attributes {a = " + "[" * depth + "]" * depth + "} { return }"
    if kind == "dict":
        return "func.func @main() attributes {a = " + "{b = " * depth + "1 : i64" + "}" * depth + "} { return }"
    if kind == "module":
        return "module { " * depth + "}" * depth
    if kind == "loc":
        loc = "loc(callsite(" * depth + 'loc("a.py":1:2)' + ' at "b.py":3:4))' * depth
        return f"func.func @main(%x: tensor<i64>) -> tensor<i64> {{ return %x : tensor<i64> {loc} }}"
    if kind == "parens":
        return "(" * depth + ")" * depth
    raise ValueError(kind)


NEST_KINDS = ("regions", "case", "tuple", "dense", "attr", "dict", "module", "loc", "parens")


def _long(rng, n: int) -> str:
    alphabet = "abcdefghijklmnopqrstuvwxyz_0123456789$."
    return "".join(rng.choice(alphabet) for _ in range(64)) * (n // 64 + 1)


def make_case(seeds: dict[str, bytes], run_seed: int, index: int) -> tuple[str, bytes | str]:
    """(description, input) of hostile case `index` of run `run_seed`. `seeds` maps a name
    ('text:...', 'bytecode:...', 'artifact:...') to valid input bytes."""
    rng = random.Random(f"{run_seed}/{index}")
    names = sorted(seeds)
    name = rng.choice(names)
    data = seeds[name]
    is_text = name.startswith("text:")
    text = data.decode("utf-8") if is_text else None
    kinds = ["byte_flip", "bit_flip", "truncate", "duplicate", "delete", "swap", "splice", "tokens", "number",
             "type", "nest", "long", "non_utf8", "nul", "bom", "bytecode_header", "varint", "stack"]
    kind = rng.choice(kinds)
    desc = f"{kind} of {name}"

    def as_str_or_bytes(blob: bytes) -> bytes | str:
        """Text seeds are passed as str when they still decode (both API paths are tried)."""
        if is_text and rng.random() < 0.5:
            try:
                return blob.decode("utf-8")
            except UnicodeDecodeError:
                return blob
        return blob

    if kind == "byte_flip":
        n = rng.choice([1, 1, 2, 4, 8, 32, 128])
        return f"{desc}: {n} byte(s)", as_str_or_bytes(_flip_bytes(rng, data, n))
    if kind == "bit_flip":
        n = rng.choice([1, 2, 3, 16])
        return f"{desc}: {n} bit(s)", as_str_or_bytes(_flip_bits(rng, data, n))
    if kind == "truncate":
        cut = rng.choice([0, 1, 3, 4, 5, 8, 16, rng.randrange(len(data) + 1), len(data) - 1, len(data) // 2])
        return f"{desc} at {cut}/{len(data)}", as_str_or_bytes(data[:max(0, cut)])
    if kind == "duplicate":
        a, b = _section(rng, data)
        where = rng.choice([b, rng.randrange(len(data) + 1)])
        times = rng.choice([1, 1, 2, 10])
        out = data[:where] + data[a:b] * times + data[where:]
        return f"{desc}: [{a}:{b}] x{times} inserted at {where}", as_str_or_bytes(out)
    if kind == "delete":
        a, b = _section(rng, data)
        return f"{desc}: [{a}:{b}] deleted", as_str_or_bytes(data[:a] + data[b:])
    if kind == "swap":
        a, b = _section(rng, data, 0.1)
        c, d = _section(rng, data, 0.1)
        if c < a:
            (a, b), (c, d) = (c, d), (a, b)
        if c < b:
            c, d = b, max(b, d)
        out = data[:a] + data[c:d] + data[b:c] + data[a:b] + data[d:]
        return f"{desc}: [{a}:{b}] <-> [{c}:{d}]", as_str_or_bytes(out)
    if kind == "splice":
        other = seeds[rng.choice(names)]
        i, j = rng.randrange(len(data) + 1), rng.randrange(len(other) + 1)
        return f"{desc}: first {i} bytes + another seed from {j}", as_str_or_bytes(data[:i] + other[j:])
    if kind == "tokens":
        out = data
        n = rng.choice([1, 1, 3, 10])
        for _ in range(n):
            token = rng.choice(TOKENS).encode("utf-8", "surrogateescape") if rng.random() < 0.9 else \
                rng.choice(TOKENS).encode() * rng.randrange(2, 200)
            i = rng.randrange(len(out) + 1)
            out = out[:i] + token + out[i:]
        return f"{desc}: {n} token(s) inserted", as_str_or_bytes(out)
    if kind == "number" and is_text:
        numbers = [m for m in re.finditer(rb"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?", data)]
        out = data
        for m in rng.sample(numbers, min(len(numbers), rng.choice([1, 2, 5]))):
            new = rng.choice(EXTREME_NUMBERS).encode()
            out = out.replace(m.group(0), new, 1) if rng.random() < 0.5 else out[:m.start()] + new + out[m.end():]
        return f"{desc}: numbers replaced by extremes", as_str_or_bytes(out)
    if kind == "type" and is_text:
        wide = rng.choice([b"f64", b"i64", b"ui64", b"complex<f64>", b"i32", b"f32"])
        new = rng.choice(EXOTIC_TYPES).encode()
        count = rng.choice([1, -1])
        return (f"{desc}: {wide.decode()} -> {new.decode()} ({'first' if count == 1 else 'all'})",
                as_str_or_bytes(data.replace(wide, new, count)))
    if kind == "nest":
        nest_kind = rng.choice(NEST_KINDS)
        depths = FUZZ_ANGLE_DEPTHS if nest_kind == "tuple" else FUZZ_DEPTHS
        depth = rng.choice(depths)
        out = _nest(nest_kind, depth)
        return f"nest {nest_kind} x{depth}", out if rng.random() < 0.5 else out.encode()
    if kind == "long":
        n = rng.choice([1_000, 100_000, 1_000_000])
        ident = _long(rng, n)[:n]
        variants = [
            (b"@main", ("@" + ident).encode()), (b"%arg0", ("%" + ident).encode()),
            (b"func.func", ("func.func" + ident).encode()), (b"@jit_", ("@jit_" + ident).encode()),
            (b'loc("', ('loc("' + ident).encode()), (b"stablehlo.add", ("stablehlo." + ident).encode()),
            (b'"0x', ('"0x' + "0" * n).encode()), (b"tensor<", ("tensor<" + "1x" * min(n // 2, 1000)).encode()),  # rank: MLIR parses it in O(rank^2)
        ]
        old, new = rng.choice(variants)
        if is_text and old in data:
            count = -1 if n <= 1_000 else 1   # every occurrence of a short one, the first of a long one
            return (f"{desc}: {old.decode()} -> {len(new)}-char identifier ({'all' if count < 0 else 'first'})",
                    as_str_or_bytes(data.replace(old, new, count)))
        out = f"func.func @{ident}(%{ident}: tensor<f64> loc(\"{ident}\":1:1)) -> tensor<f64> " \
              f"{{ return %{ident} : tensor<f64> }}"
        return f"long identifiers ({n} chars)", out
    if kind == "non_utf8":
        out = data
        n = rng.choice([1, 2, 5])
        for _ in range(n):
            i = rng.randrange(len(out) + 1)
            out = out[:i] + rng.choice(BAD_UTF8) + out[i:]
        if rng.random() < 0.3:  # as a str with lone surrogates (what surrogateescape decoding gives)
            return f"{desc}: {n} invalid UTF-8 sequence(s), str with surrogates", out.decode("utf-8", "surrogateescape")
        return f"{desc}: {n} invalid UTF-8 sequence(s)", out
    if kind == "nul":
        i = rng.randrange(len(data) + 1)
        return f"{desc}: NUL at {i}", as_str_or_bytes(data[:i] + b"\x00" * rng.choice([1, 4, 1000]) + data[i:])
    if kind == "bom":
        return f"{desc}: UTF-8 BOM / whitespace prefix", as_str_or_bytes(
            rng.choice([b"\xef\xbb\xbf", b" " * 100_000, b"\n\t\r\f\v", b"\xff\xfe"]) + data)
    if kind in ("bytecode_header", "varint") and not is_text:
        out = bytearray(data)
        if kind == "bytecode_header":
            i = rng.randrange(4, min(len(out), 24))
            out[i] = rng.choice([0x00, 0x01, 0x7F, 0x80, 0xFF, out[i] ^ 0xFF])
            return f"{desc}: header byte {i} -> {out[i]:#04x}", bytes(out)
        i = rng.randrange(4, len(out))
        blob = bytes(out[:i]) + b"\xff" * rng.choice([1, 8, 9, 16]) + bytes(out[i:])
        return f"{desc}: 0xFF varint run at {i}", blob
    if kind == "stack":  # several mutations in a row
        blob = data
        for _ in range(rng.choice([2, 3, 5])):
            blob = _flip_bytes(rng, blob, 2)
            a, b = _section(rng, blob, 0.05)
            blob = blob[:a] + blob[b:] if rng.random() < 0.5 else blob[:b] + blob[a:b] + blob[b:]
        return f"{desc}: stacked flips and section edits", as_str_or_bytes(blob)
    # A mutation that does not apply to this seed kind: a plain flip instead.
    return f"byte_flip of {name}: 3 byte(s)", as_str_or_bytes(_flip_bytes(rng, data, 3))


# --------------------------------------------------------------------------------------
# seeds: valid inputs of every kind, written by the parent

HAND_WRITTEN = """
#loc1 = loc("model.py":3:4)
module @seed attributes {mhlo.num_partitions = 1 : i32} {
  func.func public @main(%x: tensor<3xcomplex<f64>>, %y: tensor<2xi64>, %z: tensor<2x2xf64>) -> (tensor<3xcomplex<f64>>, tensor<2xi64>, tensor<2x2xf64>) {
    %c = stablehlo.constant dense<[(1.0, 2.0), (3.0, -0.0), (5.0, 6.0)]> : tensor<3xcomplex<f64>> loc(#loc1)
    %0 = stablehlo.add %x, %c : tensor<3xcomplex<f64>> loc(#loc1)
    %k = stablehlo.constant dense<"0x01000000000000000200000000000000"> : tensor<2xi64>
    %1 = stablehlo.multiply %y, %k : tensor<2xi64>
    %m = stablehlo.constant dense<[[1.5, -2.5], [0x7FF0000000000000, 1.7976931348623157E+308]]> : tensor<2x2xf64>
    %i = stablehlo.constant dense<0> : tensor<i64>
    %w:2 = stablehlo.while(%a = %i, %b = %z) : tensor<i64>, tensor<2x2xf64>
     cond {
      %lim = stablehlo.constant dense<3> : tensor<i64>
      %p = stablehlo.compare LT, %a, %lim, SIGNED : (tensor<i64>, tensor<i64>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    } do {
      %one = stablehlo.constant dense<1> : tensor<i64>
      %a1 = stablehlo.add %a, %one : tensor<i64>
      %b1 = stablehlo.multiply %b, %m : tensor<2x2xf64>
      %u = "acme.widget"(%b1) {kind = f64} : (tensor<2x2xf64>) -> tensor<2x2xf64>
      stablehlo.return %a1, %u : tensor<i64>, tensor<2x2xf64>
    }
    %r = stablehlo.constant dense_resource<blob1> : tensor<2xi64>
    %2 = stablehlo.add %1, %r : tensor<2xi64>
    %3 = stablehlo.convert %w#1 : (tensor<2x2xf64>) -> tensor<2x2xf32>
    %4 = stablehlo.convert %3 : (tensor<2x2xf32>) -> tensor<2x2xf64>
    return %0, %2, %4 : tensor<3xcomplex<f64>>, tensor<2xi64>, tensor<2x2xf64>
  }
}
{-#
  dialect_resources: {
    builtin: {
      blob1: "0x0800000003000000000000000400000000000000"
    }
  }
#-}
"""


def hand_written_bytecode() -> bytes:
    """HAND_WRITTEN as MLIR bytecode: the seed the named bytecode regressions patch."""
    from x64guard.io import modules
    return modules.to_bytecode(modules.load(HAND_WRITTEN.strip())[0])


def patched(data: bytes, offset: int, value: int) -> bytes:
    """`data` with the byte at `offset` set to `value`."""
    out = bytearray(data)
    out[offset] = value
    return bytes(out)


def _jax_seed_function():
    import jax.numpy as jnp
    from jax import lax

    def f(x, n, c):
        y = jnp.where(x > 0, jnp.sin(x) * 1e-3, x.astype(jnp.float64) ** 2)
        k = lax.fori_loop(0, 3, lambda i, v: v + (n * i).astype(v.dtype), y)
        idx = jnp.argsort(k)
        s = jnp.zeros(5, jnp.int64).at[n % 5].add(n)
        z = lax.cond(jnp.sum(s) > 2, lambda a: a * c, lambda a: a - c, c)
        return k[idx], s, jnp.linalg.norm(z), jnp.cumsum(n, dtype=jnp.uint64)

    return f


def write_seeds(directory: Path) -> dict[str, bytes]:
    """Valid inputs of each kind (text with locations, bytecode, portable artifact), as
    files `directory/<name>` and returned as a dict."""
    import warnings

    import numpy as np

    from tests.corpus.oracle import lower_x64
    from x64guard.io import modules

    directory.mkdir(parents=True, exist_ok=True)
    hand = HAND_WRITTEN.strip()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        jax_text = lower_x64(_jax_seed_function(), (np.linspace(-1, 1, 6), np.arange(6, dtype=np.int64),
                                                     np.ones(3, np.complex128)))
    seeds = {"text:hand.mlir": hand.encode(), "text:jax.mlir": jax_text.encode()}
    for name in ("hand.mlir", "jax.mlir"):
        module, _ = modules.load(seeds[f"text:{name}"].decode())
        seeds[f"bytecode:{name}bc"] = modules.to_bytecode(module)
    jax_module, _ = modules.load(jax_text)
    seeds["artifact:jax.vhlo"] = modules.to_portable_artifact(jax_module)
    for name, blob in seeds.items():
        (directory / name.replace(":", "_")).write_bytes(blob)
    return seeds


def read_seeds(directory: Path, family: str = "all") -> dict[str, bytes]:
    """The seeds of one family: 'text' (MLIR text), 'binary' (bytecode and portable
    artifacts) or 'all'."""
    seeds = {p.name.replace("_", ":", 1): p.read_bytes() for p in sorted(Path(directory).iterdir())}
    if family == "text":
        return {k: v for k, v in seeds.items() if k.startswith("text:")}
    if family == "binary":
        return {k: v for k, v in seeds.items() if not k.startswith("text:")}
    return seeds


# --------------------------------------------------------------------------------------
# the child

FORBIDDEN_AUDIT_EVENTS = ("exec", "compile", "pickle.find_class", "marshal.loads", "marshal.load",
                          "os.system", "subprocess.Popen", "os.exec", "os.posix_spawn", "ctypes.dlopen")


def _outcome(fn, data) -> str:
    import x64guard
    try:
        result = fn(data)
    except ValueError as exc:  # X64GuardError is a ValueError
        kind = "X64GuardError" if isinstance(exc, x64guard.X64GuardError) else type(exc).__name__
        first = str(exc).splitlines()[0] if str(exc) else ""
        if not first.startswith("x64guard"):  # the contract holds; the message is the bindings' own
            return f"{kind} (foreign message): {first[:200]}"
        if isinstance(exc, x64guard.X64GuardError) and not exc.findings:
            return f"UNEXPECTED X64GuardError without findings: {first[:300]}"
        return f"{kind}: {first[:200]}"
    except Exception as exc:  # noqa: BLE001 - anything else is what the test looks for
        return f"UNEXPECTED {type(exc).__name__}: {str(exc)[:300]}"
    # It read: a mutation that kept the module valid. The result must be usable.
    try:
        if isinstance(result, x64guard.NarrowResult):
            if not result.module.operation.verify():
                return "UNEXPECTED narrowed module does not verify"
            result.text  # printing must work
            left = _wide_types(result.module)
            if left:
                return f"UNEXPECTED narrowed module still has 64-bit types: {left[:3]}"
            return f"ok: narrowed {sum(result.changes.values())} type(s)"
        str(result)
        return f"ok: {len(result.findings)} finding(s)"
    except Exception as exc:  # noqa: BLE001
        return f"UNEXPECTED after success, {type(exc).__name__}: {str(exc)[:300]}"


def _wide_types(module) -> list[str]:
    """64-bit element types left on results, block arguments and TypeAttrs."""
    from tests.conftest import wide_types
    return wide_types(module)


def child_main(seeds_dir: str, family: str, run_seed: int, start: int, stop: int) -> int:
    import warnings
    warnings.simplefilter("ignore")
    import x64guard
    seeds = read_seeds(Path(seeds_dir), family)
    # Warm up every path once so that lazy imports do not show in the audit log.
    for blob in seeds.values():
        for fn in (x64guard.narrow, x64guard.check):
            try:
                fn(blob)
            except ValueError:
                pass
    events: list[str] = []

    import traceback

    from x64guard.io.isolated_reader import READER_COMMAND

    def hook(event, args):
        # Lazy imports of library modules exec their code objects: not input. Restarting
        # x64guard's own bytecode reader (a fixed command) after input killed it is allowed.
        # Python 3.13's subprocess spawns with os.posix_spawn (argv second), 3.11's does not.
        if event in ("subprocess.Popen", "os.posix_spawn") and tuple(args[1]) == READER_COMMAND:
            return
        if event in FORBIDDEN_AUDIT_EVENTS and not any("importlib._bootstrap" in f.filename
                                                       for f in traceback.extract_stack()):
            events.append(event)

    sys.addaudithook(hook)
    for index in range(start, stop):
        desc, data = make_case(seeds, run_seed, index)
        print(f"START {index}", file=sys.stderr, flush=True)
        events.clear()
        outcomes = {fn.__name__: _outcome(fn, data) for fn in (x64guard.narrow, x64guard.check)}
        record = {"index": index, "case": desc, "size": len(data), **outcomes}
        if events:
            record["audit"] = sorted(set(events))
        print(json.dumps(record), flush=True)
    print(json.dumps({"done": True}), flush=True)
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 7 and sys.argv[1] == "child":
        sys.exit(child_main(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])))
    print(__doc__, file=sys.stderr)
    sys.exit(2)
