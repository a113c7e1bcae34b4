//! A worker pool with a watchdog: workers register in a heartbeat table,
//! mark each unit of work in flight while they hold it, and beat; the
//! watchdog (this process) ticks the epoch, hands out units, and when a
//! worker is killed with SIGKILL takes back its unit, exactly once, the
//! moment it dies (failover_wait holds a pidfd per worker), and gives it
//! to another. Every unit is done exactly once.
//!
//!     cargo run --example worker_pool [WORKERS] [UNITS]
//!
//! The workers are this program again (`worker_pool --worker TABLE`).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Sender};
use std::time::Duration;

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
        for line in std::io::stdin().lock().lines() {
            let unit: u32 = match line.ok().and_then(|l| l.strip_prefix("unit ")?.parse().ok()) {
                Some(u) => u,
                None => break,
            };
            // A worker stopped past the grace window (SIGSTOP, a long
            // pause) has been reclaimed: its units went back to the
            // watchdog and its slot may be someone else's. Ask before each
            // unit (two loads, no system call); a mark or clear says
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
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        Ok::<(), vigil::Error>(())
    })?;
    me.unregister()
}

struct Worker {
    child: Child,
    busy: Option<u32>,
}

fn spawn(i: usize, table: &str, tx: &Sender<(usize, String)>) -> Worker {
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
            let _ = tx.send((i, line));
        }
    });
    Worker { child, busy: None }
}

fn give(w: &mut Worker, unit: u32) {
    writeln!(w.child.stdin.as_mut().unwrap(), "unit {unit}").expect("a worker's stdin");
    w.busy = Some(unit);
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
    let mut slots = BTreeMap::new(); // slot -> worker
    while slots.len() < nworkers {
        let (i, line) = rx.recv_timeout(Duration::from_secs(30))?;
        if let Some(s) = line.strip_prefix("slot ") {
            slots.insert(s.parse::<u32>()?, i);
        }
    }
    let mut todo: Vec<u32> = (0..nunits).rev().collect();
    let mut done = vec![0u32; nunits as usize];
    let mut killed = false;
    for w in workers.iter_mut() {
        if let Some(u) = todo.pop() {
            give(w, u);
        }
    }
    let ticking = std::sync::atomic::AtomicBool::new(true);
    std::thread::scope(|s| -> Result<(), Box<dyn std::error::Error>> {
        let ticker = s.spawn(|| {
            while ticking.load(std::sync::atomic::Ordering::Relaxed) {
                table.tick(); // the watchdog's clock: workers beat faster
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        while done.contains(&0) {
            // A dead worker's unit comes back here, once.
            for r in table.failover_wait(GRACE, Some(Duration::ZERO))? {
                let i = slots[&r.slot];
                println!("watchdog: worker {i} (pid {}) is gone; units back: {:?}", r.pid, r.units().collect::<Vec<_>>());
                todo.extend(r.units());
                workers[i].busy = None;
            }
            let (i, line) = match rx.recv_timeout(Duration::from_millis(5)) {
                Ok(msg) => msg,
                Err(_) => continue,
            };
            if let Some(u) = line.strip_prefix("took ") {
                if !killed && i == 0 {
                    // Kill worker 0 while it holds a unit: its unit must
                    // come back and be done by another.
                    println!("pool: SIGKILL worker 0 while it holds unit {u}");
                    workers[0].child.kill()?;
                    workers[0].child.wait()?;
                    killed = true;
                }
            } else if let Some(u) = line.strip_prefix("done ") {
                done[u.parse::<usize>()?] += 1;
                workers[i].busy = None;
            }
            for (j, w) in workers.iter_mut().enumerate() {
                if w.busy.is_none() && !(killed && j == 0) {
                    if let Some(u) = todo.pop() {
                        give(w, u);
                    }
                }
            }
        }
        ticking.store(false, std::sync::atomic::Ordering::Relaxed);
        ticker.join().expect("ticker");
        Ok(())
    })
    .map_err(|e| e.to_string())?;
    for w in workers.iter_mut() {
        w.child.stdin.take(); // EOF: leave
        w.child.wait()?;
    }
    assert!(done.iter().all(|&d| d == 1), "each unit done exactly once: {done:?}");
    println!("pool: {nunits} units done exactly once by {nworkers} workers, one of them killed mid-unit");
    println!("table: {:?}", table.stats()?);
    drop(table);
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
