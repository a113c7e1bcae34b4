//! The API in one process: what a guard, a keepalive, a barrier between
//! threads and the compat surface promise, each asserted on real files.
//! (The multi-process behaviour is tests/procs.rs.)

mod support;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use support::TempDir;
use vigil::compat::{self, BarrierError, EpochBarrier, FailoverWatchdog, HeartbeatError};
use vigil::{Barrier, Error, HeartbeatTable, Keepalive, Lease, LeasePort, Leases, Role, WaitOutcome};

#[test]
fn registration_guard_unregisters_and_a_reclaimed_one_is_lost() {
    let dir = TempDir::new("api-guard");
    let table = HeartbeatTable::create(dir.path("t"), 4).unwrap();
    {
        let me = table.register().unwrap();
        me.mark(7).unwrap();
        me.set_role(Role::Coordinator).unwrap();
        assert!(me.is_owned());
    }
    let stats = table.stats().unwrap();
    assert_eq!((stats.registers, stats.unregisters, stats.occupied), (1, 1, 0));

    // A holder paused past the grace window: reclaimed, then the slot is
    // someone else's; the stale holder's calls change nothing of theirs.
    let stale = table.register().unwrap();
    let slot = stale.slot();
    for _ in 0..3 {
        table.tick();
    }
    let taken = table.failover_scan(1).unwrap();
    assert_eq!(taken.len(), 1);
    let other = HeartbeatTable::open(dir.path("t")).unwrap();
    let successor = other.register_pid(4242).unwrap();
    assert_eq!(successor.slot(), slot);
    successor.mark(1).unwrap();
    assert!(!stale.is_owned());
    assert!(!table.owned(slot).unwrap(), "the stale handle still says it owns the slot");
    assert!(other.owned(slot).unwrap(), "the successor's handle does not own its slot");
    // Every call that could change the successor's slot is told, and
    // changes nothing: its bits (1 set, 5 clear), role and registration.
    assert!(matches!(stale.mark(5), Err(Error::Lost)));
    assert!(matches!(stale.clear(1), Err(Error::Lost)));
    assert!(matches!(table.mark(slot, 5), Err(Error::Lost)));
    assert!(matches!(table.clear(slot, 1), Err(Error::Lost)));
    assert!(matches!(stale.set_role(Role::Coordinator), Err(Error::Lost)));
    assert!(matches!(stale.unregister(), Err(Error::Lost)));
    let s = other.snapshot(slot).unwrap();
    assert_eq!((s.pid, s.in_flight, s.role), (4242, 0b10, Role::Worker), "the successor's slot was touched");
    assert!(other.owned(slot).unwrap());
}

/// A stale guard dropped (not unregistered by hand) leaves the successor
/// alone, as its explicit unregister does; a barrier bound to the stale
/// registration says Lost instead of arriving for the successor.
#[test]
fn stale_guard_dropped_and_stale_barrier_arrival() {
    let dir = TempDir::new("api-stale-drop");
    let table = HeartbeatTable::create(dir.path("t"), 2).unwrap();
    let mut barrier = Barrier::create(dir.path("b"), &table, 1).unwrap();
    let stale = table.register().unwrap();
    let slot = stale.slot();
    barrier.bind(slot).unwrap();
    for _ in 0..3 {
        table.tick();
    }
    assert_eq!(table.failover_scan(1).unwrap().len(), 1);
    let other = HeartbeatTable::open(dir.path("t")).unwrap();
    let successor = other.register_pid(4343).unwrap();
    assert_eq!(successor.slot(), slot);
    successor.mark(2).unwrap();
    assert!(matches!(barrier.wait_timeout(0, Duration::from_secs(5)), Err(Error::Lost)));
    assert!(matches!(barrier.start_timeout(1, Duration::from_secs(5)), Err(Error::Lost)));
    assert_eq!(Barrier::peek(dir.path("b")).unwrap().arrived, 0, "a stale arrival was counted");
    drop(stale);
    let s = other.snapshot(slot).unwrap();
    assert_eq!((s.pid, s.in_flight), (4343, 0b100), "dropping the stale guard touched the successor");
    let stats = table.stats().unwrap();
    assert_eq!((stats.reclaims, stats.unregisters, stats.occupied), (1, 0, 1));
    drop(successor);
    assert_eq!(table.stats().unwrap().occupied, 0);
}

