"""Vetting untrusted MLIR bytecode in a separate process before this one reads it.

jaxlib's bytecode reader trusts its input: a corrupted file can abort the process
(SIGABRT), crash it (SIGSEGV) or loop forever inside `ir.Module.parse`, where no Python
code can catch anything. So before x64guard parses bytecode it has not produced itself, a
long-lived reader process parses the same bytes with the same code (same jaxlib, same
dialects, `modules.read_bytecode`). Only when the reader survives does this process parse
them: the reader is deterministic, so bytes it read cleanly read cleanly here too. When
the reader dies or hangs, it is replaced and the caller gets a `ValueError` saying so.

The reader is started on first use (about a second: it imports jax's MLIR bindings) and
serves every thread of this process, one request at a time (a forked child starts its
own). It exits when this process closes its stdin: at exit, or when this process dies.
Its program is `x64guard/io/_bytecode_reader.py`, which runs `serve` below with
`x64guard.io.modules.read_bytecode`: this module imports nothing of x64guard (x64guard.io.modules
imports it, never the reverse).

Protocol (binary, on the reader's stdin/stdout): a request is a kind byte (b"B": bytes
follow; b"P": a UTF-8 file path follows), an 8-byte little-endian length and the payload;
the reply is one UTF-8 JSON line, {"ok": true} or {"error": "x64guard: ..."}.
Nothing is pickled or evaluated on either side.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable

# Seconds the reader may take for a request: a base, plus time per MB of input (reading
# 400 MB of bytecode takes about a second; a reader that loops forever must still be
# stopped). $X64GUARD_READER_TIMEOUT replaces the base (tests use a few seconds).
BASE_TIMEOUT_S = 30.0
TIMEOUT_S_PER_MB = 0.25
STARTUP_TIMEOUT_S = 120.0  # importing jax on a loaded machine; not counted in a request's time
_READY = b'{"ready": true}\n'
_HEADER = struct.Struct("<cQ")
_PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])
READER_COMMAND = (sys.executable, "-m", "x64guard.io._bytecode_reader", "serve")


def timeout_for(size: int) -> float:
    base = float(os.environ.get("X64GUARD_READER_TIMEOUT", BASE_TIMEOUT_S))
    return base + TIMEOUT_S_PER_MB * size / 1e6


class _Reader:
    """The one reader process of this process, restarted after it dies or hangs."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._owner = os.getpid()

    def vet(self, kind: bytes, payload: bytes, size: int) -> str | None:
        """None if the reader read the input cleanly, else the reason it could not."""
        with self._lock:
            proc = self._running()
            if proc is None:
                return ("x64guard: the bytecode reader process did not start (it exited, or was not ready within "
                        f"{STARTUP_TIMEOUT_S:.0f} s), so x64guard did not read this bytecode; pass trusted=True "
                        "to read bytecode you produced yourself in this process")
            try:
                assert proc.stdin is not None
                proc.stdin.write(_HEADER.pack(kind, len(payload)))
                proc.stdin.write(payload)
                proc.stdin.flush()
            except (BrokenPipeError, OSError):
                return self._died(proc)
            try:
                reply = self._reply(proc, timeout_for(size))
            except TimeoutError:
                self._stop(proc)
                return (f"x64guard: the MLIR bytecode reader did not finish within {timeout_for(size):.0f} s on this input "
                        "(corrupted bytecode can make it loop); x64guard stopped it in its separate process")
            if reply is None:
                return self._died(proc)
            answer = json.loads(reply)
            return None if answer.get("ok") else str(answer["error"])

    def _running(self) -> subprocess.Popen | None:
        if self._owner != os.getpid():  # a forked child: the reader is the parent's
            if self._proc is not None:
                self._close_pipes(self._proc)  # this process's copies only
            self._proc, self._owner = None, os.getpid()
        if self._proc is not None and self._proc.poll() is not None:
            self._stop(self._proc)  # died between requests
        if self._proc is None:
            env = dict(os.environ)
            env["PYTHONPATH"] = _PACKAGE_PARENT + os.pathsep + env.get("PYTHONPATH", "")
            env.setdefault("JAX_PLATFORMS", "cpu")  # the reader never runs anything
            proc = subprocess.Popen(READER_COMMAND, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, env=env, close_fds=True)
            try:
                ready = self._reply(proc, STARTUP_TIMEOUT_S) == _READY  # imports done: requests are timed from here
            except TimeoutError:
                ready = False
            if not ready:
                self._proc = proc
                self._stop(proc)
                return None
            self._proc = proc
        return self._proc

    @staticmethod
    def _reply(proc: subprocess.Popen, timeout: float) -> bytes | None:
        """The reply line; None if the reader died; TimeoutError if it took too long."""
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        line = bytearray()
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            ready, _, _ = select.select([fd], [], [], min(left, 1.0))
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    return None
                line += chunk
        return bytes(line)

    def _died(self, proc: subprocess.Popen) -> str:
        self._stop(proc)
        code = proc.returncode
        if code is not None and code < 0:
            try:
                how = f"was killed by {signal.Signals(-code).name}"
            except ValueError:
                how = f"was killed by signal {-code}"
        else:
            how = f"exited with status {code}"
        return (f"x64guard: the MLIR bytecode reader {how} on this input (corrupted bytecode, or bytecode this jaxlib's MLIR "
                "cannot read); x64guard read it in a separate process, so this one is unaffected")

    def _stop(self, proc: subprocess.Popen) -> None:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        self._close_pipes(proc)
        self._proc = None

    @staticmethod
    def _close_pipes(proc: subprocess.Popen) -> None:
        for stream in (proc.stdin, proc.stdout):
            try:
                stream.close()
            except OSError:
                pass

    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None and self._owner == os.getpid() and proc.poll() is None else None

    def close(self) -> None:
        """At exit: end the reader's loop (it reads end-of-file) and reap it."""
        proc = self._proc
        if proc is None or self._owner != os.getpid():
            return
        try:
            proc.stdin.close()
            proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()
        self._close_pipes(proc)
        self._proc = None


