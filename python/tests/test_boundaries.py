# SPDX-License-Identifier: MIT
"""The boundaries a program crosses without meaning to: a fork in the middle
of a block (a real os.fork; the child leaves every block and closes every
handle the way a program would), a NUL inside a path, key or owner, two
threads on one bound barrier or one table's failover_wait, and more asyncio
waits at once than any fixed pool has threads."""
from __future__ import annotations

import asyncio
import gc
import os
import sys
import threading
import time
import traceback

import pytest

import vigil
from vigil import _table


def in_child(leave) -> int:
    """Fork; the child runs leave() and _exits (0, or 1 with the traceback
    on stderr); the parent gets the child's exit code."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            leave()
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
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


def test_failover_waits_on_one_table_take_turns(tmp, monkeypatch):
    """Two threads' failover_wait on one table never run the C wait at once
    (it keeps the handle's pidfds), and a dead worker's units go to one."""
    inside, most = [0], [0]
    real = _table.lib

    class Counting:
        def __getattr__(self, name):
            return getattr(real, name)

        @staticmethod
        def vigil_failover_wait(*args):
            inside[0] += 1
            most[0] = max(most[0], inside[0])
            try:
                time.sleep(0.002)
                return real.vigil_failover_wait(*args)
            finally:
                inside[0] -= 1

    monkeypatch.setattr(_table, "lib", Counting())
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
