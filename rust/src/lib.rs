//! vigil: liveness and coordination between processes, over shared
//! memory-mapped files on one host and over etcd across hosts.
//!
//! This crate is a safe binding of libvigil (the C library), so Rust, C and
//! Python processes share the same files and protocols:
//!
//! * [`HeartbeatTable`]: a 64-byte slot per process, claimed by CAS; a
//!   beat is one load and one store ([`Beater`], inline); units of work
//!   in flight as a bitmap; consistent snapshots; leader election with a
//!   fencing term; failover that hands a dead process's units to exactly
//!   one watchdog ([`HeartbeatTable::failover_scan`],
//!   [`HeartbeatTable::failover_wait`], woken the moment a process exits).
//! * [`Barrier`]: phase rounds that count only live peers, so a crashed
//!   peer never deadlocks them; quorums, timeouts, waiters asleep in the
//!   kernel.
//! * [`Leases`]: leases on keys with fencing tokens, kept alive by a
//!   [`Keepalive`] (or [`with_keepalive`]) that renews at a third of the
//!   TTL, stops for good on refusal, and is joined on every exit; `Etcd`
//!   (feature `etcd`) gives the same across hosts.
//! * [`compat`]: subetha-cxc's `HeartbeatTable`, `EpochBarrier` and
//!   `FailoverWatchdog`, name for name, for programs moving over with only
//!   their `use` lines changed.
//!
//! Every time is a [`Duration`](std::time::Duration); epochs (the
//! watchdog's ticks) are counts. Errors are one [`Error`] enum. Handles are
//! `Send + Sync` (every operation is an atomic protocol on the shared file;
//! the one per-handle wait is serialised), and borrow what they need to
//! outlive: a [`Registration`], [`Beater`] or [`Barrier`] borrows its table,
//! a [`Keepalive`] its port.
//!
//! # A worker and its watchdog
//!
//! ```
//! use std::time::Duration;
//! use vigil::HeartbeatTable;
//!
//! # let dir = std::env::temp_dir().join(format!("vigil-doc-crate-{}", std::process::id()));
//! # std::fs::create_dir_all(&dir)?;
//! let table = HeartbeatTable::create(dir.join("pool"), 64)?;
//!
//! // A worker: register, mark the units it takes, beat while it works.
//! let worker = table.register()?;
//! worker.mark(3)?;
//! let beater = worker.beater();
//! beater.beat();
//! let slot = worker.into_slot(); // ... and then it dies without a word
//!
//! // The watchdog: tick the epoch; a slot that stops beating for more
//! // than the grace window is reclaimed, its units handed over once.
//! for _ in 0..3 { table.tick(); }
//! let reclaimed = table.failover_wait(2, Some(Duration::from_secs(5)))?;
//! assert_eq!((reclaimed[0].slot, reclaimed[0].units().collect::<Vec<_>>()), (slot, vec![3]));
//! # drop(table); std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! More in `rust/examples/`: a worker pool with a watchdog that reclaims
//! a killed worker's units, a phase barrier started with `Barrier::start`, and
//! leader election holding a lease.
//!
//! # Linking
//!
//! The build script finds libvigil through `VIGIL_LIB_DIR` (headers in
//! `VIGIL_INCLUDE_DIR`, default `$VIGIL_LIB_DIR/../include`) or the
//! `pkg-config` program (`vigil`, and `vigil-etcd` with the `etcd`
//! feature), and links it dynamically. No other crate is needed.
//!
//! # Replacing subetha-cxc's `OwnerLease`
//!
//! [`compat`] leaves `OwnerLease` out: acquire a lease on the scope's key
//! from [`Leases`] (one host) or `Etcd` (across hosts), hold it under
//! [`with_keepalive`], pass [`Lease::token`] with every action it
//! authorises, and release it. Unlike an owner word, a vigil lease expires
//! on its own when its holder dies, and its token fences a holder that was
//! paused past its TTL.
//!
//! ```
//! use std::time::Duration;
//! # let dir = std::env::temp_dir().join(format!("vigil-doc-owner-{}", std::process::id()));
//! # std::fs::create_dir_all(&dir)?;
//! let store = vigil::Leases::create(dir.join("leases"), 16)?;
//! let lease = store.acquire("scope/consolidation", "worker-1", Duration::from_secs(10))?;
//! vigil::with_keepalive(&store, &lease, |_ka| -> vigil::Result<()> {
//!     // do the work, fencing each write with lease.token()
//!     Ok(())
//! })?;
//! store.release(&lease)?;
//! # drop(store); std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![warn(missing_docs, missing_debug_implementations, rust_2018_idioms)]
#![deny(unsafe_op_in_unsafe_fn)]

mod barrier;
pub mod compat;
mod error;
#[cfg(feature = "etcd")]
mod etcd;
mod failover;
mod heartbeat;
mod keepalive;
mod lease;
mod sys;
mod util;

pub use barrier::{Barrier, BarrierCounters, BarrierPeer, BarrierRound, BarrierState, PeerWhy, Start, WaitOutcome};
pub use error::{Error, Result};
#[cfg(feature = "etcd")]
pub use etcd::{Etcd, EtcdOptions};
pub use failover::{Election, FailoverWatchInfo, Leader, Reclaim, ReclaimReason};
pub use heartbeat::{Beater, HeartbeatCounters, HeartbeatTable, Registration, Role, SlotInfo};
pub use keepalive::{with_keepalive, Keepalive, KeepaliveStats};
pub use lease::{Lease, LeaseInfo, LeasePort, LeaseState, Leases, LeasesCounters};

/// The Rust programs of README.md, run as doc tests (`make rust-doc`).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_are_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<HeartbeatTable>();
        check::<Registration<'static>>();
        check::<Beater<'static>>();
        check::<Barrier<'static>>();
        check::<Leases>();
        check::<Lease>();
        check::<Keepalive>();
        check::<compat::HeartbeatTable>();
        check::<compat::EpochBarrier>();
        check::<compat::FailoverWatchdog<'static>>();
        #[cfg(feature = "etcd")]
        check::<Etcd>();
    }
}
