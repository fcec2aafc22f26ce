"""passes/kernels.py: the random-word rules rely on facts proved from the module, never on
names. Each test lowers jax.random with the JAX that runs it (so `make test-matrix` checks
every supported release's own lowering), then perturbs one fact: the kernel's name (still
narrowed, to x32 JAX's bits), a rotation, the key-schedule parity, the number of rounds,
the order of the output words, of the counters, of the keys, or the counters' values
(each refused with `rng-bits`), with jax_threefry_partitionable on and off.
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import x64guard
from tests.conftest import kinds, narrow_quietly, refusal
from tests.passes.test_rng import KEY, assert_x32_bits
from tests.runner import lower_x64
from x64guard.passes.kernels import Terms, threefry2x32_terms

R = jax.random
SHAPE = (5,)


def draw(k):
    return R.bits(k, SHAPE, jnp.uint64)


def lowered(partitionable: bool) -> str:
    with jax.threefry_partitionable(partitionable):
        return lower_x64(draw, KEY)


def kernel_name(text: str) -> str:
    (name,) = set(re.findall(r"call @(\w+)\(%\w+, %\w+, %\w+, %\w+\)", text))
    return name


def replaced(text: str, old: str, new: str, *, count: int | None = None) -> str:
    """`text` with `old` (a regex) replaced by `new`; the perturbation must apply."""
    out, n = re.subn(old, new, text)
    assert n >= 1 and (count is None or n == count), (old, n)
    return out


def function_body(text: str, name: str) -> tuple[int, int]:
    start = text.index(f"func.func private @{name}(")
    return start, start + re.search(r"\n  \}", text[start:]).start()


def in_kernel(text: str, old: str, new: str) -> str:
    """A perturbation inside the kernel's function (and what it calls) only."""
    name = kernel_name(text)
    start, end = function_body(text, name)
    return text[:start] + replaced(text[start:end], old, new) + text[end:]


def swap_kernel_outputs(text: str) -> str:
    name = kernel_name(text)
    start, end = function_body(text, name)
    body = text[start:end]
    last = body.rindex("return ")
    line_end = body.index(":", last)
    a, b = body[last + len("return "):line_end].strip().split(", ")
    return text[:start] + body[:last] + f"return {b}, {a} " + body[line_end:] + text[end:]


def swap_call_operands(text: str, first: int, second: int) -> str:
    call = re.search(r"call @\w+\((%[\w#]+), (%[\w#]+), (%[\w#]+), (%[\w#]+)\)", text)
    operands = list(call.groups())
    operands[first], operands[second] = operands[second], operands[first]
    return text[:call.start(1)] + ", ".join(operands) + text[call.end(4):]


@pytest.mark.parametrize("partitionable", [True, False], ids=["partitionable", "original"])
def test_a_renamed_kernel_is_still_proved_and_narrowed_to_x32_bits(partitionable):
    text = lowered(partitionable)
    renamed = replaced(text, rf"@{kernel_name(text)}\b", "@mix_words")
    result = narrow_quietly(renamed)
    assert "rng-words" in kinds(result.findings)
    assert_x32_bits(result, draw, KEY, partitionable=partitionable)


PERTURBATIONS = {
    "rotation": lambda t: in_kernel(t, r"\[13, 15, 26, 6\]", "[13, 15, 26, 7]"),
    "parity": lambda t: in_kernel(t, r"\b466688986\b", "466688987"),
    "rounds": lambda t: in_kernel(t, r"dense<5> : tensor<i64>", "dense<4> : tensor<i64>"),
    "outputs swapped": swap_kernel_outputs,
    "counters swapped": lambda t: swap_call_operands(t, 2, 3),
    "keys swapped": lambda t: swap_call_operands(t, 0, 1),
}


@pytest.mark.parametrize("partitionable", [True, False], ids=["partitionable", "original"])
@pytest.mark.parametrize("perturbation", list(PERTURBATIONS))
def test_a_look_alike_kernel_or_layout_is_refused(perturbation, partitionable):
    text = PERTURBATIONS[perturbation](lowered(partitionable))
    error = refusal(text)
    assert "rng-bits" in kinds(error.findings) and "rng-words" not in kinds(error.findings)
    (finding,) = [f for f in error.findings if f.kind == "rng-bits"]
    assert "could not prove" in finding.message and finding.op == "stablehlo.shift_left"


