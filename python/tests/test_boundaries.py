# SPDX-License-Identifier: MIT
"""The boundaries a program crosses without meaning to: a fork in the middle
of a block (a real os.fork; the child leaves every block and closes every
handle the way a program would), a NUL inside a path, key or owner, two
threads on one bound barrier or one table's failover_wait, and more asyncio
waits at once than any fixed pool has threads."""
from __future__ import annotations

import asyncio
import faulthandler
import gc
import os
import sys
import threading
import time
import traceback

import pytest

import vigil
from vigil import _table


def in_child(leave, limit: float = 60.0) -> int:
    """Fork; the child runs leave() and _exits (0, or 1 with the traceback
    on stderr); the parent gets the child's exit code. A child still
    running after `limit` seconds prints where it is and is killed."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            faulthandler.dump_traceback_later(limit, exit=True)
            leave()
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    deadline = time.monotonic() + limit + 10
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            raise AssertionError(f"the child did not finish in {limit + 10} s")
        time.sleep(0.005)
    assert os.WIFEXITED(status), f"child ended by signal {os.WTERMSIG(status)}"
    return os.WEXITSTATUS(status)


def test_a_forked_child_leaves_the_parents_things_alone(tmp):
    """A child forked inside a registered() block, a lock() block and a
    keepalive block leaves them, closes the handles and is collected: the
    parent's slot stays registered with its unit, its lease held and its
    keepalive renewing; the parent then leaves them itself."""
    t = vigil.HeartbeatTable.create(os.path.join(tmp, "t.hb"), 4)
    store = vigil.Leases.create(os.path.join(tmp, "l.ls"), 4)
    reg = t.registered()
    slot = reg.__enter__()
    t.mark(slot, 5)
    lock = store.lock("k", "parent", ttl=1.0)
    lease = lock.__enter__()
    other = store.acquire("kept", "parent", ttl=1.0)
    ka = vigil.keepalive(store, other).__enter__()

    def leave() -> None:
        lock.__exit__(None, None, None)
        ka.__exit__(None, None, None)
        ka.close()
        reg.__exit__(None, None, None)
        t.close()
        store.close()
        gc.collect()

    assert in_child(leave) == 0
    assert t.snapshot(slot).pid == os.getpid() and t.owned(slot), "the parent's slot was taken"
    assert t.snapshot(slot).in_flight == 1 << 5
    renewed = ka.stats().renewals
    deadline = time.monotonic() + 60
    while ka.stats().renewals < renewed + 2:  # two more: its renewer goes on
        assert not ka.lost and time.monotonic() < deadline, "the parent's keepalive stopped"
        time.sleep(0.02)
    for key, held in (("k", lease), ("kept", other)):
        info = store.get(key)
        assert info is not None and info.token == held.token, f"the parent's lease {key!r} was let go"
    assert lock.lost is False
    ka.__exit__(None, None, None)
    store.release(other)
    lock.__exit__(None, None, None)
    reg.__exit__(None, None, None)
    assert store.get("k") is None and not t.owned(slot)
    t.close()
    store.close()


@pytest.mark.asyncio
async def test_a_child_forked_under_a_heartbeat_leaves_it(tmp):
    with vigil.Leases.create(os.path.join(tmp, "l.ls"), 4) as store:
        lease = store.acquire("k", "parent", ttl=1.0)
        hb = vigil.heartbeat(store, lease)
        await hb.__aenter__()

        def leave() -> None:
            # The child runs the block's exit in a loop of its own, as its
            # program would (an exception: the parent's lease is released
            # on an exception, not here).
            asyncio.new_event_loop().run_until_complete(hb.__aexit__(KeyError, KeyError(), None))

        renewed = hb._ka.stats().renewals
        assert in_child(leave) == 0
        deadline = time.monotonic() + 60
        while hb._ka.stats().renewals < renewed + 2:  # the parent's renewal goes on
            assert not hb.lost and time.monotonic() < deadline, "the parent's heartbeat stopped"
            await asyncio.sleep(0.02)
        assert store.get("k").token == lease.token
        await hb.__aexit__(None, None, None)
        store.release(lease)


@pytest.mark.parametrize("make", [
    lambda d: vigil.HeartbeatTable.create(d + "/t\0.evil", 4),
    lambda d: vigil.HeartbeatTable.open(d + "/t\0.evil"),
    lambda d: vigil.Leases.create(d + "/t\0.evil", 4),
    lambda d: vigil.Leases.open(d.encode() + b"/t\0.evil"),
])
def test_a_nul_in_a_path_is_value_error(tmp, make):
    with pytest.raises(ValueError, match="embedded null byte") as ei:
        make(tmp)
    assert not isinstance(ei.value, vigil.Error)
    assert os.listdir(tmp) == [], "a file was made at the path cut at the NUL"


def test_a_nul_in_a_key_or_owner_is_value_error(tmp):
    with vigil.Leases.create(os.path.join(tmp, "l.ls"), 4) as s, \
            vigil.HeartbeatTable.create(os.path.join(tmp, "t.hb"), 4) as t:
        for call in (lambda: s.acquire("k\0x", "me", 1.0), lambda: s.acquire("k", "m\0e", 1.0),
                     lambda: s.lock("k\0", "me", 1.0), lambda: s.get("k\0")):
            with pytest.raises(ValueError, match="embedded null byte"):
                call()
        assert s.get("k") is None
        with pytest.raises(ValueError, match="embedded null byte"):
            vigil.Barrier.create(os.path.join(tmp, "b\0.bar"), t, 5)


def test_two_threads_on_one_bound_barrier_keep_its_arrival(tmp):
    """One thread waits on a bound handle, a second one waits on it with a
    short timeout: that wait takes its turn and leaves without withdrawing
    the first one's arrival; the round releases when the third peer comes
    (before: the round stayed stuck)."""
    with vigil.HeartbeatTable.create(os.path.join(tmp, "t.hb"), 4) as t:
        me, peer = t.register(), t.register()
        mine = vigil.Barrier.create(os.path.join(tmp, "b.bar"), t, 5)
        mine.bind(me)
        theirs = vigil.Barrier.open(mine.path, t)
        theirs.bind(peer)
        got = {}
        first = threading.Thread(target=lambda: got.setdefault("first", mine.wait(0, timeout=60)))
        first.start()
        deadline = time.monotonic() + 60
        while mine._turns.busy == 0:
            assert time.monotonic() < deadline
            time.sleep(0.001)
        with pytest.raises(vigil.Timeout, match="another thread"):
            mine.wait(0, timeout=0.05)
        theirs.wait(0, timeout=60)
        first.join(60)
        assert "first" in got and mine.epoch == 1


def wrap_failover_wait(monkeypatch, wait):
    """The table module's library with vigil_failover_wait replaced by `wait`."""
    real = _table.lib

    class Wrapped:
        def __getattr__(self, name):
            return getattr(real, name)

        vigil_failover_wait = staticmethod(wait)

    monkeypatch.setattr(_table, "lib", Wrapped())


