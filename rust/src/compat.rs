//! subetha-cxc's heartbeat, barrier and failover surface, over vigil.
//!
//! A program written against subetha-cxc's `HeartbeatTable`,
//! `EpochBarrier` and `FailoverWatchdog` builds against this module with
//! only its `use` lines changed:
//!
//! ```text
//! -use subetha_cxc::{EpochBarrier, HeartbeatTable};
//! -use subetha_cxc::failover::{FailoverWatchdog, DEFAULT_GRACE_EPOCHS};
//! +use vigil::compat::{EpochBarrier, HeartbeatTable};
//! +use vigil::compat::{FailoverWatchdog, DEFAULT_GRACE_EPOCHS};
//! ```
//!
//! The names, signatures and slot indices (`usize`) are subetha-cxc's; the
//! files are vigil's (a table made here is read by the `vigil` tool, the C
//! library and the Python package), and so are the guarantees, which are
//! stricter where it matters. Each item says where:
//!
//! * `create` never clobbers: it creates the file, or attaches to the
//!   table already there (a different capacity is `LayoutMismatch`).
//! * A registration is named by a generation that never recurs (not by
//!   its pid), so a recycled pid is never taken for the old owner, and a
//!   stale owner (stopped, reclaimed, resumed) changes nothing in its
//!   successor's slot: its unregister, marks and clears are refused
//!   (`vigil().owned(slot)` tells it).
//! * The failover scan vacates a dead slot and hands its units over exactly
//!   once, even with several watchdogs in several processes.
//! * Barrier rounds are exact when the waiting process has registered
//!   itself (its handle is bound to its slot: a peer that dies after
//!   arriving stops counting, the wait keeps the slot beating), and waiters
//!   sleep in the kernel instead of polling.
//! * Starting a group safely needs [`EpochBarrier::start`] (vigil's
//!   addition): waiting from round 0 miscounts rounds when members start at
//!   different times.
//!
//! `OwnerLease` is not here: [`Leases`](crate::Leases) (one host) and
//! `Etcd` (across hosts, feature `etcd`) replace it, with a
//! [`Keepalive`](crate::Keepalive) or [`with_keepalive`](crate::with_keepalive)
//! for the renewal and the lease's fencing token for every action.
//!
//! ```
//! use std::sync::Arc;
//! use vigil::compat::{EpochBarrier, FailoverWatchdog, HeartbeatTable};
//! # let dir = std::env::temp_dir().join(format!("vigil-doc-compat-{}", std::process::id()));
//! # std::fs::create_dir_all(&dir)?;
//!
//! let hb = Arc::new(HeartbeatTable::create(dir.join("hb.bin"), 32)?);
//! let barrier = EpochBarrier::create(dir.join("barrier.bin"), hb.clone(), 5)?;
//! let slot = hb.register(std::process::id())?;
//! for epoch in 0..3 {
//!     hb.beat(slot);
//!     barrier.wait_timeout(epoch, std::time::Duration::from_secs(30))?;
//! }
//! let report = FailoverWatchdog::new(&hb).scan();
//! assert!(report.is_empty());
//! hb.unregister(slot);
//! # drop(barrier); drop(hb); std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fmt;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, TryLockError};
use std::time::Duration;

use crate::barrier::RawBarrier;
use crate::error::Error;

/// Default grace window of [`FailoverWatchdog::new`]: a slot must miss
/// more than this many epochs before it is reclaimed.
///
/// ```
/// assert_eq!(vigil::compat::DEFAULT_GRACE_EPOCHS, 1);
/// ```
pub const DEFAULT_GRACE_EPOCHS: u64 = 1;

/// Why a heartbeat table could not be made or used.
///
/// ```
/// use vigil::compat::{HeartbeatError, HeartbeatTable};
/// # let dir = std::env::temp_dir().join(format!("vigil-doc-hberr-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// let t = HeartbeatTable::create(dir.join("hb"), 1)?;
/// t.register(std::process::id())?;
/// assert_eq!(t.register(std::process::id()), Err(HeartbeatError::TableFull));
/// # drop(t); std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HeartbeatError {
    /// Not a heartbeat table, a wrong layout version, or another capacity
    /// than the one expected.
    LayoutMismatch,
    /// No vacant slot.
    TableFull,
    /// A system call failed (open, map, ...), or an argument was out of range.
    IoError(ErrorKind),
}

impl fmt::Display for HeartbeatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HeartbeatError::LayoutMismatch => f.write_str("heartbeat table layout mismatch"),
            HeartbeatError::TableFull => f.write_str("heartbeat table full"),
            HeartbeatError::IoError(kind) => write!(f, "heartbeat table I/O error: {kind:?}"),
        }
    }
}

impl std::error::Error for HeartbeatError {}

impl From<Error> for HeartbeatError {
    fn from(e: Error) -> HeartbeatError {
        match e {
            Error::Full => HeartbeatError::TableFull,
            Error::BadFile | Error::CapacityMismatch => HeartbeatError::LayoutMismatch,
            Error::Os(e) => HeartbeatError::IoError(e.kind()),
            Error::OutOfRange => HeartbeatError::IoError(ErrorKind::InvalidInput),
            Error::Untrusted => HeartbeatError::IoError(ErrorKind::PermissionDenied),
            _ => HeartbeatError::IoError(ErrorKind::Other),
        }
    }
}

