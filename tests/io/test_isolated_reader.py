"""The reader process that vets untrusted bytecode (x64guard/io/isolated_reader.py): one
long-lived process, replaced when input kills or hangs it, and a clear ValueError for the
caller. Crashing inputs are safe to use in this process: only the reader dies."""

from __future__ import annotations

import base64
import os
import signal
import time

import pytest

import x64guard
from tests.reliability import hostile
from tests.support.child import run_python
from x64guard.io import isolated_reader


@pytest.fixture(scope="module")
def bytecode() -> bytes:
    return hostile.hand_written_bytecode()


def test_valid_bytecode_is_vetted_by_one_long_lived_process(bytecode):
    assert isolated_reader.vet_bytes(bytecode) is None
    pid = isolated_reader.reader_pid()
    assert pid is not None and pid != os.getpid()
    for _ in range(3):
        assert isolated_reader.vet_bytes(bytecode) is None
    assert isolated_reader.reader_pid() == pid


def test_unreadable_bytecode_is_reported_without_killing_the_reader(bytecode):
    isolated_reader.vet_bytes(bytecode)
    pid = isolated_reader.reader_pid()
    reason = isolated_reader.vet_bytes(bytecode[: len(bytecode) // 2])
    assert reason is not None and reason.startswith("x64guard: unreadable MLIR bytecode")
    assert isolated_reader.reader_pid() == pid


def test_a_crash_is_a_value_error_and_the_next_call_gets_a_fresh_reader(bytecode):
    crashing = hostile.patched(bytecode, 333, 0x80)  # SIGSEGV in jaxlib's reader (test_fuzz_regressions)
    isolated_reader.vet_bytes(bytecode)
    pid = isolated_reader.reader_pid()
    with pytest.raises(ValueError, match="^x64guard: the MLIR bytecode reader was killed by SIGSEGV"):
        x64guard.narrow(crashing)
    assert isolated_reader.reader_pid() is None
    assert x64guard.check(bytecode).findings  # a new reader
    assert isolated_reader.reader_pid() not in (None, pid)


def test_a_reader_killed_from_outside_is_replaced(bytecode):
    isolated_reader.vet_bytes(bytecode)
    pid = isolated_reader.reader_pid()
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while isolated_reader.reader_pid() is not None and time.monotonic() < deadline:
        time.sleep(0.01)  # reader_pid() polls the process: None once it is gone
    assert isolated_reader.vet_bytes(bytecode) is None
    assert isolated_reader.reader_pid() not in (None, pid)


def test_a_reader_that_does_not_finish_is_stopped(bytecode, monkeypatch):
    from tests.reliability.test_fuzz_regressions import HANGING_BYTECODE
    monkeypatch.setenv("X64GUARD_READER_TIMEOUT", "2")
    reason = isolated_reader.vet_bytes(base64.b64decode(HANGING_BYTECODE))
    assert reason is not None and reason.startswith("x64guard: the MLIR bytecode reader did not finish within 2 s")
    monkeypatch.delenv("X64GUARD_READER_TIMEOUT")
    assert isolated_reader.vet_bytes(bytecode) is None


def test_the_timeout_grows_with_the_input():
    assert isolated_reader.timeout_for(400_000_000) > isolated_reader.timeout_for(1000) + 60


def test_files_are_vetted_by_path(bytecode, tmp_path):
    path = tmp_path / "module.mlirbc"
    path.write_bytes(bytecode)
    assert isolated_reader.vet_file(path) is None
    path.write_bytes(hostile.patched(bytecode, 333, 0x80))
    assert "SIGSEGV" in isolated_reader.vet_file(path)


def test_the_reader_module_refuses_other_uses():
    proc = run_python("-m", "x64guard.io.isolated_reader", timeout=60)
    assert proc.returncode == 2 and "started by x64guard itself" in proc.stderr


@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")  # JAX's warning about forking threads
def test_a_forked_child_uses_its_own_reader(bytecode):
    """The parent's pipes must not be shared: a child of os.fork starts its own reader."""
    import multiprocessing
    isolated_reader.vet_bytes(bytecode)
    parent_reader = isolated_reader.reader_pid()
    context = multiprocessing.get_context("fork")
    with context.Pool(1) as pool:
        child_reader, verdict = pool.apply(_vet_in_child, (bytecode,))
    assert verdict is None and child_reader not in (None, parent_reader)
    assert isolated_reader.vet_bytes(bytecode) is None and isolated_reader.reader_pid() == parent_reader


def _vet_in_child(data: bytes):
    verdict = isolated_reader.vet_bytes(data)
    return isolated_reader.reader_pid(), verdict


def test_a_reader_that_cannot_start_is_a_value_error_not_a_hang(bytecode, monkeypatch):
    import sys
    isolated_reader._reader.close()
    monkeypatch.setattr(isolated_reader, "READER_COMMAND", (sys.executable, "-c", "pass"))
    with pytest.raises(ValueError, match="^x64guard: the bytecode reader process did not start"):
        x64guard.narrow(bytecode)
    assert x64guard.check(bytecode, trusted=True).findings
    monkeypatch.undo()
    assert isolated_reader.vet_bytes(bytecode) is None
