# SPDX-License-Identifier: MIT
"""Group: membership, the watch's fileno, units exactly once, barrier rounds
and their asyncio forms, against the etcd of CTest's fixture; a member in a
child process (Python) killed with SIGKILL, seen through a host's agent."""
from __future__ import annotations

import asyncio
import os
import select
import signal
import subprocess
import sys
import time

import pytest

import vigil
from conftest import child_env

from test_etcd import _endpoints


@pytest.fixture
def etcd():
    url = _endpoints()
    try:
        e = vigil.Etcd(url, timeout=3.0)
    except OSError as err:
        pytest.skip(f"libvigil-etcd: {err}")
    with e:
        yield e


def _group(name: str) -> str:
    return f"vigil-py/{os.getpid()}/{time.monotonic_ns()}/{name}"


def test_join_members_leader_leave(etcd):
    name = _group("m")
    with vigil.Group(etcd, name).join("alpha", ttl=5.0, dir="") as a, vigil.Group(etcd, name).join("beta", 5.0, dir="") as b:
        members = a.members()
        assert [m.name for m in members] == ["alpha", "beta"]
        assert members[0].pid == os.getpid() and members[0].vigil
        assert a.is_leader() and not b.is_leader()
        assert a.leader().revision == a.term < b.term
        with pytest.raises(vigil.Busy):
            vigil.Group(etcd, name).join("alpha", 5.0, dir="")
        assert not a.lost
    assert vigil.Group(etcd, name).members() == []
    with pytest.raises(vigil.OutOfRange):
        vigil.Group(etcd, "")
    with pytest.raises(ValueError):
        vigil.Group(etcd, name).take()


def test_watch_fileno(etcd):
    name = _group("w")
    g = vigil.Group(etcd, name)
    with g.watch() as w:
        assert w.next_event() is None
        with vigil.Group(etcd, name).join("x", 5.0, dir="") as x:
            r, _, _ = select.select([w], [], [], 10.0)
            assert r == [w]
            ev = w.next_event()
            assert ev.kind == "join" and ev.member.name == "x" and ev.revision == x.term and not ev.initial
        ev = w.wait(10.0)
        assert ev is not None and ev.kind == "leave" and ev.member.name == "x"


def test_units_exactly_once(etcd):
    name = _group("u")
    g = vigil.Group(etcd, name)
    for i in range(4):
        assert g.add(f"u{i}")
    assert not g.add("u0")
    with vigil.Group(etcd, name).join("a", 5.0, dir="") as a, vigil.Group(etcd, name).join("b", 5.0, dir="") as b:
        got = [a.take(), b.take(), a.take(), b.take()]
        assert sorted(u.name for u in got) == ["u0", "u1", "u2", "u3"]
        assert a.take() is None  # all owned
        with pytest.raises(vigil.Lost):
            b.done(got[0])  # a's
        for who, u in zip([a, b, a, b], got):
            who.done(u)
        assert a.take_wait(timeout=1.0) is None  # nothing left
        s = g.stats()
        assert (s.units_done, s.units_free, s.units_owned, s.members) == (4, 0, 0, 2)


def test_barrier_rounds(etcd):
    name = _group("b")
    with vigil.Group(etcd, name).join("a", 5.0, dir="") as a, vigil.Group(etcd, name).join("b", 5.0, dir="") as b:

        async def both(r):
            return await asyncio.gather(a.barrier_wait_async(r, 30.0), b.barrier_wait_async(r, 30.0))

        for r in range(2):
            serials = asyncio.run(both(r))
            assert sorted(serials) == [False, True]
        info = a.round_info(1)
        assert info is not None and sorted(p.name for p in info.counted) == ["a", "b"] and info.left_out == []
        with pytest.raises(vigil.Timeout):
            a.barrier_wait(2, timeout=0.2)  # b never arrives: withdrawn, never counted
    with pytest.raises(ValueError):
        a.barrier_wait(3)


def test_take_wait_async_cancel_gives_back(etcd):
    name = _group("c")
    g = vigil.Group(etcd, name)
    g.add("only")
    with vigil.Group(etcd, name).join("holder", 5.0, dir="") as h, vigil.Group(etcd, name).join("w", 5.0, dir="") as w:
        u = h.take()

        async def main():
            t = asyncio.ensure_future(w.take_wait_async(timeout=30.0))
            await asyncio.sleep(0.3)
            t.cancel()
            with pytest.raises(asyncio.CancelledError):
                await t

        asyncio.run(main())
        h.giveback(u)
        assert w.take_wait(timeout=10.0).name == "only"


