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
import time

WAIT = 60.0  # every wait is bounded by this many seconds
JOBS = {"job-1": 3, "job-2": 4}
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg, flush=True)


def wait_for(what, cond, timeout=WAIT):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.01)
    raise TimeoutError(f"waited {timeout:.0f}s for {what}")


def stopped(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "T"


def worker_py(source, table):
    """The guide's worker.py, its table moved into the test's directory."""
    with open(os.path.join(source, "docs", "guide-worker-pool.md")) as f:
        text = f.read()
    block = re.search(r"<!-- check: file worker.py[^>]*-->\n```python\n(.*?)```", text, re.S).group(1)
    return block.replace("/run/vigil/pool.hb", table)


def case(source, build, hook, kind, when):
    vigil = os.path.join(build, "vigil")
    tmp = tempfile.mkdtemp(prefix="vigil-pool-stop.")
    try:
        spool = os.path.join(tmp, "spool")
        for d in ("queue", "claimed", "done"):
            os.makedirs(os.path.join(spool, d))
        for job, n in JOBS.items():
            with open(os.path.join(spool, "queue", job), "w") as f:
                f.write(f"{n}\n")
        shutil.copy(os.path.join(source, "examples", "requeue.sh"), spool)
        table = os.path.join(tmp, "pool.hb")
        subprocess.run([vigil, "create", table, "--capacity", "8"], check=True, stdout=subprocess.DEVNULL)
        if kind == "c":
            argv = [os.path.join(build, "examples", "pool_worker"), table, "600000"]
        else:
            with open(os.path.join(tmp, "worker.py"), "w") as f:
                f.write(worker_py(source, table))
            argv = [sys.executable, os.path.join(tmp, "worker.py")]
        env = dict(os.environ, LD_PRELOAD=hook, STOP_TAKE=when,
                   ASAN_OPTIONS="verify_asan_link_order=0:" + os.environ.get("ASAN_OPTIONS", ""))
        out = os.path.join(tmp, "w1.out")
        w1 = subprocess.Popen(argv, cwd=spool, env=env, stdout=open(out, "w"), stderr=subprocess.STDOUT)
        label = f"{kind} worker stopped {when}"
        claimed = lambda: os.listdir(os.path.join(spool, "claimed"))
        queued = lambda: sorted(os.listdir(os.path.join(spool, "queue")))

        def reclaim(says):
            subprocess.run([vigil, "tick", table, "--count", "6", "--interval", "1ms", "--quiet"], check=True)
            r = subprocess.run([vigil, "failover", table, "--grace", "5", "--once", "--exec", "./requeue.sh"],
                               cwd=spool, capture_output=True, text=True)
            if says not in r.stdout + r.stderr:
                fail(f"{label}: the watchdog's run says {r.stdout + r.stderr!r}, not {says!r}")

        if when.startswith("before"):
            wait_for("the stop before the take", lambda: stopped(w1.pid))
            reclaim("no claim")
            w1.send_signal(signal.SIGCONT)
        if "after" in when:
            wait_for("the take", lambda: claimed())
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
            if queued() != sorted(JOBS) or claimed() or os.listdir(os.path.join(spool, "done")):
                fail(f"{label}: queue {queued()}, claimed {claimed()}, done "
                     f"{os.listdir(os.path.join(spool, 'done'))}; expected every job queued once, nothing done")
        try:
            w2 = subprocess.run(argv[:2] + ["1"] if kind == "c" else argv, cwd=spool, capture_output=True,
                                text=True, timeout=WAIT)
        except subprocess.TimeoutExpired:
            fail(f"{label}: the next worker still waits after {WAIT:.0f}s; claimed/: {claimed()}")
            return
        done = {}
        for job in os.listdir(os.path.join(spool, "done")):
            with open(os.path.join(spool, "done", job)) as f:
                done[job] = f.read().strip()
        want = {job: str(n * n) for job, n in JOBS.items()}
        if w2.returncode != 0 or done != want or queued() or claimed():
            fail(f"{label}: the next worker ended with {w2.returncode} ({w2.stdout + w2.stderr!r}); done {done}, "
                 f"queue {queued()}, claimed {claimed()}; expected {want} and nothing left")
        if when == "before,after" and "requeued orphan" not in w2.stdout and kind == "c":
            fail(f"{label}: the next worker did not say it put the orphan back: {w2.stdout!r}")
        print(f"ok: {label}", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def held(source, build, hook):
    """A claim its live owner holds is never swept (rule 4's other half)."""
    vigil = os.path.join(build, "vigil")
    tmp = tempfile.mkdtemp(prefix="vigil-pool-held.")
    try:
        spool = os.path.join(tmp, "spool")
        for d in ("queue", "claimed", "done"):
            os.makedirs(os.path.join(spool, d))
        for job, n in JOBS.items():
            with open(os.path.join(spool, "queue", job), "w") as f:
                f.write(f"{n}\n")
        table = os.path.join(tmp, "pool.hb")
        subprocess.run([vigil, "create", table, "--capacity", "8"], check=True, stdout=subprocess.DEVNULL)
        argv = [os.path.join(build, "examples", "pool_worker"), table, "1"]
        env = dict(os.environ, LD_PRELOAD=hook,
                   ASAN_OPTIONS="verify_asan_link_order=0:" + os.environ.get("ASAN_OPTIONS", ""))
        w = [subprocess.Popen(argv, cwd=spool, env=dict(env, STOP_TAKE=when), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for when in ("after",)]
        wait_for("the first worker's stop after its take", lambda: stopped(w[0].pid))
        w.append(subprocess.Popen(argv, cwd=spool, env=dict(env, STOP_TAKE="wait"), stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True))
        wait_for("the second worker's stop in its wait", lambda: stopped(w[1].pid))
        claims = os.listdir(os.path.join(spool, "claimed"))
        if len(claims) != 1 or os.listdir(os.path.join(spool, "queue")):
            fail(f"held: claimed/ {claims}, queue/ {os.listdir(os.path.join(spool, 'queue'))} while the "
                 "second worker waits; expected the first worker's claim alone, untouched")
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
        if sorted(os.listdir(os.path.join(spool, "done"))) != sorted(JOBS):
            fail(f"held: done/ {os.listdir(os.path.join(spool, 'done'))}, expected {sorted(JOBS)}")
        print("ok: held claim kept", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def result(source, build, hook, kind):
    """Two workers write one job's result at once (a stalled one resumed):
    each under its own temporary name."""
    vigil = os.path.join(build, "vigil")
    tmp = tempfile.mkdtemp(prefix="vigil-pool-result.")
    try:
        spool = os.path.join(tmp, "spool")
        for d in ("queue", "claimed", "done"):
            os.makedirs(os.path.join(spool, d))
        for job, n in JOBS.items():
            with open(os.path.join(spool, "queue", job), "w") as f:
                f.write(f"{n}\n")
        shutil.copy(os.path.join(source, "examples", "requeue.sh"), spool)
        table = os.path.join(tmp, "pool.hb")
        subprocess.run([vigil, "create", table, "--capacity", "8"], check=True, stdout=subprocess.DEVNULL)
        if kind == "c":
            argv = [os.path.join(build, "examples", "pool_worker"), table, "1"]
        else:
            with open(os.path.join(tmp, "worker.py"), "w") as f:
                f.write(worker_py(source, table))
            argv = [sys.executable, os.path.join(tmp, "worker.py")]
        env = dict(os.environ, LD_PRELOAD=hook, STOP_TAKE="result",
                   ASAN_OPTIONS="verify_asan_link_order=0:" + os.environ.get("ASAN_OPTIONS", ""))
        spawn = lambda: subprocess.Popen(argv, cwd=spool, env=env, stdout=subprocess.PIPE,
                                         stderr=subprocess.STDOUT, text=True)
        w = [spawn()]
        wait_for("the first worker's stop before its result", lambda: stopped(w[0].pid))
        subprocess.run([vigil, "tick", table, "--count", "6", "--interval", "1ms", "--quiet"], check=True)
        subprocess.run([vigil, "failover", table, "--grace", "5", "--once", "--exec", "./requeue.sh"],
                       cwd=spool, capture_output=True, check=True)
        w.append(spawn())
        wait_for("the second worker's stop before its result", lambda: stopped(w[1].pid))
        for p in w:
            p.send_signal(signal.SIGCONT)
            out = p.communicate(timeout=WAIT)[0]
        if w[1].returncode != 0 or sorted(os.listdir(os.path.join(spool, "done"))) != sorted(JOBS):
            fail(f"result ({kind}): the second worker ended with {w[1].returncode} ({out!r}), done/ "
                 f"{os.listdir(os.path.join(spool, 'done'))}; expected 0 and {sorted(JOBS)}")
        print(f"ok: result ({kind}): two writers of one result", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def not_a_number(source, build, kind):
    """A job that is not a number ends as a result, never as a worker."""
    vigil = os.path.join(build, "vigil")
    tmp = tempfile.mkdtemp(prefix="vigil-pool-nan.")
    try:
        spool = os.path.join(tmp, "spool")
        for d in ("queue", "claimed", "done"):
            os.makedirs(os.path.join(spool, d))
        for job, text in (("job-1", "x\n"), ("job-2", "4\n")):
            with open(os.path.join(spool, "queue", job), "w") as f:
                f.write(text)
        table = os.path.join(tmp, "pool.hb")
        subprocess.run([vigil, "create", table, "--capacity", "8"], check=True, stdout=subprocess.DEVNULL)
        if kind == "c":
            argv = [os.path.join(build, "examples", "pool_worker"), table, "1"]
        else:
            with open(os.path.join(tmp, "worker.py"), "w") as f:
                f.write(worker_py(source, table))
            argv = [sys.executable, os.path.join(tmp, "worker.py")]
        r = subprocess.run(argv, cwd=spool, capture_output=True, text=True, timeout=WAIT)
        done = {}
        for job in os.listdir(os.path.join(spool, "done")):
            with open(os.path.join(spool, "done", job)) as f:
                done[job] = f.read().strip()
        want = {"job-1": "error: not a number", "job-2": "16"}
        if r.returncode != 0 or done != want:
            fail(f"not a number ({kind}): ended with {r.returncode} ({r.stdout + r.stderr!r}), done {done}; "
                 f"expected 0 and {want}")
        print(f"ok: not a number ({kind})", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


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
            not_a_number(source, build, kind)
    except TimeoutError as e:
        fail(f"held or result: {e}")
    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
