# SPDX-License-Identifier: MIT
"""Shared by the Python package's tests: a fresh mkdtemp directory per test,
child processes with bounded reads, and skips for what the machine lacks."""
from __future__ import annotations

import asyncio
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import List, Optional

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.dirname(HERE)
WORKER = os.path.join(HERE, "worker.py")


@pytest.fixture
def tmp():
    d = tempfile.mkdtemp(prefix="vigil-py-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def needs(symbol: str, library=None) -> None:
    """Skip unless the loaded library exports `symbol` (a call still on its way)."""
    from vigil import _ffi

    if not _ffi.has(symbol, library):
        pytest.skip(f"the loaded library has no {symbol} yet")


def child_env() -> dict:
    env = dict(os.environ)
    path = env.get("PYTHONPATH")
    env["PYTHONPATH"] = PKG + (os.pathsep + path if path else "")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


class Proc:
    """A child with piped stdin/stdout, read line by line with a bound on each wait."""

    def __init__(self, argv: List[str]) -> None:
        self.argv = argv
        self.p = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=child_env(), bufsize=0
        )
        self.pid = self.p.pid
        self._buf = b""
        self._eof = False

    def line(self, timeout: float = 20.0) -> str:
        """The next line it prints; AssertionError if none comes within `timeout`."""
        deadline = time.monotonic() + timeout
        fd = self.p.stdout.fileno()
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if self._eof or left <= 0:
                raise AssertionError(f"{self.argv[1:3]}: no line within {timeout} s (eof={self._eof})")
            with selectors.DefaultSelector() as sel:
                sel.register(fd, selectors.EVENT_READ)
                if sel.select(left):
                    chunk = os.read(fd, 65536)
                    self._buf += chunk
                    self._eof = not chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return line.decode()

    def send(self, text: str) -> None:
        self.p.stdin.write(text.encode())
        self.p.stdin.flush()

    def kill(self, sig: int = signal.SIGKILL) -> None:
        self.p.send_signal(sig)
        self.p.wait(timeout=20)

    def finish(self, timeout: float = 20.0) -> "tuple[int, List[str]]":
        """Close its stdin (its cue to leave), wait for its exit; (status, lines left)."""
        if self.p.stdin is not None:
            try:
                self.p.stdin.close()
            except BrokenPipeError:
                pass
            self.p.stdin = None
        rest, _ = self.p.communicate(timeout=timeout)
        text = (self._buf + rest).decode()
        self._buf = b""
        return self.p.returncode, [ln for ln in text.splitlines() if ln]

    def reap(self) -> None:
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait(timeout=20)
        for f in (self.p.stdin, self.p.stdout):
            try:
                if f is not None:
                    f.close()
            except Exception:
                pass


@pytest.fixture
def spawn():
    """spawn(argv) -> Proc; every child still running at the end is killed."""
    made: List[Proc] = []

    def run(argv: List[str]) -> Proc:
        p = Proc(argv)
        made.append(p)
        return p

    yield run
    for p in made:
        p.reap()


def python_worker(*args: str) -> List[str]:
    return [sys.executable, WORKER, *args]


def peer() -> str:
    path = os.environ.get("VIGIL_TEST_PEER")
    if not path or not os.access(path, os.X_OK):
        pytest.skip("VIGIL_TEST_PEER (the C peer, built by CMake) is not set")
    return path


def tool() -> Optional[str]:
    path = os.environ.get("VIGIL_TOOL")
    return path if path and os.access(path, os.X_OK) else None


class VirtualClock(selectors.DefaultSelector):
    """A selector for an event loop whose time is virtual: when nothing is
    ready, it jumps the clock to the next timer instead of sleeping, so a
    schedule of renewals is checked step by step, never against real time."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0

    def select(self, timeout=None):
        ready = super().select(0)
        if ready:
            return ready
        if timeout is None:
            return super().select(1.0)
        self.now += timeout
        return []


class VirtualLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        self.clock = VirtualClock()
        super().__init__(self.clock)

    def time(self) -> float:
        return self.clock.now


def run_virtual(coro, limit: float = 1000.0):
    """Run `coro` to its end on a VirtualLoop (bounded by `limit` virtual seconds)."""
    loop = VirtualLoop()
    try:
        return loop.run_until_complete(asyncio.wait_for(coro, limit))
    finally:
        loop.close()
