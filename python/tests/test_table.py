# SPDX-License-Identifier: MIT
"""HeartbeatTable: the calls of vigil_hb and the failover scan, in one process."""
from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

import vigil


@pytest.fixture
def table(tmp):
    with vigil.HeartbeatTable.create(os.path.join(tmp, "t.hb"), 4) as t:
        yield t


def test_create_open_and_what_they_refuse(tmp):
    path = os.path.join(tmp, "t.hb")
    with vigil.HeartbeatTable.create(path, 8) as t:
        assert t.capacity == 8 and t.epoch == 0 and not t.closed
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert os.path.getsize(path) == 64 + 8 * 64
    with pytest.raises(FileExistsError):
        vigil.HeartbeatTable.create(path, 8)
    with vigil.HeartbeatTable.open(path) as t:
        assert t.capacity == 8
    with pytest.raises(vigil.CapacityMismatch):
        vigil.HeartbeatTable.open(path, 4)
    with pytest.raises(FileNotFoundError):
        vigil.HeartbeatTable.open(os.path.join(tmp, "none"))
    junk = os.path.join(tmp, "junk")
    with open(junk, "wb") as f:
        f.write(b"x" * 4096)
    with pytest.raises(vigil.BadFile):
        vigil.HeartbeatTable.open(junk)
    with vigil.HeartbeatTable.create(os.path.join(tmp, "m.hb"), 2, mode=0o640):
        assert stat.S_IMODE(os.stat(os.path.join(tmp, "m.hb")).st_mode) == 0o640


def test_register_beat_tick_snapshot(table):
    slot = table.register()
    info = table.snapshot(slot)
    assert info == vigil.SlotInfo(os.getpid(), vigil.ROLE_WORKER, 0, 0)
    assert table.tick() == 1 and table.tick() == 2 and table.epoch == 2
    assert table.snapshot(slot).last_seen_epoch == 0
    table.beat(slot)
    assert table.snapshot(slot).last_seen_epoch == 2
    table.beat(99)  # out of range: ignored
    table.beat(-1)
    other = table.register(pid=12345)
    assert other != slot and table.snapshot(other).pid == 12345
    with pytest.raises(vigil.OutOfRange):
        table.register(pid=0)
    table.unregister(other)
    with pytest.raises(vigil.Vacant):
        table.snapshot(other)
    with pytest.raises(dataclass_frozen_error()):
        info.pid = 1  # type: ignore[misc]


def dataclass_frozen_error():
    import dataclasses

    return dataclasses.FrozenInstanceError


def test_full(table):
    for _ in range(4):
        table.register()
    with pytest.raises(vigil.Full):
        table.register()


def test_beater_is_the_same_beat_and_goes_inert_on_close(tmp):
    t = vigil.HeartbeatTable.create(os.path.join(tmp, "t.hb"), 2)
    slot = t.register()
    b = t.beater(slot)
    t.tick()
    b.beat()
    assert t.snapshot(slot).last_seen_epoch == 1
    with pytest.raises(vigil.OutOfRange, match=r"slot 7 is out of range 0\.\.1"):
        t.beater(7)
    t.beat(7)  # the hot path checks nothing: an out-of-range beat reaches no table
    t.close()
    b.beat()  # after close: a word of the library's own, never the unmapped file
    t.close()  # idempotent
    with pytest.raises(ValueError):
        t.tick()


def test_marks_roles_and_errors(table):
    slot = table.register()
    table.mark(slot, 0)
    table.mark(slot, 63)
    assert table.snapshot(slot).in_flight == (1 << 63) | 1
    table.clear(slot, 0)
    assert table.snapshot(slot).in_flight == 1 << 63
    with pytest.raises(vigil.OutOfRange):
        table.mark(slot, 64)
    with pytest.raises(ValueError):
        table.mark(slot, -1)
    with pytest.raises(vigil.OutOfRange):
        table.mark(9, 1)
    with pytest.raises(vigil.Vacant):
        table.mark(slot + 1, 1)
    table.set_role(slot, vigil.ROLE_COORDINATOR)
    assert table.snapshot(slot).role == vigil.ROLE_COORDINATOR
    with pytest.raises(vigil.Vacant):
        table.set_role(slot + 1, 0)


