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
import collections
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
    """The thread count once it is `base` or fewer again, or what it still
    is after 10 s: a joined thread leaves /proc a moment after its join
    returns. Fewer is no thread left running: `base` may have counted one
    of an earlier test's, or an idle pool thread, leaving as it was read."""
    deadline = time.monotonic() + 10
    while threads() > base and time.monotonic() < deadline:
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
        self.fired = False

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
                self.fired = True
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


class Second:
    """A second SIGINT, landing as one of the clean-up functions `names` of
    `owner` starts once the injector's first SIGINT has arrived (a Ctrl-C
    pressed twice): the wrapper makes it arrive, pending, and the real
    function's first instruction runs its handler."""

    def __init__(self, monkeypatch: Any, owner: Any, names: tuple) -> None:
        self.injector: Optional[Injector] = None
        self.sent = 0
        for name in names:
            real = getattr(owner, name)

            def wrapper(*args: Any, real: Any = real, **kwargs: Any) -> Any:
                if self.injector is not None and self.injector.fired and not self.sent:
                    self.sent += 1
                    SIGINT_NOW.now  # noqa: B018 (pending: real's first instruction runs the handler)
                return real(*args, **kwargs)

            monkeypatch.setattr(owner, name, wrapper)


def each_point(scenario: Callable[[], Any], also: tuple, check: Callable[[], None],
               second: Optional[Second] = None, handler: Any = signal.default_int_handler) -> int:
    """Run `scenario` once to count its points, then once per point with a
    SIGINT there (and, with `second`, another as a clean-up starts);
    `check` after each. Returns how many runs ended by KeyboardInterrupt."""
    counter = Injector(None, also)
    counter.run(scenario)
    check()
    assert counter.count > 3, f"only {counter.count} points traced"
    interrupted, seconds = 0, 0
    for at in points(counter.count):
        inj = Injector(at, also)
        if second is not None:
            second.injector, second.sent = inj, 0
        try:
            inj.run(scenario)
        except KeyboardInterrupt:
            interrupted += 1
        if handler is signal.default_int_handler:
            assert signal.getsignal(signal.SIGINT) is handler, f"point {at}: handler not put back"
            assert _signals._holders == 0 and not _signals.noted, f"point {at}: the guard is still held"
        else:  # inside a block of the test's, which keeps the guard standing in for it
            now = signal.getsignal(signal.SIGINT)
            assert now is handler or _signals._stands_in_for(now) is handler, f"point {at}: {now} in place"
            assert not _signals.noted, f"point {at}: a signal noted and never delivered"
        check()
        if second is not None:
            seconds += second.sent
            second.injector = None
    assert interrupted > 0
    assert second is None or seconds > 0, "no second signal ever landed in a clean-up"
    print(f"{scenario.__name__}: {counter.count} points, {len(points(counter.count))} runs, {interrupted} interrupted")
    return interrupted