/// The safe start on a barrier file past round 0 (one reused across runs):
/// the first round is the one after the round the barrier is at, not 1;
/// a start that times out withdraws its arrival.
#[test]
fn start_on_a_reused_barrier() {
    let dir = TempDir::new("api-start");
    let table = HeartbeatTable::create(dir.path("t"), 4).unwrap();
    let mut barrier = Barrier::create(dir.path("b.state.bin"), &table, 5).unwrap();
    for r in 0..5 {
        barrier.wait_quorum(r, 1).unwrap();
    }
    let me = table.register().unwrap();
    barrier.bind(me.slot()).unwrap();
    assert!(matches!(barrier.start_timeout(2, Duration::from_millis(20)), Err(Error::Timeout)));
    assert_eq!(Barrier::peek(dir.path("b.state.bin")).unwrap().arrived, 0, "the timed-out start stayed arrived");
    let start = barrier.start(1).unwrap();
    assert_eq!(start.first_round, 6);
    assert!(start.is_serial());
    assert!(barrier.wait(start.first_round).unwrap().is_serial());
    assert_eq!(barrier.epoch(), 7);
    assert!(matches!(barrier.start(0), Err(Error::OutOfRange)));
    // compat's start: the same first round for the next group.
    let hb = Arc::new(compat::HeartbeatTable::open(dir.path("t"), 4).unwrap());
    let eb = EpochBarrier::open(dir.path("b"), hb, 0).unwrap(); // the file at state_path("b")
    assert_eq!(eb.start(1).unwrap(), 8);
}

#[test]
fn beat_out_of_range_goes_nowhere() {
    let dir = TempDir::new("api-beat");
    let table = HeartbeatTable::create(dir.path("t"), 2).unwrap();
    table.beat(2);
    table.beat(u32::MAX);
    table.beater(9).beat();
    assert!(matches!(table.mark(2, 0), Err(Error::OutOfRange)));
    assert!(matches!(table.snapshot(5), Err(Error::OutOfRange)));
    assert_eq!(table.stats().unwrap().occupied, 0);
}

#[test]
fn errors_carry_their_kind() {
    let dir = TempDir::new("api-errors");
    assert!(matches!(HeartbeatTable::open(dir.path("missing")), Err(Error::Os(e)) if e.raw_os_error() == Some(2)));
    std::fs::write(dir.path("junk"), vec![7u8; 4096]).unwrap();
    assert!(matches!(HeartbeatTable::open(dir.path("junk")), Err(Error::BadFile)));
    let store = Leases::create(dir.path("l"), 1).unwrap();
    let long = "k".repeat(200);
    assert!(matches!(store.acquire(&long, "me", Duration::from_secs(1)), Err(Error::OutOfRange)));
    assert!(matches!(store.acquire("k", "me", Duration::from_millis(1)), Err(Error::OutOfRange)));
    store.acquire("a", "me", Duration::from_secs(5)).unwrap();
    assert!(matches!(store.acquire("b", "me", Duration::from_secs(5)), Err(Error::Full)));
    assert!(HeartbeatTable::create(dir.path("nul\0"), 1).is_err());
}

/// Refuses the `n`th renewal and after.
struct RefuseFrom(AtomicU32, u32);
impl LeasePort for RefuseFrom {
    fn renew(&self, _: &Lease) -> vigil::Result<()> {
        if self.0.fetch_add(1, Ordering::SeqCst) + 1 >= self.1 {
            Err(Error::Lost)
        } else {
            Ok(())
        }
    }
}