CHILD = r"""
import sys, vigil
e = vigil.Etcd(sys.argv[1])
g = vigil.Group(e, sys.argv[2]).join("victim", ttl=60.0, dir=sys.argv[3])
u = g.take()
print("took", u.name, flush=True)
sys.stdin.read()
"""


def test_kill9_seen_through_the_agent(etcd, tmp):
    tool = os.environ.get("VIGIL_TOOL")
    if not tool:
        pytest.skip("VIGIL_TOOL not set: run under ctest")
    name = _group("k")
    g = vigil.Group(etcd, name)
    g.add("job")
    host = os.path.join(tmp, "host")
    agent = subprocess.Popen([tool, "agent", "--etcd", etcd.endpoints, "--dir", host, "--json"],
                             stdout=subprocess.PIPE, env=child_env())
    try:
        assert b'"ready"' in agent.stdout.readline()
        child = subprocess.Popen([sys.executable, "-c", CHILD, etcd.endpoints, name, host], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, env=child_env())
        assert child.stdout.readline().split() == [b"took", b"job"]
        with vigil.Group(etcd, name).join("heir", 60.0, dir="") as heir, g.watch() as w:
            child.send_signal(signal.SIGKILL)
            child.wait(10)
            # the TTL is a minute: the unit comes back through the agent's revoke
            u = heir.take_wait(timeout=20.0)
            assert u is not None and u.name == "job"
            heir.done(u)
            seen = [w.wait(10.0) for _ in range(3)]
            assert any(e and e.kind == "leave" and e.member.name == "victim" for e in seen)
    finally:
        agent.terminate()
        agent.wait(10)


LEADER = r"""
import sys, vigil
e = vigil.Etcd(sys.argv[1])
g = vigil.Group(e, sys.argv[2]).join("first", ttl=60.0, dir="")
print("term", g.term, flush=True)
sys.stdin.read()
"""


def test_leader_wait_and_watch(etcd):
    """The leader in another process, killed with SIGKILL and its lease
    revoked (as its host's agent would): leader_wait returns the heir at
    once for a term gone, the leader watch tells each term once, and the
    asyncio form waits for the heir's end."""
    name = _group("l")
    g = vigil.Group(etcd, name)
    with pytest.raises(vigil.Timeout):
        g.leader_wait(0, timeout=0.1)  # no leader, as known: nothing changes
    assert g.leader_wait(12345, timeout=1.0) is None  # a term gone: none leads now
    with g.watch(leader=True) as w:
        ev = w.wait(10.0)
        assert ev.kind == "leader" and ev.initial and ev.member.revision == 0
        child = subprocess.Popen([sys.executable, "-c", LEADER, etcd.endpoints, name], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, env=child_env())
        try:
            first = int(child.stdout.readline().split()[1])
            lead = g.leader_wait(0, timeout=10.0)
            assert lead is not None and lead.name == "first" and lead.revision == first
            with vigil.Group(etcd, name).join("heir", 60.0, dir="") as heir:
                with pytest.raises(vigil.Timeout):
                    heir.leader_wait(first, timeout=0.3)
                child.send_signal(signal.SIGKILL)
                child.wait(10)
                lease = next(m.lease for m in g.members() if m.name == "first")
                _revoke(etcd, lease)
                now = heir.leader_wait(first, timeout=20.0)
                assert now is not None and now.name == "heir" and now.revision == heir.term

                async def main():
                    task = asyncio.ensure_future(g.leader_wait_async(heir.term, timeout=20.0))
                    await asyncio.sleep(0.1)
                    heir.leave()
                    return await task

                assert asyncio.run(main()) is None
            kinds = []
            while (ev := w.wait(5.0)) is not None and len(kinds) < 8:
                kinds.append((ev.kind, ev.member.name))
                if kinds[-1] == ("leader", ""):
                    break
            leaders = [n for k, n in kinds if k == "leader"]
            assert leaders == ["first", "heir", ""], kinds
        finally:
            child.kill()
            child.wait(10)


def _revoke(etcd, lease):
    """Revokes a lease behind its holder's back, as a host's agent does."""
    import urllib.request
    body = ('{"ID": "%d"}' % lease).encode()
    url = etcd.endpoints.split(",")[0].rstrip("/") + "/v3/lease/revoke"
    urllib.request.urlopen(urllib.request.Request(url, body, {"Content-Type": "application/json"}), timeout=10).read()


def test_leader_wait_async_cancel(etcd):
    name = _group("lc")
    with vigil.Group(etcd, name).join("only", 60.0, dir="") as g:

        async def main():
            task = asyncio.ensure_future(g.leader_wait_async(g.term))
            await asyncio.sleep(0.3)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        asyncio.run(main())
        assert g.is_leader()
