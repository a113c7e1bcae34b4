# SPDX-License-Identifier: MIT
"""The Python processes of the multi-process tests. Each waits for its
stdin to close as its cue to leave, and gives up by itself after 60 s, so
no child outlives a broken test for long.

  worker.py table TABLE BIT...          register, mark BITs, "slot S pid P", beat
  worker.py watch TABLE GRACE           failover_wait; one JSON line per reclaim
  worker.py barrier TABLE BARRIER CHECK ROUNDS   "ready", then on "go BASE\\n" meet
                                        ROUNDS rounds; one JSON line of results
  worker.py hold STORE KEY TTL sync|async  acquire, "token T", keep it alive
"""
from __future__ import annotations

import asyncio
import json
import mmap
import os
import select
import sys
import time

import vigil

LIMIT = 60.0


def stdin_closed(timeout: float) -> bool:
    r, _, _ = select.select([sys.stdin], [], [], timeout)
    return bool(r) and not os.read(sys.stdin.fileno(), 4096)


def say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def table(path: str, *bits: str) -> int:
    with vigil.HeartbeatTable.open(path) as t:
        slot = t.register()
        for b in bits:
            t.mark(slot, int(b))
        say(f"slot {slot} pid {os.getpid()}")
        beater = t.beater(slot)
        end = time.monotonic() + LIMIT
        while time.monotonic() < end:
            beater.beat()
            if stdin_closed(0.002):
                t.unregister(slot)
                return 0
    return 1


def watch(path: str, grace: str) -> int:
    with vigil.HeartbeatTable.open(path) as t:
        say("watching")
        end = time.monotonic() + LIMIT
        while time.monotonic() < end:
            for r in t.failover_wait(int(grace), timeout=0.02):
                say(json.dumps({"slot": r.slot, "pid": r.pid, "in_flight": r.in_flight, "by": "python"}))
            if stdin_closed(0):
                return 0
    return 1


def barrier(tpath: str, bpath: str, check: str, rounds: str) -> int:
    n = int(rounds)
    with vigil.HeartbeatTable.open(tpath) as t, open(check, "r+b") as f:
        slot = t.register()
        b = vigil.Barrier.open(bpath, t)
        b.bind(slot)
        shared = mmap.mmap(f.fileno(), 0)
        # 8-byte words, each written by one store (struct.pack_into zeroes
        # its bytes first: a reader could catch the 0 in between).
        words = memoryview(shared).cast("Q")
        say(f"ready {slot}")
        r, _, _ = select.select([sys.stdin], [], [], LIMIT)
        go = sys.stdin.readline().split() if r else []
        if len(go) != 2 or go[0] != "go":
            return 1
        base, me = int(go[1]), slot
        serial = early = 0
        first = None
        for i in range(n):
            # Say "I reached round i" where every peer can read it, then meet:
            # after the round releases, every peer must have said so too.
            words[me] = i + 1
            got = b.wait(base + i, timeout=30.0)
            serial += got
            seen = words.tolist()
            if any(s < i + 1 for s in seen):
                early += 1
                if first is None:
                    first = {"round": i, "seen": seen, "serial": got, "epoch": b.epoch,
                             "live": b.live_peers, "later": words.tolist()}
        say(json.dumps({"slot": slot, "serial": serial, "early": early, "epoch": b.epoch, "first": first}))
        b.close()
        words.release()
        shared.close()
        t.unregister(slot)
    return 0


def hold(path: str, key: str, ttl: str, mode: str) -> int:
    with vigil.Leases.open(path) as ls:
        lease = ls.acquire(key, f"python-{os.getpid()}", float(ttl))
        say(f"token {lease.token}")
        if mode == "sync":
            with vigil.keepalive(ls, lease) as ka:
                end = time.monotonic() + LIMIT
                while time.monotonic() < end and not ka.lost and not stdin_closed(0.05):
                    pass
        else:

            async def body() -> None:
                loop = asyncio.get_running_loop()
                closed = asyncio.Event()
                loop.add_reader(sys.stdin.fileno(), closed.set)
                async with vigil.heartbeat(ls, lease) as hb:
                    await asyncio.wait_for(asyncio.wait(
                        [asyncio.ensure_future(closed.wait()), asyncio.ensure_future(hb.wait_lost())],
                        return_when=asyncio.FIRST_COMPLETED), LIMIT)

            asyncio.run(body())
        ls.release(lease)
    return 0


def main(argv) -> int:
    cmds = {"table": table, "watch": watch, "barrier": barrier, "hold": hold}
    if len(argv) < 2 or argv[1] not in cmds:
        print(__doc__, file=sys.stderr)
        return 2
    return cmds[argv[1]](*argv[2:])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
