//! Multi-process tests: real processes on shared files, killed with
//! SIGKILL at moments the test chooses (after a child has said it holds
//! its units), every wait bounded.
//!
//! The test binary is its own child: `procs --child ROLE ARGS...` runs one
//! of the roles below. The C children are tests/c/peer.c, compiled here;
//! the Python child runs the repository's package (python/).
//!
//! Its own harness (`harness = false`): `procs [FILTER]` runs the tests
//! whose name contains FILTER, one after another.

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use support::{Proc, TempDir, Words};
use std::sync::Arc;

use vigil::{Barrier, HeartbeatTable, Keepalive, Leases, ReclaimReason, WaitOutcome};

type TestResult = Result<(), String>;
type Test = (&'static str, fn() -> TestResult);

const LIMIT: Duration = Duration::from_secs(60);
const READY: Duration = Duration::from_secs(30);

macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!($($msg)+));
        }
    };
}

fn err<E: std::fmt::Display>(what: &'static str) -> impl Fn(E) -> String {
    move |e| format!("{what}: {e}")
}

/// The test binary again, as a child in `role`.
fn child(role: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(std::env::current_exe().expect("test binary"));
    cmd.arg("--child").arg(role).args(args);
    cmd
}

/// "slot S pid P" from a worker.
fn slot_line(p: &Proc) -> Result<(u32, u32), String> {
    let line = p.line(READY)?;
    let w: Vec<&str> = line.split_whitespace().collect();
    match w.as_slice() {
        ["slot", s, "pid", pid] => Ok((s.parse().map_err(err("slot"))?, pid.parse().map_err(err("pid"))?)),
        _ => Err(format!("{}: expected 'slot S pid P', got {line:?}", p.name)),
    }
}

fn bits(units: &[u32]) -> u64 {
    units.iter().fold(0, |m, b| m | 1 << b)
}

// ---- the children -----------------------------------------------------------

/// Waits up to `t` for stdin to close (true) or to stay open (false).
fn stdin_closed(t: Duration) -> bool {
    #[repr(C)]
    struct PollFd {
        fd: i32,
        events: i16,
        revents: i16,
    }
    extern "C" {
        fn poll(fds: *mut PollFd, n: u64, timeout: i32) -> i32;
        fn read(fd: i32, buf: *mut u8, n: usize) -> isize;
    }
    let mut p = PollFd { fd: 0, events: 1, revents: 0 };
    // SAFETY: one pollfd; a read into a local buffer.
    unsafe {
        if poll(&mut p, 1, t.as_millis() as i32) == 1 {
            let mut buf = [0u8; 64];
            return read(0, buf.as_mut_ptr(), buf.len()) <= 0;
        }
    }
    false
}

/// worker TABLE BIT...: register, mark, say so, beat until stdin closes.
fn role_worker(args: &[String]) -> i32 {
    let table = HeartbeatTable::open(&args[0]).expect("open table");
    let me = table.register().expect("register");
    for b in &args[1..] {
        me.mark(b.parse().expect("bit")).expect("mark");
    }
    println!("slot {} pid {}", me.slot(), std::process::id());
    let beater = me.beater();
    let end = Instant::now() + LIMIT;
    while Instant::now() < end {
        beater.beat();
        if stdin_closed(Duration::from_millis(2)) {
            return match me.unregister() {
                Ok(()) => 0,
                Err(_) => 3,
            };
        }
    }
    1
}

/// watch TABLE GRACE: failover_wait in a loop, one line per reclaim, until
/// stdin closes.
fn role_watch(args: &[String]) -> i32 {
    let table = HeartbeatTable::open(&args[0]).expect("open table");
    let grace: u64 = args[1].parse().expect("grace");
    println!("watching");
    let end = Instant::now() + LIMIT;
    while Instant::now() < end {
        for r in table.failover_wait(grace, Some(Duration::from_millis(20))).expect("failover_wait") {
            println!("reclaim {} {} {}", r.slot, r.pid, r.in_flight);
        }
        if stdin_closed(Duration::ZERO) {
            return 0;
        }
    }
    1
}

