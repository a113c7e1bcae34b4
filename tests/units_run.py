#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The shipped systemd units, started and exercised as systemd runs them
(CTest: units).

Usage: units_run.py [--as-nobody] SOURCE_DIR BUILD_DIR

systemd is not PID 1 on a build machine, so `systemd-run` cannot start a
unit there; this is a small runner of the settings the units use, and it
refuses a [Service] setting it does not know, so a unit cannot gain one
that goes untried. For each unit: ExecStartPre= lines one after the
other, each of which must succeed (a "-" that hides a failure is refused
outright), then ExecStart=, every line split and $VARIABLE-expanded as
systemd does, run in WorkingDirectory= (missing: the start fails, as
systemd's 200/CHDIR), as User=/Group=, with Environment= and
EnvironmentFile=; Type=notify waits for READY=1 on a NOTIFY_SOCKET of
the runner's; a stop is SIGTERM to the main process, whose end must be
clean for systemd (status 0, SuccessExitStatus=, or SIGTERM itself).
NotifyAccess= and WatchdogSec= are checked against the unit's own
notices (none dropped; a WATCHDOG=1 each --interval, within half the
period); Restart=, RestartSec= and TimeoutStopSec= are read, not
enforced (a restart is exercised by starting the unit again).

Paths move into a temporary directory, as a drop-in would move them:
/usr/bin/vigil is the build's, /run/vigil a directory made as the
package's tmpfiles.d line says, /srv/pool the spool, and the failover
unit's --exec command /usr/local/bin/requeue-units the worker-pool
guide's requeue.sh (examples/requeue.sh). The workers are the guide's C
worker (examples/pool_worker.c, built). A unit run as root with
Group=vigil gets the test's group when there is no group vigil.

What is exercised: the ticker's start step makes the table, and keeps it
on a restart; the ticker without its table says how to make it; the
watchdog does not start without its spool; it says READY=1 before its
first scan; a worker killed with a job in hand has the job requeued by
requeue.sh in the spool; a reclaimed unit with no claim makes requeue.sh
fail with a line on stderr, which the watchdog logs; once --min-live is
met, the watchdog logs (and says in STATUS=) once that it withholds
WATCHDOG=1 when the pool falls below it, and once that it resumes; both
stop cleanly on SIGTERM. All of it twice: as shipped (root), and, as
root where the user vigil exists, with deployment.md's drop-in user.conf
(User=vigil, Group=vigil; the workers run as vigil too). Then
deployment.md's unit of a command under `vigil lock`: stopped with
SIGTERM, `vigil lock` ends with its CMD's 143, which the unit's
SuccessExitStatus= must name.
"""
import grp
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

WAIT = 60.0  # every wait is bounded by this many seconds
KNOWN = {
    "Type", "NotifyAccess", "WorkingDirectory", "User", "Group", "Environment", "EnvironmentFile",
    "ExecStartPre", "ExecStart", "SuccessExitStatus", "Restart", "RestartSec", "WatchdogSec",
    "TimeoutStopSec",
}
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
        time.sleep(0.02)
    raise TimeoutError(f"waited {timeout:.0f}s for {what}")


def parse_unit(text):
    """[(section, key, value)] in order, continuation lines joined."""
    out, section, pending = [], None, ""
    for raw in text.splitlines():
        line = pending + raw
        pending = ""
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        s = line.strip()
        if not s or s[0] in "#;":
            continue
        if s.startswith("["):
            section = s.strip("[]")
            continue
        key, _, value = s.partition("=")
        out.append((section, key.strip(), value.strip()))
    return out


def span_s(v):
    """A systemd time span (10, 10s, 500ms, 2min, 1h) in seconds."""
    total = 0.0
    for num, unit in re.findall(r"([\d.]+)\s*(ms|min|s|h|)", v):
        total += float(num) * {"ms": 0.001, "min": 60, "h": 3600}.get(unit, 1)
    return total


def expand(word, env):
    """systemd's $NAME and ${NAME} in an Exec line, $$ a dollar."""
    def sub(m):
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1) or m.group(2), "")
    return re.sub(r"\$\$|\$\{(\w+)\}|\$([A-Za-z_]\w*)", sub, word)