_reader = _Reader()
atexit.register(_reader.close)


def vet_bytes(data: bytes) -> str | None:
    """None if `data` (MLIR bytecode or a portable artifact) reads without harm; else
    the reason, an 'x64guard: ...' message for a ValueError."""
    return _reader.vet(b"B", data, len(data))


def vet_file(path: str | os.PathLike) -> str | None:
    """As `vet_bytes`, for a file the reader opens itself (no copy passes between processes)."""
    return _reader.vet(b"P", os.fsencode(path), os.path.getsize(path))


def reader_pid() -> int | None:
    """The running reader's process id (for measuring its memory), if one is running."""
    return _reader.pid()


# --------------------------------------------------------------------------- the reader side

def _read_exactly(stream, n: int) -> bytes | None:
    chunks, left = [], n
    while left:
        chunk = stream.read(left)
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def serve(read: Callable[[bytes | str], object], prepare: Callable[[], object]) -> int:
    """The reader's loop: read a request with `read` (bytes, or a file's path as str), as
    this process's caller will read it, and reply. `prepare()` loads what reading needs
    before the reader says it is ready (so that requests are timed from there)."""
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    prepare()
    stdout.write(_READY)
    stdout.flush()
    while True:
        header = _read_exactly(stdin, _HEADER.size)
        if header is None:
            return 0  # the caller closed the pipe: it is done or gone
        kind, size = _HEADER.unpack(header)
        payload = _read_exactly(stdin, size)
        if payload is None:
            return 0
        try:
            module = read(os.fsdecode(payload) if kind == b"P" else payload)
            del module  # its context (and the input's constants) go with it
            answer = {"ok": True}
        except ValueError as exc:
            message = str(exc)
            answer = {"error": message if message.startswith("x64guard: ") else
                      f"x64guard: unreadable MLIR bytecode: {message}"}
        except Exception as exc:  # noqa: BLE001 - reported to the caller as unreadable input
            answer = {"error": f"x64guard: unreadable MLIR bytecode: {type(exc).__name__}: {exc}"}
        del payload
        stdout.write(json.dumps(answer).encode("utf-8") + b"\n")
        stdout.flush()


USAGE = "x64guard's bytecode reader process is started by x64guard itself (x64guard/io/isolated_reader.py)"

if __name__ == "__main__":
    print(USAGE, file=sys.stderr)
    sys.exit(2)
