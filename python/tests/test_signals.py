# SPDX-License-Identifier: MIT
"""Ctrl-C at any point: a real SIGINT raised at the Nth point where a signal
handler can run in the package (and in the `with` statement around it)
while a lock is taken and left, a lease acquired, a slot registered, a
keepalive or a heartbeat started and stopped; after each run, whatever way
it ended, no lease is held, no slot registered, no keepalive thread left
running, and the program's own SIGINT handler is back in place.

CPython runs a Python signal handler only where the interpreter checks for
one: at the start of a function, at a loop's jump back, and when a call
returns (3.11 checks after a call into C; the points after a call into
Python are counted too, which is stricter). The injector raises SIGINT just
before each such point in turn.

One run per point, hundreds of points per scenario (every point when
VIGIL_SIGNAL_STRIDE=1; by default points evenly spaced, at most
VIGIL_SIGNAL_RUNS of them, so that the suite stays quick)."""
from __future__ import annotations

import asyncio
import dis
import os
import signal
import sys
from typing import Any, Callable, List, Optional

import pytest

import vigil
from vigil import _signals

PKG_DIR = os.path.dirname(os.path.abspath(vigil.__file__))
RUNS = int(os.environ.get("VIGIL_SIGNAL_RUNS", "300"))


def threads() -> int:
    """Threads of this process, the library's own (renewers, watchers)
    included, the asyncio wait pool's (which idle a while) left out."""
    return len(os.listdir("/proc/self/task")) - vigil._aio.pool()._threads


RESUME, JUMP_BACKWARD = dis.opmap["RESUME"], dis.opmap.get("JUMP_BACKWARD", -1)
CALLS = {dis.opmap[name] for name in ("CALL", "CALL_FUNCTION_EX") if name in dis.opmap}


class Injector:
    """A tracer that counts the points where a signal handler can run in the
    package's frames and in the frames of `also`, and raises SIGINT (a real
    one: raise_signal) just before the `at`-th of them."""

    def __init__(self, at: Optional[int], also: tuple) -> None:
        self.at, self.also, self.count = at, also, 0
        self.after_call: dict = {}  # frame -> whether its last instruction was a call

    def _ours(self, frame: Any) -> bool:
        return frame.f_code.co_filename.startswith(PKG_DIR) or frame.f_code in self.also

    def call(self, frame: Any, event: str, arg: Any) -> Any:
        if not self._ours(frame):
            return None
        frame.f_trace_opcodes = True
        return self.local

    def local(self, frame: Any, event: str, arg: Any) -> Any:
        if event == "opcode":
            op = frame.f_code.co_code[frame.f_lasti]
            checks = op == RESUME or op == JUMP_BACKWARD or self.after_call.get(frame, False)
            self.after_call[frame] = op in CALLS
            if checks:
                if self.count == self.at:
                    signal.raise_signal(signal.SIGINT)
                self.count += 1
        elif event == "return":
            self.after_call.pop(frame, None)
        return self.local

    def run(self, fn: Callable[[], Any]) -> Any:
        sys.settrace(self.call)
        try:
            return fn()
        finally:
            sys.settrace(None)


