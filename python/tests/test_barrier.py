# SPDX-License-Identifier: MIT
"""Barrier: rounds, quorum, deadlines and the async wait, in one process."""
from __future__ import annotations

import asyncio
import os
import signal
import threading
import time

import pytest

import vigil


@pytest.fixture
def pool(tmp):
    t = vigil.HeartbeatTable.create(os.path.join(tmp, "t.hb"), 4)
    b = vigil.Barrier.create(os.path.join(tmp, "b.bar"), t, 1000)
    yield t, b
    t.close()


def test_one_peer_is_the_serial_caller_every_round(pool):
    t, b = pool
    slot = t.register()
    b.bind(slot)
    e = b.epoch
    assert b.live_peers == 1
    for i in range(5):
        assert b.wait(e + i) is True
    assert b.epoch == e + 5
    assert b.wait(e) is False  # a round that has passed returns at once


def test_checks_and_their_order(pool):
    t, b = pool
    with pytest.raises(vigil.OutOfRange):
        b.wait(b.epoch, quorum=0)
    with pytest.raises(vigil.NoPeers):
        b.wait(b.epoch)
    assert b.wait((b.epoch - 1) & 0xFFFFFFFF) is False  # passed (rounds wrap at 2^32), before the peer check
    with pytest.raises(vigil.OutOfRange):
        b.bind(99)


def test_timeout_withdraws_the_arrival(pool):
    t, b = pool
    s1, s2 = t.register(), t.register()
    b.bind(s1)
    e = b.epoch
    with pytest.raises(vigil.Timeout) as ei:
        b.wait(e, timeout=0.05)
    assert isinstance(ei.value, TimeoutError)
    with pytest.raises(vigil.Timeout):
        b.wait(e, timeout=0)
    # The peer in s2 alone does not make the round: nobody is still waiting in s1.
    other = vigil.Barrier.open(b.path, t)
    other.bind(s2)
    with pytest.raises(vigil.Timeout):
        other.wait(e, timeout=0.05)
    assert b.epoch == e


def test_quorum(pool):
    t, b = pool
    for _ in range(3):
        t.register()
    e = b.epoch
    assert b.wait(e, quorum=1) is True
    assert b.epoch == e + 1


def test_threads_meet_and_one_is_serial(pool):
    t, b = pool
    slots = [t.register() for _ in range(3)]
    handles = [vigil.Barrier.open(b.path, t) for _ in slots]
    for h, s in zip(handles, slots):
        h.bind(s)
    e, rounds = b.epoch, 20
    serials = [0] * 3

    def run(i):
        for r in range(rounds):
            serials[i] += handles[i].wait(e + r, timeout=20)

    ths = [threading.Thread(target=run, args=(i,)) for i in range(3)]
    for th in ths:
        th.start()
    for th in ths:
        th.join(timeout=60)
        assert not th.is_alive()
    assert sum(serials) == rounds and b.epoch == e + rounds


@pytest.mark.asyncio
async def test_wait_async_leaves_the_loop_free(pool):
    t, b = pool
    s1, s2 = t.register(), t.register()
    b.bind(s1)
    other = vigil.Barrier.open(b.path, t)
    other.bind(s2)
    e = b.epoch
    task = asyncio.ensure_future(b.wait_async(e, timeout=20))
    ticks = 0
    while ticks < 5:  # the loop runs while the wait is pending
        await asyncio.sleep(0.01)
        ticks += 1
    assert not task.done()
    mine = await asyncio.get_running_loop().run_in_executor(None, lambda: other.wait(e, timeout=20))
    theirs = await asyncio.wait_for(task, 20)
    assert sorted([mine, theirs]) == [False, True]


@pytest.mark.asyncio
async def test_wait_async_cancelled_withdraws(pool):
    t, b = pool
    s1, s2 = t.register(), t.register()
    b.bind(s1)
    e = b.epoch
    task = asyncio.ensure_future(b.wait_async(e))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    with pytest.raises(vigil.Timeout):
        await b.wait_async(e, timeout=0.01)
    # The cancelled wait has left: s2 alone cannot release the round.
    other = vigil.Barrier.open(b.path, t)
    other.bind(s2)
    with pytest.raises(vigil.Timeout):
        await other.wait_async(e, timeout=0.05)
    assert b.epoch == e


def test_closing_the_table_closes_its_barriers(tmp):
    t = vigil.HeartbeatTable.create(os.path.join(tmp, "t.hb"), 2)
    b = vigil.Barrier.create(os.path.join(tmp, "b.bar"), t, 5)
    t.close()
    assert b.closed
    with pytest.raises(ValueError):
        b.wait(0)
    with pytest.raises(vigil.CapacityMismatch):
        with vigil.HeartbeatTable.create(os.path.join(tmp, "t4.hb"), 4) as t4:
            vigil.Barrier.open(os.path.join(tmp, "b.bar"), t4)


@pytest.mark.asyncio
async def test_more_async_waits_than_the_default_executor_has_threads(tmp):
    n = 12  # the default executor has min(32, cpus + 4) workers: 6 on 2 cpus
    with vigil.HeartbeatTable.create(os.path.join(tmp, "t.hb"), n) as t:
        b = vigil.Barrier.create(os.path.join(tmp, "b.bar"), t, 1000)
        handles = []
        for _ in range(n):
            h = vigil.Barrier.open(b.path, t)
            h.bind(t.register())
            handles.append(h)
        e = b.epoch
        got = await asyncio.wait_for(asyncio.gather(*(h.wait_async(e, timeout=20) for h in handles)), 30)
        assert sorted(got) == [False] * (n - 1) + [True]


