//! The etcd adapter through the crate (feature `etcd`), against the etcd
//! that CTest's fixture starts (VIGIL_ETCD_STATE/endpoints). Without a
//! fixture (a plain `cargo test --features etcd`), each test says it is
//! skipped and passes.

use std::path::PathBuf;
use std::time::Duration;

use vigil::{Error, Etcd};

fn endpoints(test: &str) -> Option<String> {
    let state = match std::env::var_os("VIGIL_ETCD_STATE") {
        Some(s) => PathBuf::from(s),
        None => {
            eprintln!("{test}: skipped, no VIGIL_ETCD_STATE (run under CTest)");
            return None;
        }
    };
    if let Ok(why) = std::fs::read_to_string(state.join("skip")) {
        eprintln!("{test}: skipped, {}", why.trim());
        return None;
    }
    let url = std::fs::read_to_string(state.join("endpoints")).expect("the fixture's endpoints");
    Some(url.trim().to_string())
}

fn key(name: &str) -> String {
    format!("vigil-rust-test/{}/{name}", std::process::id())
}

#[test]
fn acquire_is_exclusive_and_release_frees() {
    let url = match endpoints("acquire_is_exclusive_and_release_frees") {
        Some(u) => u,
        None => return,
    };
    let etcd = Etcd::connect(&url).expect("connect");
    let k = key("exclusive");
    let lease = etcd.acquire(&k, "rust-a", Duration::from_secs(5)).expect("acquire");
    assert_eq!((lease.key(), lease.owner()), (k.as_str(), "rust-a"));
    assert!(lease.token() > 0 && lease.id() != 0, "{lease:?}");
    assert!(matches!(etcd.acquire(&k, "rust-b", Duration::from_secs(5)), Err(Error::Busy)));
    let holder = etcd.get(&k).expect("get").expect("held");
    assert_eq!((holder.owner.as_str(), holder.token), ("rust-a", lease.token()));
    etcd.renew(&lease).expect("renew");
    etcd.release(&lease).expect("release");
    assert!(etcd.get(&k).expect("get").is_none());
    assert!(matches!(etcd.renew(&lease), Err(Error::Lost)));
}

#[test]
fn waiter_takes_over_with_a_higher_token() {
    let url = match endpoints("waiter_takes_over_with_a_higher_token") {
        Some(u) => u,
        None => return,
    };
    let etcd = Etcd::connect(&url).expect("connect");
    let k = key("takeover");
    let first = etcd.acquire(&k, "rust-a", Duration::from_secs(5)).expect("acquire");
    std::thread::scope(|s| {
        let waiter = s.spawn(|| {
            let e = Etcd::connect(&url).expect("connect");
            let l = e.acquire_wait(&k, "rust-b", Duration::from_secs(5), Some(Duration::from_secs(30)));
            let l = l.expect("acquire_wait");
            e.release(&l).expect("release");
            l.token()
        });
        // Held under a keepalive for a while, then released: the waiter,
        // asleep on a watch, gets the key.
        vigil::with_keepalive(&etcd, &first, |ka| -> vigil::Result<()> {
            std::thread::sleep(Duration::from_millis(300));
            assert!(!ka.is_lost());
            Ok(())
        })
        .expect("held throughout");
        etcd.release(&first).expect("release");
        let token = waiter.join().expect("waiter");
        assert!(token > first.token(), "{token} after {}", first.token());
    });
}
