# SPDX-License-Identifier: MIT
"""Etcd: the same lease calls across hosts, against the etcd that CTest's
fixture runs (VIGIL_ETCD_STATE); skipped without etcd or libvigil-etcd."""
from __future__ import annotations

import asyncio
import os
import threading
import time

import pytest

import vigil
from conftest import needs


def _endpoints() -> str:
    state = os.environ.get("VIGIL_ETCD_STATE")
    if not state:
        pytest.skip("VIGIL_ETCD_STATE not set: run under ctest (the etcd fixture)")
    if os.path.exists(os.path.join(state, "skip")):
        pytest.skip("etcd absent")
    try:
        with open(os.path.join(state, "endpoints")) as f:
            return f.read().strip()
    except FileNotFoundError:
        pytest.skip("no etcd fixture running")


@pytest.fixture
def etcd():
    url = _endpoints()
    try:
        e = vigil.Etcd(url, timeout=3.0)
    except OSError as err:
        pytest.skip(f"libvigil-etcd: {err}")
    with e:
        yield e


def _key(name: str) -> str:
    return f"vigil-py/{os.getpid()}/{time.monotonic_ns()}/{name}"


def test_acquire_busy_renew_release(etcd):
    key = _key("job")
    lease = etcd.acquire(key, "py", 1.0)
    assert lease.key == key and lease.owner == "py" and lease.token > 0 and lease.id != 0
    assert lease.ttl >= 1.0
    with pytest.raises(vigil.Busy):
        etcd.acquire(key, "rival", 1.0)
    etcd.renew(lease)
    etcd.release(lease)
    with pytest.raises(vigil.Lost):
        etcd.renew(lease)
    again = etcd.acquire(key, "rival", 1.0)
    assert again.token > lease.token
    etcd.release(again)


def test_unreachable_is_transient(tmp):
    try:
        e = vigil.Etcd("http://127.0.0.1:9", timeout=0.5)  # discard port: nobody listens
    except OSError as err:
        pytest.skip(f"libvigil-etcd: {err}")
    with e:
        with pytest.raises(OSError) as ei:
            e.acquire(_key("x"), "py", 1.0)
        assert not isinstance(ei.value, vigil.Lost)


def test_get(etcd):
    needs("vigil_etcd_get", vigil._ffi.etcd_lib())
    key = _key("job")
    assert etcd.get(key) is None
    lease = etcd.acquire(key, "py", 2.0)
    info = etcd.get(key)
    assert info is not None and info.owner == "py" and info.token == lease.token
    etcd.release(lease)
    assert etcd.get(key) is None


def test_acquire_wait(etcd):
    needs("vigil_etcd_acquire_wait", vigil._ffi.etcd_lib())
    key = _key("job")
    held = etcd.acquire(key, "first", 2.0)
    with pytest.raises(vigil.Timeout):
        etcd.acquire_wait(key, "second", 2.0, timeout=0.2)
    got = {}
    with vigil.Etcd(etcd.endpoints) as other:
        th = threading.Thread(target=lambda: got.update(lease=other.acquire_wait(key, "second", 2.0, timeout=20)))
        th.start()
        time.sleep(0.2)
        etcd.release(held)
        th.join(timeout=30)
        assert not th.is_alive() and got["lease"].token > held.token
        other.release(got["lease"])


@pytest.mark.asyncio
async def test_heartbeat_keeps_an_etcd_lease(etcd):
    key = _key("job")
    lease = etcd.acquire(key, "py", 2.0)
    async with vigil.heartbeat(etcd, lease) as hb:
        await asyncio.sleep(2.5)  # past the TTL
        assert not hb.lost
    with pytest.raises(vigil.Busy):
        etcd.acquire(key, "rival", 1.0)
    etcd.release(lease)


@pytest.mark.asyncio
async def test_heartbeat_knows_an_etcd_loss(etcd):
    key = _key("job")
    lease = etcd.acquire(key, "py", 1.0)
    with pytest.raises(vigil.Lost):
        async with vigil.heartbeat(etcd, lease) as hb:
            with vigil.Etcd(etcd.endpoints) as other:
                other.release(lease)  # as if an operator took it: the next renewal is refused
            await asyncio.wait_for(hb._event.wait(), 15)  # known, but not read: raised on exit


def test_lock_on_etcd(etcd):
    key = _key("job")
    with etcd.lock(key, "py", ttl=1.0) as lease:
        with pytest.raises(vigil.Busy):
            etcd.acquire(key, "rival", 1.0)
        time.sleep(1.5)  # past the TTL: kept alive
        assert etcd.get(key).token == lease.token
    assert etcd.get(key) is None


@pytest.mark.asyncio
async def test_async_acquire_and_lock_on_etcd(etcd):
    key = _key("job")
    lease = await etcd.acquire_async(key, "py", 2.0)
    waiter = asyncio.ensure_future(etcd.acquire_wait_async(key, "second", 2.0, timeout=20))
    await asyncio.sleep(0.2)
    assert not waiter.done()
    await asyncio.get_running_loop().run_in_executor(None, etcd.release, lease)
    got = await asyncio.wait_for(waiter, 20)
    assert got.owner == "second" and got.token > lease.token
    etcd.release(got)
    async with etcd.lock(key, "py", ttl=2.0) as held:
        assert etcd.get(key).token == held.token
    assert etcd.get(key) is None


@pytest.mark.asyncio
async def test_a_cancelled_etcd_wait_ends_at_once_and_gives_the_key_back(etcd):
    key = _key("job")
    held = etcd.acquire(key, "first", 2.0)
    waiter = asyncio.ensure_future(etcd.acquire_wait_async(key, "second", 2.0, timeout=20))
    await asyncio.sleep(0.2)
    started = time.monotonic()
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert time.monotonic() - started < 1.0
    etcd.release(held)
    # The abandoned wait gets its turn, then gives the key up at once.
    deadline = time.monotonic() + 20
    while True:
        try:
            mine = etcd.acquire(key, "third", 1.0)
            break
        except vigil.Busy:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
    etcd.release(mine)


def test_production_options(etcd):
    """The keywords reach the C options: a namespace prefixes the keys
    (seen from a handle without one), a CA bundle that is not there is
    FileNotFoundError at once naming it, a password without a user or a
    key without a certificate an OSError; user and password on a server
    without auth are spoken without a token, as clientv3 does."""
    ns = f"vigil-py-ns/{os.getpid()}/"
    key = _key("spaced")
    with vigil.Etcd(etcd.endpoints, namespace=ns, user="nobody", password="pw", timeout=3.0) as spaced:
        lease = spaced.acquire(key, "py", 2.0)
        assert lease.key == key
        assert etcd.get(ns + key).owner == "py"
        assert etcd.get(key) is None
        spaced.release(lease)
    with pytest.raises(FileNotFoundError) as info:
        vigil.Etcd(etcd.endpoints, cacert="/nonexistent/ca.pem")
    assert "/nonexistent/ca.pem" in str(info.value)
    with pytest.raises(OSError):
        vigil.Etcd(etcd.endpoints, password="pw")
    with pytest.raises(OSError):
        vigil.Etcd(etcd.endpoints, key="/nonexistent/key.pem")
