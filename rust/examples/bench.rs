//! The Rust crate against the C library, in the same run: a beat through
//! `Beater` against C's `vigil_beater_beat` (both inline), register +
//! unregister, and a barrier round of 4 processes. C is measured by the
//! C peer (tests/c/peer.c, compiled here with -O2 against the same headers
//! and library), Rust by this program; runs alternate, best of each kept.
//! The hardware's limit is printed alongside: the bare acquire load and
//! release store on words of this process's own.
//!
//!     cargo run --release --example bench [ROUNDS]
//!
//! Prints each figure and the ratio Rust / C (the machine is noisy: the
//! ratio is the figure; the target is within 1.2).

#[path = "../tests/support/mod.rs"]
mod support;

use std::hint::spin_loop;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use support::{Proc, TempDir};
use vigil::{Barrier, HeartbeatTable};

const BEATS: u64 = 20_000_000;
const REGISTERS: u64 = 100_000;
const GROUP: u32 = 4;
const ROUNDS: u32 = 1_000;

/// An opaque read of `x`, so the loop count is not known to the optimiser
/// (`std::hint::black_box` is newer than this crate's Rust).
fn opaque(x: u64) -> u64 {
    // SAFETY: a read of a local.
    unsafe { std::ptr::read_volatile(&x) }
}

fn ns_per(t0: Instant, n: u64) -> f64 {
    t0.elapsed().as_nanos() as f64 / n as f64
}

fn best_of<F: FnMut() -> f64>(runs: usize, mut f: F) -> f64 {
    (0..runs).map(|_| f()).fold(f64::INFINITY, f64::min)
}

fn c_figure(peer: &std::path::Path, args: &[&str]) -> f64 {
    let out = Command::new(peer).args(args).output().expect("run the C peer");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "C peer {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    text.trim().strip_prefix("ns ").and_then(|v| v.parse().ok()).expect("ns X")
}

/// Eight of `$e` per loop turn, as the C peer writes its loop: the loop's
/// own cost is then the same small share on both sides (LLVM would unroll
/// a one-beat loop, GCC at -O2 does not).
macro_rules! eight {
    ($e:expr) => {{
        $e; $e; $e; $e; $e; $e; $e; $e;
    }};
}

fn rust_beat(table: &HeartbeatTable) -> f64 {
    let me = table.register().expect("register");
    let beater = me.beater();
    let n = opaque(BEATS);
    best_of(5, || {
        // A local copy, as a worker keeps it: its two words stay in
        // registers (through the closure's reference they would be
        // reloaded after every store, which might alias them).
        let b = beater;
        let t0 = Instant::now();
        for _ in 0..n / 8 {
            eight!(b.beat());
        }
        ns_per(t0, n)
    })
}

/// The hardware's limit: the same pair on two words of this process's own
/// (statics, so the stores are not optimised away).
fn bare_pair() -> f64 {
    static EPOCH: AtomicU64 = AtomicU64::new(1);
    static SEEN: AtomicU64 = AtomicU64::new(0);
    let n = opaque(BEATS);
    best_of(5, || {
        let t0 = Instant::now();
        for _ in 0..n / 8 {
            eight!(SEEN.store(EPOCH.load(Ordering::Acquire), Ordering::Release));
        }
        ns_per(t0, n)
    })
}

fn rust_register(table: &HeartbeatTable) -> f64 {
    let pid = std::process::id();
    let n = opaque(REGISTERS);
    best_of(5, || {
        let t0 = Instant::now();
        for _ in 0..n {
            drop(table.register_pid(pid).expect("register"));
        }
        ns_per(t0, n)
    })
}

/// A member of the barrier round: the safe start, then time ROUNDS rounds
/// (as the C peer's `barrier`).
fn member(table: &str, barrier: &str, group: u32, rounds: u32) -> vigil::Result<()> {
    let table = HeartbeatTable::open(table)?;
    let mut barrier = Barrier::open(barrier, &table)?;
    let me = table.register()?;
    barrier.bind(me.slot())?;
    let first = barrier.start(group)?.first_round;
    let t0 = Instant::now();
    for r in first..first + rounds {
        barrier.wait(r)?;
    }
    println!("ns {:.1}", ns_per(t0, u64::from(rounds)));
    Ok(())
}