def test_failover_waits_on_one_table_take_turns(tmp, monkeypatch):
    """Two threads' failover_wait on one table never run the C wait at once
    (it keeps the handle's pidfds), and a dead worker's units go to one."""
    inside, most = [0], [0]
    real = _table.lib

    def counted(*args):
        inside[0] += 1
        most[0] = max(most[0], inside[0])
        try:
            time.sleep(0.002)
            return real.vigil_failover_wait(*args)
        finally:
            inside[0] -= 1

    wrap_failover_wait(monkeypatch, counted)
    with vigil.HeartbeatTable.create(os.path.join(tmp, "t.hb"), 4) as t:
        slot = t.register(pid=os.getpid())
        t.mark(slot, 9)
        for _ in range(3):
            t.tick()
        got = []
        threads = [threading.Thread(target=lambda: got.extend(t.failover_wait(1, timeout=2.0))) for _ in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(60)
    assert most[0] == 1, f"{most[0]} failover waits ran at once on one handle"
    assert [(r.slot, r.units) for r in got] == [(slot, [9])]


@pytest.mark.asyncio
async def test_waits_that_need_each_other_outnumber_any_fixed_pool(tmp):
    """300 async waits of one round, each needing all the others: a pool of
    256 threads (the old one) waited for ever; each has a thread now."""
    n = 300
    with vigil.HeartbeatTable.create(os.path.join(tmp, "t.hb"), n) as t:
        b = vigil.Barrier.create(os.path.join(tmp, "b.bar"), t, 5)
        got = await asyncio.wait_for(asyncio.gather(*(b.wait_async(0, quorum=n, timeout=60) for _ in range(n))), 90)
        assert sorted(got) == [False] * (n - 1) + [True]


def test_a_port_whose_renew_stops_its_own_keepalive(tmp):
    """A port's renew that stops the keepalive calling it (issue 27's
    review: the C stop joined itself, freed, and the renewal returned into
    freed memory: a segfault). The stop returns at once, no renewal comes
    after it, and the renewer's threads end."""
    base = len(os.listdir("/proc/self/task"))

    class StopsItself:
        def __init__(self) -> None:
            self.ka = None
            self.calls = 0
            self.stopped = threading.Event()
            self.rc = None

        def renew(self, lease):
            self.calls += 1
            if self.calls == 1:
                assert self.ka is not None
                self.rc = self.ka.stop()
                self.stopped.set()
            return True

    for _ in range(5):
        port = StopsItself()
        lease = vigil.Lease("k", "me", 1, 1.5)  # first renewal 0.48 s after start
        ka = port.ka = vigil.keepalive(port, lease).start()
        assert port.stopped.wait(30), "renew was never called"
        assert port.rc == 0 and not ka.running
        deadline = time.monotonic() + 10
        while len(os.listdir("/proc/self/task")) != base and time.monotonic() < deadline:
            time.sleep(0.002)
        assert len(os.listdir("/proc/self/task")) == base, "the renewer's threads are still running"
        time.sleep(0.6)  # past the next beat
        assert port.calls == 1, f"{port.calls} renewals: one came after the stop"
        assert ka.stop() == 0  # again: idempotent
        del port.ka
        gc.collect()


def test_a_renew_that_stops_while_another_thread_stops(tmp):
    """The renew stops its keepalive while another thread's stop is joining
    the renewer (and so waiting for that renewal): neither waits for the
    other."""
    inside, leave = threading.Event(), threading.Event()

    class Slow:
        ka = None

        def renew(self, lease):
            inside.set()
            assert leave.wait(30)
            return self.ka.stop() == 0

    port = Slow()
    ka = port.ka = vigil.keepalive(port, vigil.Lease("k", "me", 1, 0.3)).start()
    assert inside.wait(30)
    stopper = threading.Thread(target=ka.stop)
    stopper.start()
    deadline = time.monotonic() + 10
    while not ka._stopping.locked() and time.monotonic() < deadline:
        time.sleep(0.001)
    leave.set()
    stopper.join(30)
    assert not stopper.is_alive(), "the stops waited for each other"
    assert not ka.running


READS = {"lost": lambda ka: ka.lost, "stats": lambda ka: ka.stats(), "fileno": lambda ka: ka.fileno()}


@pytest.mark.parametrize("stopper", ["thread", "renewer"])
@pytest.mark.parametrize("read", sorted(READS))
def test_a_read_racing_a_stop_never_reaches_a_freed_keepalive(monkeypatch, read, stopper):
    """A thread reads `lost`, `stats()` or `fileno()` while the keepalive is
    stopped by another thread or by its own renew (issue 27's review: the
    reader had taken the C keepalive, the stop freed it, and the reader's
    call read freed memory: heap-use-after-free under ASan). The race is
    landed where it hurt: the reader holds the keepalive, about to call the
    library, until the stop has begun (entered the library's stop, or
    waits for the reader). A call on a keepalive whose stop began is
    recorded, and not made."""
    from vigil import _keepalive
    from vigil._ffi import ffi

    real = _keepalive.lib
    reader: list = []  # the reading thread's ident
    reading, stop_begun = threading.Event(), threading.Event()
    stopped, late = set(), []

    def address(ka):
        return int(ffi.cast("uintptr_t", ka))

    def held(name, refused):
        call = getattr(real, name)

        def read_held(ka, *args):
            if threading.get_ident() in reader and not reading.is_set():
                reading.set()
                assert stop_begun.wait(60), "the stop never began"
            if address(ka) in stopped:
                late.append(name)
                return refused
            return call(ka, *args)

        return read_held

    class Library:
        def __getattr__(self, name):
            return getattr(real, name)

        vigil_keepalive_lost = staticmethod(held("vigil_keepalive_lost", 0))
        vigil_keepalive_stats = staticmethod(held("vigil_keepalive_stats", -22))
        vigil_keepalive_fd = staticmethod(held("vigil_keepalive_fd", -22))

        @staticmethod
        def vigil_keepalive_stop(ka):
            stopped.add(address(ka))
            stop_begun.set()
            return real.vigil_keepalive_stop(ka)

    class Announced:
        """The keepalive's reader lock, saying when a stop waits for it."""

        def __init__(self, lock):
            self.lock = lock

        def __enter__(self):
            if threading.get_ident() not in reader:
                stop_begun.set()
            return self.lock.__enter__()

        def __exit__(self, *exc):
            return self.lock.__exit__(*exc)

    class Port:
        ka = None
        rc = None
        done = threading.Event()

        def renew(self, lease):
            if stopper == "renewer" and self.rc is None:
                assert reading.wait(60), "the reader never came"
                self.rc = self.ka.stop()
                self.done.set()
            return True

    monkeypatch.setattr(_keepalive, "lib", Library())
    port = Port()
    # The renewer's stop comes with its first renewal (0.48 s in); the
    # thread's long before any.
    ka = port.ka = vigil.keepalive(port, vigil.Lease("k", "me", 1, 1.5 if stopper == "renewer" else 60)).start()
    ka._using = Announced(ka._using)
    got = []

    def read_once():
        reader.append(threading.get_ident())
        try:
            got.append(READS[read](ka))
        except ValueError as e:  # stopped first: a clear error, never a freed keepalive
            got.append(e)

    th = threading.Thread(target=read_once)
    th.start()
    if stopper == "thread":
        assert reading.wait(60), "the reader never came"
        assert ka.stop() == 0
    else:
        assert port.done.wait(60), "renew was never called"
        assert port.rc in (0, vigil.VIGIL_ELOST)  # the verdict then: lost if the machine stalled past the TTL
    th.join(60)
    assert not th.is_alive()
    assert not late, f"{late} called on a keepalive its stop had freed (or was freeing)"
    assert got and not isinstance(got[0], ValueError), f"the read was refused: {got}"
    assert not ka.running
    with pytest.raises(ValueError):
        READS[read](ka) if read != "lost" else ka.stats()


def test_a_forked_child_starts_the_wait_pool_and_turns_afresh(tmp):
    """Forked while the parent's threads hold a table's failover_wait turn,
    are inside a barrier wait (counted by close) and idle in the asyncio
    wait pool: the child's own async calls, failover_wait and close run
    (issue 27's review: every *_async call hung for ever in the child)."""
    with vigil.HeartbeatTable.create(os.path.join(tmp, "t.hb"), 8) as t, \
            vigil.Leases.create(os.path.join(tmp, "l.ls"), 4) as store:
        b = vigil.Barrier.create(os.path.join(tmp, "b.bar"), t, 5)
        asyncio.run(store.acquire_async("warm", "me", 5.0))  # the pool has an idle thread now
        me = t.register()
        t.register(pid=os.getpid())  # a second live peer, which never arrives
        waiting, release = threading.Event(), threading.Event()

        def hold_turn() -> None:
            # A failover_wait's turn held (as a wait in progress holds it),
            # claiming nothing: the child's wait is the only one to claim.
            t._failover_turns.run(True, None, None, lambda _: (waiting.set(), release.wait(60)), list)

        holders = [threading.Thread(target=hold_turn),
                   threading.Thread(target=lambda: b.wait(b.epoch, timeout=30))]
        for th in holders:
            th.start()
        assert waiting.wait(30)
        deadline = time.monotonic() + 30
        while not (b._inside and t._failover_turns.busy) and time.monotonic() < deadline:
            time.sleep(0.001)
        assert b._inside and t._failover_turns.busy, "the parent's threads never got in"

        def child() -> None:
            async def both():
                lease = await asyncio.wait_for(store.acquire_async("k", "child", 5.0), 20)
                await asyncio.wait_for(store.acquire_wait_async("k2", "child", 5.0, timeout=5.0), 20)
                return lease
            lease = asyncio.run(both())
            assert lease.owner == "child"
            dead = _registered_and_dead(t)
            got = t.failover_wait(10**6, timeout=20)  # the turn is free: its exit is seen at once
            assert [r.slot for r in got] == [dead], got
            b.close()  # nothing counted of the parent's waits

        try:
            assert in_child(child, 30) == 0
        finally:
            release.set()
            b.wait(0, timeout=30)  # the second of the two live peers: the parent's wait is released
            for th in holders:
                th.join(60)
        b.close()
        t.unregister(me)


def _registered_and_dead(t) -> int:
    """The slot of a child that registered in `t` and exited (reaped)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.write(w, str(t.register()).encode())
        os._exit(0)
    os.close(w)
    slot = int(os.read(r, 32))
    os.close(r)
    os.waitpid(pid, 0)
    return slot


def test_a_child_forked_by_another_thread_has_no_guard_up(tmp):
    """Forked by a thread while the main thread is inside a block (which
    holds the signal guard): the child has none of the main thread's
    frames, so nothing holds the guard there and its handlers are the
    program's own (Ctrl-C raises at once)."""
    import signal

    from vigil import _signals

    codes = []
    with vigil.Leases.create(os.path.join(tmp, "l.ls"), 4) as store, store.lock("k", "me", ttl=5.0):
        assert _signals._holders > 0

        def leave() -> None:
            assert _signals._holders == 0 and not _signals._armed
            assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
            try:
                signal.raise_signal(signal.SIGINT)
                time.sleep(0)
            except KeyboardInterrupt:
                return
            raise AssertionError("Ctrl-C was held back")

        th = threading.Thread(target=lambda: codes.append(in_child(leave, 30)))
        th.start()
        th.join(60)
    assert codes == [0]


def test_failover_waits_on_one_table_are_served_in_turn(tmp, monkeypatch):
    """A thread calling failover_wait again and again with short timeouts,
    and one with longer ones, on one table: the turns go in the order
    asked, so the second is served as often as the first (polling for the
    turn let the first take nearly all of them: 176 to 2)."""
    served = {"short": 0, "long": 0}
    real = _table.lib

    def counted(*args):
        served[threading.current_thread().name] += 1  # the C wait runs only in a turn
        return real.vigil_failover_wait(*args)

    wrap_failover_wait(monkeypatch, counted)
    with vigil.HeartbeatTable.create(os.path.join(tmp, "t.hb"), 4) as t:
        stop = threading.Event()

        def loop(timeout: float) -> None:
            while not stop.is_set():
                t.failover_wait(10**6, timeout=timeout)
                if served["short"] >= 30:
                    stop.set()

        threads = [threading.Thread(target=loop, args=(0.01,), name="short"),
                   threading.Thread(target=loop, args=(0.1,), name="long")]
        for th in threads:
            th.start()
        for th in threads:
            th.join(120)
    assert served["long"] >= 10, f"served {served}: the longer waits starved"


def test_a_turn_waiter_leaves_the_queue_at_its_timeout_or_signal(tmp):
    """A waiter whose timeout passes, or whose wait a signal's exception
    ends, leaves the queue: the turn goes to the next one, never to a
    waiter that is gone (else every later call waits for ever)."""
    turns = vigil._util.Turns()
    inside, leave = threading.Event(), threading.Event()
    holder = threading.Thread(target=lambda: turns.run(True, None, None, lambda _: (inside.set(), leave.wait(60)), list))
    holder.start()
    assert inside.wait(30)
    assert turns.run(True, 0.05, None, lambda _: "ran", lambda: "missed") == "missed"
    import signal

    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        # A real SIGINT to the main thread, waiting on its gate.
        timer = threading.Timer(0.05, signal.pthread_kill, (threading.main_thread().ident, signal.SIGINT))
        with pytest.raises(KeyboardInterrupt):
            timer.start()
            turns.run(True, 30, None, lambda _: "ran", lambda: "missed")
        timer.join()
    finally:
        signal.signal(signal.SIGINT, old)
    assert not turns._queue, "a waiter that left is still queued"
    got = []
    late = threading.Thread(target=lambda: got.append(turns.run(True, 30, None, lambda _: "ran", lambda: "missed")))
    late.start()
    deadline = time.monotonic() + 30
    while not turns._queue and time.monotonic() < deadline:
        time.sleep(0.001)
    leave.set()
    holder.join(30)
    late.join(30)
    assert got == ["ran"] and turns.busy == 0 and not turns._queue


def test_a_wait_pool_thread_that_fails_to_start_leaves_no_call_behind(monkeypatch):
    """A call whose thread cannot be started raises, and is never made later
    by another thread of the pool (it was left queued: an acquire made
    then held a lease nobody would release)."""
    pool = vigil._aio.WaitPool()
    ran = []
    real = threading.Thread.start

    def refuse(self):
        if self.name == "vigil-wait":
            raise RuntimeError("can't start new thread")
        return real(self)

    monkeypatch.setattr(threading.Thread, "start", refuse)
    with pytest.raises(RuntimeError):
        pool.submit(ran.append, "stale")
    monkeypatch.undo()
    assert pool.submit(ran.append, "fresh").result(30) is None
    assert pool.submit(ran.append, "again").result(30) is None
    assert ran == ["fresh", "again"], ran
    pool.shutdown()
