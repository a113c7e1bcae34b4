#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What a beat and a barrier round cost from Python, next to C's.

    python3 bench.py [--c-bench DIR] [--rounds N]

Measures, through the vigil package (cffi, ABI mode):
  beat                  HeartbeatTable.beat(slot)
  Beater.beat()         the beater looked up once (the hot-loop form)
  empty loop            the same loop doing nothing, Python's own floor
  wait(e, quorum=1)     a barrier round with a single participant
  4-process round       four Python processes, a bound handle each
and, with --c-bench DIR (the build's bench/ directory, default
../build/bench when it exists), runs bench_heartbeat and bench_barrier and
prints their lines for the same operations. Each figure is the best (beat)
or median (round) of several runs: the machine is shared and noisy.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import vigil  # noqa: E402

REPS = 7


def per_op(fn, n: int) -> float:
    best = float("inf")
    for _ in range(REPS):
        t0 = time.perf_counter_ns()
        fn(n)
        best = min(best, (time.perf_counter_ns() - t0) / n)
    return best


def bench_beat(d: str, n: int) -> dict:
    with vigil.HeartbeatTable.create(os.path.join(d, "beat.hb"), 64) as t:
        slot = t.register()
        b = t.beater(slot)

        def table_beat(k):
            beat = t.beat
            for _ in range(k):
                beat(slot)

        def beater_beat(k):
            beat = b.beat
            for _ in range(k):
                beat()

        def empty(k):
            for _ in range(k):
                pass

        return {
            "beat": per_op(table_beat, n),
            "Beater.beat()": per_op(beater_beat, n),
            "empty loop": per_op(empty, n),
        }


def bench_quorum(d: str, n: int) -> float:
    with vigil.HeartbeatTable.create(os.path.join(d, "q.hb"), 8) as t:
        slot = t.register()
        with vigil.Barrier.create(os.path.join(d, "q.bar"), t, 1000) as b:
            b.bind(slot)

            def rounds(k):
                wait, e = b.wait, b.epoch
                for i in range(k):
                    wait(e + i, quorum=1)

            return per_op(rounds, n)


def child(tpath: str, bpath: str, rounds: int) -> int:
    with vigil.HeartbeatTable.open(tpath) as t:
        slot = t.register()
        with vigil.Barrier.open(bpath, t) as b:
            b.bind(slot)
            print("ready", flush=True)
            base = int(sys.stdin.readline())
            wait = b.wait
            t0 = time.perf_counter_ns()
            for i in range(rounds):
                wait(base + i, timeout=60)
            print(time.perf_counter_ns() - t0, flush=True)
        t.unregister(slot)
    return 0


def bench_procs(d: str, rounds: int, procs: int = 4) -> float:
    runs = []
    for rep in range(REPS):
        tpath, bpath = os.path.join(d, f"p{rep}.hb"), os.path.join(d, f"p{rep}.bar")
        with vigil.HeartbeatTable.create(tpath, procs) as t, vigil.Barrier.create(bpath, t, 1 << 40) as b:
            kids = [
                subprocess.Popen(
                    [sys.executable, __file__, "--child", tpath, bpath, str(rounds)],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                )
                for _ in range(procs)
            ]
            for k in kids:
                assert k.stdout.readline().strip() == "ready"
            for k in kids:
                k.stdin.write(f"{b.epoch}\n")
                k.stdin.flush()
            ns = [int(k.stdout.readline()) for k in kids]
            for k in kids:
                k.stdin.close()
                k.wait(timeout=60)
            runs.append(max(ns) / rounds)
    runs.sort()
    return runs[len(runs) // 2]


def c_lines(c_dir: str) -> list:
    out = []
    for prog, wanted in (
        ("bench_heartbeat", ("beat ", "  with a compiler barrier")),
        ("bench_barrier", ("| wait_quorum", "| 4-process round")),
    ):
        path = os.path.join(c_dir, prog)
        if not os.access(path, os.X_OK):
            out.append(f"  ({path} not built)")
            continue
        text = subprocess.run([path], capture_output=True, text=True, timeout=600).stdout
        out += [f"  {prog}: {ln.strip()}" for ln in text.splitlines() if ln.startswith(wanted)]
    return out


def main() -> int:
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        return child(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    default_c = os.path.join(HERE, "..", "build", "bench")
    ap.add_argument("--c-bench", default=default_c if os.path.isdir(default_c) else None)
    ap.add_argument("--rounds", type=int, default=2000, help="rounds per 4-process run")
    ap.add_argument("--beats", type=int, default=1_000_000)
    args = ap.parse_args()

    d = tempfile.mkdtemp(prefix="vigil-bench-")
    try:
        beat = bench_beat(d, args.beats)
        quorum = bench_quorum(d, args.beats // 20)
        procs = bench_procs(d, args.rounds)
    finally:
        shutil.rmtree(d, ignore_errors=True)

    print(f"vigil from Python {sys.version.split()[0]} (cffi ABI mode), {os.cpu_count()} cpus")
    for name, ns in beat.items():
        print(f"  {name:<28} {ns:9.1f} ns")
    print(f"  {'wait(e, quorum=1), 1 peer':<28} {quorum:9.1f} ns")
    print(f"  {'4-process round, bound':<28} {procs / 1000:9.2f} us")
    if args.c_bench:
        print("C, same machine (bench/):")
        for ln in c_lines(args.c_bench):
            print(ln)
    return 0


if __name__ == "__main__":
    sys.exit(main())
