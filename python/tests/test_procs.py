# SPDX-License-Identifier: MIT
"""Python and C processes on the same files: a table of mixed workers with
one killed by SIGKILL, four Python processes at a barrier, and a Python
lease holder against a C rival."""
from __future__ import annotations

import json
import os
import signal
import time

import pytest

import vigil
from conftest import peer, python_worker, tool

GRACE = 1_000_000  # nobody ticks: a slot is reclaimed only because its owner died


def _mask(bits):
    m = 0
    for b in bits:
        m |= 1 << b
    return m


@pytest.mark.parametrize("victim", ["python", "c"])
def test_mixed_workers_one_killed_reclaimed_once(tmp, spawn, victim):
    path = os.path.join(tmp, "pool.hb")
    units = {"py0": [0, 1, 2], "py1": [8, 9], "py2": [16, 17, 18, 19], "c": [40, 41, 63]}
    with vigil.HeartbeatTable.create(path, 8) as t:
        workers = {}
        for name, bits in units.items():
            argv = [peer(), "worker", path] if name == "c" else python_worker("table", path)
            p = spawn(argv + [str(b) for b in bits])
            words = p.line().split()  # "slot S pid P"
            assert words[0] == "slot" and int(words[3]) == p.pid, words
            workers[name] = (p, int(words[1]))
        for name, (p, slot) in workers.items():
            info = t.snapshot(slot)
            assert (info.pid, info.in_flight) == (p.pid, _mask(units[name])), (name, info)

        # Three watchdogs race for the dead worker's units: two Python
        # processes on pidfds and, when built, the C tool; and this test scans.
        watchers = [spawn(python_worker("watch", path, str(GRACE))) for _ in range(2)]
        for w in watchers:
            assert w.line() == "watching"
        c_watch = None
        if tool():
            c_watch = spawn([tool(), "failover", path, "--grace", str(GRACE), "--json"])
            time.sleep(0.2)  # let it take its pidfds; an early kill is still caught by the others

        name = "py1" if victim == "python" else "c"
        dead, dead_slot = workers[name]
        dead.kill(signal.SIGKILL)

        mine = []
        deadline = time.monotonic() + 20
        while True:  # until the slot is vacated
            try:
                if t.snapshot(dead_slot).pid != dead.pid:
                    break
            except vigil.Vacant:
                break
            mine += t.failover_scan(GRACE, probe=True)
            assert time.monotonic() < deadline, "the killed worker's slot was never reclaimed"
            time.sleep(0.005)
        mine += t.failover_scan(GRACE, probe=True)
        time.sleep(0.2)  # a duplicate, if any, would come now

        reclaims = [{"slot": r.slot, "pid": r.pid, "in_flight": r.in_flight} for r in mine]
        for w in watchers:
            rc, lines = w.finish()
            assert rc == 0, lines
            reclaims += [json.loads(ln) for ln in lines]
        if c_watch is not None:
            c_watch.p.send_signal(signal.SIGTERM)
            rc, lines = c_watch.finish()
            assert rc == 0, lines
            for ln in lines:
                d = json.loads(ln)
                reclaims.append({"slot": d["slot"], "pid": d["pid"], "in_flight": int(d["in_flight"], 16)})

        assert len(reclaims) == 1, reclaims
        r = reclaims[0]
        assert (r["slot"], r["pid"], r["in_flight"]) == (dead_slot, dead.pid, _mask(units[name])), r

        # The survivors still hold their slots and their units.
        for other, (p, slot) in workers.items():
            if other == name:
                continue
            info = t.snapshot(slot)
            assert (info.pid, info.in_flight) == (p.pid, _mask(units[other])), (other, info)
            rc, _ = p.finish()
            assert rc == 0


def test_four_python_processes_hundred_rounds(tmp, spawn):
    n, rounds = 4, 100
    tpath, bpath, check = (os.path.join(tmp, f) for f in ("pool.hb", "phase.bar", "check"))
    with open(check, "wb") as f:
        f.write(b"\0" * 8 * n)
    with vigil.HeartbeatTable.create(tpath, n) as t, vigil.Barrier.create(bpath, t, 1_000_000) as b:
        base = b.epoch
        procs = [spawn(python_worker("barrier", tpath, bpath, check, str(rounds))) for _ in range(n)]
        slots = sorted(int(p.line().split()[1]) for p in procs)
        assert slots == list(range(n))
        for p in procs:  # every peer is registered before the first round
            p.send(f"go {base}\n")
        results = [json.loads(p.line(timeout=120)) for p in procs]
        for p in procs:
            rc, _ = p.finish()
            assert rc == 0
        assert sum(r["serial"] for r in results) == rounds, results
        assert all(r["early"] == 0 for r in results), json.dumps([r for r in results if r["early"]])
        assert b.epoch == (base + rounds) & 0xFFFFFFFF


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_python_holder_refused_to_c_rival_until_killed(tmp, spawn, mode):
    path = os.path.join(tmp, "locks.ls")
    c_peer = peer()
    ttl_ms = 1500  # a TTL a loaded machine's stalls do not lapse
    with vigil.Leases.create(path, 8) as ls:
        holder = spawn(python_worker("hold", path, "job", str(ttl_ms / 1000), mode))
        words = holder.line().split()
        assert words[0] == "token"
        token = int(words[1])
        # Tried again and again over several TTLs: the keepalive holds it.
        end = time.monotonic() + 2 * ttl_ms / 1000
        tries = 0
        lock = [tool(), "lock", "--store", path, "--ttl", str(ttl_ms)] if tool() else None
        while time.monotonic() < end or tries < 3:
            rival = spawn([c_peer, "lease", path, "job", "c-rival", str(ttl_ms)])
            rc, lines = rival.finish()
            assert rc == 75, (rc, lines)
            if lock:  # `vigil lock` too: 75, KEY not acquired within --wait
                rival = spawn(lock + ["--wait", "0", "job", "--", "true"])
                rc, lines = rival.finish()
                assert rc == 75, (rc, lines)
            info = ls.get("job")
            assert info is not None and info.owner == f"python-{holder.pid}" and info.token == token
            tries += 1
            time.sleep(0.05)

        holder.kill(signal.SIGKILL)
        rival = spawn([c_peer, "lease-wait", path, "job", "c-rival", str(ttl_ms), "20000"])
        rc, lines = rival.finish(timeout=30)
        assert rc == 0, (rc, lines)
        assert lines[0].startswith("token ") and int(lines[0].split()[1]) > token, lines
        if lock:  # its own TTL long: what is checked is that it gets the key, not its keepalive
            lock = [tool(), "lock", "--store", path, "--ttl", "10000"]
            rival = spawn(lock + ["--wait", "20000", "job", "--", "sh", "-c", "echo $VIGIL_LEASE_TOKEN"])
            rc, lines = rival.finish(timeout=30)
            assert rc == 0 and int(lines[0]) > token, (rc, lines)