/// barrier TABLE BARRIER WORDS GROUP ROUNDS: start the group (the safe
/// start), then meet ROUNDS rounds from the first round it gave; before
/// the k-th, say "I reached k" in WORDS, and after it, check that every
/// member did. "first F serial S early E" (S counts the start's serial).
fn role_barrier(args: &[String]) -> i32 {
    let table = HeartbeatTable::open(&args[0]).expect("open table");
    let mut barrier = Barrier::open(&args[1], &table).expect("open barrier");
    let words = Words::open(Path::new(&args[2]), table.capacity() as usize);
    let group: u32 = args[3].parse().expect("group");
    let rounds: u32 = args[4].parse().expect("rounds");
    let me = table.register().expect("register");
    barrier.bind(me.slot()).expect("bind");
    let start = barrier.start_timeout(group, LIMIT).expect("start");
    let mut serial = u32::from(start.is_serial());
    let mut early = 0;
    for k in 1..=rounds {
        words.get(me.slot() as usize).store(u64::from(k), Ordering::SeqCst);
        let round = start.first_round + k - 1;
        let outcome = barrier.wait_timeout(round, Duration::from_secs(30)).expect("wait");
        serial += u32::from(outcome == WaitOutcome::Serial);
        let reached = (0..table.capacity() as usize)
            .filter(|&i| words.get(i).load(Ordering::SeqCst) >= u64::from(k))
            .count();
        if reached < group as usize {
            early += 1;
        }
    }
    println!("first {} serial {serial} early {early}", start.first_round);
    0
}

// ---- the tests ----------------------------------------------------------------

/// A worker holding units is SIGKILLed; three watchdogs race for them (two
/// child processes in failover_wait, this one scanning and ticking); the
/// units are reclaimed exactly once, whole, and nothing else is.
fn worker_killed_units_reclaimed_once() -> TestResult {
    let dir = TempDir::new("kill");
    let path = dir.path("table");
    let table = HeartbeatTable::create(&path, 8).map_err(err("create"))?;
    let p = path.to_str().unwrap();
    let units = [1, 5, 9, 63];
    let unit_args: Vec<String> = units.iter().map(u32::to_string).collect();
    let mut args = vec![p];
    args.extend(unit_args.iter().map(String::as_str));
    let mut worker = Proc::spawn("worker", child("worker", &args))?;
    let (slot, pid) = slot_line(&worker)?;
    ensure!(table.snapshot(slot).map_err(err("snapshot"))?.in_flight == bits(&units), "units not marked");

    let mut watchers = Vec::new();
    for i in 0..2 {
        let w = Proc::spawn(&format!("watcher {i}"), child("watch", &[p, "3"]))?;
        ensure!(w.line(READY)? == "watching", "watcher {i} did not start");
        watchers.push(w);
    }
    worker.kill(); // the moment is ours: it holds its units and beats
    worker.wait(LIMIT)?;

    // This process scans too, ticking the epoch as a watchdog does.
    let mut mine = Vec::new();
    let end = Instant::now() + LIMIT;
    while table.snapshot(slot).is_ok() && Instant::now() < end {
        table.tick();
        mine.extend(table.failover_scan(3).map_err(err("scan"))?);
        std::thread::sleep(Duration::from_millis(2));
    }
    for _ in 0..10 {
        table.tick();
        mine.extend(table.failover_scan(3).map_err(err("scan"))?);
    }
    let mut seen: Vec<(u32, u32, u64, String)> =
        mine.iter().map(|r| (r.slot, r.pid, r.in_flight, "scan".to_string())).collect();
    for w in &mut watchers {
        w.close_stdin();
        for line in w.rest(LIMIT) {
            let f: Vec<u64> = line.split_whitespace().skip(1).map(|x| x.parse().unwrap_or(u64::MAX)).collect();
            ensure!(f.len() == 3, "{}: bad line {line:?}", w.name);
            seen.push((f[0] as u32, f[1] as u32, f[2], w.name.clone()));
        }
        ensure!(w.wait(LIMIT)?.success(), "{} failed", w.name);
    }
    ensure!(
        seen.len() == 1,
        "expected one reclaim of slot {slot} (pid {pid}), got {}: {seen:?}",
        seen.len()
    );
    ensure!(seen[0].0 == slot && seen[0].1 == pid, "reclaimed the wrong slot: {seen:?}");
    ensure!(seen[0].2 == bits(&units), "units {:#x}, expected {:#x}", seen[0].2, bits(&units));
    let stats = table.stats().map_err(err("stats"))?;
    ensure!(stats.reclaims == 1 && stats.occupied == 0, "stats after the reclaim: {stats:?}");
    Ok(())
}