def test_live_count_and_failover_scan(table):
    a, b = table.register(), table.register(pid=os.getpid())
    table.mark(b, 5)
    table.mark(b, 7)
    for _ in range(3):
        table.tick()
    table.beat(a)
    assert table.live_count(2) == 1 and table.live_count(3) == 2
    got = table.failover_scan(2)
    assert got == [vigil.Reclaim(b, os.getpid(), (1 << 5) | (1 << 7))]
    assert table.failover_scan(2) == []  # exactly once
    with pytest.raises(vigil.Vacant):
        table.snapshot(b)


def test_a_stale_handle_is_told_lost_and_changes_nothing_of_its_successor(tmp):
    # Issue 17: A registers, is failed over (stale past grace), and B, with
    # the very same pid, registers into the same slot and marks unit 5. A's
    # calls about its lost registration raise Lost and leave B's slot alone.
    path = os.path.join(tmp, "t.hb")
    with vigil.HeartbeatTable.create(path, 1) as a, vigil.HeartbeatTable.open(path) as b:
        slot = a.register()
        assert a.owned(slot) and not b.owned(slot)
        a.mark(slot, 3)
        for _ in range(3):
            b.tick()
        assert b.failover_scan(grace=1) == [vigil.Reclaim(slot, os.getpid(), 1 << 3)]
        assert not a.owned(slot)
        assert b.register() == slot  # same slot, same pid: a new registration
        b.mark(slot, 5)
        assert b.owned(slot) and not a.owned(slot)
        for call in (lambda: a.clear(slot, 5), lambda: a.mark(slot, 6),
                     lambda: a.set_role(slot, vigil.ROLE_COORDINATOR), lambda: a.unregister(slot)):
            with pytest.raises(vigil.Lost):
                call()
        info = b.snapshot(slot)
        assert (info.pid, info.in_flight, info.role) == (os.getpid(), 1 << 5, vigil.ROLE_WORKER)
        assert b.owned(slot) and not a.owned(slot)
        b.unregister(slot)
        assert not b.owned(slot)
        with pytest.raises(vigil.OutOfRange):
            a.owned(1)
        with pytest.raises(ValueError):
            a.owned(-1)


def test_scan_probe_and_probe_tell_a_dead_owner(table):
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    me = table.register()
    dead = table.register(pid=child.pid)  # reaped: the pid is gone (or reused by another process)
    table.mark(dead, 3)
    assert table.probe(me) is True
    assert table.probe(dead) in (False, None)
    with pytest.raises(vigil.OutOfRange):
        table.probe(99)
    if table.probe(dead) is False:
        assert table.failover_scan(1000) == []  # within the grace window by epochs
        assert table.failover_scan(1000, probe=True) == [vigil.Reclaim(dead, child.pid, 1 << 3)]


def test_failover_wait_times_out_empty(table):
    table.register()
    assert table.failover_wait(1000, timeout=0.01) == []


def test_leader_election(table):
    with pytest.raises(vigil.NoPeers):
        table.leader_elect(5)
    lo = table.register(pid=os.getpid())
    first = table.leader_elect(5)
    assert (first.slot, first.pid, first.changed) == (lo, os.getpid(), True)
    again = table.leader_elect(5)
    assert not again.changed and again.term == first.term
    assert table.leader_is(lo, 5)
    assert table.leader() == vigil.Leader(lo, os.getpid(), first.term)
    table.register(pid=1)  # a lower pid takes over, with a higher term
    new = table.leader_elect(5)
    assert new.changed and new.pid == 1 and new.term > first.term
    assert not table.leader_is(lo, 5)


def test_readonly_open_sees_but_does_not_write(tmp, table):
    slot = table.register()
    with vigil.HeartbeatTable.open(table.path, readonly=True) as ro:
        assert ro.snapshot(slot).pid == os.getpid()
        table.tick()
        assert ro.epoch == 1