/// A consistent read of one occupied slot.
///
/// ```
/// use vigil::compat::HeartbeatTable;
/// # let dir = std::env::temp_dir().join(format!("vigil-doc-hbsnap-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// let t = HeartbeatTable::create(dir.join("hb"), 4)?;
/// let slot = t.register(4242)?;
/// t.mark_in_flight(slot, 2);
/// let snap = t.snapshot(slot).unwrap();
/// assert_eq!((snap.pid, snap.in_flight_bitmap, snap.role), (4242, 0b100, 0));
/// # drop(t); std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HeartbeatSnapshot {
    /// The owner's pid.
    pub pid: u32,
    /// The global epoch at the owner's last beat.
    pub last_seen_epoch: u64,
    /// One bit per unit of work in flight.
    pub in_flight_bitmap: u64,
    /// 0 worker, 1 coordinator.
    pub role: u32,
}

/// Cross-process heartbeat registry: one 64-byte slot per process in a
/// memory-mapped file (a vigil heartbeat table). Each process registers a
/// slot, beats it, and marks the units of work it holds; a watchdog ticks
/// the global epoch and reclaims the slots that stopped beating.
///
/// Stricter than subetha-cxc: [`create`](Self::create) never clobbers a
/// live table; a registration is named by a generation that never recurs
/// (a recycled pid is never taken for the old owner); a stale owner's late
/// [`unregister`](Self::unregister), [`mark_in_flight`](Self::mark_in_flight)
/// or [`clear_in_flight`](Self::clear_in_flight) never touches a slot that
/// was reclaimed and registered again (these return `()` as subetha-cxc's
/// do: ask [`vigil`](Self::vigil)`().owned(slot)` to learn it is stale).
///
/// ```
/// use vigil::compat::HeartbeatTable;
/// # let dir = std::env::temp_dir().join(format!("vigil-doc-chb-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// let t = HeartbeatTable::open(dir.join("hb.bin"), 64).or_else(|_| HeartbeatTable::create(dir.join("hb.bin"), 64))?;
/// let slot = t.register(std::process::id())?;
/// t.beat(slot);
/// t.mark_in_flight(slot, 7);
/// t.clear_in_flight(slot, 7);
/// t.unregister(slot); // before a clean exit
/// # drop(t); std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct HeartbeatTable {
    inner: crate::HeartbeatTable,
    // The registrations this handle made for the process that called, each
    // named by the slot and a number of this handle's that never recurs:
    // the barrier binds to the one such registration of the process
    // waiting (see EpochBarrier), never to a parent's in a forked child,
    // and binds again when the slot is registered again.
    own: Mutex<OwnSlots>,
}

/// The registrations a compat table made for the processes that called.
#[derive(Default)]
struct OwnSlots {
    list: Vec<OwnSlot>,
    made: u64, // registrations made through this handle: the next one's number
}

/// One registration this handle made: its slot, the pid it was made for,
/// and its number (one per registration, never reused).
#[derive(Clone, Copy, PartialEq, Eq)]
struct OwnSlot {
    slot: u32,
    pid: u32,
    number: u64,
}

