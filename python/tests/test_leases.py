# SPDX-License-Identifier: MIT
"""Leases (the embedded store) and the sync keepalive over the C renewer."""
from __future__ import annotations

import os
import select
import threading
import time

import pytest

import vigil
from conftest import needs


@pytest.fixture
def store(tmp):
    with vigil.Leases.create(os.path.join(tmp, "l.ls"), 8) as ls:
        yield ls


def test_acquire_busy_renew_release(store):
    lease = store.acquire("job", "me", 5.0)
    assert (lease.key, lease.owner, lease.ttl) == ("job", "me", 5.0) and lease.token > 0
    with pytest.raises(vigil.Busy):
        store.acquire("job", "me", 5.0)  # the same owner string too
    store.renew(lease)
    info = store.get("job")
    assert info is not None and (info.owner, info.token, info.state) == ("me", lease.token, vigil.LeaseState.HELD)
    assert 0 < info.expires_in <= 5.01 and info.pid == os.getpid() and info.ttl == 5.0
    store.release(lease)
    assert store.get("job") is None
    with pytest.raises(vigil.Lost):
        store.release(lease)
    with pytest.raises(vigil.Lost):
        store.renew(lease)
    again = store.acquire("job", "you", 1.0)
    assert again.token > lease.token  # fencing: strictly greater each hand-over


def test_arguments_out_of_range(store):
    with pytest.raises(vigil.OutOfRange):
        store.acquire("k" * 128, "me", 1.0)
    with pytest.raises(vigil.OutOfRange):
        store.acquire("k", "o" * 64, 1.0)
    with pytest.raises(ValueError):
        store.acquire("k\0x", "me", 1.0)
    with pytest.raises(ValueError):
        store.acquire("k", "me", 0)
    with pytest.raises(ValueError):
        store.acquire("k", "me", -1.0)
    assert store.get("never") is None


def test_expiry_frees_the_key(store):
    lease = store.acquire("job", "me", 0.05)
    deadline = time.monotonic() + 10
    while store.get("job") is not None:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    other = store.acquire("job", "other", 1.0)
    assert other.token > lease.token
    with pytest.raises(vigil.Lost):
        store.renew(lease)


def test_store_file(tmp):
    path = os.path.join(tmp, "l.ls")
    vigil.Leases.create(path, 4).close()
    with pytest.raises(FileExistsError):
        vigil.Leases.create(path, 4)
    with vigil.Leases.open(path) as ls:
        assert ls.capacity == 4
        lease = ls.acquire("a", "me", 1.0)
        assert ls.entry(lease.id - 1).owner == "me"
    with pytest.raises(vigil.BadFile):
        hb = os.path.join(tmp, "t.hb")
        vigil.HeartbeatTable.create(hb, 2).close()
        vigil.Leases.open(hb)


def test_acquire_wait(store):
    needs("vigil_leases_acquire_wait")
    held = store.acquire("job", "first", 5.0)
    with pytest.raises(vigil.Timeout):
        store.acquire_wait("job", "second", 1.0, timeout=0.05)
    got = {}

    def waiter():
        got["lease"] = store.acquire_wait("job", "second", 1.0, timeout=20)

    th = threading.Thread(target=waiter)
    th.start()
    time.sleep(0.05)
    store.release(held)
    th.join(timeout=30)
    assert not th.is_alive() and got["lease"].owner == "second" and got["lease"].token > held.token


def test_keepalive_holds_past_the_ttl(store):
    # A TTL that a loaded machine's stalls do not lapse: the renewer must
    # land one within 1.36 s of the last.
    lease = store.acquire("job", "me", 2.0)
    with vigil.keepalive(store, lease) as ka:
        time.sleep(2.5)  # past the TTL
        assert not ka.lost
        assert ka.stats().renewals >= 1
        info = store.get("job")
        assert info is not None and info.token == lease.token
    store.release(lease)


def test_keepalive_loss_raises_lost_on_exit_and_the_body_wins(store):
    lease = store.acquire("job", "me", 0.3)
    with pytest.raises(vigil.Lost):
        with vigil.keepalive(store, lease) as ka:
            store.release(lease)  # as if someone took it: the next renewal is refused
            _until_lost(ka)  # without reading ka.lost: the loss is untold
    assert not ka.running and ka.lost
    lease = store.acquire("job", "me", 0.3)
    with pytest.raises(KeyError):
        with vigil.keepalive(store, lease) as ka:
            store.release(lease)
            _until_lost(ka)
            raise KeyError("the body's own")


def _until_lost(ka):
    deadline = time.monotonic() + 10
    while not ka.stats().lost:
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_keepalive_loss_seen_by_the_block_is_not_raised_again(store):
    lease = store.acquire("job", "me", 0.3)
    with vigil.keepalive(store, lease) as ka:
        store.release(lease)
        _until_lost(ka)
        assert ka.lost  # told: the exit raises nothing
    assert not ka.running


def test_keepalive_fd_becomes_readable_on_loss(store):
    needs("vigil_keepalive_fd")
    lease = store.acquire("job", "me", 0.3)
    with pytest.raises(vigil.Lost):
        with vigil.keepalive(store, lease) as ka:
            fd = ka.fileno()
            assert select.select([fd], [], [], 0)[0] == []
            store.release(lease)
            assert select.select([fd], [], [], 10)[0] == [fd]
            assert ka.stats().lost


def test_keepalive_through_a_python_port(store):
    calls = []

    class Port:
        def renew(self, lease):
            calls.append(lease.token)
            return None if len(calls) < 3 else False  # the third is a refusal

    lease = store.acquire("job", "me", 1.0)
    with pytest.raises(vigil.Lost):
        with vigil.keepalive(Port(), lease) as ka:
            _until_lost(ka)
            n = len(calls)
            time.sleep(0.7)  # two periods
            assert len(calls) == n  # lost: never again
    # Refused at the third, or (on a stalled machine) expired before it.
    assert n <= 3 and all(c == lease.token for c in calls)


def test_keepalive_port_without_renew(store):
    lease = store.acquire("job", "me", 0.3)
    with vigil.keepalive(object(), lease) as ka:
        assert not ka.lost


def test_closing_the_store_stops_its_keepalives(tmp):
    ls = vigil.Leases.create(os.path.join(tmp, "l.ls"), 2)
    lease = ls.acquire("job", "me", 0.3)
    ka = vigil.keepalive(ls, lease).start()
    ls.close()
    assert not ka.running