/// Four processes meet 100 rounds after the safe start, on a barrier file
/// already past round 0 (one reused across runs), the fourth member
/// started only once the first three wait at the start: every member gets
/// the same first round, every round waits for all four (each finds every
/// member's "reached" word on release) and has exactly one serial caller.
/// (Waiting from round 0, the late member would find rounds passed.)
fn barrier_four_processes_hundred_rounds() -> TestResult {
    const GROUP: u32 = 4;
    const ROUNDS: u32 = 100;
    const EARLIER: u32 = 3; // rounds of an earlier run on the same file
    let dir = TempDir::new("barrier");
    let (tpath, bpath, wpath) = (dir.path("table"), dir.path("barrier"), dir.path("words"));
    let table = HeartbeatTable::create(&tpath, 8).map_err(err("create"))?;
    let barrier = Barrier::create(&bpath, &table, 5).map_err(err("barrier"))?;
    for r in 0..EARLIER {
        barrier.wait_quorum(r, 1).map_err(err("an earlier run's round"))?;
    }
    let _words = Words::create(&wpath, 8);
    let (g, r) = (GROUP.to_string(), ROUNDS.to_string());
    let args = [tpath.to_str().unwrap(), bpath.to_str().unwrap(), wpath.to_str().unwrap(), &g, &r];
    let mut members: Vec<Proc> = Vec::new();
    for i in 0..GROUP {
        if i == GROUP - 1 {
            // The late member: only once the others wait at the start round.
            let end = Instant::now() + LIMIT;
            while Barrier::peek(&bpath).map_err(err("peek"))?.arrived < GROUP - 1 {
                ensure!(Instant::now() < end, "the first {} members never arrived at the start", GROUP - 1);
                std::thread::sleep(Duration::from_millis(1));
            }
            ensure!(barrier.epoch() == EARLIER, "the start round released early: at {}", barrier.epoch());
        }
        members.push(Proc::spawn(&format!("member {i}"), child("barrier", &args))?);
    }
    let (mut serials, mut early, mut firsts) = (0, 0, Vec::new());
    for m in &mut members {
        let line = m.line(LIMIT)?;
        let f: Vec<&str> = line.split_whitespace().collect();
        ensure!(f.len() == 6 && f[0] == "first" && f[2] == "serial", "{}: {line:?}", m.name);
        firsts.push(f[1].parse::<u32>().map_err(err("first"))?);
        serials += f[3].parse::<u32>().map_err(err("serial"))?;
        early += f[5].parse::<u32>().map_err(err("early"))?;
        ensure!(m.wait(LIMIT)?.success(), "{} failed", m.name);
    }
    ensure!(firsts.iter().all(|&f| f == EARLIER + 1), "first rounds {firsts:?}, expected {}", EARLIER + 1);
    ensure!(early == 0, "{early} releases found a member missing");
    ensure!(serials == ROUNDS + 1, "{serials} serial callers for {} rounds", ROUNDS + 1);
    ensure!(barrier.epoch() == EARLIER + 1 + ROUNDS, "barrier at round {}", barrier.epoch());
    Ok(())
}

const PY_WORKER: &str = r#"
import os, select, sys, time
import vigil
t = vigil.HeartbeatTable.open(sys.argv[1])
slot = t.register()
for b in sys.argv[2:]:
    t.mark(slot, int(b))
print(f"slot {slot} pid {os.getpid()}", flush=True)
end = time.monotonic() + 60
while time.monotonic() < end:
    t.beat(slot)
    r, _, _ = select.select([sys.stdin], [], [], 0.002)
    if r and not os.read(sys.stdin.fileno(), 64):
        t.unregister(slot)
        sys.exit(0)
sys.exit(1)
"#;

