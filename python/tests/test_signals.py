# SPDX-License-Identifier: MIT
"""Ctrl-C at any point: SIGINT arriving at the Nth point where a signal
handler can run in the package (and in the `with` statement around it)
while a lock is taken and left, a lease acquired, a slot registered, a
keepalive or a heartbeat started and stopped; after each run, whatever way
it ended, no lease is held, no slot registered, no keepalive thread left
running, and the program's own SIGINT handler is back in place.

CPython runs a Python signal handler only where the interpreter checks for
one (a function's start, a loop's jump back, a call's return). The
injector stops tracing just before the Nth call, function start or jump
back and makes SIGINT arrive there as its C handler makes it arrive (the
signal marked pending, through _thread.interrupt_main: nothing in the
tracer runs the handler); the interpreter then runs the handler at its own
next check, exactly where a SIGINT from the terminal would be handled.

One run per point, hundreds of points per scenario (every point when
VIGIL_SIGNAL_STRIDE=1; by default points evenly spaced, at most
VIGIL_SIGNAL_RUNS of them, so that the suite stays quick)."""
from __future__ import annotations

import _thread
import asyncio
import dis
import os
import signal
import sys
import threading
import time
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


def threads_back_to(base: int) -> int:
    """The thread count once it is `base` again, or what it still is after
    10 s: a joined thread leaves /proc a moment after its join returns."""
    deadline = time.monotonic() + 10
    while threads() != base and time.monotonic() < deadline:
        time.sleep(0.001)
    return threads()


# The instructions a point sits just before: where the interpreter checks
# for a signal (a function's start, a jump back) or is about to make a call
# (after which it checks, or the callee's start does).
POINTS = {dis.opmap[name] for name in ("RESUME", "JUMP_BACKWARD", "CALL", "CALL_FUNCTION_EX") if name in dis.opmap}


class Arrive(int):
    """`Arrive(signum).now` makes the signal arrive as its C handler makes it
    arrive: pending, its Python handler run at the interpreter's next check.
    A property, so that reading it makes no call (after a call the
    interpreter checks, and would run the handler inside the tracer)."""

    now = property(_thread.interrupt_main)


SIGINT_NOW = Arrive(signal.SIGINT)


class Injector:
    """A tracer that counts the points in the package's frames and in the
    frames of `also`, and makes SIGINT arrive just before the `at`-th of
    them, tracing stopped first so that only the program runs after."""

    def __init__(self, at: Optional[int], also: tuple) -> None:
        self.at, self.also, self.count = at, also, 0

    def _ours(self, frame: Any) -> bool:
        return frame.f_code.co_filename.startswith(PKG_DIR) or frame.f_code in self.also

    def call(self, frame: Any, event: str, arg: Any) -> Any:
        if not self._ours(frame):
            return None
        frame.f_trace_opcodes = True
        return self.local

    def local(self, frame: Any, event: str, arg: Any) -> Any:
        if event == "opcode" and frame.f_code.co_code[frame.f_lasti] in POINTS:
            if self.count == self.at:
                sys.settrace(None)
                frame.f_trace_opcodes = False
                SIGINT_NOW.now  # noqa: B018 (a property read: the signal arrives)
                return None
            self.count += 1
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
    assert counter.count > 3, f"only {counter.count} points traced"
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
        left = threads_back_to(base) - base
        assert left == 0, f"{left} keepalive thread(s) left running"
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
        assert threads_back_to(base) == base, "a keepalive thread was left running"
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
        left = threads_back_to(base) - base
        assert left == 0, f"{left} keepalive thread(s) left running"

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


def test_ctrl_c_ends_a_lock_wait_inside_another_block(tmp, store):
    """The guard holds signals back only while something is half-made: a
    lock() waiting for its key (inside a registered() block, which holds
    the guard) is still ended by Ctrl-C, with nothing held after."""
    holder = store.acquire("k", "holder", 30.0)
    with vigil.HeartbeatTable.create(os.path.join(tmp, "t.hb"), 4) as t:
        timer = threading.Timer(0.2, _thread.interrupt_main)
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            with t.registered():
                timer.start()
                with store.lock("k", "me", ttl=5.0, timeout=30.0):
                    raise AssertionError("the key was never free")
        timer.join()
        assert time.monotonic() - started < 25, "Ctrl-C did not end the wait"
        assert t.live_count(vigil._util.U64_MAX) == 0
    assert store.get("k").owner == "holder"
    store.release(holder)


def test_turns_are_given_back(tmp):
    """A bound barrier's wait and a table's failover_wait take a turn on
    their handle: whatever way they end, it is given back (else the next
    wait would find the handle busy for ever)."""
    with vigil.HeartbeatTable.create(os.path.join(tmp, "t.hb"), 4) as t, \
            vigil.Barrier.create(os.path.join(tmp, "b.bar"), t, 5) as b:
        b.bind(t.register())

        def check() -> None:
            assert b._turns.busy == 0 and t._failover_turns.busy == 0, "a turn was kept"

        each_point(lambda: b.wait(b.epoch, quorum=1, timeout=5.0), (), check)
        each_point(lambda: t.failover_wait(5, timeout=0), (), check)
