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
../build/bench when it exists), runs bench_heartbeat and bench_barrier in
the same run and prints their figures for the same operations beside, with
the ratio. Each figure is the best (beat) or median (round) of several
runs: on a shared, noisy machine the ratio is the figure to read.
"""
from __future__ import annotations

import argparse
import os
import re
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


def c_figures(c_dir: str) -> dict:
    """The same operations' C figures (ns), from bench_heartbeat and bench_barrier."""
    got = {}
    runs = {}
    for prog in ("bench_heartbeat", "bench_barrier"):
        path = os.path.join(c_dir, prog)
        if os.access(path, os.X_OK):
            runs[prog] = subprocess.run([path], capture_output=True, text=True, timeout=600).stdout
        else:
            print(f"({path} not built)")
    for ln in runs.get("bench_heartbeat", "").splitlines():
        if ln.startswith("beat "):
            got["beat"] = float(ln.split()[1])  # vigil_hb_beat
        m = re.search(r"with a compiler barrier:\s+beater ([0-9.]+)", ln)
        if m:
            got["Beater.beat()"] = float(m.group(1))  # vigil_beater_beat
    for ln in runs.get("bench_barrier", "").splitlines():
        cells = [c.strip() for c in ln.split("|")]
        if len(cells) > 2 and cells[1].startswith("wait_quorum(e, 1)"):
            got["quorum"] = _ns(cells[2])
        if len(cells) > 2 and cells[1].startswith("4-process round, bound"):
            got["procs"] = _ns(cells[2])
    return got


def _ns(cell: str) -> float:
    value, unit = cell.split()
    return float(value) * {"ns": 1.0, "us": 1e3, "ms": 1e6}[unit]


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

    c = c_figures(args.c_bench) if args.c_bench else {}
    print(f"vigil from Python {sys.version.split()[0]} (cffi ABI mode) and from C, {os.cpu_count()} cpus")
    print(f"  {'operation':<34} {'Python':>10} {'C':>10} {'Python/C':>9}")
    rows = [
        ("beat (table.beat / vigil_hb_beat)", beat["beat"], c.get("beat")),
        ("Beater.beat() / vigil_beater_beat", beat["Beater.beat()"], c.get("Beater.beat()")),
        ("empty Python loop", beat["empty loop"], None),
        ("round, 1 peer: wait(e, quorum=1)", quorum, c.get("quorum")),
        ("round, 4 processes, bound", procs, c.get("procs")),
    ]
    for name, py, cv in rows:
        ratio = f"{py / cv:.1f}x" if cv else ""
        print(f"  {name:<34} {_fmt(py):>10} {_fmt(cv) if cv else '':>10} {ratio:>9}")
    return 0


def _fmt(ns: float) -> str:
    return f"{ns:.1f} ns" if ns < 1000 else f"{ns / 1000:.2f} us"


if __name__ == "__main__":
    sys.exit(main())