@pytest.mark.parametrize("partitionable", [True, False], ids=["partitionable", "original"])
def test_other_counters_than_jax_randoms_are_refused(partitionable):
    """The counters are read by evaluating them: shifted by one (iota + 1 instead of
    iota) they make other words, which no rule may rewrite as x32's."""
    text = lowered(partitionable)
    iota = re.search(r"(%\w+) = stablehlo\.iota dim = 0 : (tensor<\d+xui(?:32|64)>)", text)
    assert iota, "jax.random lowers its counters from an iota"
    name, kind = iota.groups()
    element = kind.split("x")[-1].rstrip(">")
    shifted = (f"%counter_iota = stablehlo.iota dim = 0 : {kind}\n"
               f"    %counter_one = stablehlo.constant dense<1> : tensor<{element}>\n"
               f"    %counter_ones = stablehlo.broadcast_in_dim %counter_one, dims = [] : (tensor<{element}>) -> {kind}\n"
               f"    {name} = stablehlo.add %counter_iota, %counter_ones : {kind}")
    error = refusal(text[:iota.start()] + shifted + text[iota.end():])
    assert "rng-bits" in kinds(error.findings) and "rng-words" not in kinds(error.findings)


@pytest.mark.parametrize("partitionable", [True, False], ids=["partitionable", "original"])
def test_the_gpu_lowering_of_the_kernel_is_proved_too(partitionable):
    """On GPUs JAX lowers Threefry with its rounds unrolled (no rotation tables, no loop):
    lowered for CUDA here (no GPU needed), proved, and, run on the CPU, x32 JAX's bits."""
    with jax.threefry_partitionable(partitionable), jax.enable_x64(True):
        text = jax.jit(draw).trace(KEY).lower(lowering_platforms=("cuda",)).as_text()
    assert "stablehlo.while" not in text.split(f"@{kernel_name(text)}(", 2)[-1]
    result = narrow_quietly(text)
    assert "rng-words" in kinds(result.findings)
    assert_x32_bits(result, draw, KEY, partitionable=partitionable)


def test_x32_programs_unaffected():
    """x32 JAX's own program holds the kernel and no 64-bit words: nothing to prove."""
    from tests.corpus.oracle import x64
    with x64(False):
        text = jax.jit(lambda k: R.bits(k, SHAPE, jnp.uint32)).lower(KEY).as_text()
    assert x64guard.check(text, target="x32").ok


# ---- the term algebra ---------------------------------------------------------------------

def test_terms_normalise_associative_commutative_ops_and_fold_constants():
    t = Terms()
    a, b, c = t.arg(0), t.arg(1), t.arg(2)
    assert t.add(a, t.add(b, c)) == t.add(t.add(c, a), b)
    assert t.add(a, t.const(3), t.const(5)) == t.add(t.const(8), a)
    assert t.add(a, t.const(0)) == a and t.xor(a, t.const(0)) == a
    assert t.add(t.const(0xFFFFFFFF), t.const(1)) == t.const(0)
    assert t.xor(a, b) != t.add(a, b)
    assert t.rotate_left(a, 13) == t.or_(t.shift("shr", a, 19), t.shift("shl", a, 13))
    assert t.rotate_left(a, 13) != t.rotate_left(a, 14)


def test_the_specification_matches_numpy_threefry_on_test_vectors():
    """The term builder's Threefry-2x32 is the published one: evaluated on the Random123
    known-answer vectors (also in JAX's tests), it gives their outputs."""
    def evaluate(t: Terms, term: int, env: dict, memo: dict) -> int:
        if term in memo:  # terms share subterms: without a memo the walk is exponential
            return memo[term]
        node = t.nodes[term]
        kind = node[0]
        if kind == "arg":
            out = env[node[1]]
        elif kind == "const":
            out = node[1]
        elif kind in ("shl", "shr"):
            x = evaluate(t, node[1], env, memo)
            out = ((x << node[2]) if kind == "shl" else (x >> node[2])) & 0xFFFFFFFF
        else:
            out = 0
            for v in [evaluate(t, x, env, memo) for x in node[1:-1]] + [node[-1]]:
                out = (out + v) & 0xFFFFFFFF if kind == "add" else (out ^ v if kind == "xor" else out | v)
        memo[term] = out
        return out

    vectors = [((0x00000000, 0x00000000), (0x00000000, 0x00000000), (0x6B200159, 0x99BA4EFE)),
               ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
               ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0))]
    t = Terms()
    out = threefry2x32_terms(t, t.arg(0), t.arg(1), t.arg(2), t.arg(3))
    for key, count, want in vectors:
        env = {0: key[0], 1: key[1], 2: count[0], 3: count[1]}
        memo: dict = {}
        assert tuple(evaluate(t, o, env, memo) for o in out) == want
