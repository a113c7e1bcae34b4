#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The worker-pool guide's workers stopped in the middle of a take (CTest:
pool_stop).

Usage: pool_stop_run.py SOURCE_DIR BUILD_DIR STOP_TAKE_SO

Each worker (the guide's C worker, examples/pool_worker.c, and its
worker.py when VIGIL_LIBRARY names the library) is stopped by
tests/stop_take.c, an LD_PRELOAD of rename, at a step of its take; the
test sees the stop in /proc, reclaims the slot as stale (`vigil tick`,
then `vigil failover --once --exec ./requeue.sh`), and resumes or kills
it. Three cases, each ending with a worker that must drain the queue:
  before:       reclaimed between the mark and the take (requeue.sh finds
                no claim); resumed, the worker takes, sees its mark gone,
                puts the job back and stops;
  before,after: the same, killed right after the take: the claim is an
                orphan, which the next worker's wait puts back (rule 4);
  after:        reclaimed between the take and its check (requeue.sh puts
                the job back); resumed, the worker finds its claim gone,
                stops, and the job is in the queue once;
  held (C):     stopped after the take and not reclaimed, while a second
                worker drains the rest and waits (stopped itself once it
                swept claimed/ once): the held claim stays where it is, and
                both end well once resumed;
  result:       stopped before its result goes into place, reclaimed; a
                second worker redoes the job and stops at the same step;
                both resumed, neither takes the other's temporary result,
                and the second drains the queue;
  not a number: a job that is not a number is done, its result saying
                so, and the worker goes on.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from units_run import WAIT, fail, failures, wait_for  # noqa: E402  (one runner's helpers for both)

JOBS = {"job-1": 3, "job-2": 4}


