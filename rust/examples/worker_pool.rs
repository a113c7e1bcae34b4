//! A worker pool with a watchdog: workers register in a heartbeat table,
//! mark each unit of work in flight while they hold it, and beat; the
//! watchdog (this process) ticks the epoch, hands out units, and when a
//! worker is killed with SIGKILL takes back its unit, exactly once, the
//! moment it dies (failover_wait holds a pidfd per worker), and gives it
//! to another. A worker paused past the grace (SIGSTOP; valgrind, which
//! runs one thread at a time) is reclaimed alive: it gets no more units,
//! leaves, and a newcomer takes its place. Every unit is done exactly once.
//!
//!     cargo run --example worker_pool [WORKERS] [UNITS]
//!
//! The workers are this program again (`worker_pool --worker TABLE`).

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::time::{Duration, Instant};

use vigil::HeartbeatTable;

const GRACE: u64 = 5;

/// A worker: takes "unit N" lines from stdin, marks N in flight, works,
/// clears it, says "done N"; a thread beats meanwhile. Leaves at EOF.
fn worker(table_path: &str) -> vigil::Result<()> {
    let table = HeartbeatTable::open(table_path)?;
    let me = table.register()?;
    println!("slot {}", me.slot());
    let beater = me.beater();
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                beater.beat();
                std::thread::sleep(Duration::from_millis(2));
            }
        });
        // The beater stops on every way out, an error too: the scope
        // joins it before returning, so a beater left running would keep
        // a reclaimed worker alive for ever.
        let work = || -> vigil::Result<()> {
            for line in std::io::stdin().lock().lines() {
                let unit: u32 = match line.ok().and_then(|l| l.strip_prefix("unit ")?.parse().ok()) {
                    Some(u) => u,
                    None => break,
                };
                // A worker stopped past the grace window (SIGSTOP, a long
                // pause, valgrind's one thread at a time) has been
                // reclaimed: its units went back to the watchdog and its
                // slot may be someone else's. Ask before each unit (two
                // loads, no system call); a mark or clear says
                // Error::Lost in any case, and changes nothing of the
                // successor's. Such a worker stops, reporting nothing done.
                if !me.is_owned() {
                    return Err(vigil::Error::Lost);
                }
                me.mark(unit)?;
                println!("took {unit}");
                std::thread::sleep(Duration::from_millis(20)); // the work
                me.clear(unit)?; // Lost: reclaimed meanwhile, the unit handed out again
                println!("done {unit}");
            }
            Ok(())
        };
        let result = work();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        result
    })?;
    me.unregister()
}

struct Worker {
    child: Child,
    /// The unit last given, until it is said done or comes back.
    busy: Option<u32>,
    /// Its slot was reclaimed (killed, or stale past the grace): it gets
    /// no more units, and its stdin is closed so that it leaves.
    reclaimed: bool,
    /// Its stdout ended: every line it will ever say has been read.
    eof: bool,
}

fn spawn(i: usize, table: &str, tx: &Sender<(usize, Option<String>)>) -> Worker {
    let mut child = Command::new(std::env::current_exe().expect("this program"))
        .args(["--worker", table])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn a worker");
    let out = BufReader::new(child.stdout.take().unwrap());
    let tx = tx.clone();
    std::thread::spawn(move || {
        for line in out.lines().map_while(Result::ok) {
            let _ = tx.send((i, Some(line)));
        }
        let _ = tx.send((i, None)); // its end: nothing more will come
    });
    Worker { child, busy: None, reclaimed: false, eof: false }
}

fn give(w: &mut Worker, unit: u32) {
    writeln!(w.child.stdin.as_mut().unwrap(), "unit {unit}").expect("a worker's stdin");
    w.busy = Some(unit);
}