def points(total: int) -> List[int]:
    stride = int(os.environ.get("VIGIL_SIGNAL_STRIDE", "0")) or max(1, -(-total // RUNS))
    return list(range(0, total, stride)) + [total - 1]


def each_point(scenario: Callable[[], Any], also: tuple, check: Callable[[], None]) -> int:
    """Run `scenario` once to count its points, then once per point with a
    SIGINT there; `check` after each. Returns how many runs ended by
    KeyboardInterrupt."""
    counter = Injector(None, also)
    counter.run(scenario)
    check()
    assert counter.count > 20, f"only {counter.count} points traced"
    interrupted = 0
    for at in points(counter.count):
        inj = Injector(at, also)
        try:
            inj.run(scenario)
        except KeyboardInterrupt:
            interrupted += 1
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler, f"point {at}: handler not put back"
        assert _signals._holders == 0 and not _signals.noted, f"point {at}: the guard is still held"
        check()
    assert interrupted > 0
    print(f"{scenario.__name__}: {counter.count} points, {len(points(counter.count))} runs, {interrupted} interrupted")
    return interrupted


@pytest.fixture
def store(tmp):
    with vigil.Leases.create(os.path.join(tmp, "l.ls"), 4) as s:
        yield s


def nothing_held(store: vigil.Leases, base: int) -> Callable[[], None]:
    def check() -> None:
        assert store.get("k") is None, "the lease is still held"
        assert threads() == base, f"{threads() - base} keepalive thread(s) left running"
    return check


def test_lock_enter_and_exit(store):
    base = threads()

    def scenario() -> None:
        with store.lock("k", "me", ttl=5.0, timeout=5.0) as lease:
            assert lease.token > 0

    each_point(scenario, (scenario.__code__,), nothing_held(store, base))


def test_acquire_and_acquire_wait(store):
    """A call returns the lease (the caller's to give back) or raises and
    holds nothing: the points are the package's, not the caller's."""
    base = threads()
    got: List[vigil.Lease] = []
    held = nothing_held(store, base)

    def check() -> None:
        while got:
            store.release(got.pop())
        held()

    for take in (lambda: store.acquire("k", "me", 5.0), lambda: store.acquire_wait("k", "me", 5.0, timeout=5.0)):
        each_point(lambda take=take: got.append(take()), (), check)


def test_registered_enter_and_exit(tmp):
    with vigil.HeartbeatTable.create(os.path.join(tmp, "t.hb"), 4) as t:

        def scenario() -> None:
            with t.registered() as slot:
                t.mark(slot, 1)

        def check() -> None:
            assert t.live_count(vigil._util.U64_MAX) == 0, "a slot is still registered"

        each_point(scenario, (scenario.__code__,), check)
        # register() alone: it returns the slot, or leaves none.
        got: List[int] = []

        def check_plain() -> None:
            while got:
                t.unregister(got.pop())
            check()

        each_point(lambda: got.append(t.register()), (), check_plain)


def test_keepalive_enter_and_exit(store):
    base = threads()
    lease = store.acquire("held", "me", 5.0)

    def scenario() -> None:
        with vigil.keepalive(store, lease) as ka:
            assert not ka.lost

    def check() -> None:
        assert threads() == base, "a keepalive thread was left running"
        assert store.get("held") is not None  # a keepalive never releases

    each_point(scenario, (scenario.__code__,), check)
    store.release(lease)


@pytest.mark.filterwarnings("ignore:coroutine .* was never awaited")
def test_async_lock_and_heartbeat(store):
    """Under asyncio.run, whose SIGINT handler cancels the main task: the
    same promise for `async with store.lock()` and `async with heartbeat()`."""
    base = threads()
    lease = store.acquire("held", "me", 5.0)

    async def locked() -> None:
        async with store.lock("k", "me", ttl=5.0, timeout=5.0):
            pass

    async def beating() -> None:
        async with vigil.heartbeat(store, lease):
            pass

    def check() -> None:
        assert store.get("k") is None, "the lease is still held"
        assert store.get("held") is not None
        assert threads() == base, f"{threads() - base} keepalive thread(s) left running"

    for coro in (locked, beating):
        def scenario(coro=coro) -> None:
            asyncio.run(coro())

        each_point(scenario, (scenario.__code__, coro.__code__), check)
    store.release(lease)


def test_a_signal_elsewhere_is_raised_at_once(store):
    """The guard holds a signal back only inside vigil: in the block's body
    Ctrl-C is raised where it lands, and the exit gives the lease back."""
    with pytest.raises(KeyboardInterrupt):
        with store.lock("k", "me", ttl=5.0):
            signal.raise_signal(signal.SIGINT)
            raise AssertionError("not interrupted")
    assert store.get("k") is None
