# SPDX-License-Identifier: MIT
"""The heartbeat table under asyncio (issue 31.6): failover_wait_async
wakes at once for a death through failover_fileno() (no thread), finds
slots stale by epochs, times out empty and leaves nothing behind when
cancelled; `async with table.registered()`; keepalive_async, the lease
keepalive's name that no heartbeat table can be confused with."""
from __future__ import annotations

import asyncio
import os
import select
import signal
import time

import pytest

import vigil


def worker(table, units=(3,)):
    """A child that registers in `table`, marks `units` and waits to be
    killed; returns (pid, slot)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        slot = table.register()
        for u in units:
            table.mark(slot, u)
        os.write(w, str(slot).encode())
        while True:
            signal.pause()
    os.close(w)
    slot = int(os.read(r, 32))
    os.close(r)
    return pid, slot


def reap(pid):
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    os.waitpid(pid, 0)


@pytest.fixture
def table(tmp):
    with vigil.HeartbeatTable.create(os.path.join(tmp, "t.hb"), 8) as t:
        yield t


@pytest.mark.asyncio
async def test_a_death_wakes_failover_wait_async(table):
    pid, slot = worker(table)
    try:
        threads = len(os.listdir("/proc/self/task"))
        waiting = asyncio.ensure_future(table.failover_wait_async(10**6, timeout=60))
        await asyncio.sleep(0.1)
        assert not waiting.done()
        assert len(os.listdir("/proc/self/task")) == threads, "the wait took a thread"
        os.kill(pid, signal.SIGKILL)
        got = await asyncio.wait_for(waiting, 30)
        assert [(r.slot, r.pid, r.units) for r in got] == [(slot, pid, [3])]
    finally:
        reap(pid)


@pytest.mark.asyncio
async def test_stale_timeout_and_cancel(table):
    pid, slot = worker(table, units=(5,))
    try:
        assert await table.failover_wait_async(2, timeout=0.1) == []  # alive and fresh
        fds = len(os.listdir("/proc/self/fd"))
        task = asyncio.ensure_future(table.failover_wait_async(2))
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert table._failover_turns.busy == 0, "the cancelled wait left its turn taken"
        assert len(os.listdir("/proc/self/fd")) == fds, "the cancelled wait left its descriptor open"
        for _ in range(4):
            table.tick()  # the worker is alive but silent: stale past the grace
        got = await asyncio.wait_for(table.failover_wait_async(2, timeout=30), 60)
        assert [(r.slot, r.units) for r in got] == [(slot, [5])]
    finally:
        reap(pid)


@pytest.mark.asyncio
async def test_two_async_waits_on_one_table_share_its_descriptor(table):
    a, sa = worker(table)
    b, sb = worker(table)
    try:
        table.failover_fileno()  # the epoll instance, made at the first call that needs it
        fds = len(os.listdir("/proc/self/fd"))
        waits = [asyncio.ensure_future(table.failover_wait_async(10**6, timeout=60, max=1)) for _ in range(2)]
        await asyncio.sleep(0.1)
        os.kill(a, signal.SIGKILL)
        os.kill(b, signal.SIGKILL)
        got = await asyncio.wait_for(asyncio.gather(*waits), 30)
        assert sorted(r.slot for g in got for r in g) == sorted([sa, sb])
        assert len(os.listdir("/proc/self/fd")) == fds, "a wait left its descriptor open"
    finally:
        reap(a)
        reap(b)


@pytest.mark.asyncio
async def test_a_table_closed_under_an_async_wait(tmp):
    """The table closed while a failover_wait_async waits, and its
    descriptor's number taken by another file that the loop reads: the
    wait ends (ValueError, the table is closed) and the other file's
    reader is left alone (the wait watched the table's own descriptor:
    its remove_reader took the new file's reader, or its add_reader
    failed on it)."""
    loop = asyncio.get_running_loop()
    table = vigil.HeartbeatTable.create(os.path.join(tmp, "c.hb"), 8)
    fd = table.failover_fileno()
    task = asyncio.ensure_future(table.failover_wait_async(10**6, timeout=60))
    await asyncio.sleep(0.1)
    table.close()
    r, w = os.pipe()
    if fd not in (r, w):
        os.dup2(r, fd)  # the table's descriptor's number, now a pipe's (if the pipe did not take it)
    try:
        readable = loop.create_future()
        loop.add_reader(fd, lambda: readable.done() or readable.set_result(None))
        with pytest.raises(ValueError):
            await asyncio.wait_for(task, 30)
        os.write(w, b"x")
        await asyncio.wait_for(readable, 30)
        loop.remove_reader(fd)
    finally:
        for f in {fd, r, w}:
            os.close(f)


def test_failover_fileno_for_a_loop_of_ones_own(table):
    """The descriptor a loop of one's own polls: readable at a death, a
    failover_wait with a timeout of 0 then reclaims, and it is quiet again."""
    fd = table.failover_fileno()
    assert table.failover_fileno() == fd
    pid, slot = worker(table)
    try:
        assert table.failover_wait(10**6, timeout=0) == []  # the look that watches it
        assert select.select([fd], [], [], 0)[0] == []
        os.kill(pid, signal.SIGKILL)
        assert select.select([fd], [], [], 30)[0] == [fd]
        assert [r.slot for r in table.failover_wait(10**6, timeout=0)] == [slot]
        assert select.select([fd], [], [], 0)[0] == []
    finally:
        reap(pid)


@pytest.mark.asyncio
async def test_async_registered(table):
    async with table.registered() as slot:
        assert table.owned(slot)
        table.mark(slot, 1)
    assert table.live_count(vigil._util.U64_MAX) == 0
    with pytest.raises(vigil.Lost):
        async with table.registered() as slot:
            for _ in range(4):
                table.tick()
            assert [r.slot for r in await table.failover_wait_async(2, timeout=30)] == [slot]
    assert table.live_count(vigil._util.U64_MAX) == 0


def test_keepalive_async_is_the_lease_keepalive(tmp):
    assert vigil.heartbeat is vigil.keepalive_async and vigil.Heartbeat is vigil.AsyncKeepalive

    async def main() -> None:
        with vigil.Leases.create(os.path.join(tmp, "l.ls"), 4) as store:
            lease = store.acquire("k", "me", 0.3)
            async with vigil.keepalive_async(store, lease) as ka:
                await asyncio.sleep(0.5)  # past the TTL: renewed meanwhile
                assert not ka.lost
            store.release(lease)

    asyncio.run(main())