/// A reclaimed worker that has said all it will: a unit it was given but
/// neither marked (the reclaim gave back what was marked) nor said done
/// (it found itself reclaimed first, or died between its clear and its
/// "done") is done by no one else: hand it out again. Both facts are
/// needed: before the reclaim a unit may still be marked and come back
/// through it; before the end a "done" may still be on its way.
fn settle(w: &mut Worker, todo: &mut Vec<u32>) {
    if w.reclaimed && w.eof {
        todo.extend(w.busy.take());
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() == 3 && args[1] == "--worker" {
        return Ok(worker(&args[2])?);
    }
    let nworkers: usize = args.get(1).map_or(Ok(3), |a| a.parse())?;
    let nunits: u32 = args.get(2).map_or(Ok(24), |a| a.parse())?.min(64);
    let dir = std::env::temp_dir().join(format!("vigil-worker-pool-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("pool");
    let table = HeartbeatTable::create(&path, 16)?;
    let table_arg = path.to_str().ok_or("a UTF-8 path")?;

    let (tx, rx) = channel();
    let mut workers: Vec<Worker> = (0..nworkers).map(|i| spawn(i, table_arg, &tx)).collect();
    let mut registered = 0;
    while registered < nworkers {
        if let (_, Some(line)) = rx.recv_timeout(Duration::from_secs(30))? {
            registered += usize::from(line.starts_with("slot "));
        }
    }
    let mut todo: Vec<u32> = (0..nunits).rev().collect();
    let mut done = vec![0u32; nunits as usize];
    let mut killed = false;
    let mut replaced = 0;
    // Every wait is bounded: no unit done for this long is a failure,
    // never a hang (valgrind runs a unit in well under a second).
    let quiet_limit = Duration::from_secs(300);
    let mut last_done = Instant::now();
    let ticking = AtomicBool::new(true);
    std::thread::scope(|s| -> Result<(), Box<dyn std::error::Error>> {
        // The ticker stops however this scope is left (an error, a
        // panic): the scope joins it first.
        struct StopTicking<'a>(&'a AtomicBool);
        impl Drop for StopTicking<'_> {
            fn drop(&mut self) {
                self.0.store(false, Ordering::Relaxed);
            }
        }
        let _stop = StopTicking(&ticking);
        s.spawn(|| {
            while ticking.load(Ordering::Relaxed) {
                table.tick(); // the watchdog's clock: workers beat faster
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        while done.contains(&0) {
            // A dead or stale worker's marked unit comes back here, once.
            // Its pid names it: the slot may be a newcomer's by now.
            for r in table.failover_wait(GRACE, Some(Duration::ZERO))? {
                let back: Vec<u32> = r.units().collect();
                let i = match workers.iter().position(|w| !w.reclaimed && w.child.id() == r.pid) {
                    Some(i) => i,
                    None => {
                        todo.extend(back);
                        continue;
                    }
                };
                println!("watchdog: worker {i} (pid {}) is gone; units back: {back:?}", r.pid);
                let w = &mut workers[i];
                if w.busy.map_or(false, |u| back.contains(&u)) {
                    w.busy = None;
                }
                todo.extend(back);
                w.reclaimed = true;
                w.child.stdin.take(); // EOF: a stale one still alive leaves
                settle(w, &mut todo);
                if !(killed && i == 0) {
                    // Reclaimed alive (stale past the grace): a newcomer
                    // takes its place, so that the pool never runs dry.
                    let j = workers.len();
                    workers.push(spawn(j, table_arg, &tx));
                    replaced += 1;
                    println!("pool: worker {j} replaces worker {i}");
                }
            }
            match rx.recv_timeout(Duration::from_millis(5)) {
                Ok((i, None)) => {
                    workers[i].eof = true;
                    settle(&mut workers[i], &mut todo);
                }
                Ok((i, Some(line))) => {
                    if let Some(u) = line.strip_prefix("took ") {
                        if !killed && i == 0 {
                            // Kill worker 0 while it holds a unit: its unit
                            // must come back and be done by another.
                            println!("pool: SIGKILL worker 0 while it holds unit {u}");
                            workers[0].child.kill()?;
                            workers[0].child.wait()?;
                            killed = true;
                        }
                    } else if let Some(u) = line.strip_prefix("done ") {
                        done[u.parse::<usize>()?] += 1;
                        workers[i].busy = None;
                        last_done = Instant::now();
                    }
                }
                Err(_) => {}
            }
            if last_done.elapsed() > quiet_limit {
                return Err(format!("no unit done in {quiet_limit:?}: done {done:?}, to do {todo:?}").into());
            }
            for (j, w) in workers.iter_mut().enumerate() {
                if w.busy.is_none() && !w.reclaimed && !(killed && j == 0) {
                    if let Some(u) = todo.pop() {
                        give(w, u);
                    }
                }
            }
        }
        Ok(())
    })
    .map_err(|e| e.to_string())?;
    for w in workers.iter_mut() {
        w.child.stdin.take(); // EOF: leave
        w.child.wait()?;
    }
    assert!(done.iter().all(|&d| d == 1), "each unit done exactly once: {done:?}");
    println!(
        "pool: {nunits} units done exactly once by {nworkers} workers, one of them killed mid-unit{}",
        if replaced > 0 { format!(", {replaced} replaced when reclaimed stale") } else { String::new() }
    );
    println!("table: {:?}", table.stats()?);
    drop(table);
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