impl HeartbeatTable {
    /// Obtains the table at `path`: creates it with `capacity` slots when
    /// the path does not exist, else attaches to the table there, leaving
    /// its registrations in place (another capacity is `LayoutMismatch`).
    /// Never reinitialises a live table.
    ///
    /// ```
    /// use vigil::compat::{HeartbeatError, HeartbeatTable};
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-chbcreate-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let a = HeartbeatTable::create(dir.join("hb"), 8)?;
    /// let slot = a.register(std::process::id())?;
    /// let b = HeartbeatTable::create(dir.join("hb"), 8)?; // attaches
    /// assert!(b.snapshot(slot).is_some());
    /// assert_eq!(HeartbeatTable::create(dir.join("hb"), 16).err(), Some(HeartbeatError::LayoutMismatch));
    /// # drop(a); drop(b); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn create(path: impl AsRef<Path>, capacity: usize) -> Result<Self, HeartbeatError> {
        let path = path.as_ref();
        let cap = u32::try_from(capacity).map_err(|_| HeartbeatError::IoError(ErrorKind::InvalidInput))?;
        let inner = match crate::HeartbeatTable::create(path, cap) {
            Err(Error::Os(e)) if e.kind() == ErrorKind::AlreadyExists => {
                crate::HeartbeatTable::open_with_capacity(path, cap)?
            }
            other => other?,
        };
        Ok(HeartbeatTable { inner, own: Mutex::new(OwnSlots::default()) })
    }

    /// Maps the existing table at `path`, which must have
    /// `expected_capacity` slots (`LayoutMismatch` otherwise).
    ///
    /// ```
    /// use vigil::compat::HeartbeatTable;
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-chbopen-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let _daemon = HeartbeatTable::create(dir.join("hb"), 8)?;
    /// let worker = HeartbeatTable::open(dir.join("hb"), 8)?;
    /// assert_eq!(worker.capacity(), 8);
    /// # drop(_daemon); drop(worker); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open(path: impl AsRef<Path>, expected_capacity: usize) -> Result<Self, HeartbeatError> {
        let cap = u32::try_from(expected_capacity).map_err(|_| HeartbeatError::LayoutMismatch)?;
        if cap == 0 {
            return Err(HeartbeatError::LayoutMismatch);
        }
        let inner = crate::HeartbeatTable::open_with_capacity(path, cap)?;
        Ok(HeartbeatTable { inner, own: Mutex::new(OwnSlots::default()) })
    }

    /// Number of slots.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-chbcap-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// assert_eq!(vigil::compat::HeartbeatTable::create(dir.join("hb"), 8)?.capacity(), 8);
    /// # std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn capacity(&self) -> usize {
        self.inner.capacity() as usize
    }

    /// Registers `pid`: claims the first vacant slot by CAS and returns its
    /// index. `TableFull` when none is vacant; pid 0 is
    /// `IoError(InvalidInput)`.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-chbreg-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let t = vigil::compat::HeartbeatTable::create(dir.join("hb"), 8)?;
    /// assert_eq!(t.register(std::process::id())?, 0);
    /// assert_eq!(t.register(std::process::id())?, 1);
    /// # drop(t); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn register(&self, pid: u32) -> Result<usize, HeartbeatError> {
        let mut own = self.own.lock().unwrap_or_else(|e| e.into_inner());
        // A registration of ours that failover took (this process was
        // judged dead) is gone: only those still held are ours. Judged
        // before this registration, which may take the same slot (the
        // first vacant one) and would make the gone one look held: two
        // entries, no sole slot, and the barrier's waits arriving unbound
        // (issue 27's review: a second reclaim then released a round).
        own.list.retain(|o| self.inner.owned(o.slot).unwrap_or(false));
        let slot = self.inner.register_pid(pid)?.into_slot();
        // The slot is this registration's now, whatever was recorded of it.
        own.list.retain(|o| o.slot != slot);
        if pid == std::process::id() {
            own.made += 1;
            let number = own.made;
            own.list.push(OwnSlot { slot, pid, number });
        }
        Ok(slot as usize)
    }

    /// Releases the slot at `idx` (call before a clean exit). A slot that
    /// was reclaimed and registered by another process meanwhile is left
    /// to its new owner.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-chbunreg-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let t = vigil::compat::HeartbeatTable::create(dir.join("hb"), 8)?;
    /// let slot = t.register(std::process::id())?;
    /// t.unregister(slot);
    /// assert!(t.snapshot(slot).is_none());
    /// # drop(t); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn unregister(&self, idx: usize) {
        if let Ok(slot) = u32::try_from(idx) {
            self.own.lock().unwrap_or_else(|e| e.into_inner()).list.retain(|o| o.slot != slot);
            let _ = self.inner.unregister(slot);
        }
    }

    /// Heartbeat: advances this slot's `last_seen_epoch` to the global
    /// epoch (one acquire load, one release store, inline). An index out of
    /// range is ignored.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-chbbeat-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let t = vigil::compat::HeartbeatTable::create(dir.join("hb"), 8)?;
    /// let slot = t.register(std::process::id())?;
    /// let now = t.tick_global_epoch();
    /// t.beat(slot);
    /// assert_eq!(t.snapshot(slot).unwrap().last_seen_epoch, now);
    /// # drop(t); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn beat(&self, idx: usize) {
        if idx < self.inner.capacity() as usize {
            self.inner.beat(idx as u32)
        }
    }

    /// Advances the global epoch and returns the new value (the watchdog's
    /// job, once per scan interval).
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-chbtick-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let t = vigil::compat::HeartbeatTable::create(dir.join("hb"), 8)?;
    /// assert_eq!(t.tick_global_epoch(), t.global_epoch());
    /// # drop(t); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn tick_global_epoch(&self) -> u64 {
        self.inner.tick()
    }

    /// The global epoch.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-chbepoch-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let t = vigil::compat::HeartbeatTable::create(dir.join("hb"), 8)?;
    /// let e = t.global_epoch();
    /// t.tick_global_epoch();
    /// assert_eq!(t.global_epoch(), e + 1);
    /// # drop(t); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn global_epoch(&self) -> u64 {
        self.inner.epoch()
    }

    /// Marks work unit `bit` (0..64) in flight for `slot_idx`. A vacant
    /// slot, or a slot or bit out of range, is left unchanged.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-chbmark-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let t = vigil::compat::HeartbeatTable::create(dir.join("hb"), 8)?;
    /// let slot = t.register(std::process::id())?;
    /// t.mark_in_flight(slot, 63);
    /// assert_eq!(t.snapshot(slot).unwrap().in_flight_bitmap, 1 << 63);
    /// # drop(t); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn mark_in_flight(&self, slot_idx: usize, bit: u8) {
        if let Ok(slot) = u32::try_from(slot_idx) {
            let _ = self.inner.mark(slot, u32::from(bit));
        }
    }

    /// Clears work unit `bit` for `slot_idx`.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-chbclear-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let t = vigil::compat::HeartbeatTable::create(dir.join("hb"), 8)?;
    /// let slot = t.register(std::process::id())?;
    /// t.mark_in_flight(slot, 1);
    /// t.clear_in_flight(slot, 1);
    /// assert_eq!(t.snapshot(slot).unwrap().in_flight_bitmap, 0);
    /// # drop(t); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn clear_in_flight(&self, slot_idx: usize, bit: u8) {
        if let Ok(slot) = u32::try_from(slot_idx) {
            let _ = self.inner.clear(slot, u32::from(bit));
        }
    }

    /// Snapshot of slot `idx` via SeqLock retry; `None` if the slot is
    /// vacant, out of range, or wedged by a writer killed mid-change.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-chbsnapshot-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let t = vigil::compat::HeartbeatTable::create(dir.join("hb"), 8)?;
    /// assert!(t.snapshot(0).is_none());
    /// let slot = t.register(7)?;
    /// assert_eq!(t.snapshot(slot).unwrap().pid, 7);
    /// # drop(t); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn snapshot(&self, idx: usize) -> Option<HeartbeatSnapshot> {
        let slot = u32::try_from(idx).ok()?;
        let s = self.inner.snapshot(slot).ok()?;
        Some(HeartbeatSnapshot {
            pid: s.pid,
            last_seen_epoch: s.last_seen_epoch,
            in_flight_bitmap: s.in_flight,
            role: s.role.to_raw(),
        })
    }

    /// The vigil table underneath, for everything subetha-cxc did not
    /// have (leader election, `failover_wait`, probes, counters).
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-chbvigil-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let t = vigil::compat::HeartbeatTable::create(dir.join("hb"), 8)?;
    /// let slot = t.register(std::process::id())?;
    /// assert_eq!(t.vigil().leader_elect(5)?.leader.slot as usize, slot);
    /// # drop(t); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn vigil(&self) -> &crate::HeartbeatTable {
        &self.inner
    }

    /// The one registration this handle made for this process, if exactly one.
    fn sole_own_slot(&self) -> Option<OwnSlot> {
        let me = std::process::id();
        let own = self.own.lock().unwrap_or_else(|e| e.into_inner());
        let mut mine = own.list.iter().filter(|o| o.pid == me).copied();
        match (mine.next(), mine.next()) {
            (Some(o), None) => Some(o),
            _ => None,
        }
    }
}