class Unit:
    def __init__(self, name, text, tmp):
        self.name, self.tmp = name, tmp
        self.settings = parse_unit(text)
        self.service = [(k, v) for s, k, v in self.settings if s == "Service"]
        for k, v in self.service:
            if k not in KNOWN:
                fail(f"{name}: [Service] {k}= is not one this runner knows: teach it before shipping it")
            if k.startswith("Exec") and v[:1] in "-@:+!":
                fail(f"{name}: {k}={v[:40]}...: the prefix {v[0]!r} changes how it runs "
                     "(\"-\" hides a failed step)")
        self.check_watchdog()
        self.main = None
        self.out = os.path.join(tmp, name + ".out")
        self.err = os.path.join(tmp, name + ".err")
        self.datagrams = []

    def check_watchdog(self):
        """NotifyAccess= and WatchdogSec= against the unit's own notices:
        systemd drops a notice NotifyAccess= does not let through, and
        restarts a unit whose WATCHDOG=1 (one each --interval) does not
        come well inside WatchdogSec= (half of it, as sd_watchdog_enabled(3)
        advises)."""
        access = self.get("NotifyAccess", "main" if self.get("Type") == "notify" else "none")
        if self.get("Type") == "notify" and access == "none":
            fail(f"{self.name}: Type=notify with NotifyAccess=none: systemd would never see READY=1")
        dog = self.get("WatchdogSec")
        if dog is None or span_s(dog) == 0:
            return
        if access == "none":
            fail(f"{self.name}: WatchdogSec= with NotifyAccess=none: every ping dropped, a restart each period")
        line = " ".join(self.all("ExecStart"))
        m = re.search(r"--interval[ =](\S+)", line)
        if "--sd-notify" not in line or not m:
            fail(f"{self.name}: WatchdogSec={dog} but ExecStart= sends no WATCHDOG=1 at a known --interval")
        elif 2 * span_s(m.group(1)) > span_s(dog):
            fail(f"{self.name}: --interval {m.group(1)} is not within half of WatchdogSec={dog}")

    def get(self, key, default=None):
        vals = [v for k, v in self.service if k == key]
        return vals[-1] if vals else default

    def all(self, key):
        return [v for k, v in self.service if k == key]

    def env(self):
        env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
        for path in self.all("EnvironmentFile"):
            if path.startswith("-") and not os.path.exists(path[1:]):
                continue  # "-": a missing file is no error, as for systemd
            with open(path.lstrip("-")) as f:
                for line in f:
                    line = line.strip()
                    if line and not line.startswith("#") and "=" in line:
                        k, _, v = line.partition("=")
                        env[k] = v.strip('"')
        for value in self.all("Environment"):
            for word in shlex.split(value):
                k, _, v = word.partition("=")
                env[k] = v
        return env

    def creds(self):
        kw = {}
        user, group = self.get("User"), self.get("Group")
        if user:
            kw["user"] = user
            kw["extra_groups"] = []
        if group:
            try:
                grp.getgrnam(group)
            except KeyError:
                group = os.getegid()
            kw["group"] = group
            kw.setdefault("extra_groups", [])
        return kw

    def spawn(self, line, env, **extra):
        argv = [expand(w, env) for w in shlex.split(line)]
        wd = self.get("WorkingDirectory", "/")
        if not os.path.isdir(wd):
            return None, f"200/CHDIR: {wd}: no such directory"
        kw = dict(cwd=wd, env=env, start_new_session=True, stdin=subprocess.DEVNULL)
        if os.geteuid() == 0:
            kw.update(self.creds())
        kw.update(extra)
        return subprocess.Popen(argv, **kw), None

    def start(self):
        """ExecStartPre= then ExecStart=; for Type=notify, until READY=1.
        Returns None, or why the start failed."""
        env = self.env()
        for line in self.all("ExecStartPre"):
            p, why = self.spawn(line, env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            if why:
                return why
            out, err = p.communicate(timeout=WAIT)
            with open(self.err, "ab") as f:
                f.write(err)
            with open(self.out, "ab") as f:
                f.write(out)
            if p.returncode != 0:
                return f"ExecStartPre={line[:50]}... exited {p.returncode}: {err.decode(errors='replace')}"
        self.datagrams = []
        if self.get("Type") == "notify":
            sock_path = os.path.join(self.tmp, self.name + ".notify")
            if os.path.exists(sock_path):
                os.unlink(sock_path)
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            self.sock.bind(sock_path)
            os.chmod(sock_path, 0o777)
            env["NOTIFY_SOCKET"] = sock_path
            threading.Thread(target=self._listen, args=(self.sock,), daemon=True).start()
        (line,) = self.all("ExecStart")
        self.main, why = self.spawn(line, env, stdout=open(self.out, "ab"), stderr=open(self.err, "ab"))
        if why:
            return why
        if self.get("Type") == "notify":
            try:
                wait_for(f"{self.name}'s READY=1",
                         lambda: self.main.poll() is not None or any("READY=1" in d for d in self.datagrams))
            except TimeoutError as e:
                return str(e)
            if self.main.poll() is not None:
                return f"exited {self.main.returncode} before READY=1: {self.stderr()}"
        return None

    def _listen(self, sock):
        while True:
            try:
                d = sock.recv(4096)
            except OSError:
                return
            self.datagrams.append(d.decode(errors="replace"))

    def stop(self):
        """SIGTERM to the main process; its end must be clean for systemd."""
        self.main.send_signal(signal.SIGTERM)
        try:
            rc = self.main.wait(timeout=WAIT)
        except subprocess.TimeoutExpired:
            os.killpg(self.main.pid, signal.SIGKILL)
            self.main.wait()
            fail(f"{self.name}: still running {WAIT:.0f}s after SIGTERM")
            return
        ok = {"0"} | set(" ".join(self.all("SuccessExitStatus")).split())
        clean = str(rc) in ok or rc in (-signal.SIGTERM, -signal.SIGHUP, -signal.SIGINT, -signal.SIGPIPE)
        if not clean:
            fail(f"{self.name}: ended with {rc} on SIGTERM, a failure to systemd "
                 f"(SuccessExitStatus={' '.join(self.all('SuccessExitStatus')) or 'unset'}): {self.stderr()}")
        if getattr(self, "sock", None):
            self.sock.close()
            self.sock = None

    def stderr(self):
        with open(self.err, errors="replace") as f:
            return f.read()

    def stdout(self):
        with open(self.out, errors="replace") as f:
            return f.read()


def make_run_dir(source, root):
    """/run/vigil as debian/vigil.tmpfiles makes it (a 'd' line)."""
    with open(os.path.join(source, "debian", "vigil.tmpfiles")) as f:
        (line,) = [l.split() for l in f if l.strip() and not l.startswith("#")]
    kind, path, mode, user, group = line[:5]
    assert kind == "d" and path == "/run/vigil", line
    d = root + path
    os.makedirs(d)
    try:
        gid = grp.getgrnam(group).gr_gid
    except KeyError:
        gid = os.getegid()
    if os.geteuid() == 0:
        os.chown(d, 0, gid)
    os.chmod(d, int(mode, 8))
    return d


def load(source, build, tmp, name, text=None, dropin=""):
    """A unit of examples/ (or text), its paths moved into tmp, a drop-in's
    [Service] lines after its own (a later setting wins, as in systemd)."""
    if text is None:
        with open(os.path.join(source, "examples", name)) as f:
            text = f.read()
    text += dropin
    moves = {
        "/usr/bin/vigil": os.path.join(build, "vigil"),
        "/run/vigil": os.path.join(tmp, "run", "vigil"),
        "/srv/pool": os.path.join(tmp, "srv", "pool"),
        "/usr/local/bin/requeue-units": os.path.join(source, "examples", "requeue.sh"),
    }
    for a, b in moves.items():
        text = text.replace(a, b)
    # The group vigil stands for the test's own where the runner cannot use
    # it: not root (Group= is not applied, and a non-member cannot give a
    # file to it), or no such group; as Group= does in Unit.creds.
    try:
        usable = os.geteuid() == 0 and grp.getgrnam("vigil")
    except KeyError:
        usable = False
    if not usable:
        text = re.sub(r"(--group[ =])vigil(?![\w-])", rf"\g<1>{os.getegid()}", text)
    return Unit(name, text, tmp)


def docs_block(source, doc, name):
    """The ini block of docs/DOC written to NAME (<!-- check: file NAME -->)."""
    with open(os.path.join(source, "docs", doc)) as f:
        text = f.read()
    m = re.search(r"<!-- check: file " + re.escape(name) + r" -->\n```ini\n(.*?)```", text, re.S)
    return m.group(1)


class Worker:
    """The guide's C worker, its stdout in a file."""
    n = 0

    def __init__(self, build, table, spool, work_ms, creds):
        Worker.n += 1
        self.out = os.path.join(spool, "..", f"w{Worker.n}.out")
        self.p = subprocess.Popen([os.path.join(build, "examples", "pool_worker"), table, str(work_ms)],
                                  cwd=spool, stdout=open(self.out, "w"), stderr=subprocess.STDOUT, **creds)

    def took(self):
        with open(self.out) as f:
            m = re.search(r"slot (\d+) took (\S+)", f.read())
        return m and (int(m.group(1)), m.group(2))

    def kill(self):
        self.p.kill()
        self.p.wait()


def count(text, needle):
    return sum(1 for line in text.splitlines() if needle in line)


def exercise(source, build, tmp, dropin=""):
    """The pool's two units, with a drop-in's settings (the workers run as
    the units do)."""
    os.makedirs(tmp)
    os.chmod(tmp, 0o755)
    run = make_run_dir(source, tmp)
    table = os.path.join(run, "pool.hb")
    tick = load(source, build, tmp, "vigil-tick.service", dropin=dropin)
    failover = load(source, build, tmp, "vigil-failover.service", dropin=dropin)
    creds = failover.creds() if os.geteuid() == 0 and dropin else {}
    for u in (tick, failover):
        if u.get("RuntimeDirectory"):
            fail(f"{u.name}: RuntimeDirectory= beside tmpfiles.d: /run/vigil is made one way only")

    # The ticker with no table (its start step skipped): it names the file
    # and says how to make it.
    (line,) = tick.all("ExecStart")
    p, _ = tick.spawn(line, tick.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = p.communicate(timeout=WAIT)
    err = err.decode()
    if p.returncode == 0 or table not in err or "vigil create" not in err:
        fail(f"the ticker with no table: exit {p.returncode}, expected its path and `vigil create`: {err!r}")

    why = tick.start()
    if why:
        fail(f"vigil-tick.service did not start: {why}")
        return
    if not os.path.exists(table):
        fail("vigil-tick.service's start made no table")
    tick.stop()
    why = tick.start()  # a restart: the table is kept
    if why or "kept" not in tick.stdout():
        fail(f"vigil-tick.service's restart: {why or tick.stdout()!r}")
        return

    # No spool: the watchdog does not start (systemd's 200/CHDIR).
    why = failover.start()
    if not why or "CHDIR" not in why:
        fail(f"vigil-failover.service started with no spool: {why}")
        if failover.main and failover.main.poll() is None:
            failover.stop()
    spool = failover.get("WorkingDirectory")
    for d in ("queue", "claimed", "done"):
        os.makedirs(os.path.join(spool, d))
    for i in range(1, 6):
        with open(os.path.join(spool, "queue", f"job-{i}"), "w") as f:
            f.write(f"{i}\n")
    if os.geteuid() == 0:
        for dirpath, dirs, files in os.walk(spool):
            os.chmod(dirpath, 0o777)

    why = failover.start()
    if why:
        fail(f"vigil-failover.service did not start: {why}")
        tick.stop()
        return
    first = failover.datagrams[0]
    if "READY=1" not in first or "scan" in first:
        fail(f"the first datagram is not READY=1 before any scan: {first!r}")

    workers = []
    try:
        # Four workers, each with a job in hand for long: --min-live 4 is met.
        workers = [Worker(build, table, spool, 600000, creds) for _ in range(4)]
        took = [wait_for(f"worker {i} to take a job", w.took) for i, w in enumerate(workers)]
        wait_for("STATUS= with 4 live", lambda: any("4 live" in d and "WATCHDOG=1" in d for d in failover.datagrams))

        # Killed with its job in hand: the job goes back to queue/.
        slot, job = took[0]
        workers[0].kill()
        wait_for(f"{job} requeued", lambda: os.path.exists(os.path.join(spool, "queue", job)))
        wait_for("requeue.sh's line", lambda: f"requeued {job} (exited)" in failover.stderr())

        # A unit with no claim (the worker died between its mark and its
        # take, rule 1): requeue.sh fails loudly, the watchdog logs it.
        slot, job = took[1]
        claim = os.path.join(spool, "claimed", f"{slot}.0.{workers[1].p.pid}.{job}")
        os.unlink(claim)
        workers[1].kill()
        wait_for("requeue.sh's complaint",
                 lambda: f"requeue.sh: slot {slot} unit 0 (pid {workers[1].p.pid}): no claim in {spool}/claimed"
                 in failover.stderr())
        wait_for("the watchdog's log of the failed CMD",
                 lambda: any(f"slot {slot}" in l and "units 0" in l and "exit" in l
                             for l in failover.stderr().splitlines() if "--exec" in l))

        # Below --min-live: withheld, said once (and in STATUS=).
        wait_for("the withheld line", lambda: "ping withheld" in failover.stderr())
        seen = len(failover.datagrams)
        wait_for("two more STATUS= reports", lambda: len(failover.datagrams) >= seen + 2)
        later = failover.datagrams[seen:]
        if any("WATCHDOG=1\n" in d for d in later) or not all("ping withheld: 2 live, fewer than --min-live 4" in d
                                                              for d in later):
            fail(f"STATUS= while withheld: {later}")
        for w in workers[2:]:
            w.kill()
        wait_for("the last two jobs requeued", lambda: len(os.listdir(os.path.join(spool, "claimed"))) == 0)

        # Four new workers take the four queued jobs: resumed, said once.
        workers += [Worker(build, table, spool, 600000, creds) for _ in range(4)]
        for i, w in enumerate(workers[4:]):
            wait_for(f"new worker {i} to take a job", w.took)
        wait_for("the resumed line", lambda: "ping resumed: 4 live" in failover.stderr())
        wait_for("WATCHDOG=1 again", lambda: "WATCHDOG=1\n" in failover.datagrams[-1])
        err = failover.stderr()
        if count(err, "ping withheld") != 1 or count(err, "ping resumed") != 1:
            fail(f"withheld and resumed are each said once:\n{err}")
        if "left)" in "".join(failover.datagrams) and re.search(r"\.\d\d\ds left", "".join(failover.datagrams)):
            fail("a status in milliseconds: " + "".join(failover.datagrams))
    except TimeoutError as e:
        fail(f"{e}\nwatchdog's stdout:\n{failover.stdout()}\nstderr:\n{failover.stderr()}\n"
             f"datagrams: {failover.datagrams[-3:]}")
    finally:
        for w in workers:
            if w.p.poll() is None:
                w.kill()
        failover.stop()
        tick.stop()


def lock_unit(source, build, tmp):
    """deployment.md's unit of a command under `vigil lock`: stopped by
    systemd's SIGTERM, it ends with its CMD's 143, which its
    SuccessExitStatus= makes a clean stop."""
    os.makedirs(tmp)
    os.chmod(tmp, 0o755)
    make_run_dir(source, tmp)
    marker = os.path.join(tmp, "report-running")
    text = docs_block(source, "deployment.md", "nightly-report.service")
    text = text.replace("/usr/local/bin/nightly-report", f"/bin/sh -c 'touch {marker}; exec sleep 600'")
    unit = load(source, build, tmp, "nightly-report.service", text=text)
    why = unit.start()
    if why:
        fail(f"nightly-report.service did not start: {why}")
        return
    try:
        wait_for("the report to run under its lock", lambda: os.path.exists(marker))
    except TimeoutError as e:
        fail(f"{e}: {unit.stderr()}")
    unit.stop()
    if unit.main.returncode != 143:
        fail(f"vigil lock ended with {unit.main.returncode} on SIGTERM, not the 143 its unit's "
             "SuccessExitStatus= is for")


def user_pass_blocked(source, build):
    """Why the units cannot be run as the user vigil here, or None."""
    if os.geteuid() != 0:
        return "not root"
    try:
        __import__("pwd").getpwnam("vigil")
    except KeyError:
        return "no user vigil"
    # The build and the checkout must be in vigil's reach (not under a
    # directory of root's alone, as a scratch copy of the tree may be).
    probe = subprocess.run(["/bin/sh", "-c", 'test -x "$1" && test -x "$2" && test -r "$3"', "sh",
                            os.path.join(build, "vigil"), os.path.join(build, "examples", "pool_worker"),
                            os.path.join(source, "examples", "requeue.sh")], user="vigil")
    return "the build or the checkout is out of the user vigil's reach" if probe.returncode else None


def as_nobody(source, build):
    """The whole run again as the user nobody (CTest: units_unprivileged):
    what a developer who is not root meets. 77, with the reason, when it
    cannot be tried."""
    if os.geteuid() != 0:
        print("units_unprivileged: skipped: not root (the test units itself is the unprivileged run)")
        return 77
    python = "/usr/bin/python3"
    if not os.access(python, os.X_OK) or not shutil.which("setpriv"):
        print(f"units_unprivileged: skipped: no {python} or no setpriv to run it as nobody")
        return 77
    return subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", python,
                           os.path.abspath(__file__), source, build]).returncode


def main():
    if sys.argv[1:2] == ["--as-nobody"]:
        return as_nobody(*(os.path.abspath(a) for a in sys.argv[2:4]))
    source, build = (os.path.abspath(a) for a in sys.argv[1:3])
    tmp = tempfile.mkdtemp(prefix="vigil-units.")
    os.chmod(tmp, 0o755)
    try:
        print("units: the pool's units as shipped", flush=True)
        exercise(source, build, os.path.join(tmp, "shipped"))
        why_not = user_pass_blocked(source, build)
        if why_not:
            print(f"units: the units' User= drop-in not tried: {why_not}")
        else:
            # deployment.md's drop-in: both units as the system user vigil.
            dropin = docs_block(source, "deployment.md", "user.conf")
            print("units: the pool's units with deployment.md's user.conf (User=vigil)", flush=True)
            exercise(source, build, os.path.join(tmp, "as-vigil"), dropin="\n" + dropin)
        print("units: deployment.md's unit of a command under vigil lock", flush=True)
        lock_unit(source, build, os.path.join(tmp, "lock"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print(f"units: {len(failures)} failure(s)")
        return 1
    print("units: the shipped units ran as systemd runs them")
    return 0


if __name__ == "__main__":
    sys.exit(main())
