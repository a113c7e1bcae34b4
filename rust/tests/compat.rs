//! `vigil::compat` against what subetha-cxc's own unit tests check, in
//! our words: the heartbeat table, the watchdog's grace boundary, and the
//! barrier where threads of one process share it (each call an arrival),
//! dead peers drop out, timeouts withdraw and the state file sits at
//! `state_path(base)`.

mod support;

use std::sync::Arc;
use std::thread;
use std::time::Duration;

use support::TempDir;
use vigil::compat::{state_path, BarrierError, EpochBarrier, FailoverWatchdog, HeartbeatError, HeartbeatTable};

const LONG: Duration = Duration::from_secs(30);

fn table(dir: &TempDir, slots: usize) -> Arc<HeartbeatTable> {
    Arc::new(HeartbeatTable::create(dir.path("hb.bin"), slots).unwrap())
}

/// `n` threads each calling `wait_timeout` at rounds `rounds`, once they
/// all stand at the start line.
fn threads_wait(barrier: &Arc<EpochBarrier>, n: usize, rounds: std::ops::Range<u32>) {
    let line = Arc::new(std::sync::Barrier::new(n));
    let handles: Vec<_> = (0..n)
        .map(|_| {
            let (b, line, rounds) = (barrier.clone(), line.clone(), rounds.clone());
            thread::spawn(move || {
                line.wait();
                for r in rounds {
                    b.wait_timeout(r, LONG).unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}

#[test]
fn slots_are_claimed_freed_and_marked() {
    let dir = TempDir::new("compat-slots");
    let t = HeartbeatTable::create(dir.path("hb.bin"), 2).unwrap();
    let (a, b) = (t.register(11).unwrap(), t.register(22).unwrap());
    assert_ne!(a, b);
    assert_eq!(t.register(33), Err(HeartbeatError::TableFull));
    t.unregister(a);
    assert_eq!(t.register(33).unwrap(), a, "the freed slot is the first vacant one");
    t.mark_in_flight(b, 0);
    t.mark_in_flight(b, 63);
    t.clear_in_flight(b, 0);
    assert_eq!(t.snapshot(b).unwrap().in_flight_bitmap, 1 << 63);
    for _ in 0..4 {
        t.tick_global_epoch();
    }
    let before = t.snapshot(b).unwrap().last_seen_epoch;
    t.beat(b);
    let after = t.snapshot(b).unwrap();
    assert!(after.last_seen_epoch > before);
    assert_eq!((after.last_seen_epoch, after.pid), (t.global_epoch(), 22));
}

#[test]
fn a_slot_is_dead_only_past_the_grace() {
    let dir = TempDir::new("compat-grace");
    let t = HeartbeatTable::create(dir.path("hb.bin"), 4).unwrap();
    let (alive, silent) = (t.register(500).unwrap(), t.register(501).unwrap());
    t.mark_in_flight(silent, 2);
    t.beat(alive);
    t.beat(silent);
    let w = FailoverWatchdog::with_grace(&t, 2);
    // Lag 1, then lag 2 (equal to the grace): alive; lag 3: dead.
    for lag in 1..=3u64 {
        t.beat(alive);
        let r = w.scan();
        if lag <= 2 {
            assert!(r.is_empty(), "lag {lag} within the grace, yet {:?}", r.dead_slots);
        } else {
            assert_eq!(r.dead_slots.len(), 1);
            let (slot, snap) = r.dead_slots[0];
            assert_eq!((slot, snap.pid, snap.in_flight_bitmap), (silent, 501, 1 << 2));
        }
    }
    // Taken once: the next scan has nothing, clear_dead_bitmap or not.
    w.clear_dead_bitmap(silent);
    assert!(w.scan().is_empty());
    assert_eq!(FailoverWatchdog::iter_in_flight_bits(1 | 1 << 40).collect::<Vec<u8>>(), vec![0, 40]);
}

#[test]
fn the_state_file_is_beside_the_base() {
    let dir = TempDir::new("compat-state");
    let hb = table(&dir, 4);
    let base = dir.path("phase");
    let b = EpochBarrier::create(&base, hb.clone(), 3).unwrap();
    assert_eq!(state_path(&base), dir.path("phase.state.bin"));
    assert!(state_path(&base).exists() && !base.exists());
    assert_eq!((b.current_epoch(), b.arrived_count()), (0, 0));
    // The vigil tool and Barrier::peek read the same file.
    assert_eq!(vigil::Barrier::peek(state_path(&base)).unwrap().grace_epochs, 3);
    let other = EpochBarrier::open(&base, hb.clone(), 0).unwrap();
    hb.register(7000).unwrap();
    b.wait(0).unwrap();
    assert_eq!(other.current_epoch(), 1, "another handle sees the release");
    assert_eq!(EpochBarrier::open(dir.path("none"), hb, 0).err(), Some(BarrierError::IoError(std::io::ErrorKind::NotFound)));
}

/// The issue 27 case: this process registered its own slot, so the
/// barrier arrives as that slot; two threads sharing the barrier with two
/// live peers are still two arrivals, as subetha-cxc counts them.
#[test]
fn threads_sharing_a_barrier_are_an_arrival_each() {
    let dir = TempDir::new("compat-threads");
    let hb = table(&dir, 8);
    hb.register(std::process::id()).unwrap();
    hb.register(424_242).unwrap(); // a live peer that is these threads' partner
    let barrier = Arc::new(EpochBarrier::create(dir.path("b"), hb.clone(), 10).unwrap());
    threads_wait(&barrier, 2, 0..20);
    assert_eq!(barrier.snapshot(), (20, 0));
    // Three threads, three live peers, the own slot among them.
    hb.register(434_343).unwrap();
    threads_wait(&barrier, 3, 20..40);
    assert_eq!(barrier.current_epoch(), 40);
}

#[test]
fn peers_that_are_not_this_process_count_by_arrivals() {
    let dir = TempDir::new("compat-count");
    let hb = table(&dir, 8);
    for pid in 100..103 {
        hb.register(pid).unwrap();
    }
    let barrier = Arc::new(EpochBarrier::create(dir.path("b"), hb.clone(), 10).unwrap());
    threads_wait(&barrier, 3, 0..5);
    assert_eq!(barrier.snapshot(), (5, 0), "arrivals reset at each release");
    // A quorum of two of the three releases without the third.
    let q = barrier.clone();
    let h = thread::spawn(move || q.wait_quorum(5, 2));
    barrier.wait_quorum_timeout(5, 2, LONG).unwrap();
    h.join().unwrap().unwrap();
    assert_eq!(barrier.current_epoch(), 6);
    // A round already passed returns at once, whoever comes late.
    barrier.wait(0).unwrap();
}

#[test]
fn a_timeout_withdraws_and_the_dead_drop_out() {
    let dir = TempDir::new("compat-dead");
    let hb = table(&dir, 4);
    let barrier = EpochBarrier::create(dir.path("b"), hb.clone(), 1).unwrap();
    assert_eq!(barrier.wait(0), Err(BarrierError::NoLivePeers));
    let live = hb.register(9000).unwrap();
    hb.register(9001).unwrap(); // never beats again
    assert_eq!(barrier.wait_timeout(0, Duration::from_millis(20)), Err(BarrierError::Timeout));
    assert_eq!(barrier.arrived_count(), 0, "the timed-out arrival stayed");
    for _ in 0..3 {
        hb.tick_global_epoch();
    }
    hb.beat(live);
    assert_eq!(barrier.live_peer_count(), 1);
    barrier.wait(0).unwrap(); // alone among the live: released at once
    assert_eq!(barrier.current_epoch(), 1);
}

/// A process that unregisters and registers again, into the same slot,
/// waits as its new registration (issue 27's review: the handle bound to
/// the first was kept, since the slot's number matched, and every wait
/// after was IoError(Other) for good).
#[test]
fn registered_again_in_the_same_slot_waits_as_the_new_registration() {
    let dir = TempDir::new("compat-rereg");
    let hb = table(&dir, 4);
    let barrier = EpochBarrier::create(dir.path("b"), hb.clone(), 5).unwrap();
    let me = std::process::id();
    let first = barrier.start(1).unwrap();
    for round in 0..3u32 {
        let slot = hb.register(me).unwrap();
        barrier.wait_timeout(first + 2 * round, LONG).unwrap();
        hb.unregister(slot);
        let again = hb.register(me).unwrap();
        assert_eq!(again, slot, "the freed slot is the first vacant one");
        barrier.wait_timeout(first + 2 * round + 1, LONG).unwrap();
        hb.unregister(again);
    }
}

/// A process whose slot failover took is told, `Reclaimed` (not
/// IoError(Other)), records nothing, and waits again once it registers
/// again; twice over, registered again in the same slot each time (issue
/// 27's review: the gone registration was kept beside the new one, the
/// waits arrived unbound, and after the second reclaim a wait of quorum 1
/// released a round). Every wait has quorum 1: an arrival unbound, as no
/// peer, would release the round and fail the test.
#[test]
fn a_reclaimed_waiter_is_told_and_registers_again() {
    let dir = TempDir::new("compat-reclaimed");
    let hb = table(&dir, 4);
    let barrier = EpochBarrier::create(dir.path("b"), hb.clone(), 2).unwrap();
    let me = std::process::id();
    let mut slot = hb.register(me).unwrap();
    let first = barrier.start(1).unwrap();
    barrier.wait_timeout(first, LONG).unwrap(); // bound now
    let peer = hb.register(me + 1).unwrap(); // another process's, live throughout
    for reclaim in 0..2 {
        // It stalls: a watchdog takes its slot (and the unit).
        hb.mark_in_flight(slot, 1);
        for _ in 0..4 {
            hb.tick_global_epoch();
        }
        hb.beat(peer);
        let report = FailoverWatchdog::with_grace(&hb, 2).scan();
        assert!(!report.is_empty(), "reclaim {reclaim}: the stalled slot was not reclaimed");
        let epoch = barrier.current_epoch();
        assert_eq!(barrier.wait_quorum_timeout(epoch, 1, LONG), Err(BarrierError::Reclaimed), "reclaim {reclaim}");
        assert_eq!(barrier.current_epoch(), epoch, "reclaim {reclaim}: a reclaimed waiter released a round");
        if reclaim == 0 {
            // A fresh barrier handle (never bound) is told too, not counted unbound.
            let other = EpochBarrier::open(dir.path("b"), hb.clone(), 2).unwrap();
            assert_eq!(other.wait_quorum_timeout(epoch, 1, LONG), Err(BarrierError::Reclaimed));
        }
        // Registered again, in the same slot (the first vacant one): a peer again.
        let again = hb.register(me).unwrap();
        assert_eq!(again, slot);
        barrier.wait_quorum_timeout(epoch, 1, LONG).unwrap();
        assert_eq!(barrier.current_epoch(), epoch + 1);
        slot = again;
    }
    hb.unregister(slot);
    hb.unregister(peer);
}