impl fmt::Debug for HeartbeatTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HeartbeatTable").field("inner", &self.inner).finish()
    }
}

/// Why a barrier wait or open failed.
///
/// ```
/// use std::sync::Arc;
/// use vigil::compat::{BarrierError, EpochBarrier, HeartbeatTable};
/// # let dir = std::env::temp_dir().join(format!("vigil-doc-berr-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// let hb = Arc::new(HeartbeatTable::create(dir.join("hb"), 4)?);
/// let barrier = EpochBarrier::create(dir.join("b"), hb, 2)?;
/// assert_eq!(barrier.wait(0), Err(BarrierError::NoLivePeers));
/// # drop(barrier); std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BarrierError {
    /// `wait` found no live peer to wait for.
    NoLivePeers,
    /// The deadline passed; the arrival was withdrawn.
    Timeout,
    /// Not a barrier file, a wrong version, or a capacity other than the
    /// heartbeat table's.
    LayoutMismatch,
    /// A system call failed, or an argument (a quorum of 0) was out of range.
    IoError(ErrorKind),
    /// vigil's addition: the slot this process waits as was taken by
    /// failover after it registered (its heartbeat lapsed past the grace
    /// window, or it was judged dead), so this process is no peer any more
    /// and the wait recorded nothing. It is fenced: stop the work the slot
    /// stood for, or register again (a new registration) and wait as that.
    Reclaimed,
}

impl fmt::Display for BarrierError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BarrierError::NoLivePeers => f.write_str("no live peers"),
            BarrierError::Timeout => f.write_str("barrier wait timed out"),
            BarrierError::LayoutMismatch => f.write_str("barrier layout mismatch"),
            BarrierError::IoError(kind) => write!(f, "barrier I/O error: {kind:?}"),
            BarrierError::Reclaimed => f.write_str("this process's slot was reclaimed by failover"),
        }
    }
}

impl std::error::Error for BarrierError {}

impl From<Error> for BarrierError {
    fn from(e: Error) -> BarrierError {
        match e {
            Error::NoPeers => BarrierError::NoLivePeers,
            Error::Timeout => BarrierError::Timeout,
            Error::BadFile | Error::CapacityMismatch => BarrierError::LayoutMismatch,
            Error::Os(e) => BarrierError::IoError(e.kind()),
            Error::OutOfRange => BarrierError::IoError(ErrorKind::InvalidInput),
            Error::Lost => BarrierError::Reclaimed,
            Error::Untrusted => BarrierError::IoError(ErrorKind::PermissionDenied),
            _ => BarrierError::IoError(ErrorKind::Other),
        }
    }
}

/// The file an [`EpochBarrier`] made at `base` lives in:
/// `<base's file name>.state.bin`, beside it, as subetha-cxc names it
/// (remove it to clean up after a run).
///
/// ```
/// use std::path::Path;
/// assert_eq!(vigil::compat::state_path(Path::new("/run/app/phase")), Path::new("/run/app/phase.state.bin"));
/// ```
pub fn state_path(base: &Path) -> PathBuf {
    let mut p = base.to_path_buf();
    let stem = base.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    p.set_file_name(format!("{stem}.state.bin"));
    p
}

