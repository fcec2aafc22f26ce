"""Every code block in README.md and docs/*.md runs here, so none goes stale.

The convention (the first word of a fence's info string is its language, the others are flags):

* ```python            runs. A document's python blocks run in order in ONE fresh child process
                       (repository root as working directory, PYTHONPATH set, PJRT_DEVICE=CPU),
                       so later blocks use earlier names. Each block is compiled as `example.py`,
                       so JAX locations and warnings read `example.py:LINE` (lines counted from
                       the block's first line). Warnings are printed to stdout, in order with
                       what the block prints, in Python's own format.
* ```text output       what the code block just before it prints: checked against the real
                       output with whitespace normalised (every run of blanks and line breaks
                       is one space, so long lines may be wrapped) and `...` matching any text.
* ```console / ```sh   lines starting with `$ ` are commands, run with bash from the repository
                       root (PATH starts with this venv's bin, PYTHONPATH set); the lines up to
                       the next `$ ` are their output (stdout and stderr), checked as above when
                       present. `$ echo $?` followed by a number checks the previous command's
                       exit status; otherwise every command must exit 0.
* ```mlir              parses with x64guard's own reader (`x64guard.check`); ```mlir output is
                       also checked as output, like ```text output.
* `no-run: REASON`     (any language, after the language word) the block is not executed; a
                       reason is required, python blocks must still compile and mlir blocks
                       marked `fragment` are excerpts that do not parse on their own. Keep these
                       few and justified.
* ```text, ```json, ```yaml (without `output`)
                       data shown to the reader (a synopsis, an excerpt of a report); not run.

Fences without a language are an error: every block says what it is.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import re
import subprocess
import sys
import textwrap

import pytest

from tests.support.child import child_env

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHOWN = {"text", "json", "yaml", "mlir", "python", "console", "sh"}
BLOCK_MARK = "\x1e-x64guard-doc-block-\x1e"
# Measured over about 5 s (torch, torch-xla, the CLI gate, a tool run): marked slow for a fast tier.
SLOW_PYTHON = {"README.md", "torch.md", "torch_xla.md", "torch_xla-lazy.md"}
SLOW_CONSOLE = {"README.md", "cli.md", "constants.md"}
# Their python blocks import torch or torch-xla: not run by `make test-matrix`.
TORCH_PYTHON = {"README.md", "torch.md", "torch_xla.md", "torch_xla-lazy.md", "targets.md"}


@dataclasses.dataclass
class Block:
    document: pathlib.Path
    line: int            # 1-based line of the opening fence
    language: str
    flags: list[str]
    reason: str          # text after "no-run:", if any
    code: str

    @property
    def no_run(self) -> bool:
        return "no-run" in self.flags

    def where(self) -> str:
        return f"{self.document.relative_to(ROOT)}:{self.line}"


def parse_blocks(document: pathlib.Path) -> list[Block]:
    lines = document.read_text().splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        opening = re.match(r"^(\s*)```(.*)$", lines[i])
        if not opening:
            i += 1
            continue
        indent, info = opening.group(1), opening.group(2).strip()
        end = i + 1
        while end < len(lines) and not lines[end].strip().startswith("```"):
            end += 1
        reason = ""
        if "no-run:" in info:
            info, reason = info.split("no-run:", 1)
            info += " no-run"
        words = info.split()
        body = "\n".join(line[len(indent):] if line.startswith(indent) else line
                         for line in lines[i + 1:end])
        blocks.append(Block(document, i + 1, words[0] if words else "", words[1:], reason.strip(), body))
        i = end + 1
    return blocks


def outputs_following(blocks: list[Block]) -> dict[int, Block]:
    """Index of a code block -> the ```text output block right after it."""
    return {index - 1: block for index, block in enumerate(blocks)
            if block.language in ("text", "mlir") and "output" in block.flags and index > 0}


def normalise(text: str) -> str:
    """Every run of whitespace, line breaks included, as one space: docs may wrap long lines."""
    return " ".join(text.split())


def output_matches(expected: str, actual: str) -> bool:
    """Whitespace-normalised full match; `...` matches any text, also across lines."""
    regex = ".*?".join(re.escape(part) for part in re.split(r"\s*\.\.\.\s*", normalise(expected)))
    return re.fullmatch(regex, normalise(actual), re.DOTALL) is not None


def document_env() -> dict[str, str]:
    """A child's environment (tests/support/child.py), on the CPU, this venv first on PATH."""
    return child_env({"PJRT_DEVICE": "CPU",
                      "PATH": str(pathlib.Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")},
                     unset=("X64GUARD_MODE",), defaults={"TF_CPP_MIN_LOG_LEVEL": "2"})


# The child: runs the blocks it is given in one namespace, a mark between blocks on stdout.
DRIVER = textwrap.dedent(r'''
    import json, linecache, sys, traceback, warnings
    blocks = json.load(sys.stdin)
    def show(message, category, filename, lineno, file=None, line=None):
        sys.stdout.write(warnings.formatwarning(message, category, filename, lineno, line))
        sys.stdout.flush()
    warnings.showwarning = show
    namespace = {"__name__": "__main__"}
    for index, (where, code) in enumerate(blocks):
        print(MARK + str(index), flush=True)
        linecache.cache["example.py"] = (len(code), None, code.splitlines(True), "example.py")
        try:
            exec(compile(code, "example.py", "exec"), namespace)
        except BaseException:
            sys.stdout.flush()
            sys.stderr.write(f"block at {where} raised:\n")
            traceback.print_exc()
            sys.exit(1)
        sys.stdout.flush()
''').replace("MARK", repr(BLOCK_MARK))


def run_python(document: pathlib.Path) -> None:
    blocks = parse_blocks(document)
    code_blocks = [(index, block) for index, block in enumerate(blocks)
                   if block.language == "python" and not block.no_run]
    run = subprocess.run([sys.executable, "-u", "-c", DRIVER],
                         input=json.dumps([(block.where(), block.code) for _, block in code_blocks]),
                         capture_output=True, text=True, cwd=ROOT, env=document_env(), timeout=900)
    pieces = run.stdout.split(BLOCK_MARK)[1:]
    printed = {}
    for piece in pieces:
        number, _, text = piece.partition("\n")
        printed[code_blocks[int(number)][0]] = text
    assert run.returncode == 0, f"{document.name}: a python block failed\n{run.stdout[-3000:]}\n{run.stderr[-6000:]}"
    for index, output in outputs_following(blocks).items():
        if blocks[index].language != "python" or blocks[index].no_run:
            continue
        assert output_matches(output.code, printed[index]), (
            f"{output.where()}: the output shown is not what {blocks[index].where()} prints.\n"
            f"--- shown:\n{output.code}\n--- printed:\n{printed[index]}")


def console_steps(block: Block) -> list[tuple[str, str]]:
    """[(command, the output shown under it)] of a console block."""
    steps: list[tuple[str, list[str]]] = []
    for line in block.code.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        elif steps:
            steps[-1][1].append(line)
    return [(command, "\n".join(shown)) for command, shown in steps]


def run_console(block: Block) -> None:
    steps = console_steps(block)
    assert steps, f"{block.where()}: a {block.language} block without `$ ` commands (use ```text, or no-run: REASON)"
    status = None
    for command, shown in steps:
        if command.strip() == "echo $?":
            assert status is not None and shown.strip() == str(status), (
                f"{block.where()}: the block shows exit status {shown.strip()}, the command exited {status}")
            status = 0
            continue
        if status not in (None, 0):
            raise AssertionError(f"{block.where()}: the previous command exited {status} and the block does not say so")
        run = subprocess.run(["bash", "-c", command], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, cwd=ROOT, env=document_env(), timeout=900)
        status = run.returncode
        if shown.strip():
            assert output_matches(shown, run.stdout), (
                f"{block.where()}: the output shown for `{command}` is not what it prints.\n"
                f"--- shown:\n{shown}\n--- printed:\n{run.stdout}")
    assert status in (None, 0), f"{block.where()}: the last command exited {status} and the block does not say so"


