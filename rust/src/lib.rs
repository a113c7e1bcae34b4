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
//! the per-handle waits, `failover_wait` and a bound barrier's, take
//! turns), and hold what they need to outlive: a [`Registration`],
//! [`Beater`] or [`Barrier`] borrows its table, a [`Keepalive`] owns a
//! share (an `Arc`) of its port, and [`with_keepalive`] borrows one for the
//! length of a call.
//!
//! # No undefined behaviour from safe code
//!
//! No sequence of safe calls reaches undefined behaviour: not
//! `std::mem::forget`, not a handle shared between threads or dropped on
//! another, not a port whose `renew` drops its own [`Keepalive`], not a
//! panic in a port (even one whose payload panics again when dropped).
//! What could go wrong is ruled out by the types, and each `unsafe` block
//! of the crate says why it holds from them (the test `safety_comments`
//! checks that each has its reason). `fork` is outside the promise: it is
//! no safe call (`libc::fork` is `unsafe`), and what a child may do is
//! said below. These do not compile:
//!
//! A keepalive that could outlive what it renews through (a borrowed
//! store, or a port that borrows one: a forgotten keepalive would renew
//! through a closed store):
//!
//! ```compile_fail
//! # fn f(store: &vigil::Leases, lease: &vigil::Lease) {
//! let ka = vigil::Keepalive::start(store, lease); // an Arc<Leases> is needed
//! # }
//! ```
//!
//! ```compile_fail
//! struct Borrowing<'a>(&'a vigil::Leases);
//! impl vigil::LeasePort for Borrowing<'_> {
//!     fn renew(&self, lease: &vigil::Lease) -> vigil::Result<()> { self.0.renew(lease) }
//! }
//! fn leak(store: &vigil::Leases, lease: &vigil::Lease) {
//!     let ka = vigil::Keepalive::start(std::sync::Arc::new(Borrowing(store)), lease).unwrap();
//!     std::mem::forget(ka);
//! }
//! ```
//!
//! A port the renewer thread could not share (not `Sync`):
//!
//! ```compile_fail
//! struct Counting(std::cell::Cell<u32>);
//! impl vigil::LeasePort for Counting {
//!     fn renew(&self, _: &vigil::Lease) -> vigil::Result<()> { self.0.set(self.0.get() + 1); Ok(()) }
//! }
//! # fn f(lease: &vigil::Lease) {
//! let ka = vigil::Keepalive::start(std::sync::Arc::new(Counting(Default::default())), lease);
//! # }
//! ```
//!
//! The scoped keepalive of [`with_keepalive`] taken out of its call:
//!
//! ```compile_fail
//! # fn f(store: &vigil::Leases, lease: &vigil::Lease) {
//! let mut kept = None;
//! let _ = vigil::with_keepalive(store, lease, |ka| -> vigil::Result<()> {
//!     kept = Some(ka);
//!     Ok(())
//! });
//! # drop(kept);
//! # }
//! ```
//!
//! The library's own port of a store, which points into it: not a name
//! outside the crate, nor a method anyone else can call or override (its
//! key and its port are in a module private to the crate: error E0603).
//!
//! ```compile_fail,E0412
//! let _: Option<vigil::NativePort> = None;
//! ```
//!
//! ```compile_fail,E0603
//! # fn f(store: &vigil::Leases) {
//! use vigil::LeasePort;
//! let _ = store.native_port(vigil::lease::sealed::Token(()));
//! # }
//! ```
//!
//! ```compile_fail,E0603
//! struct Mine(vigil::Leases);
//! impl vigil::LeasePort for Mine {
//!     fn renew(&self, lease: &vigil::Lease) -> vigil::Result<()> { self.0.renew(lease) }
//!     fn native_port(&self, t: vigil::lease::sealed::Token) -> Option<vigil::lease::sealed::NativePort<'_>> {
//!         self.0.native_port(t)
//!     }
//! }
//! ```
//!
//! Binding a barrier while another thread may be waiting on it (a bound
//! handle stands for one peer, and its waits take turns):
//!
//! ```compile_fail
//! # fn f(mut barrier: vigil::Barrier<'_>, slot: u32) {
//! std::thread::scope(|s| {
//!     s.spawn(|| barrier.wait(0));
//!     barrier.bind(slot).unwrap();
//! });
//! # }
//! ```
//!
//! A guard, beater, barrier or watchdog that outlives its table:
//!
//! ```compile_fail
//! # fn f(path: &std::path::Path) -> vigil::Result<()> {
//! let me = { let table = vigil::HeartbeatTable::open(path)?; table.register()? };
//! # drop(me); Ok(()) }
//! ```
//!
//! ```compile_fail
//! # fn f(path: &std::path::Path) -> vigil::Result<()> {
//! let beater = { let table = vigil::HeartbeatTable::open(path)?; table.beater(0) };
//! # drop(beater); Ok(()) }
//! ```
//!
//! ```compile_fail
//! # fn f(path: &std::path::Path) -> vigil::Result<()> {
//! let table = vigil::HeartbeatTable::open(path)?;
//! let barrier = vigil::Barrier::open("b", &table)?;
//! drop(table);
//! # drop(barrier); Ok(()) }
//! ```
//!
//! ```compile_fail
//! # fn f(path: &std::path::Path) -> Result<(), vigil::compat::HeartbeatError> {
//! let watchdog = { let t = vigil::compat::HeartbeatTable::open(path, 8)?; vigil::compat::FailoverWatchdog::new(&t) };
//! # drop(watchdog); Ok(()) }
//! ```
//!
//! # Fork
//!
//! `fork` is not a safe call: `libc::fork` is `unsafe`, and in the child
//! of a process with other threads (a running [`Keepalive`] has two) POSIX
//! allows only async-signal-safe calls until `exec`. No promise of this
//! crate reaches past that. What the crate does for a child that goes on
//! without `exec` on glibc (whose `malloc` works in a forked child): the
//! guards remember the process that made them, so a child's copy of a
//! [`Registration`] unregisters nothing when dropped (its `unregister` is
//! [`Error::Lost`]), a [`Keepalive`]'s frees the child's copy and stops
//! nothing of the parent's renewer, and an `Etcd` connection is forgotten,
//! never closed (its TLS session and locks are the parent's). Beyond
//! dropping the parent's guards, a child should make its own: open the
//! table, register, acquire and connect again (or `exec`, the safe way).
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
mod open;
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
pub use open::OpenOptions;

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
