//! A phase barrier across processes, started safely and surviving a crash.
//!
//! Each member registers, binds its barrier handle to its slot, and calls
//! `Barrier::start(N)` once: it returns when all N members have arrived
//! (hence registered and bound), with the first round to wait, the same
//! for every member whenever each started and whatever round the barrier
//! file was at. Every phase is then a plain wait on the next round, which
//! counts the live peers: when this program kills one member with SIGKILL,
//! its heartbeat lapses (this process ticks the epoch) and the others
//! carry on without it.
//!
//! Waiting from round 0 instead is unsafe: a member that has not
//! registered yet is not live, so the first members' rounds release
//! without it, and it then finds those rounds passed and counts rounds
//! apart from the others, with no error.
//!
//!     cargo run --example phase_barrier [MEMBERS] [PHASES]
//!
//! The members are this program again (`phase_barrier --member ...`).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use vigil::{Barrier, HeartbeatTable};

const GRACE: u64 = 5; // epochs; this process ticks one every 5 ms

fn member(table: &str, barrier: &str, group: u32, phases: u32) -> vigil::Result<()> {
    let table = HeartbeatTable::open(table)?;
    let mut barrier = Barrier::open(barrier, &table)?;
    let me = table.register()?;
    barrier.bind(me.slot())?; // its waits keep the slot beating
    let start = barrier.start_timeout(group, Duration::from_secs(30))?; // all N are here
    println!("slot {} started: first round {}", me.slot(), start.first_round);
    for phase in 1..=phases {
        std::thread::sleep(Duration::from_millis(u64::from(me.slot()) * 3 + 5)); // the work
        let round = start.first_round + phase - 1;
        if barrier.wait_timeout(round, Duration::from_secs(30))?.is_serial() {
            println!("phase {phase} complete ({} live)", barrier.live_peers());
        }
        println!("slot {} reached {phase}", me.slot());
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() == 6 && args[1] == "--member" {
        return Ok(member(&args[2], &args[3], args[4].parse()?, args[5].parse()?)?);
    }
    let group: u32 = args.get(1).map_or(Ok(4), |a| a.parse())?;
    let phases: u32 = args.get(2).map_or(Ok(6), |a| a.parse())?;
    let dir = std::env::temp_dir().join(format!("vigil-phase-barrier-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let (tpath, bpath) = (dir.join("table"), dir.join("barrier"));
    let table = HeartbeatTable::create(&tpath, 16)?;
    let barrier = Barrier::create(&bpath, &table, GRACE)?;
    let (t, b) = (tpath.to_str().ok_or("UTF-8 path")?, bpath.to_str().ok_or("UTF-8 path")?);

    let mut members: Vec<_> = (0..group)
        .map(|_| {
            Command::new(std::env::current_exe().expect("this program"))
                .args(["--member", t, b, &group.to_string(), &phases.to_string()])
                .stdout(Stdio::piped())
                .spawn()
        })
        .collect::<Result<_, _>>()?;
    let ticking = AtomicBool::new(true);
    std::thread::scope(|s| -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        s.spawn(|| {
            while ticking.load(Ordering::Relaxed) {
                table.tick();
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        let victim = members.len() - 1;
        let mut readers = Vec::new();
        for (i, m) in members.iter_mut().enumerate() {
            let out = BufReader::new(m.stdout.take().unwrap());
            readers.push(s.spawn(move || {
                let mut phase2 = false;
                for line in out.lines().map_while(Result::ok) {
                    println!("member {i}: {line}");
                    phase2 |= line.ends_with("reached 2");
                    if i == victim && phase2 {
                        break; // the main thread kills it now
                    }
                }
                phase2
            }));
        }
        // Kill the last member once it has passed phase 2.
        if readers.pop().unwrap().join().unwrap() {
            members[victim].kill()?;
            println!("main: SIGKILL member {victim} after phase 2");
        }
        for r in readers {
            r.join().unwrap();
        }
        ticking.store(false, Ordering::Relaxed);
        Ok(())
    })
    .map_err(|e| e.to_string())?;
    let mut ok = 0;
    for m in members.iter_mut() {
        ok += m.wait()?.success() as u32;
    }
    println!("main: {ok} of {group} members finished all {phases} phases; barrier at round {}", barrier.epoch());
    drop(barrier);
    drop(table);
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