/// Multi-process phase barrier with heartbeat-driven dead-peer exclusion:
/// a round releases when every live peer of the [`HeartbeatTable`] has
/// called `wait` at it (or `quorum` have), so a crashed peer never
/// deadlocks it. Its state is the vigil barrier file at
/// [`state_path`]`(base)`.
///
/// Each call to `wait` is one arrival, as subetha-cxc counts them, also
/// when threads of one process share the barrier (an `Arc`): two threads
/// waiting at a round are two arrivals.
///
/// Stricter than subetha-cxc:
///
/// * **Exact rounds.** When this process registered exactly one slot
///   through the table handle it passed in, a wait arrives as that slot:
///   a handle bound to it (opened on the first wait) records the arrival
///   per slot, so a peer that dies after arriving stops counting once its
///   heartbeat lapses, and the round still waits for a slow but live peer;
///   the wait keeps the slot beating, so a long wait never ages the waiter
///   out. The bound handle serves one wait at a time: a thread that waits
///   while another is in it arrives as subetha-cxc counts, on the shared
///   handle. Otherwise (no such slot) arrivals are counted as subetha-cxc
///   counts them. The handle is bound to the registration, not to the
///   slot's number: a process that unregisters and registers again (the
///   same slot, perhaps) waits as its new registration. One whose slot
///   failover took (it stalled past the grace window) is no peer any
///   more: its waits are [`BarrierError::Reclaimed`], recording nothing,
///   until it registers again.
/// * **A safe start.** A peer that has not registered yet is not live, so
///   processes that register and wait from round 0 at once can see round
///   0 released before the last of them exists (as with subetha-cxc), and
///   then count rounds apart with no error: waiting from round 0 is unsafe.
///   Call [`start`](Self::start)`(group_size)` once and wait from the
///   round it returns.
/// * **No busy wait.** Waiters sleep on a futex in the file after a short
///   spin (subetha-cxc polls with 50 µs sleeps).
/// * A wait that times out withdraws its arrival, so it never helps
///   release a round it has left.
///
/// ```
/// use std::sync::Arc;
/// use vigil::compat::{EpochBarrier, HeartbeatTable};
/// # let dir = std::env::temp_dir().join(format!("vigil-doc-eb-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// let hb = Arc::new(HeartbeatTable::create(dir.join("hb.bin"), 4)?);
/// let live = hb.register(1000)?;
/// let _crashed = hb.register(1001)?; // never beats
/// let barrier = EpochBarrier::create(dir.join("b"), hb.clone(), 2)?;
/// for _ in 0..3 { hb.tick_global_epoch(); }
/// hb.beat(live); // refresh live; the crashed slot is now stale
/// assert_eq!(barrier.live_peer_count(), 1);
/// barrier.wait(0)?; // releases on 1/1: no deadlock
/// # drop(barrier); drop(hb); std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct EpochBarrier {
    // Unbound: any number of threads wait on it at once, each an arrival.
    shared: RawBarrier<'static>,
    // Bound to this process's own slot, opened at the first wait that
    // finds one: one wait at a time (try_lock), the others go to `shared`.
    own: Mutex<Option<OwnHandle>>,
    heartbeat: Arc<HeartbeatTable>, // dropped after the handles that read it
    path: PathBuf,
    grace_epochs: u64,
}

/// The barrier handle bound to a registration of this process.
struct OwnHandle {
    raw: RawBarrier<'static>,
    registration: OwnSlot,
}