#[test]
fn keepalive_renews_and_its_loss_is_told() {
    let dir = TempDir::new("api-ka");
    let store = std::sync::Arc::new(Leases::create(dir.path("l"), 4).unwrap());
    let lease = store.acquire("k", "me", Duration::from_millis(40)).unwrap();
    let port = std::sync::Arc::new(RefuseFrom(AtomicU32::new(0), 3));
    let ka = Keepalive::start(port.clone(), &lease).unwrap();
    let end = std::time::Instant::now() + Duration::from_secs(10);
    while !ka.is_lost() && std::time::Instant::now() < end {
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(ka.is_lost());
    // Lost by the refusal (or, on a starved machine, by local expiry
    // first): either way the renewer stops for good.
    let calls = port.0.load(Ordering::SeqCst);
    let stats = ka.stats().unwrap();
    assert!(stats.lost && stats.renewals <= 2 && calls <= 3, "{stats:?}, {calls} calls");
    // A loss by local expiry can be seen here while the renewer, starved,
    // has decided to renew and not yet called: that one call may still
    // come (its answer is then refused by the lapsed deadline), no other.
    std::thread::sleep(Duration::from_millis(60)); // several periods
    let after = port.0.load(Ordering::SeqCst);
    assert!(after <= calls + 1 && after <= 3, "renewed after the loss: {calls} calls, then {after}");
    assert!(matches!(ka.stop(), Err(Error::Lost)));
    // Stopped: the renewer is joined, nothing calls the port again.
    let stopped = port.0.load(Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(60));
    assert_eq!(port.0.load(Ordering::SeqCst), stopped, "renewed after stop");

    // The store's own port (the library's, no call into Rust) renews it.
    let lease = store.acquire("k2", "me", Duration::from_millis(1500)).unwrap();
    let ka = Keepalive::start(store.clone(), &lease).unwrap();
    let end = std::time::Instant::now() + Duration::from_secs(10);
    while ka.stats().unwrap().renewals < 2 && std::time::Instant::now() < end {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(ka.stats().unwrap().renewals >= 2);
    ka.stop().unwrap();
    store.release(&lease).unwrap();
}

#[test]
fn with_keepalive_gives_the_body_error_first_then_lost() {
    let dir = TempDir::new("api-with");
    let store = Leases::create(dir.path("l"), 4).unwrap();
    let lease = store.acquire("k", "me", Duration::from_millis(30)).unwrap();
    let refusing = RefuseFrom(AtomicU32::new(0), 1);
    let wait_lost = |ka: &Keepalive| {
        let end = std::time::Instant::now() + Duration::from_secs(10);
        while !ka.is_lost() {
            assert!(std::time::Instant::now() < end, "a refused lease never lost");
            std::thread::sleep(Duration::from_millis(2));
        }
    };
    let r: Result<(), Error> = vigil::with_keepalive(&refusing, &lease, |ka| {
        wait_lost(ka);
        Err(Error::Busy)
    });
    assert!(matches!(r, Err(Error::Busy)), "the body's own error wins");
    let r: Result<u8, Error> = vigil::with_keepalive(&refusing, &lease, |ka| {
        wait_lost(ka);
        Ok(1)
    });
    assert!(matches!(r, Err(Error::Lost)), "a success while lost is Lost");
    let fresh = store.acquire("k2", "me", Duration::from_secs(5)).unwrap();
    let r: Result<u8, Error> = vigil::with_keepalive(&store, &fresh, |_| Ok(7));
    assert_eq!(r.unwrap(), 7);
}

#[test]
fn barrier_between_threads_one_serial_per_round() {
    let dir = TempDir::new("api-barrier");
    let table = HeartbeatTable::create(dir.path("t"), 8).unwrap();
    let barrier = Barrier::create(dir.path("b"), &table, 5).unwrap();
    let serials = AtomicU32::new(0);
    std::thread::scope(|s| {
        for _ in 0..3 {
            s.spawn(|| {
                let b = Barrier::open(dir.path("b"), &table).unwrap();
                for r in 0..50 {
                    if b.wait_quorum(r, 3).unwrap() == WaitOutcome::Serial {
                        serials.fetch_add(1, Ordering::SeqCst);
                    }
                }
            });
        }
    });
    assert_eq!(serials.load(Ordering::SeqCst), 50);
    assert_eq!(barrier.epoch(), 50);
    assert_eq!(Barrier::peek(dir.path("b")).unwrap().epoch, 50);
    // A timed-out waiter withdraws: it never counts toward the quorum.
    assert!(matches!(barrier.wait_quorum_timeout(50, 2, Duration::from_millis(10)), Err(Error::Timeout)));
    assert_eq!(Barrier::peek(dir.path("b")).unwrap().arrived, 0);
}

// ---- compat: subetha-cxc's worked examples, and where vigil is stricter ----

#[test]
fn compat_survive_a_crashed_peer() {
    let dir = TempDir::new("compat-crash");
    let hb = Arc::new(compat::HeartbeatTable::create(dir.path("hb.bin"), 4).unwrap());
    let live = hb.register(1000).unwrap();
    let _crashed = hb.register(1001).unwrap();
    let barrier = EpochBarrier::create(dir.path("b.bin"), hb.clone(), 2).unwrap();
    hb.beat(live);
    for _ in 0..3 {
        hb.tick_global_epoch();
    }
    hb.beat(live);
    assert_eq!(barrier.live_peer_count(), 1);
    barrier.wait(0).unwrap();
    assert_eq!(barrier.snapshot(), (1, 0));
}

#[test]
fn compat_errors_and_attach() {
    let dir = TempDir::new("compat-errors");
    let t = compat::HeartbeatTable::create(dir.path("hb"), 2).unwrap();
    t.register(1).unwrap();
    t.register(2).unwrap();
    assert_eq!(t.register(3), Err(HeartbeatError::TableFull));
    assert_eq!(compat::HeartbeatTable::open(dir.path("hb"), 3).err(), Some(HeartbeatError::LayoutMismatch));
    assert!(matches!(
        compat::HeartbeatTable::open(dir.path("none"), 2).err(),
        Some(HeartbeatError::IoError(std::io::ErrorKind::NotFound))
    ));
    // create attaches: the registrations stay.
    let again = compat::HeartbeatTable::create(dir.path("hb"), 2).unwrap();
    assert_eq!(again.snapshot(0).unwrap().pid, 1);
    let hb = Arc::new(again);
    let b = EpochBarrier::create(dir.path("b"), hb, 5).unwrap();
    assert_eq!(b.wait_quorum_timeout(0, 3, Duration::from_millis(5)), Err(BarrierError::Timeout));
    assert!(matches!(b.wait_quorum(0, 0), Err(BarrierError::IoError(_))));
    b.flush().unwrap();
}

#[test]
fn compat_watchdogs_reclaim_once_and_spare_the_live() {
    let dir = TempDir::new("compat-watchdog");
    let hb = compat::HeartbeatTable::create(dir.path("hb"), 8).unwrap();
    let live = hb.register(std::process::id()).unwrap();
    let dead = hb.register(999_999).unwrap();
    hb.mark_in_flight(live, 1);
    hb.mark_in_flight(dead, 3);
    hb.mark_in_flight(dead, 60);
    let other = compat::HeartbeatTable::open(dir.path("hb"), 8).unwrap();
    let (a, b) = (FailoverWatchdog::new(&hb), FailoverWatchdog::with_grace(&other, 1));
    let mut reports = Vec::new();
    for _ in 0..6 {
        hb.beat(live);
        reports.push(a.scan());
        hb.beat(live);
        reports.push(b.scan());
    }
    let dead_slots: Vec<_> = reports.iter().flat_map(|r| r.dead_slots.iter().copied()).collect();
    assert_eq!(dead_slots.len(), 1, "{dead_slots:?}");
    let (slot, snap) = dead_slots[0];
    assert_eq!((slot, snap.pid), (dead, 999_999));
    assert_eq!(FailoverWatchdog::iter_in_flight_bits(snap.in_flight_bitmap).collect::<Vec<_>>(), vec![3, 60]);
    assert_eq!(hb.snapshot(live).unwrap().in_flight_bitmap, 0b10);
    assert!(hb.snapshot(dead).is_none());
    assert!(reports.windows(2).all(|w| w[1].new_global_epoch > w[0].new_global_epoch));
}

/// Two threads on one bound handle (one of them with a short timeout) and
/// a third peer: the timed-out wait leaves without taking the other's
/// arrival, and the round releases when the third peer comes (issue 27:
/// it stayed stuck, the slot's one record withdrawn).
#[test]
fn a_bound_barrier_shared_by_threads_keeps_its_arrival() {
    let dir = TempDir::new("api-bound-threads");
    let table = HeartbeatTable::create(dir.path("t"), 4).unwrap();
    let (me, peer) = (table.register().unwrap(), table.register().unwrap());
    let mut mine = Barrier::create(dir.path("b"), &table, 5).unwrap();
    mine.bind(me.slot()).unwrap();
    let mut theirs = Barrier::open(dir.path("b"), &table).unwrap();
    theirs.bind(peer.slot()).unwrap();
    let long = Duration::from_secs(60);
    std::thread::scope(|s| {
        let waiting = s.spawn(|| mine.wait_timeout(0, long));
        // Until the first arrival stands, then one more wait on the handle.
        let end = std::time::Instant::now() + long;
        while Barrier::peek(dir.path("b")).unwrap().recorded == 0 {
            assert!(std::time::Instant::now() < end, "the first wait never arrived");
            std::thread::sleep(Duration::from_millis(1));
        }
        let short = s.spawn(|| mine.wait_timeout(0, Duration::from_millis(50)));
        assert!(matches!(short.join().unwrap(), Err(Error::Timeout)));
        assert_eq!(Barrier::peek(dir.path("b")).unwrap().recorded, 1, "the short wait withdrew the other's arrival");
        assert!(theirs.wait_timeout(0, long).is_ok());
        assert!(waiting.join().unwrap().is_ok());
    });
    assert_eq!(mine.epoch(), 1);
}

/// A keepalive leaked with mem::forget keeps its own share of the store:
/// dropping every other handle neither closes the store under the renewer
/// nor stops it (under valgrind, no read of freed memory).
#[test]
fn a_forgotten_keepalive_keeps_its_store() {
    let dir = TempDir::new("api-forget");
    let store = Arc::new(Leases::create(dir.path("l"), 4).unwrap());
    // Long enough that a renewer starved by valgrind on a loaded machine
    // still renews before the lease lapses (it renews at 0.32 TTL).
    let lease = store.acquire("k", "me", Duration::from_secs(10)).unwrap();
    let ka = Keepalive::start(store.clone(), &lease).unwrap();
    std::mem::forget(ka);
    drop(store);
    // Renewed after the last other handle went: the time left grows back.
    let view = Leases::open(dir.path("l")).unwrap();
    let left = || view.get("k").unwrap().and_then(|i| i.expires_in).expect("the lease lapsed");
    let (mut low, end) = (left(), std::time::Instant::now() + Duration::from_secs(60));
    loop {
        let now = left();
        if now > low + Duration::from_millis(100) {
            break;
        }
        low = low.min(now);
        assert!(std::time::Instant::now() < end, "the leaked keepalive never renewed");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The keepalive a port's renewal takes out of a static and drops.
static OWN_KEEPALIVE: std::sync::Mutex<Option<Keepalive>> = std::sync::Mutex::new(None);

/// A port whose renewal drops its own keepalive (and with it, the last
/// share of the port itself).
struct DropsItsKeepalive {
    renewals: Arc<AtomicU32>,
    dropped: Arc<std::sync::atomic::AtomicBool>,
}

impl LeasePort for DropsItsKeepalive {
    fn renew(&self, _: &Lease) -> vigil::Result<()> {
        self.renewals.fetch_add(1, Ordering::SeqCst);
        let ka = OWN_KEEPALIVE.lock().unwrap_or_else(|e| e.into_inner()).take();
        drop(ka); // stops it from its own renewer; `self` must outlive this call
        // Still here, still readable: the renewal holds a share of its own.
        assert!(self.renewals.load(Ordering::SeqCst) >= 1);
        Ok(())
    }
}

impl Drop for DropsItsKeepalive {
    fn drop(&mut self) {
        self.dropped.store(true, Ordering::SeqCst);
    }
}

/// A keepalive dropped by its own port's renewal (issue 27's review: the
/// C stop joined itself, freed the keepalive, and the renewal returned
/// into freed memory: SIGSEGV 3 of 3, and valgrind's invalid reads): the
/// drop returns, no renewal follows, and the port, whose last share the
/// keepalive held, is dropped once the renewal has returned.
#[test]
fn a_keepalive_dropped_by_its_own_renewal() {
    let dir = TempDir::new("api-selfdrop");
    let store = Leases::create(dir.path("l"), 4).unwrap();
    for round in 0..3 {
        // Long enough that no starved machine (valgrind) loses it before
        // the first renewal, 0.32 TTL after the start.
        let lease = store.acquire("k", "me", Duration::from_millis(1500)).unwrap();
        let renewals = Arc::new(AtomicU32::new(0));
        let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let port = DropsItsKeepalive { renewals: renewals.clone(), dropped: dropped.clone() };
        {
            // Held while it starts: the first renewal finds it there.
            let mut own = OWN_KEEPALIVE.lock().unwrap_or_else(|e| e.into_inner());
            *own = Some(Keepalive::start(Arc::new(port), &lease).unwrap());
        }
        let end = std::time::Instant::now() + Duration::from_secs(10);
        while !dropped.load(Ordering::SeqCst) {
            assert!(std::time::Instant::now() < end, "round {round}: the port was never dropped");
            std::thread::sleep(Duration::from_millis(2));
        }
        assert_eq!(renewals.load(Ordering::SeqCst), 1, "round {round}: a renewal after the drop");
        std::thread::sleep(Duration::from_millis(600)); // past the next period
        assert_eq!(renewals.load(Ordering::SeqCst), 1, "round {round}: a renewal after the drop");
        // The port renews nothing: on a slow run (valgrind, a loaded
        // machine) the lease has lapsed by now, and release says so.
        match store.release(&lease) {
            Ok(()) | Err(Error::Lost) => {}
            Err(e) => panic!("round {round}: release: {e}"),
        }
    }
}

/// A panic payload whose own drop panics.
struct Bomb;

impl Drop for Bomb {
    fn drop(&mut self) {
        panic!("the payload's drop panics too");
    }
}

/// Panics in its renewal with a payload whose drop panics.
struct PanicsTwice(AtomicU32);

impl LeasePort for PanicsTwice {
    fn renew(&self, _: &Lease) -> vigil::Result<()> {
        self.0.fetch_add(1, Ordering::SeqCst);
        std::panic::panic_any(Bomb)
    }
}

/// A renewal that panics with a payload whose drop panics is a transient
/// failure: nothing unwinds into C (before, the second panic left the
/// renewer's catch and unwound through the library: undefined behaviour,
/// an abort on later compilers).
#[test]
fn a_renewal_panicking_twice_is_a_failure() {
    let dir = TempDir::new("api-bomb");
    let store = Leases::create(dir.path("l"), 4).unwrap();
    let lease = store.acquire("k", "me", Duration::from_millis(1500)).unwrap();
    let port = Arc::new(PanicsTwice(AtomicU32::new(0)));
    let ka = Keepalive::start(port.clone(), &lease).unwrap();
    let end = std::time::Instant::now() + Duration::from_secs(10);
    while ka.stats().unwrap().failures < 1 && !ka.is_lost() {
        assert!(std::time::Instant::now() < end, "no renewal failed");
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(port.0.load(Ordering::SeqCst) >= 1);
    let _ = ka.stop();
    let _ = store.release(&lease);
}

/// A failover_wait behind another on the same table returns empty at its
/// own timeout while the first still waits (issue 27's review: it took
/// the turn untimed, and a 100 ms wait returned after 3 s).
#[test]
fn a_second_failover_wait_keeps_its_timeout() {
    let dir = TempDir::new("api-fwturn");
    let table = HeartbeatTable::create(dir.path("t"), 4).unwrap();
    let slot = table.register().unwrap().into_slot(); // alive (this process), not beating
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let first = s.spawn(|| {
            let got = table.failover_wait(2, Some(Duration::from_secs(60))).unwrap();
            done.store(true, Ordering::SeqCst);
            got
        });
        let end = std::time::Instant::now() + Duration::from_secs(30);
        while table.failover_wait_info().unwrap().watched + table.failover_wait_info().unwrap().by_epochs == 0 {
            assert!(std::time::Instant::now() < end, "the first wait never looked at the table");
            std::thread::sleep(Duration::from_millis(1));
        }
        for i in 0..3 {
            let got = table.failover_wait(2, Some(Duration::from_millis(100))).unwrap();
            assert!(got.is_empty(), "wait {i}: {got:?}");
            assert!(!done.load(Ordering::SeqCst), "wait {i} returned only after the first ended");
        }
        for _ in 0..4 {
            table.tick(); // the slot goes stale: the first wait takes it
        }
        let got = first.join().unwrap();
        assert_eq!(got.iter().map(|r| r.slot).collect::<Vec<_>>(), vec![slot]);
    });
}

extern "C" {
    fn chown(path: *const std::os::raw::c_char, uid: u32, gid: u32) -> std::os::raw::c_int;
}

/// vigil-test's uid (tests/test_user.sh), when this runs as root and the
/// user exists: the other user whose file is not trusted.
fn other_user() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let euid = status.lines().find(|l| l.starts_with("Uid:"))?.split_whitespace().nth(2)?.to_string();
    if euid != "0" {
        return None;
    }
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    let line = passwd.lines().find(|l| l.starts_with("vigil-test:"))?;
    line.split(':').nth(2)?.parse().ok()
}

fn give_to(path: &std::path::Path, uid: u32) {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: c is a NUL-terminated path for the length of the call; -1
    // (u32::MAX) keeps the group.
    assert_eq!(unsafe { chown(c.as_ptr(), uid, u32::MAX) }, 0, "chown {}", path.display());
}

/// Opening for writing refuses a file anyone may write, or another user's
/// (as root, vigil-test's), with Error::Untrusted; OpenOptions::trust_owner
/// opens it; a look needs no trust (issue 26's opens, bound here).
#[test]
fn untrusted_files_are_refused_unless_their_owner_is_trusted() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("api-trust");
    let (t, l, b) = (dir.path("t"), dir.path("l"), dir.path("b"));
    let table = HeartbeatTable::create(&t, 4).unwrap();
    Barrier::create(&b, &table, 5).unwrap();
    drop(Leases::create(&l, 4).unwrap());
    let trusting = vigil::OpenOptions::new().trust_owner(true);
    let other = other_user();
    for mode in [0o666, 0o644] {
        if mode == 0o644 && other.is_none() {
            break; // a file of one's own that only its owner writes is trusted
        }
        for path in [&t, &l, &b] {
            if let Some(uid) = other {
                give_to(path, uid);
            }
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        assert!(matches!(HeartbeatTable::open(&t), Err(Error::Untrusted)), "mode {mode:o}");
        assert!(matches!(Leases::open(&l), Err(Error::Untrusted)), "mode {mode:o}");
        assert!(matches!(Barrier::open(&b, &table), Err(Error::Untrusted)), "mode {mode:o}");
        assert_eq!(Error::Untrusted.code(), -1011);
        HeartbeatTable::open_with(&t, 4, trusting).unwrap();
        Leases::open_with(&l, trusting).unwrap();
        Barrier::open_with(&b, &table, 0, trusting).unwrap();
        HeartbeatTable::open_readonly(&t).unwrap();
        Leases::open_readonly(&l).unwrap();
    }
    assert!(matches!(
        Barrier::open_with(&b, &table, 0, vigil::OpenOptions::new().readonly(true)),
        Err(Error::Os(e)) if e.kind() == std::io::ErrorKind::InvalidInput
    ));
}