/// A Rust, a C and a Python worker on one table: each sees its own slot
/// and units; the C and the Python worker are SIGKILLed in turn and each's
/// units come back to this watchdog at once (failover_wait, by pidfd), the
/// Rust worker leaves cleanly.
fn rust_c_python_workers_share_one_table() -> TestResult {
    let dir = TempDir::new("mixed");
    let path = dir.path("table");
    let p = path.to_str().unwrap();
    let table = HeartbeatTable::create(&path, 8).map_err(err("create"))?;
    let peer = support::c_peer(&dir.path("."))?;
    let python = support::python().ok_or("no python3 with cffi (apt-get install python3-cffi)")?;
    let lib = support::vigil_library().ok_or("no libvigil.so for the Python package")?;

    let mut py_cmd = Command::new(&python);
    py_cmd.args(["-c", PY_WORKER, p, "20", "21"]);
    py_cmd.env("PYTHONPATH", support::python_dir()).env("VIGIL_LIBRARY", &lib).env("PYTHONDONTWRITEBYTECODE", "1");
    let mut c_cmd = Command::new(&peer);
    c_cmd.args(["worker", p, "10", "11"]);
    let mut workers = BTreeMap::new();
    for (name, cmd, units) in [
        ("rust", child("worker", &[p, "1", "2"]), vec![1, 2]),
        ("c", c_cmd, vec![10, 11]),
        ("python", py_cmd, vec![20, 21]),
    ] {
        let w = Proc::spawn(name, cmd)?;
        let (slot, pid) = slot_line(&w)?;
        ensure!(pid == w.pid(), "{name}: pid {pid}, spawned {}", w.pid());
        workers.insert(name, (w, slot, units));
    }
    let slots: Vec<u32> = workers.values().map(|w| w.1).collect();
    ensure!(slots[0] != slots[1] && slots[1] != slots[2] && slots[0] != slots[2], "slots {slots:?}");
    for (name, (w, slot, units)) in &workers {
        let s = table.snapshot(*slot).map_err(err("snapshot"))?;
        ensure!(s.pid == w.pid() && s.in_flight == bits(units), "{name}: slot {slot} reads {s:?}");
    }
    ensure!(table.live_count(5) == 3, "live {} of 3", table.live_count(5));
    // Where the kernel (or valgrind) has no pidfd_open, the wait has no
    // exit to wake on: a probing scan finds the dead instead.
    table.failover_wait(1000, Some(Duration::ZERO)).map_err(err("failover_wait"))?;
    let pidfds = table.failover_wait_info().map_err(err("failover_wait_info"))?.pidfds > 0;
    if !pidfds {
        println!("    (no pidfds here: reclaimed by probing instead)");
    }

    for name in ["c", "python"] {
        let (w, slot, units) = workers.get_mut(name).unwrap();
        w.kill();
        w.wait(LIMIT)?;
        let got = if pidfds {
            table.failover_wait(1000, Some(LIMIT)).map_err(err("failover_wait"))?
        } else {
            table.failover_scan_probe(1000).map_err(err("failover_scan_probe"))?
        };
        ensure!(got.len() == 1, "{name}: reclaimed {got:?}");
        let r = got[0];
        ensure!(r.slot == *slot && r.pid == w.pid(), "{name}: reclaimed {r:?}, expected slot {slot}");
        let why = if pidfds { ReclaimReason::Exited } else { ReclaimReason::StaleOrExited };
        ensure!(r.in_flight == bits(units) && r.reason == why, "{name}: reclaimed {r:?}");
    }
    let (rust, slot, _) = workers.get_mut("rust").unwrap();
    ensure!(table.snapshot(*slot).is_ok(), "the Rust worker lost its slot");
    rust.close_stdin();
    ensure!(rust.wait(LIMIT)?.success(), "the Rust worker did not leave cleanly");
    let stats = table.stats().map_err(err("stats"))?;
    ensure!(
        stats.reclaims == 2 && stats.unregisters == 1 && stats.occupied == 0,
        "stats at the end: {stats:?}"
    );
    Ok(())
}

extern "C" {
    fn fork() -> i32;
    fn _exit(code: i32) -> !;
    fn waitpid(pid: i32, status: *mut i32, options: i32) -> i32;
}

/// Forks: 0 in the child, the child's pid in the parent.
fn fork_now() -> Result<i32, String> {
    // SAFETY: fork has no preconditions. The children here only drop
    // values and make C calls that take no lock a fork can catch held, then
    // _exit.
    let pid = unsafe { fork() };
    ensure!(pid >= 0, "fork failed: {}", std::io::Error::last_os_error());
    Ok(pid)
}

/// Ends a forked child at once: nothing of the parent's (destructors, the
/// harness) runs there.
fn exit_child(code: i32) -> ! {
    // SAFETY: _exit has no preconditions.
    unsafe { _exit(code) }
}

/// The exit code of the forked child `pid`.
fn child_code(pid: i32) -> Result<i32, String> {
    let mut status = 0;
    // SAFETY: our own child, and a local to write its status in.
    let got = unsafe { waitpid(pid, &mut status, 0) };
    ensure!(got == pid, "waitpid: {}", std::io::Error::last_os_error());
    ensure!(status & 0x7f == 0, "the child died of signal {}", status & 0x7f);
    Ok((status >> 8) & 0xff)
}

