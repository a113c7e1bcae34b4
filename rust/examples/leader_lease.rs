//! Leader election with a lease: candidates wait for the key "leader" in a
//! lease store (asleep on a futex in the file, never polling); the one that
//! gets it leads while a keepalive renews the lease, fencing every action
//! with the lease's token (the term). When a leader is killed with SIGKILL
//! its lease is no longer renewed, and the next candidate takes over the
//! moment the TTL runs out, with a higher term: a stale leader's actions
//! carry a lower token and the resource refuses them.
//!
//!     cargo run --example leader_lease [CANDIDATES]
//!
//! Across hosts, the same with `vigil::Etcd` (feature `etcd`) in place of
//! `vigil::Leases`. The candidates are this program again.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use vigil::Leases;

const TTL: Duration = Duration::from_millis(300);

fn candidate(store: &str, name: &str) -> vigil::Result<()> {
    let store = Leases::open(store)?;
    let lease = store.acquire_wait("leader", name, TTL, Some(Duration::from_secs(30)))?;
    println!("leader {name} term {}", lease.token());
    vigil::with_keepalive(&store, &lease, |ka| -> vigil::Result<()> {
        for action in 1..=5 {
            if ka.is_lost() {
                break; // another leads now: stop acting
            }
            println!("{name} (term {}) action {action}", lease.token());
            std::thread::sleep(Duration::from_millis(100)); // longer than TTL in all
        }
        Ok(())
    })?;
    store.release(&lease)?;
    println!("{name} steps down");
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() == 4 && args[1] == "--candidate" {
        return Ok(candidate(&args[2], &args[3])?);
    }
    let n: usize = args.get(1).map_or(Ok(3), |a| a.parse())?;
    let dir = std::env::temp_dir().join(format!("vigil-leader-lease-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("leases");
    let store = Leases::create(&path, 8)?;
    let p = path.to_str().ok_or("a UTF-8 path")?;
    let mut kids: Vec<_> = (0..n)
        .map(|i| {
            Command::new(std::env::current_exe().expect("this program"))
                .args(["--candidate", p, &format!("candidate-{i}")])
                .stdout(Stdio::piped())
                .spawn()
        })
        .collect::<Result<_, _>>()?;
    let (tx, rx) = std::sync::mpsc::channel();
    for (i, k) in kids.iter_mut().enumerate() {
        let out = BufReader::new(k.stdout.take().unwrap());
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in out.lines().map_while(Result::ok) {
                let _ = tx.send((i, line));
            }
        });
    }
    drop(tx);
    let mut killed = false;
    let mut terms = Vec::new();
    while let Ok((i, line)) = rx.recv_timeout(Duration::from_secs(60)) {
        println!("{line}");
        if let Some(term) = line.split("term ").nth(1).and_then(|t| t.parse::<u64>().ok()) {
            if line.starts_with("leader") {
                terms.push(term);
            }
        }
        if !killed && line.ends_with("action 2") {
            kids[i].kill()?; // the first leader dies mid-term
            killed = true;
            println!("main: SIGKILL candidate-{i}; its lease lapses within {TTL:?}");
        }
    }
    for k in kids.iter_mut() {
        k.wait()?;
    }
    assert!(terms.windows(2).all(|w| w[0] < w[1]), "terms rise: {terms:?}");
    println!("main: {} leaders, terms {terms:?}; store: {:?}", terms.len(), store.stats()?);
    drop(store);
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