impl EpochBarrier {
    /// Obtains the barrier at `base_path` over `heartbeat`: creates its
    /// file ([`state_path`]`(base_path)`) when it does not exist (storing
    /// `grace_epochs`), else attaches to it. Never resets a barrier in use.
    ///
    /// ```
    /// use std::sync::Arc;
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-ebcreate-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let hb = Arc::new(vigil::compat::HeartbeatTable::create(dir.join("hb"), 4)?);
    /// let barrier = vigil::compat::EpochBarrier::create(dir.join("b"), hb, 5)?;
    /// assert_eq!(barrier.current_epoch(), 0);
    /// assert!(dir.join("b.state.bin").exists());
    /// # drop(barrier); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn create(
        base_path: impl AsRef<Path>,
        heartbeat: Arc<HeartbeatTable>,
        grace_epochs: u64,
    ) -> Result<Self, BarrierError> {
        let path = state_path(base_path.as_ref());
        let open = |mode| RawBarrier::with_share(&path, &heartbeat, HeartbeatTable::vigil, grace_epochs, mode);
        let shared = match open(Some(0o600)) {
            Err(Error::Os(e)) if e.kind() == ErrorKind::AlreadyExists => open(None)?,
            other => other?,
        };
        Ok(EpochBarrier { shared, own: Mutex::new(None), heartbeat, path, grace_epochs })
    }

    /// Opens the existing barrier at `base_path` (its file
    /// [`state_path`]`(base_path)`) over `heartbeat`, with `grace_epochs`
    /// for this handle (0: the grace stored at create).
    ///
    /// ```
    /// use std::sync::Arc;
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-ebopen-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let hb = Arc::new(vigil::compat::HeartbeatTable::create(dir.join("hb"), 4)?);
    /// let _made = vigil::compat::EpochBarrier::create(dir.join("b"), hb.clone(), 5)?;
    /// let barrier = vigil::compat::EpochBarrier::open(dir.join("b"), hb, 5)?;
    /// # drop(_made); drop(barrier); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open(
        base_path: impl AsRef<Path>,
        heartbeat: Arc<HeartbeatTable>,
        grace_epochs: u64,
    ) -> Result<Self, BarrierError> {
        let path = state_path(base_path.as_ref());
        let shared = RawBarrier::with_share(&path, &heartbeat, HeartbeatTable::vigil, grace_epochs, None)?;
        Ok(EpochBarrier { shared, own: Mutex::new(None), heartbeat, path, grace_epochs })
    }

    /// Number of live peers in the heartbeat table, by this barrier's grace.
    ///
    /// ```
    /// use std::sync::Arc;
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-eblive-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let hb = Arc::new(vigil::compat::HeartbeatTable::create(dir.join("hb"), 4)?);
    /// let barrier = vigil::compat::EpochBarrier::create(dir.join("b"), hb.clone(), 5)?;
    /// hb.register(std::process::id())?;
    /// assert_eq!(barrier.live_peer_count(), 1);
    /// # drop(barrier); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn live_peer_count(&self) -> u32 {
        self.shared.live_peers()
    }

    /// Runs `call` as one arrival: on the handle bound to this process's
    /// slot when there is one and no other thread is in it, else on the
    /// shared handle.
    fn arrive<T>(&self, call: impl Fn(&RawBarrier<'static>) -> crate::Result<T>) -> Result<T, BarrierError> {
        if let Some(registration) = self.heartbeat.sole_own_slot() {
            let own = match self.own.try_lock() {
                Ok(own) => Some(own),
                Err(TryLockError::Poisoned(e)) => Some(e.into_inner()),
                Err(TryLockError::WouldBlock) => None, // another thread arrives as the slot
            };
            if let Some(mut own) = own {
                // Bound to this registration, not to the slot's number: a
                // slot unregistered and registered again is another one
                // (a handle bound to the first is refused, Lost, for good).
                if own.as_ref().map(|h| h.registration) != Some(registration) {
                    *own = self.bound_handle(registration)?;
                }
                if let Some(h) = own.as_ref() {
                    return call(&h.raw).map_err(BarrierError::from);
                }
            }
        }
        call(&self.shared).map_err(BarrierError::from)
    }

    /// A handle of this barrier bound to `registration`; None when it
    /// cannot be had (the waits then arrive unbound, as subetha-cxc's);
    /// `Reclaimed` when the registration is gone (the slot vacant, or
    /// another's now): this process is no peer, and arriving unbound would
    /// count it as one.
    fn bound_handle(&self, registration: OwnSlot) -> Result<Option<OwnHandle>, BarrierError> {
        let mut raw =
            match RawBarrier::with_share(&self.path, &self.heartbeat, HeartbeatTable::vigil, self.grace_epochs, None) {
                Ok(raw) => raw,
                Err(_) => return Ok(None),
            };
        match raw.bind(registration.slot) {
            Ok(()) => Ok(Some(OwnHandle { raw, registration })),
            Err(Error::Lost | Error::Vacant) => Err(BarrierError::Reclaimed),
            Err(_) => Ok(None),
        }
    }

    fn wait_for(&self, epoch: u32, quorum: Option<u32>, timeout: Option<Duration>) -> Result<(), BarrierError> {
        self.arrive(|raw| raw.wait(epoch, quorum, timeout)).map(drop)
    }

    /// vigil's addition (subetha-cxc has none): the safe start of a group
    /// of `participants`. Each member calls it once, after registering, and
    /// then waits the round it returns, the next, and so on; every member
    /// gets the same first round whenever it started and whatever round
    /// the barrier file was at (see [`Barrier::start`](crate::Barrier::start)).
    /// Waiting from round 0 instead, or `wait_quorum(0, participants)` as a
    /// gate, miscounts rounds when members start at different times or
    /// the file is past round 0.
    ///
    /// ```
    /// use std::sync::Arc;
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-ebstart-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let hb = Arc::new(vigil::compat::HeartbeatTable::create(dir.join("hb"), 4)?);
    /// let barrier = vigil::compat::EpochBarrier::create(dir.join("b"), hb.clone(), 5)?;
    /// let slot = hb.register(std::process::id())?;
    /// let first = barrier.start(1)?; // the group's size: here, one
    /// for round in first..first + 3 {
    ///     hb.beat(slot);
    ///     barrier.wait(round)?;
    /// }
    /// assert_eq!(barrier.current_epoch(), first + 3);
    /// # drop(barrier); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn start(&self, participants: u32) -> Result<u32, BarrierError> {
        self.arrive(|raw| raw.start(participants, None)).map(|s| s.first_round)
    }

    /// Arrives at round `my_epoch` and waits until every live peer has. A
    /// round already passed returns at once; `NoLivePeers` when nothing is
    /// live at entry.
    ///
    /// ```
    /// use std::sync::Arc;
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-ebwait-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let hb = Arc::new(vigil::compat::HeartbeatTable::create(dir.join("hb"), 4)?);
    /// let barrier = vigil::compat::EpochBarrier::create(dir.join("b"), hb.clone(), 5)?;
    /// hb.register(std::process::id())?;
    /// barrier.wait(0)?;
    /// assert_eq!(barrier.current_epoch(), 1);
    /// # drop(barrier); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn wait(&self, my_epoch: u32) -> Result<(), BarrierError> {
        self.wait_for(my_epoch, None, None)
    }

    /// Arrives at round `my_epoch` and waits until `quorum` have.
    ///
    /// ```
    /// use std::sync::Arc;
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-ebq-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let hb = Arc::new(vigil::compat::HeartbeatTable::create(dir.join("hb"), 4)?);
    /// let barrier = vigil::compat::EpochBarrier::create(dir.join("b"), hb, 5)?;
    /// barrier.wait_quorum(0, 1)?;
    /// # drop(barrier); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn wait_quorum(&self, my_epoch: u32, quorum: u32) -> Result<(), BarrierError> {
        self.wait_for(my_epoch, Some(quorum), None)
    }

    /// As [`wait`](Self::wait), giving up with `Timeout` after `timeout`.
    ///
    /// ```
    /// use std::{sync::Arc, time::Duration};
    /// use vigil::compat::BarrierError;
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-ebt-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let hb = Arc::new(vigil::compat::HeartbeatTable::create(dir.join("hb"), 4)?);
    /// let barrier = vigil::compat::EpochBarrier::create(dir.join("b"), hb.clone(), 5)?;
    /// hb.register(std::process::id())?;
    /// hb.register(1)?; // a live peer that never arrives
    /// assert_eq!(barrier.wait_timeout(0, Duration::from_millis(20)), Err(BarrierError::Timeout));
    /// # drop(barrier); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn wait_timeout(&self, my_epoch: u32, timeout: Duration) -> Result<(), BarrierError> {
        self.wait_for(my_epoch, None, Some(timeout))
    }

    /// As [`wait_quorum`](Self::wait_quorum), giving up after `timeout`.
    ///
    /// ```
    /// use std::{sync::Arc, time::Duration};
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-ebqt-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let hb = Arc::new(vigil::compat::HeartbeatTable::create(dir.join("hb"), 4)?);
    /// let barrier = vigil::compat::EpochBarrier::create(dir.join("b"), hb, 5)?;
    /// assert!(barrier.wait_quorum_timeout(0, 3, Duration::from_millis(20)).is_err());
    /// # drop(barrier); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn wait_quorum_timeout(&self, my_epoch: u32, quorum: u32, timeout: Duration) -> Result<(), BarrierError> {
        self.wait_for(my_epoch, Some(quorum), Some(timeout))
    }

    /// The round now gathering.
    ///
    /// ```
    /// use std::sync::Arc;
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-ebcur-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let hb = Arc::new(vigil::compat::HeartbeatTable::create(dir.join("hb"), 4)?);
    /// let barrier = vigil::compat::EpochBarrier::create(dir.join("b"), hb, 5)?;
    /// assert_eq!(barrier.current_epoch(), 0);
    /// # drop(barrier); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn current_epoch(&self) -> u32 {
        self.shared.epoch()
    }

    /// Arrivals in the round now gathering (0 if the file cannot be read).
    ///
    /// ```
    /// use std::sync::Arc;
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-ebarr-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let hb = Arc::new(vigil::compat::HeartbeatTable::create(dir.join("hb"), 4)?);
    /// let barrier = vigil::compat::EpochBarrier::create(dir.join("b"), hb, 5)?;
    /// assert_eq!(barrier.arrived_count(), 0);
    /// # drop(barrier); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn arrived_count(&self) -> u32 {
        self.snapshot().1
    }

    /// `(current_epoch, arrived_count)`, read together.
    ///
    /// ```
    /// use std::sync::Arc;
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-ebsnap-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let hb = Arc::new(vigil::compat::HeartbeatTable::create(dir.join("hb"), 4)?);
    /// let barrier = vigil::compat::EpochBarrier::create(dir.join("b"), hb, 5)?;
    /// barrier.wait_quorum(0, 1)?;
    /// assert_eq!(barrier.snapshot(), (1, 0));
    /// # drop(barrier); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn snapshot(&self) -> (u32, u32) {
        match crate::Barrier::peek(&self.path) {
            Ok(s) => (s.epoch, s.arrived),
            Err(_) => (self.current_epoch(), 0),
        }
    }

    /// Flushes the barrier file's pages to disk (the state is shared
    /// through the page cache whether flushed or not).
    ///
    /// ```
    /// use std::sync::Arc;
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-ebflush-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let hb = Arc::new(vigil::compat::HeartbeatTable::create(dir.join("hb"), 4)?);
    /// let barrier = vigil::compat::EpochBarrier::create(dir.join("b"), hb, 5)?;
    /// barrier.flush()?;
    /// # drop(barrier); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn flush(&self) -> std::io::Result<()> {
        std::fs::File::open(&self.path)?.sync_data()
    }
}