def test_slices_are_not_counted_as_withdrawals(pool):
    t, b = pool
    s1, s2 = t.register(), t.register()
    b.bind(s1)
    other = vigil.Barrier.open(b.path, t)
    other.bind(s2)
    e = b.epoch
    before = b.stats()
    # A wait of several slices, released by the other peer: nothing withdrawn.
    late = threading.Timer(0.6, lambda: other.wait(e, timeout=20))
    late.start()
    b.wait(e, timeout=20)
    late.join(timeout=30)  # out of its wait before anything else (or the fixture's close) touches the files
    assert not late.is_alive()
    # A wait of several slices that times out: withdrawn once.
    with pytest.raises(vigil.Timeout):
        b.wait(e + 1, timeout=0.6)
    after = b.stats()
    assert after.withdrawals - before.withdrawals == 1
    assert after.releases - before.releases == 1


def test_an_exception_between_slices_withdraws_the_arrival(pool):
    t, b = pool
    s1, s2 = t.register(), t.register()
    b.bind(s1)
    e = b.epoch
    before = b.stats().withdrawals

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        with pytest.raises(KeyboardInterrupt):
            b.wait(e, timeout=20)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert b.stats().withdrawals == before + 1
    other = vigil.Barrier.open(b.path, t)
    other.bind(s2)
    with pytest.raises(vigil.Timeout):  # the interrupted wait has left: s2 alone cannot release
        other.wait(e, timeout=0.05)


def test_start_gives_every_member_the_same_first_round(pool):
    t, b = pool
    s1, s2 = t.register(), t.register()
    b.bind(s1)
    for i in range(3):  # a barrier file used before: not at round 0
        b.wait(b.epoch, quorum=1)
    at = b.epoch
    other = vigil.Barrier.open(b.path, t)
    other.bind(s2)
    got = {}
    th = threading.Thread(target=lambda: got.update(first=other.start(2, timeout=20)))
    th.start()
    mine = b.start(2, timeout=20)  # the thread may be late: the start waits for it
    th.join(timeout=30)
    assert not th.is_alive() and mine == got["first"] == at + 1
    assert b.stats().withdrawals == 0  # the slices of the longer wait were not withdrawals
    th = threading.Thread(target=lambda: other.wait(mine, timeout=20))
    th.start()
    assert b.wait(mine, timeout=20) in (True, False) and b.epoch == mine + 1
    th.join(timeout=30)  # before the fixture unmaps the table under the thread's wait
    assert not th.is_alive()


def test_start_times_out_and_withdraws(pool):
    t, b = pool
    s1 = t.register()
    b.bind(s1)
    with pytest.raises(vigil.Timeout):
        b.start(2, timeout=0.3)
    assert b.stats().withdrawals == 1
    with pytest.raises(vigil.OutOfRange, match="participants 0 is out of range"):
        b.start(0)


@pytest.mark.asyncio
async def test_start_async_cancelled_withdraws(pool):
    t, b = pool
    b.bind(t.register())
    task = asyncio.ensure_future(b.start_async(3))
    await asyncio.sleep(0.1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert b.stats().withdrawals == 1


def test_closing_the_table_under_a_wait_in_another_thread(tmp):
    """A thread waiting in a barrier when another closes the table (a main
    thread leaving its `with` on Ctrl-C, say) gets ValueError at its next
    slice: the close waits for the slice in progress instead of unmapping
    the files under it (it used to crash the interpreter)."""
    t = vigil.HeartbeatTable.create(os.path.join(tmp, "t.hb"), 4)
    b = vigil.Barrier.create(os.path.join(tmp, "b.bar"), t, 1000)
    s1, s2 = t.register(), t.register()  # s2 never arrives: the wait goes on
    b.bind(s1)
    got = {}

    def waiter():
        try:
            b.wait(b.epoch, timeout=60)
        except BaseException as e:  # what the thread saw is the result
            got["error"] = e

    th = threading.Thread(target=waiter)
    th.start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not b._inside:  # the thread is in a slice
        time.sleep(0.001)
    assert b._inside, "the waiter never reached its wait"
    t.close()  # closes the barrier first, after the slice in progress
    th.join(timeout=30)
    assert not th.is_alive() and isinstance(got.get("error"), ValueError), got
    assert b.closed and t.closed


def test_wait_info_names_who_was_counted_and_who_was_left_out(tmp):
    t = vigil.HeartbeatTable.create(os.path.join(tmp, "i.hb"), 4)
    b = vigil.Barrier.create(os.path.join(tmp, "i.bar"), t, 2)
    mine = t.register()
    b.bind(mine)
    gone = os.fork()
    if gone == 0:
        os._exit(0)
    os.waitpid(gone, 0)
    other = t.register(gone)  # registered, never beats: dead once 2 ticks old
    for _ in range(3):
        t.tick()
        t.beat(mine)
    assert b.round_info(b.epoch) is None  # not released yet
    e = b.epoch
    serial, info = b.wait_info(e)
    assert serial is True and info is not None and info.round == e
    assert [(p.slot, p.why, p.pid) for p in info.counted] == [(mine, "counted", os.getpid())]
    assert [(p.slot, p.why) for p in info.left_out] == [(other, "dead")]
    assert info.unbound == 0 and info.serial_slot == mine and info.serial_gen == info.counted[0].gen
    assert b.round_info(e) == info
    t.close()