ALL_BLOCKS = [block for document in DOCUMENTS for block in parse_blocks(document)]


def _param(block: Block, slow: bool):
    return pytest.param(block, id=block.where(), marks=[pytest.mark.slow] if slow else [])


@pytest.mark.parametrize("block", [pytest.param(b, id=b.where()) for b in ALL_BLOCKS])
def test_block_follows_the_convention(block: Block) -> None:
    assert block.language in SHOWN, f"{block.where()}: fence language {block.language!r}; say what the block is"
    if block.no_run:
        assert block.reason, f"{block.where()}: `no-run` needs a reason (no-run: REASON)"
        if block.language == "python":
            compile(block.code, block.where(), "exec")


@pytest.mark.parametrize("document", [
    pytest.param(d, id=d.name, marks=([pytest.mark.slow] if d.name in SLOW_PYTHON else [])
                 + ([pytest.mark.torch] if d.name in TORCH_PYTHON else []))
    for d in DOCUMENTS if any(b.language == "python" and not b.no_run for b in parse_blocks(d))])
def test_python_blocks_run_and_print_what_is_shown(document: pathlib.Path) -> None:
    run_python(document)


@pytest.mark.parametrize("block", [
    _param(b, b.document.name in SLOW_CONSOLE) for b in ALL_BLOCKS
    if b.language in ("console", "sh") and not b.no_run])
def test_console_blocks_run(block: Block) -> None:
    run_console(block)


def test_mlir_blocks_parse() -> None:
    import x64guard

    parsed = [block for block in ALL_BLOCKS if block.language == "mlir" and not block.no_run]
    assert parsed, "no ```mlir block to parse: the docs show at least one whole module"
    for block in parsed:
        x64guard.check(block.code, target="x64")   # raises ValueError naming the parser's diagnostic


def test_output_blocks_follow_a_code_block() -> None:
    for document in DOCUMENTS:
        blocks = parse_blocks(document)
        for index, output in outputs_following(blocks).items():
            assert blocks[index].language in ("python", "console", "sh"), (
                f"{output.where()}: an output block must follow the code block whose output it shows")


def test_output_matching() -> None:
    assert output_matches("a  b\n\nc ... e", "a b\nc d\n e")
    assert output_matches("a long\n  wrapped line", "a long wrapped line\n")
    assert output_matches("x = ...\n...\nend", "x = 1\nmore\nlines\nend")
    assert not output_matches("a b", "a c")
    assert not output_matches("a", "a\nb")


# Issue 36: a README read at a glance, docs pages short enough to read (split a page that grows).
README_MAX_CHARS = 10_000
PAGE_MAX_BYTES = 25 * 1024


def test_readme_and_pages_stay_short() -> None:
    readme = len((ROOT / "README.md").read_text())
    assert readme <= README_MAX_CHARS, f"README.md has {readme} characters (at most {README_MAX_CHARS})"
    pages = [*sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "docs").glob("*.rst"))]
    assert len(pages) > 10, "the docs pages were not found"
    long = {page.name: page.stat().st_size for page in pages if page.stat().st_size > PAGE_MAX_BYTES}
    assert not long, f"docs pages over {PAGE_MAX_BYTES} bytes (split them): {long}"