@pytest.fixture(autouse=True)
def sigint_handled():
    """Python's own SIGINT handler for each test, whatever the disposition
    the test run inherited (started with SIGINT ignored, Python installs
    none, and interrupt_main then does nothing)."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)


@pytest.fixture
def store(tmp):
    with vigil.Leases.create(os.path.join(tmp, "l.ls"), 4) as s:
        yield s


def nothing_held(store: vigil.Leases, base: int) -> Callable[[], None]:
    def check() -> None:
        assert store.get("k") is None, "the lease is still held"
        left = threads_back_to(base) - base
        assert left <= 0, f"{left} keepalive thread(s) left running"
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
        assert threads_back_to(base) <= base, "a keepalive thread was left running"
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
        assert left <= 0, f"{left} keepalive thread(s) left running"

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


def test_two_ctrl_cs_leave_nothing_held(tmp, store, monkeypatch):
    """Ctrl-C twice: the first at any point of a call or a block's way in,
    the second as the clean-up it set off starts (acquire's give-back, a
    register's unregister, a lock's release, a keepalive's stop). The
    clean-up runs through all the same: nothing is held after."""
    base = threads()
    got: List[Any] = []
    held = nothing_held(store, base)

    def check() -> None:
        while got:
            store.release(got.pop())
        held()

    # acquire and acquire_wait: the give-back, and the release inside it.
    for names in (("_give_back",), ("_release_for_you",)):
        second = Second(monkeypatch, store, names)
        for take in (lambda: store.acquire("k", "me", 5.0), lambda: store.acquire_wait("k", "me", 5.0, timeout=5.0)):
            each_point(lambda take=take: got.append(take()), (), check, second)
        monkeypatch.undo()

    # lock(): the release of a lease whose keepalive never started, or the
    # keepalive's stop.
    def locked() -> None:
        with store.lock("k", "me", ttl=5.0, timeout=5.0):
            pass

    from vigil import _keepalive
    for owner, names in ((store, ("_release_for_you",)), (_keepalive.Keepalive, ("stop",))):
        each_point(locked, (locked.__code__,), held, Second(monkeypatch, owner, names))
        monkeypatch.undo()

    # A keepalive's start() alone: the stop of one never handed over.
    lease = store.acquire("held", "me", 5.0)
    started: List[vigil.Keepalive] = []

    def check_started() -> None:
        while started:
            started.pop().stop()
        assert threads_back_to(base) <= base, "a keepalive thread was left running"

    for names in (("stop",), ("_stop_unowned",)):
        owner = _keepalive.Keepalive if names == ("stop",) else _keepalive
        each_point(lambda: started.append(vigil.keepalive(store, lease).start()), (), check_started,
                   Second(monkeypatch, owner, names))
        monkeypatch.undo()
    store.release(lease)

    # register(): the unregister of a slot never handed over.
    with vigil.HeartbeatTable.create(os.path.join(tmp, "t.hb"), 4) as t:
        slots: List[int] = []

        def check_table() -> None:
            while slots:
                t.unregister(slots.pop())
            assert t.live_count(vigil._util.U64_MAX) == 0, "a slot is still registered"

        each_point(lambda: slots.append(t.register()), (), check_table, Second(monkeypatch, t, ("_unregister_quietly",)))


def test_a_handler_saved_inside_a_block_works_after_it(store):
    """What getsignal() or signal.signal() hand back inside a block is the
    guard standing in for the program's handler; kept and used after the
    block, it is that handler (issue 27's review: calling it recursed, and
    putting it back left Ctrl-C ignored for the rest of the process)."""
    with store.lock("k", "me", ttl=5.0):
        saved = signal.getsignal(signal.SIGINT)
        calls: List[int] = []
        old = signal.signal(signal.SIGINT, lambda signum, frame: calls.append(signum))
    assert saved is old and callable(saved)
    # Called by a handler that chains to it: the handler it stood in for.
    with pytest.raises(KeyboardInterrupt):
        saved(signal.SIGINT, None)
    assert signal.getsignal(signal.SIGINT) is not saved  # the program's own, left alone
    signal.raise_signal(signal.SIGINT)
    assert calls == [signal.SIGINT]
    # Put back after the block: Ctrl-C raises KeyboardInterrupt again.
    signal.signal(signal.SIGINT, old)
    with pytest.raises(KeyboardInterrupt):
        signal.raise_signal(signal.SIGINT)
        time.sleep(0)  # a call: the handler has run by now
    # And the next block guards it as its own, and puts the plain one back.
    with store.lock("k", "me", ttl=5.0):
        pass
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_handler_installed_inside_a_block_is_guarded_by_the_next(store, tmp):
    """A handler the program installs inside a block (replacing the guard)
    is guarded in turn by a block nested in it: a SIGINT at any point of
    that block's way in or out goes to it once nothing is half-made, and
    it is left in place when the blocks end."""
    calls: List[int] = []

    def mine(signum: int, frame: Any) -> None:
        calls.append(signum)
        raise KeyboardInterrupt

    def locked() -> None:
        with store.lock("k", "me", ttl=5.0, timeout=5.0):
            pass

    with vigil.HeartbeatTable.create(os.path.join(tmp, "t.hb"), 4) as t:
        with t.registered():
            signal.signal(signal.SIGINT, mine)
            n = each_point(locked, (locked.__code__,), nothing_held(store, threads()), handler=mine)
            assert len(calls) == n
        assert signal.getsignal(signal.SIGINT) is mine
        assert t.live_count(vigil._util.U64_MAX) == 0
    signal.signal(signal.SIGINT, signal.default_int_handler)


def test_lock_in_a_subinterpreter(tmp):
    """In a subinterpreter no Python signal handler runs, and signal.signal
    raises ValueError: the guard stands aside, lock() works and gives the
    lease back (it raised ValueError and leaked the lease)."""
    mod = None
    for name in ("_interpreters", "_xxsubinterpreters"):
        try:
            mod = __import__(name)
            break
        except ImportError:
            pass
    if mod is None:
        pytest.skip("no subinterpreters in this Python")
    path = os.path.join(tmp, "l.ls")
    vigil.Leases.create(path, 4).close()
    code = f"""if True:
        import sys
        sys.path.insert(0, {os.path.dirname(PKG_DIR)!r})
        import vigil
        with vigil.Leases.open({path!r}) as s:
            for _ in range(2):
                with s.lock("k", "sub", ttl=5.0) as lease:
                    assert s.get("k").owner == "sub"
                with vigil.HeartbeatTable.create({os.path.join(tmp, 't.hb')!r} + str(lease.token), 2) as t:
                    with t.registered():
                        pass
    """
    interp = mod.create()
    try:
        mod.run_string(interp, code)
    finally:
        mod.destroy(interp)
    with vigil.Leases.open(path) as s:
        assert s.get("k") is None, "the lease is still held"


@pytest.mark.filterwarnings("ignore:coroutine .* was never awaited")
def test_async_registered_enter_and_exit(tmp):
    """`async with table.registered()` under asyncio.run: no way out leaves
    a slot registered."""
    with vigil.HeartbeatTable.create(os.path.join(tmp, "t.hb"), 4) as t:

        async def registered() -> None:
            async with t.registered() as slot:
                t.mark(slot, 1)

        def scenario() -> None:
            asyncio.run(registered())

        def check() -> None:
            assert t.live_count(vigil._util.U64_MAX) == 0, "a slot is still registered"

        each_point(scenario, (scenario.__code__, registered.__code__), check)


class SignalledQueue(collections.deque):
    """A turn queue whose append, on the main thread, delivers SIGINT just
    as the ticket is in (as a Ctrl-C from the terminal landing there: the
    handler runs at the check after the call, inside Turns' `with`)."""

    def append(self, ticket: Any) -> None:
        super().append(ticket)
        if threading.current_thread() is threading.main_thread():
            signal.raise_signal(signal.SIGINT)


@pytest.mark.parametrize("second", [False, True], ids=["once", "twice"])
def test_ctrl_c_as_a_failover_wait_queues_leaves_no_ticket(tmp, monkeypatch, second):
    """Ctrl-C landing as the main thread's failover_wait queues for the
    table's turn (another thread's wait holds it), and, `twice`, again as
    the clean-up starts: no ticket of the gone caller is left (issue 27's
    review: one was, the turn was handed to it, busy for nobody, and every
    later failover_wait returned [] at its timeout, a dead owner never
    reclaimed). A bound Barrier's waits take the same turns."""
    from vigil import _table, _util

    real = _table.lib
    inside, release = threading.Event(), threading.Event()

    class HeldByAnotherThread:
        """The library, its failover wait held on other threads until released."""

        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        @staticmethod
        def vigil_failover_wait(*args: Any) -> int:
            if threading.current_thread() is not threading.main_thread():
                inside.set()
                assert release.wait(60)
            return real.vigil_failover_wait(*args)

    monkeypatch.setattr(_table, "lib", HeldByAnotherThread())
    if second:
        # The second Ctrl-C lands at the first instruction of the first
        # clean-up (pending, its handler run by the real one's start).
        leave, sent = _util.Turns._leave, []

        def leave_signalled(self: Any, ticket: Any) -> None:
            if not sent:
                sent.append(1)
                SIGINT_NOW.now  # noqa: B018
            leave(self, ticket)

        monkeypatch.setattr(_util.Turns, "_leave", leave_signalled)
    with vigil.HeartbeatTable.create(os.path.join(tmp, "t.hb"), 4) as t:
        turns = t._failover_turns
        turns._queue = SignalledQueue()
        holder = threading.Thread(target=lambda: t.failover_wait(0, timeout=0))
        holder.start()
        assert inside.wait(60), "the other thread's wait never started"
        with pytest.raises(KeyboardInterrupt):
            t.failover_wait(0, timeout=60)
        assert not turns._queue, "the gone caller's ticket is still queued"
        assert not second or sent, "no second signal landed"
        release.set()
        holder.join(60)
        assert turns.busy == 0, f"busy {turns.busy} with no call in progress"
        # An owner that dies holding its slot: the next wait reclaims it.
        pid = os.fork()
        if pid == 0:
            try:
                t.register()
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        got = t.failover_wait(0, timeout=30)
        assert [r.pid for r in got] == [pid], f"failover_wait -> {got}"
        assert turns.busy == 0 and not turns._queue