impl fmt::Debug for EpochBarrier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EpochBarrier").field("path", &self.path).field("epoch", &self.current_epoch()).finish()
    }
}

/// Report from one watchdog scan.
///
/// ```
/// let report = vigil::compat::ReclaimReport { dead_slots: Vec::new(), new_global_epoch: 3 };
/// assert!(report.is_empty());
/// ```
#[derive(Clone, Debug)]
pub struct ReclaimReport {
    /// Slot index and last snapshot of each dead process whose in-flight
    /// units are now the caller's to reassign.
    pub dead_slots: Vec<(usize, HeartbeatSnapshot)>,
    /// The global epoch after the scan's tick.
    pub new_global_epoch: u64,
}

impl ReclaimReport {
    /// Whether the scan found no dead slot with units in flight.
    ///
    /// ```
    /// let report = vigil::compat::ReclaimReport { dead_slots: Vec::new(), new_global_epoch: 0 };
    /// assert!(report.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.dead_slots.is_empty()
    }
}

/// Watchdog scanner; one per cooperating cluster (several are safe).
///
/// Stricter than subetha-cxc: a scan *takes* each dead slot (vacates it and
/// hands its units to this caller) exactly once, even with several
/// watchdogs scanning at once in several processes, so a report is never
/// repeated and no unit is reassigned twice; [`clear_dead_bitmap`](Self::clear_dead_bitmap)
/// has nothing left to clear. Dead slots without units in flight are
/// vacated too, and left out of the report as subetha-cxc leaves them out.
///
/// ```
/// use vigil::compat::{FailoverWatchdog, HeartbeatTable};
/// # let dir = std::env::temp_dir().join(format!("vigil-doc-wd-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// let hb = HeartbeatTable::create(dir.join("hb"), 8)?;
/// let dead = hb.register(999_999)?; // a worker that will never beat again
/// hb.mark_in_flight(dead, 4);
/// let watchdog = FailoverWatchdog::with_grace(&hb, 2);
/// let report = (0..10).map(|_| watchdog.scan()).find(|r| !r.is_empty()).expect("reclaimed");
/// let (slot, snap) = report.dead_slots[0];
/// assert_eq!((slot, snap.pid), (dead, 999_999));
/// assert_eq!(FailoverWatchdog::iter_in_flight_bits(snap.in_flight_bitmap).collect::<Vec<_>>(), vec![4]);
/// # drop(hb); std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct FailoverWatchdog<'a> {
    /// The table watched.
    pub table: &'a HeartbeatTable,
    /// Epochs a slot may miss before it is reclaimed.
    pub grace_epochs: u64,
}