/// A child forked while the parent holds a registration (two guards) and
/// a lease under a keepalive unregisters, drops and stops its copies: the
/// parent's slots, units and lease are untouched, and its keepalive goes
/// on renewing.
fn forked_child_leaves_the_parents_guards() -> TestResult {
    let dir = TempDir::new("procs-fork");
    let table = HeartbeatTable::create(dir.path("t"), 4).map_err(err("create"))?;
    let (a, b) = (table.register().map_err(err("register"))?, table.register().map_err(err("register"))?);
    a.mark(5).map_err(err("mark"))?;
    let store = Arc::new(Leases::create(dir.path("l"), 4).map_err(err("leases"))?);
    let ttl = Duration::from_secs(3); // slow machines, valgrind: the renewer must keep up
    let lease = store.acquire("k", "parent", ttl).map_err(err("acquire"))?;
    let ka = Keepalive::start(store.clone(), &lease).map_err(err("keepalive"))?;
    let slots = [a.slot(), b.slot()];
    let pid = fork_now()?;
    if pid == 0 {
        // The child leaves the guards as a program would: by hand, by
        // drop, by stop, then the handles.
        let told = matches!(a.unregister(), Err(vigil::Error::Lost));
        drop(b);
        let stopped = ka.stop().is_ok();
        drop(store);
        drop(table);
        exit_child(if told && stopped { 0 } else { 10 + i32::from(told) });
    }
    let code = child_code(pid)?;
    ensure!(code == 0, "the child's view of the parent's guards: exit {code}");
    for slot in slots {
        let s = table.snapshot(slot).map_err(err("snapshot"))?;
        ensure!(s.pid == std::process::id(), "slot {slot} left the parent: {s:?}");
    }
    ensure!(a.is_owned() && b.is_owned(), "the parent no longer owns its registrations");
    ensure!(a.snapshot().map_err(err("snapshot"))?.in_flight == 1 << 5, "the parent's unit was touched");
    // The parent's renewer goes on: two more renewals, the lease held.
    let (renewals, end) = (ka.stats().map_err(err("stats"))?.renewals, Instant::now() + LIMIT);
    while ka.stats().map_err(err("stats"))?.renewals < renewals + 2 {
        ensure!(!ka.is_lost() && Instant::now() < end, "the parent's keepalive stopped renewing");
        std::thread::sleep(Duration::from_millis(20));
    }
    let held = store.get("k").map_err(err("get"))?;
    ensure!(held.as_ref().map(|i| i.token) == Some(lease.token()), "the parent's lease was let go: {held:?}");
    ka.stop().map_err(err("stop"))?;
    store.release(&lease).map_err(err("release"))?;
    a.unregister().map_err(err("unregister"))?;
    drop(b);
    ensure!(table.stats().map_err(err("stats"))?.occupied == 0, "the parent's guards did not unregister");
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--child") {
        let code = match args.get(1).map(String::as_str) {
            Some("worker") => role_worker(&args[2..]),
            Some("watch") => role_watch(&args[2..]),
            Some("barrier") => role_barrier(&args[2..]),
            other => {
                eprintln!("unknown child role {other:?}");
                2
            }
        };
        std::process::exit(code);
    }
    let filter: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    let tests: [Test; 4] = [
        ("forked_child_leaves_the_parents_guards", forked_child_leaves_the_parents_guards),
        ("worker_killed_units_reclaimed_once", worker_killed_units_reclaimed_once),
        ("barrier_four_processes_hundred_rounds", barrier_four_processes_hundred_rounds),
        ("rust_c_python_workers_share_one_table", rust_c_python_workers_share_one_table),
    ];
    let chosen: Vec<_> = tests.iter().filter(|(n, _)| filter.is_empty() || filter.iter().any(|f| n.contains(f.as_str()))).collect();
    println!("\nrunning {} tests", chosen.len());
    let mut failed = Vec::new();
    for (name, test) in chosen {
        let t0 = Instant::now();
        match test() {
            Ok(()) => println!("test {name} ... ok ({:.1} s)", t0.elapsed().as_secs_f64()),
            Err(e) => {
                println!("test {name} ... FAILED\n    {e}");
                failed.push(*name);
            }
        }
    }
    if failed.is_empty() {
        println!("\ntest result: ok");
    } else {
        println!("\ntest result: FAILED ({})", failed.join(", "));
        std::process::exit(1);
    }
}
