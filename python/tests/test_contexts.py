# SPDX-License-Identifier: MIT
"""The context managers people expect (`table.registered()`, `store.lock()`
and its async twin) and the store's async acquire calls."""
import asyncio
import os
import threading
import time

import pytest

import vigil


@pytest.fixture
def store(tmp):
    with vigil.Leases.create(os.path.join(tmp, "l.ls"), 8) as ls:
        yield ls


# ---- table.registered() ------------------------------------------------------


def test_registered_holds_a_slot_for_the_block(tmp):
    with vigil.HeartbeatTable.create(os.path.join(tmp, "t.hb"), 2) as t:
        with t.registered() as slot:
            assert t.snapshot(slot).pid == os.getpid()
        with pytest.raises(vigil.Vacant):
            t.snapshot(slot)
        with pytest.raises(KeyError):
            with t.registered() as slot:
                raise KeyError("the body's")
        assert t.live_count(grace=1000) == 0


def test_registered_says_lost_when_failover_took_the_slot(tmp):
    with vigil.HeartbeatTable.create(os.path.join(tmp, "t.hb"), 2) as t:
        with pytest.raises(vigil.Lost, match="slot 0 was taken"):
            with t.registered() as slot:
                for _ in range(3):
                    t.tick()  # no beat: stale past grace 1
                assert [r.slot for r in t.failover_scan(grace=1)] == [slot]
        with pytest.raises(KeyError):  # the block's own exception wins
            with t.registered():
                for _ in range(3):
                    t.tick()
                t.failover_scan(grace=1)
                raise KeyError("the body's")


def test_a_worker_taken_over_is_told(tmp):
    """A stale actor is told: once failover took its slot, owned() says so,
    and its marks and clears raise Lost, even after someone else registered
    into the same slot, whose bits they leave alone."""
    path = os.path.join(tmp, "t.hb")
    with vigil.HeartbeatTable.create(path, 2) as t, vigil.HeartbeatTable.open(path) as other:
        slot = t.register()
        t.mark(slot, 3)
        assert t.owned(slot) and not other.owned(slot)
        for _ in range(3):
            t.tick()  # no beat: stale past grace 1
        assert [(r.slot, r.units) for r in t.failover_scan(grace=1)] == [(slot, [3])]
        assert not t.owned(slot)
        with pytest.raises(vigil.Lost):
            t.mark(slot, 5)
        successor = other.register()
        assert successor == slot and other.owned(slot) and not t.owned(slot)
        other.mark(slot, 1)
        with pytest.raises(vigil.Lost):
            t.clear(slot, 1)
        with pytest.raises(vigil.Lost):
            t.mark(slot, 2)
        assert other.snapshot(slot).units == [1]
        with pytest.raises(vigil.OutOfRange, match="slot 2 is out of range 0..1"):
            t.owned(2)


# ---- store.lock() ------------------------------------------------------------


def test_lock_acquires_keeps_and_releases(store):
    with store.lock("job", "me", ttl=0.3) as lease:
        assert store.get("job").token == lease.token
        time.sleep(0.5)  # past the TTL: kept alive
        assert store.get("job").token == lease.token
        with pytest.raises(vigil.Timeout):
            with store.lock("job", "rival", ttl=1.0, timeout=0.05):
                pass
    assert store.get("job") is None
    with pytest.raises(KeyError):
        with store.lock("job", "me", ttl=1.0):
            raise KeyError("the body's")
    assert store.get("job") is None  # released on the way out


def test_lock_waits_for_the_holder(store):
    held = store.acquire("job", "first", 5.0)
    releaser = threading.Timer(0.1, store.release, (held,))
    releaser.start()
    with store.lock("job", "second", ttl=1.0, timeout=20) as lease:
        assert lease.owner == "second" and lease.token > held.token
    releaser.join(timeout=30)  # out of its call before the fixture closes the store


def test_lock_raises_lost_unless_the_block_saw_it(store):
    lk = store.lock("job", "me", ttl=0.3)
    with pytest.raises(vigil.Lost):
        with lk as lease:
            store.release(lease)  # as if an operator took it
            _until(lambda: lk._ka._is_lost())
    assert store.get("job") is None
    lk = store.lock("job", "me", ttl=0.3)
    with lk as lease:
        store.release(lease)
        _until(lambda: lk.lost)  # seen: the exit raises nothing


def _until(cond, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline
        time.sleep(0.01)


@pytest.mark.asyncio
async def test_async_lock(store):
    async with store.lock("job", "me", ttl=0.3) as lease:
        await asyncio.sleep(0.5)
        assert store.get("job").token == lease.token
    assert store.get("job") is None

    async def holder():
        async with store.lock("job", "me", ttl=5.0):
            await asyncio.sleep(1e6)

    task = asyncio.ensure_future(holder())
    await _async_until(lambda: store.get("job") is not None)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert store.get("job") is None  # the cancellation released it


async def _async_until(cond, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline
        await asyncio.sleep(0.01)


# ---- acquire_async, acquire_wait_async ------------------------------------------


@pytest.mark.asyncio
async def test_acquire_async_and_wait_async_leave_the_loop_free(store):
    lease = await store.acquire_async("job", "me", 5.0)
    with pytest.raises(vigil.Busy):
        await store.acquire_async("job", "rival", 5.0)
    ticks = 0

    async def ticker():
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    t = asyncio.ensure_future(ticker())
    waiter = asyncio.ensure_future(store.acquire_wait_async("job", "second", 1.0, timeout=20))
    await _async_until(lambda: ticks >= 5)  # the loop runs while the wait is pending
    assert not waiter.done()
    store.release(lease)
    got = await asyncio.wait_for(waiter, 20)
    assert got.owner == "second" and got.token > lease.token
    t.cancel()
    with pytest.raises(vigil.Timeout):
        await store.acquire_wait_async("job", "third", 1.0, timeout=0.05)


@pytest.mark.asyncio
async def test_a_cancelled_wait_leaves_nothing_held(store):
    held = store.acquire("job", "first", 5.0)
    waiter = asyncio.ensure_future(store.acquire_wait_async("job", "second", 1.0))
    await asyncio.sleep(0.1)
    started = time.monotonic()
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert time.monotonic() - started < 5  # left within a slice, not at a deadline
    store.release(held)
    await asyncio.sleep(0.2)
    assert store.get("job") is None  # the cancelled waiter did not take it