def stopped(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "T"


def worker_py(source, table):
    """The guide's worker.py, its table moved into the test's directory."""
    with open(os.path.join(source, "docs", "guide-worker-pool.md")) as f:
        text = f.read()
    block = re.search(r"<!-- check: file worker.py[^>]*-->\n```python\n(.*?)```", text, re.S).group(1)
    return block.replace("/run/vigil/pool.hb", table)


class Pool:
    """A spool (queue/ with jobs, claimed/, done/, requeue.sh) and its table
    in a directory of its own, removed on exit; workers of either kind."""

    def __init__(self, source, build, hook, jobs):
        self.source, self.build, self.hook = source, build, hook
        self.vigil = os.path.join(build, "vigil")
        self.tmp = tempfile.mkdtemp(prefix="vigil-pool-stop.")
        self.spool = os.path.join(self.tmp, "spool")
        for d in ("queue", "claimed", "done"):
            os.makedirs(os.path.join(self.spool, d))
        for job, text in jobs.items():
            with open(os.path.join(self.spool, "queue", job), "w") as f:
                f.write(f"{text}\n")
        shutil.copy(os.path.join(source, "examples", "requeue.sh"), self.spool)
        self.table = os.path.join(self.tmp, "pool.hb")
        subprocess.run([self.vigil, "create", self.table, "--capacity", "8"], check=True, stdout=subprocess.DEVNULL)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def ls(self, d):
        return sorted(os.listdir(os.path.join(self.spool, d)))

    def done(self):
        out = {}
        for job in self.ls("done"):
            with open(os.path.join(self.spool, "done", job)) as f:
                out[job] = f.read().strip()
        return out

    def argv(self, kind, work_ms):
        if kind == "c":
            return [os.path.join(self.build, "examples", "pool_worker"), self.table, str(work_ms)]
        with open(os.path.join(self.tmp, "worker.py"), "w") as f:
            f.write(worker_py(self.source, self.table))
        return [sys.executable, os.path.join(self.tmp, "worker.py")]

    def spawn(self, argv, when, **kw):
        """A worker that stop_take.so stops as STOP_TAKE=when says."""
        env = dict(os.environ, LD_PRELOAD=self.hook, STOP_TAKE=when,
                   ASAN_OPTIONS="verify_asan_link_order=0:" + os.environ.get("ASAN_OPTIONS", ""))
        kw.setdefault("stdout", subprocess.PIPE)
        return subprocess.Popen(argv, cwd=self.spool, env=env, stderr=subprocess.STDOUT, text=True, **kw)

    def reclaim(self):
        """Every slot stale past the grace, reclaimed, requeue.sh run: what it said."""
        subprocess.run([self.vigil, "tick", self.table, "--count", "6", "--interval", "1ms", "--quiet"], check=True)
        r = subprocess.run([self.vigil, "failover", self.table, "--grace", "5", "--once", "--exec", "./requeue.sh"],
                           cwd=self.spool, capture_output=True, text=True)
        return r.stdout + r.stderr


def case(source, build, hook, kind, when):
    with Pool(source, build, hook, JOBS) as pool:
        argv = pool.argv(kind, 600000)
        out = os.path.join(pool.tmp, "w1.out")
        w1 = pool.spawn(argv, when, stdout=open(out, "w"))
        label = f"{kind} worker stopped {when}"

        def reclaim(says):
            said = pool.reclaim()
            if says not in said:
                fail(f"{label}: the watchdog's run says {said!r}, not {says!r}")

        if when.startswith("before"):
            wait_for("the stop before the take", lambda: stopped(w1.pid))
            reclaim("no claim")
            w1.send_signal(signal.SIGCONT)
        if "after" in when:
            wait_for("the take", lambda: pool.ls("claimed"))
            wait_for("the stop after the take", lambda: stopped(w1.pid))
        if when == "before,after":
            w1.kill()
        if when == "after":
            reclaim("requeued job-1 (stale)")
            w1.send_signal(signal.SIGCONT)
        try:
            rc = w1.wait(timeout=WAIT)
        except subprocess.TimeoutExpired:
            w1.kill()
            w1.wait()
            with open(out) as f:
                fail(f"{label}: still working on a slot it lost after {WAIT:.0f}s; said {f.read()!r}")
            return
        with open(out) as f:
            said = f.read()
        if when != "before,after":
            if rc == 0 or "reclaimed" not in said and "held no more" not in said:
                fail(f"{label}: ended with {rc}, saying {said!r}; expected a failure naming the lost slot")
            if pool.ls("queue") != sorted(JOBS) or pool.ls("claimed") or pool.ls("done"):
                fail(f"{label}: queue {pool.ls('queue')}, claimed {pool.ls('claimed')}, done {pool.ls('done')}; "
                     "expected every job queued once, nothing done")
        try:
            w2 = subprocess.run(pool.argv(kind, 1), cwd=pool.spool, capture_output=True, text=True, timeout=WAIT)
        except subprocess.TimeoutExpired:
            fail(f"{label}: the next worker still waits after {WAIT:.0f}s; claimed/: {pool.ls('claimed')}")
            return
        want = {job: str(n * n) for job, n in JOBS.items()}
        if w2.returncode != 0 or pool.done() != want or pool.ls("queue") or pool.ls("claimed"):
            fail(f"{label}: the next worker ended with {w2.returncode} ({w2.stdout + w2.stderr!r}); done "
                 f"{pool.done()}, queue {pool.ls('queue')}, claimed {pool.ls('claimed')}; expected {want} and "
                 "nothing left")
        if when == "before,after" and "requeued orphan" not in w2.stdout and kind == "c":
            fail(f"{label}: the next worker did not say it put the orphan back: {w2.stdout!r}")
        print(f"ok: {label}", flush=True)


def held(source, build, hook):
    """A claim its live owner holds is never swept (rule 4's other half)."""
    with Pool(source, build, hook, JOBS) as pool:
        argv = pool.argv("c", 1)
        w = [pool.spawn(argv, "after")]
        wait_for("the first worker's stop after its take", lambda: stopped(w[0].pid))
        w.append(pool.spawn(argv, "wait"))
        wait_for("the second worker's stop in its wait", lambda: stopped(w[1].pid))
        if len(pool.ls("claimed")) != 1 or pool.ls("queue"):
            fail(f"held: claimed/ {pool.ls('claimed')}, queue/ {pool.ls('queue')} while the second worker "
                 "waits; expected the first worker's claim alone, untouched")
        for p in w:
            p.send_signal(signal.SIGCONT)
        for i, p in enumerate(w):
            try:
                out, _ = p.communicate(timeout=WAIT)
            except subprocess.TimeoutExpired:
                p.kill()
                out, _ = p.communicate()
            if p.returncode != 0:
                fail(f"held: worker {i + 1} ended with {p.returncode}: {out!r}")
        if pool.ls("done") != sorted(JOBS):
            fail(f"held: done/ {pool.ls('done')}, expected {sorted(JOBS)}")
        print("ok: held claim kept", flush=True)


def result(source, build, hook, kind):
    """Two workers write one job's result at once (a stalled one resumed):
    each under its own temporary name."""
    with Pool(source, build, hook, JOBS) as pool:
        argv = pool.argv(kind, 1)
        w = [pool.spawn(argv, "result")]
        wait_for("the first worker's stop before its result", lambda: stopped(w[0].pid))
        pool.reclaim()
        w.append(pool.spawn(argv, "result"))
        wait_for("the second worker's stop before its result", lambda: stopped(w[1].pid))
        for p in w:
            p.send_signal(signal.SIGCONT)
            out = p.communicate(timeout=WAIT)[0]
        if w[1].returncode != 0 or pool.ls("done") != sorted(JOBS):
            fail(f"result ({kind}): the second worker ended with {w[1].returncode} ({out!r}), done/ "
                 f"{pool.ls('done')}; expected 0 and {sorted(JOBS)}")
        print(f"ok: result ({kind}): two writers of one result", flush=True)


def not_a_number(source, build, hook, kind):
    """A job that is not a number ends as a result, never as a worker."""
    with Pool(source, build, hook, {"job-1": "x", "job-2": 4}) as pool:
        r = subprocess.run(pool.argv(kind, 1), cwd=pool.spool, capture_output=True, text=True, timeout=WAIT)
        want = {"job-1": "error: not a number", "job-2": "16"}
        if r.returncode != 0 or pool.done() != want:
            fail(f"not a number ({kind}): ended with {r.returncode} ({r.stdout + r.stderr!r}), done "
                 f"{pool.done()}; expected 0 and {want}")
        print(f"ok: not a number ({kind})", flush=True)


def main():
    source, build, hook = sys.argv[1:4]
    kinds = ["c"] + (["python"] if os.environ.get("VIGIL_LIBRARY") else [])
    if len(kinds) == 1:
        print("the Python worker is not tried: VIGIL_LIBRARY is not set (a sanitizer build)", flush=True)
    for kind in kinds:
        for when in ("before", "before,after", "after"):
            try:
                case(source, build, hook, kind, when)
            except TimeoutError as e:
                fail(f"{kind} worker stopped {when}: {e}")
    try:
        held(source, build, hook)
        for kind in kinds:
            result(source, build, hook, kind)
            not_a_number(source, build, hook, kind)
    except TimeoutError as e:
        fail(f"held or result: {e}")
    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