impl<'a> FailoverWatchdog<'a> {
    /// A watchdog with [`DEFAULT_GRACE_EPOCHS`].
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-wdnew-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let hb = vigil::compat::HeartbeatTable::create(dir.join("hb"), 8)?;
    /// assert_eq!(vigil::compat::FailoverWatchdog::new(&hb).grace_epochs, 1);
    /// # drop(hb); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(table: &'a HeartbeatTable) -> Self {
        Self::with_grace(table, DEFAULT_GRACE_EPOCHS)
    }

    /// A watchdog with its own grace window.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-wdgrace-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let hb = vigil::compat::HeartbeatTable::create(dir.join("hb"), 8)?;
    /// assert_eq!(vigil::compat::FailoverWatchdog::with_grace(&hb, 5).grace_epochs, 5);
    /// # drop(hb); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_grace(table: &'a HeartbeatTable, grace_epochs: u64) -> Self {
        FailoverWatchdog { table, grace_epochs }
    }

    /// Advances the global epoch and takes every slot whose last beat is
    /// more than `grace_epochs` behind it; reports those with units in
    /// flight. (An error reading the table gives an empty report.)
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-wdscan-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let hb = vigil::compat::HeartbeatTable::create(dir.join("hb"), 8)?;
    /// let me = hb.register(std::process::id())?;
    /// let watchdog = vigil::compat::FailoverWatchdog::new(&hb);
    /// for _ in 0..5 {
    ///     hb.beat(me);
    ///     assert!(watchdog.scan().is_empty()); // alive
    /// }
    /// # drop(hb); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn scan(&self) -> ReclaimReport {
        let table = &self.table.inner;
        let new_global_epoch = table.tick();
        // The last beat and role of each slot about to be taken, for the
        // report (the scan itself hands back slot, pid and units).
        let grace = self.grace_epochs;
        let before: Vec<Option<crate::SlotInfo>> = (0..table.capacity())
            .map(|s| table.snapshot(s).ok())
            .map(|s| {
                s.filter(|i| {
                    let age = new_global_epoch.wrapping_sub(i.last_seen_epoch) as i64;
                    age > 0 && age as u64 > grace
                })
            })
            .collect();
        let taken = table.failover_scan(grace).unwrap_or_default();
        let dead_slots = taken
            .into_iter()
            .filter(|r| r.in_flight != 0)
            .map(|r| {
                let seen = before.get(r.slot as usize).copied().flatten().filter(|i| i.pid == r.pid);
                let snap = HeartbeatSnapshot {
                    pid: r.pid,
                    last_seen_epoch: seen.map_or(0, |i| i.last_seen_epoch),
                    in_flight_bitmap: r.in_flight,
                    role: seen.map_or(0, |i| i.role.to_raw()),
                };
                (r.slot as usize, snap)
            })
            .collect();
        ReclaimReport { dead_slots, new_global_epoch }
    }

    /// The set bits of `bitmap`, lowest first: the units to reassign.
    ///
    /// ```
    /// let bits: Vec<u8> = vigil::compat::FailoverWatchdog::iter_in_flight_bits(0b1001).collect();
    /// assert_eq!(bits, vec![0, 3]);
    /// ```
    pub fn iter_in_flight_bits(bitmap: u64) -> impl Iterator<Item = u8> {
        (0..64u8).filter(move |b| bitmap >> b & 1 == 1)
    }

    /// Kept for subetha-cxc's callers, and a no-op: the scan already took
    /// the dead slot's bits (and vacated it) exactly once, and clearing
    /// bits now could only hit a new owner's work.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-wdclear-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let hb = vigil::compat::HeartbeatTable::create(dir.join("hb"), 8)?;
    /// let slot = hb.register(std::process::id())?;
    /// hb.mark_in_flight(slot, 1);
    /// vigil::compat::FailoverWatchdog::new(&hb).clear_dead_bitmap(slot);
    /// assert_eq!(hb.snapshot(slot).unwrap().in_flight_bitmap, 0b10); // a live owner's work is untouched
    /// # drop(hb); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn clear_dead_bitmap(&self, slot_idx: usize) {
        let _ = slot_idx;
    }
}