/// A round of GROUP processes, each the C peer or this program: the
/// slowest member's time per round.
fn round(dir: &TempDir, run: u32, c_peer: Option<&std::path::Path>, rounds: u32) -> f64 {
    let (t, b) = (dir.path(&format!("round{run}.hb")), dir.path(&format!("round{run}.barrier")));
    let table = HeartbeatTable::create(&t, 8).expect("table");
    let _barrier = Barrier::create(&b, &table, 5).expect("barrier");
    let (ts, bs, g, r) = (t.to_str().unwrap(), b.to_str().unwrap(), GROUP.to_string(), rounds.to_string());
    let members: Vec<Proc> = (0..GROUP)
        .map(|i| {
            let mut cmd = match c_peer {
                Some(peer) => {
                    let mut c = Command::new(peer);
                    c.arg("barrier");
                    c
                }
                None => {
                    let mut c = Command::new(std::env::current_exe().unwrap());
                    c.arg("--member");
                    c
                }
            };
            cmd.args([ts, bs, &g, &r]);
            Proc::spawn(&format!("member {i}"), cmd).expect("spawn a member")
        })
        .collect();
    members
        .iter()
        .map(|m| {
            let line = m.line(std::time::Duration::from_secs(300)).expect("a member's figure");
            line.strip_prefix("ns ").and_then(|v| v.parse::<f64>().ok()).expect("ns X")
        })
        .fold(0.0, f64::max)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() == 6 && args[1] == "--member" {
        if let Err(e) = member(&args[2], &args[3], args[4].parse().unwrap(), args[5].parse().unwrap()) {
            eprintln!("member: {e}");
            std::process::exit(1);
        }
        return;
    }
    let rounds: u32 = args.get(1).map_or(ROUNDS, |a| a.parse().expect("ROUNDS"));
    if cfg!(debug_assertions) {
        println!("warning: a debug build; run with --release for the figures");
    }
    let dir = TempDir::new("bench");
    let peer = support::c_peer(&dir.path(".")).expect("compile the C peer");
    let hb = dir.path("bench.hb");
    let table = HeartbeatTable::create(&hb, 64).expect("table");
    let hbs = hb.to_str().unwrap();
    let (beats, regs) = (BEATS.to_string(), REGISTERS.to_string());

    // Alternating runs: C then Rust, back to back, RUNS times. Each figure
    // is the best of its runs; each ratio the median of the runs' own
    // ratios (a run's two halves share the machine's mood).
    // The barrier round is the noisiest (4 processes on a shared machine,
    // each round a scheduling of all four), so it alternates more often.
    const RUNS: u32 = 9;
    const ROUND_RUNS: u32 = 9;
    let mut fig: [(Vec<f64>, Vec<f64>); 3] = Default::default();
    let mut bare = f64::INFINITY;
    for _ in 0..RUNS {
        fig[0].0.push(c_figure(&peer, &["beat", hbs, &beats]));
        fig[0].1.push(rust_beat(&table));
        bare = bare.min(bare_pair());
        fig[1].0.push(c_figure(&peer, &["register", hbs, &regs]));
        fig[1].1.push(rust_register(&table));
        spin_loop();
    }
    for run in 0..ROUND_RUNS {
        fig[2].0.push(round(&dir, run * 2, Some(&peer), rounds));
        fig[2].1.push(round(&dir, run * 2 + 1, None, rounds));
    }
    let best = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
    let median_ratio = |(c, r): &(Vec<f64>, Vec<f64>)| {
        let mut q: Vec<f64> = r.iter().zip(c).map(|(r, c)| r / c).collect();
        q.sort_by(|a, b| a.partial_cmp(b).unwrap());
        q[q.len() / 2]
    };
    println!(
        "vigil Rust crate vs C, same run ({RUNS} alternating runs, {ROUND_RUNS} for the barrier; best figures, median of the runs' ratios)"
    );
    println!("  hardware: bare acquire load + release store        {bare:9.3} ns");
    let names = [
        ("beat (Beater / vigil_beater_beat, inline)", "ns", 1.0),
        ("register + unregister", "ns", 1.0),
        ("barrier round, 4 processes", "us", 1000.0),
    ];
    for (i, (name, unit, scale)) in names.iter().enumerate() {
        let (c, r) = (best(&fig[i].0) / scale, best(&fig[i].1) / scale);
        println!(
            "  {name:<42} Rust {r:9.3} {unit}   C {c:9.3} {unit}   ratio {:.2} (best {:.2})",
            median_ratio(&fig[i]),
            r / c
        );
    }
    println!("  (barrier: {rounds} rounds after Barrier::start / vigil_barrier_start, the slowest member's time per round)");
}
