//! The epoch barrier: a cross-process phase barrier that counts only the
//! live peers of a heartbeat table, so a crashed peer never deadlocks it.

use std::fmt;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{check, Result};
use crate::heartbeat::HeartbeatTable;
use crate::sys;
use crate::util::{c_path, timeout_ns, Turn, TurnHeld};

/// How a wait on a [`Barrier`] ended: the round was released, and to
/// exactly one caller per released round, `Serial` (its CAS released it).
///
/// ```
/// assert!(vigil::WaitOutcome::Serial.is_serial());
/// assert!(!vigil::WaitOutcome::Released.is_serial());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WaitOutcome {
    /// The round was released (by another caller, or had already passed).
    Released,
    /// The round was released by this caller: one per round.
    Serial,
}

impl WaitOutcome {
    /// Whether this caller released the round.
    ///
    /// ```
    /// let serials = [vigil::WaitOutcome::Serial, vigil::WaitOutcome::Released]
    ///     .iter()
    ///     .filter(|o| o.is_serial())
    ///     .count();
    /// assert_eq!(serials, 1);
    /// ```
    pub fn is_serial(self) -> bool {
        self == WaitOutcome::Serial
    }
}

/// A barrier file's state as [`Barrier::peek`] reads it.
///
/// ```
/// # let dir = std::env::temp_dir().join(format!("vigil-doc-bstate-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// # let table = vigil::HeartbeatTable::create(dir.join("t"), 4)?;
/// let _b = vigil::Barrier::create(dir.join("b"), &table, 5)?;
/// let state = vigil::Barrier::peek(dir.join("b"))?;
/// assert_eq!((state.capacity, state.epoch, state.grace_epochs), (4, 0, 5));
/// # drop(_b); drop(table); std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct BarrierState {
    /// Slots; the heartbeat table's capacity.
    pub capacity: u32,
    /// The round now gathering.
    pub epoch: u32,
    /// Arrivals in it, bound and unbound.
    pub arrived: u32,
    /// Per-slot arrival records of bound handles in it.
    pub recorded: u32,
    /// The grace stored at create.
    pub grace_epochs: u64,
    /// Waiters asleep in the kernel (a hint).
    pub sleepers: u32,
    /// Arrivals withdrawn (by waits that timed out) since create.
    pub withdrawals: u64,
}

/// Counters of a barrier's events ([`Barrier::stats`]).
///
/// ```
/// # let dir = std::env::temp_dir().join(format!("vigil-doc-bcount-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// # let table = vigil::HeartbeatTable::create(dir.join("t"), 4)?;
/// let b = vigil::Barrier::create(dir.join("b"), &table, 5)?;
/// assert_eq!(b.stats()?, vigil::BarrierCounters::default());
/// # drop(b); drop(table); std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct BarrierCounters {
    /// Rounds released (the epoch, so it wraps at 2^32).
    pub releases: u64,
    /// Arrivals withdrawn by waiters that timed out.
    pub withdrawals: u64,
}

/// Why a round's record names a peer ([`BarrierPeer::why`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerWhy {
    /// Arrived and live: counted.
    Counted,
    /// Left out: its heartbeat had lapsed (arrived or not).
    Dead,
    /// Left out: live and not arrived, when a quorum alone released the round.
    Absent,
}

/// A registration as a round's record names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BarrierPeer {
    /// Its heartbeat slot.
    pub slot: u32,
    /// Why it is named.
    pub why: PeerWhy,
    /// The registration (the slot's generation, which never recurs).
    pub gen: u64,
    /// Its pid while it still holds the slot, else 0.
    pub pid: u32,
}

/// A released round as the judgement that released it counted
/// ([`Barrier::round_info`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BarrierRound {
    /// The round.
    pub round: u32,
    /// Bound peers counted, in slot order.
    pub counted: Vec<BarrierPeer>,
    /// Arrivals of unbound handles counted.
    pub unbound: u32,
    /// Peers of the table left out, in slot order.
    pub left_out: Vec<BarrierPeer>,
    /// The slot of the bound handle whose commit released it (None: an
    /// unbound one), and its registration.
    pub serial: Option<(u32, u64)>,
}

/// How a [`Barrier::start`] ended: the first round the group waits (the
/// same for every member, whenever it started), and whether this caller
/// released the start round.
///
/// ```
/// # let dir = std::env::temp_dir().join(format!("vigil-doc-start-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// # let table = vigil::HeartbeatTable::create(dir.join("t"), 4)?;
/// # let mut barrier = vigil::Barrier::create(dir.join("b"), &table, 5)?;
/// # let me = table.register()?;
/// # barrier.bind(me.slot())?;
/// let start = barrier.start(1)?;
/// assert_eq!(start.first_round, 1); // the start round was 0
/// assert!(start.is_serial()); // alone: this caller released it
/// # drop(barrier); drop(me); drop(table); std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Start {
    /// The first round to wait, then the next ones in turn.
    pub first_round: u32,
    /// [`WaitOutcome::Serial`] to the one caller that released the start
    /// round (for instance to set up what the rounds share),
    /// [`WaitOutcome::Released`] to the others.
    pub outcome: WaitOutcome,
}

impl Start {
    /// Whether this caller released the start round.
    ///
    /// ```
    /// let s = vigil::Start { first_round: 4, outcome: vigil::WaitOutcome::Serial };
    /// assert!(s.is_serial());
    /// ```
    pub fn is_serial(self) -> bool {
        self.outcome.is_serial()
    }
}

/// How a barrier file is come by: made (with its mode, and its group when
/// given), or opened (with VIGIL_OPEN_* flags).
#[derive(Clone, Copy)]
enum Make {
    Create { mode: u32, group: Option<u32> },
    Open { flags: std::os::raw::c_uint },
}

/// The owned C handle, shared by [`Barrier`] and `compat::EpochBarrier`.
///
/// The C handle may be used by any number of threads at once while it is
/// unbound; once bound it stands for one peer, and is waited on by one
/// thread at a time (vigil_barrier_create(3)). Here the binding changes
/// only through `&mut self`, and every wait of a bound handle holds its
/// turn.
pub(crate) struct RawBarrier<'t> {
    ptr: NonNull<sys::vigil_barrier>,
    bound: bool,
    turn: Turn,
    // The heartbeat table the C handle reads on every wait, kept open for
    // as long as the handle: borrowed for 't, or a share of it held (and
    // dropped after the handle is closed, a field dropped after Drop).
    _table: PhantomData<&'t HeartbeatTable>,
    _share: Option<Arc<dyn Send + Sync>>,
}

// INVARIANT: `ptr` is an open handle from `wrap` until `drop`, and the
// table it reads stays open as long (`_table`, `_share`): every call below
// that says "an open handle" rests on it.

// SAFETY: the handle keeps no state of a thread's (its fields are atomics
// or fixed at open), and may be closed on any thread; the table it reads
// is Sync, and a share of it held is Send + Sync.
unsafe impl Send for RawBarrier<'_> {}
// SAFETY: calls through `&RawBarrier` are either reads of the shared
// mapping and of fields fixed at open (epoch, live_peers, stats,
// round_info), or waits. Waits may run on any number of threads at once
// on an unbound handle (the C contract); `bound` changes only in `bind`,
// which takes `&mut self`, so no call is in progress on any thread when
// it does, and every wait of a bound handle holds `turn` for the length of
// the C call, so a bound handle never has two waits at once.
unsafe impl Sync for RawBarrier<'_> {}

impl<'t> RawBarrier<'t> {
    fn wrap(raw: *mut sys::vigil_barrier, share: Option<Arc<dyn Send + Sync>>) -> RawBarrier<'t> {
        RawBarrier {
            ptr: NonNull::new(raw).expect("vigil returned success and a NULL barrier"),
            bound: false,
            turn: Turn::new(),
            _table: PhantomData,
            _share: share,
        }
    }

    /// Creates (`mode` Some, for the group `group` when Some) or opens
    /// (with `flags`) the barrier file at `path` over `table`, for a handle
    /// that keeps `share` until it is closed.
    fn make(
        path: &Path,
        table: &HeartbeatTable,
        grace: u64,
        how: Make,
        share: Option<Arc<dyn Send + Sync>>,
    ) -> Result<RawBarrier<'t>> {
        let c = c_path(path)?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: c is a C string and table an open table (its invariant);
        // the callers tie its life to the handle's ('t, or `share`); raw
        // is written only on success.
        check(unsafe {
            match how {
                Make::Create { mode, group: None } => {
                    sys::vigil_barrier_create_mode(c.as_ptr(), table.raw(), grace, mode, &mut raw)
                }
                Make::Create { mode, group: Some(gid) } => {
                    sys::vigil_barrier_create_group(c.as_ptr(), table.raw(), grace, mode, gid, &mut raw)
                }
                Make::Open { flags } => sys::vigil_barrier_open_flags(c.as_ptr(), table.raw(), grace, flags, &mut raw),
            }
        })?;
        Ok(RawBarrier::wrap(raw, share))
    }

    /// A handle over `table`, which it borrows for 't.
    pub(crate) fn create(
        path: &Path,
        table: &'t HeartbeatTable,
        grace: u64,
        mode: u32,
        group: Option<u32>,
    ) -> Result<RawBarrier<'t>> {
        Self::make(path, table, grace, Make::Create { mode, group }, None)
    }

    /// As [`create`](Self::create), opening an existing file.
    pub(crate) fn open(
        path: &Path,
        table: &'t HeartbeatTable,
        grace: u64,
        options: crate::OpenOptions,
    ) -> Result<RawBarrier<'t>> {
        Self::make(path, table, grace, Make::Open { flags: options.flags() }, None)
    }
}

impl RawBarrier<'static> {
    /// A handle over the table inside `owner`, a share of which it holds
    /// until closed (compat's EpochBarrier, which holds the table by Arc).
    pub(crate) fn with_share<T: Send + Sync + 'static>(
        path: &Path,
        owner: &Arc<T>,
        table: fn(&T) -> &HeartbeatTable,
        grace: u64,
        mode: Option<u32>,
    ) -> Result<RawBarrier<'static>> {
        let share: Arc<dyn Send + Sync> = owner.clone();
        let how = match mode {
            Some(mode) => Make::Create { mode, group: None },
            None => Make::Open { flags: 0 },
        };
        Self::make(path, table(owner), grace, how, Some(share))
    }
}

impl RawBarrier<'_> {
    fn ptr(&self) -> *mut sys::vigil_barrier {
        self.ptr.as_ptr()
    }

    /// The turn a wait needs (a bound handle's), and the time the C call
    /// may take once it has it.
    fn turn(&self, timeout: Option<Duration>) -> Result<(Option<TurnHeld<'_>>, Option<Duration>)> {
        if !self.bound {
            return Ok((None, timeout));
        }
        let (held, left) = self.turn.take_within(timeout)?;
        Ok((Some(held), left))
    }

    #[inline]
    pub(crate) fn wait(&self, epoch: u32, quorum: Option<u32>, timeout: Option<Duration>) -> Result<WaitOutcome> {
        let (_turn, timeout) = self.turn(timeout)?;
        let b = self.ptr();
        // SAFETY: an open handle (the invariant); a bound one's turn is held (see Sync).
        let rc = unsafe {
            match (quorum, timeout) {
                (None, None) => sys::vigil_barrier_wait(b, epoch),
                (Some(q), None) => sys::vigil_barrier_wait_quorum(b, epoch, q),
                (None, Some(t)) => sys::vigil_barrier_wait_timeout(b, epoch, timeout_ns(Some(t))),
                (Some(q), Some(t)) => sys::vigil_barrier_wait_quorum_timeout(b, epoch, q, timeout_ns(Some(t))),
            }
        };
        check(rc).map(|rc| if rc == sys::VIGIL_SERIAL { WaitOutcome::Serial } else { WaitOutcome::Released })
    }

    pub(crate) fn start(&self, participants: u32, timeout: Option<Duration>) -> Result<Start> {
        let (_turn, timeout) = self.turn(timeout)?;
        let mut first = 0u32;
        // SAFETY: an open handle (the invariant), a bound one's turn held (see Sync);
        // first is written only on success.
        let rc = unsafe { sys::vigil_barrier_start(self.ptr(), participants, timeout_ns(timeout), &mut first) };
        check(rc).map(|rc| Start {
            first_round: first,
            outcome: if rc == sys::VIGIL_SERIAL { WaitOutcome::Serial } else { WaitOutcome::Released },
        })
    }

    pub(crate) fn bind(&mut self, slot: u32) -> Result<()> {
        // SAFETY: an open handle (the invariant), and `&mut self`: no wait in progress.
        check(unsafe { sys::vigil_barrier_bind(self.ptr(), slot) })?;
        self.bound = true;
        Ok(())
    }

    pub(crate) fn epoch(&self) -> u32 {
        // SAFETY: an open handle (the invariant).
        unsafe { sys::vigil_barrier_epoch(self.ptr()) }
    }

    pub(crate) fn live_peers(&self) -> u32 {
        // SAFETY: an open handle (the invariant).
        unsafe { sys::vigil_barrier_live_peers(self.ptr()) }
    }

    pub(crate) fn round_info(&self, round: u32, capacity: u32) -> Result<Option<BarrierRound>> {
        let empty = sys::vigil_barrier_peer { slot: 0, why: 0, gen: 0, pid: 0 };
        let mut counted = vec![empty; capacity as usize];
        let mut left = vec![empty; capacity as usize];
        let mut info = sys::vigil_barrier_round {
            round: 0,
            kept: 0,
            serial_slot: 0,
            serial_gen: 0,
            counted: 0,
            unbound: 0,
            left_out: 0,
            counted_peers: counted.as_mut_ptr(),
            counted_cap: capacity,
            left_out_peers: left.as_mut_ptr(),
            left_out_cap: capacity,
        };
        // SAFETY: an open handle (the invariant); the arrays have room for capacity peers.
        let rc = unsafe { sys::vigil_barrier_round_info(self.ptr(), round, &mut info) };
        if rc == sys::VIGIL_EVACANT {
            return Ok(None);
        }
        check(rc)?;
        let peers = |arr: &[sys::vigil_barrier_peer], n: u32| -> Vec<BarrierPeer> {
            arr.iter()
                .take(n.min(capacity) as usize)
                .map(|p| BarrierPeer {
                    slot: p.slot,
                    why: match p.why {
                        1 => PeerWhy::Counted,
                        2 => PeerWhy::Dead,
                        _ => PeerWhy::Absent,
                    },
                    gen: p.gen,
                    pid: p.pid,
                })
                .collect()
        };
        Ok(Some(BarrierRound {
            round: info.round,
            counted: peers(&counted, info.counted),
            unbound: info.unbound,
            left_out: peers(&left, info.left_out),
            serial: (info.serial_slot != 0).then(|| (info.serial_slot - 1, info.serial_gen)),
        }))
    }

    pub(crate) fn stats(&self) -> Result<BarrierCounters> {
        let mut out = sys::Spare::<sys::vigil_barrier_counters>::zeroed();
        // SAFETY: an open handle (the invariant); out has room for a longer struct.
        check(unsafe { sys::vigil_barrier_stats(self.ptr(), &mut out.value) })?;
        Ok(BarrierCounters { releases: out.value.releases, withdrawals: out.value.withdrawals })
    }
}

impl Drop for RawBarrier<'_> {
    fn drop(&mut self) {
        // SAFETY: an open handle (the invariant), closed once; `&mut self`:
        // no wait is in progress. The table's share, a field, goes after.
        unsafe { sys::vigil_barrier_close(self.ptr()) }
    }
}

/// An epoch barrier: processes meet at rounds numbered 0, 1, 2, ... in a
/// barrier file; a round releases when every live peer of the heartbeat
/// table has arrived (or a quorum has), so a crashed peer never deadlocks
/// it: once its heartbeat lapses past the grace window it is not counted.
///
/// Bind the handle to this process's slot ([`bind`](Self::bind)) and the
/// rule is exact: arrivals are recorded per slot, a peer that dies after
/// arriving stops counting once it lapses, and the waits keep the slot
/// beating, so a long wait never ages a waiter out. Waiters sleep in the
/// kernel (a futex in the file) after a short spin.
///
/// **Start safely: [`start`](Self::start).** Every member registers,
/// binds, calls `start(group_size)` once and waits the rounds from the
/// first round it returns: `start.first_round`, then `+ 1`, and so on (see
/// `examples/phase_barrier.rs`).
///
/// **Waiting from round 0 without it is unsafe** when members start at
/// different times: a member that has not registered yet is not a live
/// peer, so the first members' rounds release without it, and it then
/// finds those rounds passed (each wait returns at once) and counts rounds
/// apart from the others, with no error. `wait_quorum(0, group_size)` as a
/// gate fails the same way on a barrier file already past round 0 (one
/// reused across runs). `start` waits at whatever round the barrier is at
/// for the whole group (the quorum rule and the all-live rule at once).
///
/// The handle borrows its table (the C library reads it on every wait)
/// and is `Send + Sync`. Unbound, any number of threads may wait on it at
/// once, each an arrival; bound, it stands for one peer and its waits
/// take turns ([`bind`](Self::bind)).
///
/// ```
/// # let dir = std::env::temp_dir().join(format!("vigil-doc-barrier-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// let table = vigil::HeartbeatTable::create(dir.join("t"), 8)?;
/// let mut barrier = vigil::Barrier::create(dir.join("b"), &table, 5)?;
/// let me = table.register()?;
/// barrier.bind(me.slot())?;
/// let start = barrier.start(1)?; // the whole group: here, one
/// // Alone, every round is ours to release.
/// for round in start.first_round..start.first_round + 3 {
///     assert_eq!(barrier.wait(round)?, vigil::WaitOutcome::Serial);
/// }
/// assert_eq!(barrier.epoch(), start.first_round + 3);
/// # drop(barrier); drop(me); drop(table); std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Barrier<'t> {
    raw: RawBarrier<'t>,
    table: &'t HeartbeatTable,
    path: PathBuf,
}

impl<'t> Barrier<'t> {
    /// Creates a barrier file at `path` (mode 0600, never clobbering) over
    /// `table`, whose capacity it takes; `grace_epochs` is stored in the
    /// file for every opener.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-bcreate-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 8)?;
    /// let barrier = vigil::Barrier::create(dir.join("b"), &table, 5)?;
    /// assert_eq!(barrier.epoch(), 0);
    /// # drop(barrier); drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn create<P: AsRef<Path>>(path: P, table: &'t HeartbeatTable, grace_epochs: u64) -> Result<Barrier<'t>> {
        Self::create_with_mode(path, table, grace_epochs, 0o600)
    }

    /// As [`create`](Self::create), with the file's permission bits.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-bmode-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 8)?;
    /// let barrier = vigil::Barrier::create_with_mode(dir.join("b"), &table, 5, 0o660)?;
    /// # drop(barrier); drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn create_with_mode<P: AsRef<Path>>(
        path: P,
        table: &'t HeartbeatTable,
        grace_epochs: u64,
        mode: u32,
    ) -> Result<Barrier<'t>> {
        let path = path.as_ref();
        let raw = RawBarrier::create(path, table, grace_epochs, mode, None)?;
        Ok(Barrier { raw, table, path: path.to_path_buf() })
    }

    /// As [`create_with_mode`](Self::create_with_mode), the file given to
    /// the group `gid` (the caller must be in it) as it is made
    /// (vigil_barrier_create_group(3)).
    ///
    /// ```
    /// use std::os::unix::fs::MetadataExt;
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-bgroup-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let gid = std::fs::metadata(&dir)?.gid();
    /// let table = vigil::HeartbeatTable::create_with_group(dir.join("t"), 8, 0o660, gid)?;
    /// let barrier = vigil::Barrier::create_with_group(dir.join("b"), &table, 5, 0o660, gid)?;
    /// assert_eq!(std::fs::metadata(dir.join("b"))?.gid(), gid);
    /// # drop(barrier); drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn create_with_group<P: AsRef<Path>>(
        path: P,
        table: &'t HeartbeatTable,
        grace_epochs: u64,
        mode: u32,
        gid: u32,
    ) -> Result<Barrier<'t>> {
        let path = path.as_ref();
        let raw = RawBarrier::create(path, table, grace_epochs, mode, Some(gid))?;
        Ok(Barrier { raw, table, path: path.to_path_buf() })
    }

    /// Opens an existing barrier over `table` with the grace stored in the
    /// file. [`Error::CapacityMismatch`](crate::Error::CapacityMismatch)
    /// when the table's capacity is not the barrier's.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-bopen-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 8)?;
    /// vigil::Barrier::create(dir.join("b"), &table, 5)?;
    /// let barrier = vigil::Barrier::open(dir.join("b"), &table)?;
    /// # drop(barrier); drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open<P: AsRef<Path>>(path: P, table: &'t HeartbeatTable) -> Result<Barrier<'t>> {
        Self::open_with_grace(path, table, 0)
    }

    /// Opens an existing barrier with `grace_epochs` for this handle only
    /// (0 keeps the stored grace).
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-bgrace-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 8)?;
    /// vigil::Barrier::create(dir.join("b"), &table, 5)?;
    /// let patient = vigil::Barrier::open_with_grace(dir.join("b"), &table, 50)?;
    /// # drop(patient); drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open_with_grace<P: AsRef<Path>>(
        path: P,
        table: &'t HeartbeatTable,
        grace_epochs: u64,
    ) -> Result<Barrier<'t>> {
        Self::open_with(path, table, grace_epochs, crate::OpenOptions::new())
    }

    /// Opens an existing barrier with `grace_epochs` for this handle (0
    /// keeps the stored grace), as `options` say: a file another user
    /// could have rewritten is [`Error::Untrusted`](crate::Error::Untrusted)
    /// unless [`OpenOptions::trust_owner`](crate::OpenOptions::trust_owner)
    /// (a barrier is always opened for writing: `readonly` is
    /// `InvalidInput`).
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-bopenwith-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 8)?;
    /// vigil::Barrier::create(dir.join("b"), &table, 5)?;
    /// let trusting = vigil::OpenOptions::new().trust_owner(true);
    /// let barrier = vigil::Barrier::open_with(dir.join("b"), &table, 0, trusting)?;
    /// # drop(barrier); drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open_with<P: AsRef<Path>>(
        path: P,
        table: &'t HeartbeatTable,
        grace_epochs: u64,
        options: crate::OpenOptions,
    ) -> Result<Barrier<'t>> {
        let path = path.as_ref();
        let raw = RawBarrier::open(path, table, grace_epochs, options)?;
        Ok(Barrier { raw, table, path: path.to_path_buf() })
    }

    /// Reads a barrier file's state without a heartbeat table (read-only).
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-bpeek-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 8)?;
    /// let barrier = vigil::Barrier::create(dir.join("b"), &table, 5)?;
    /// let _me = table.register()?;
    /// barrier.wait_quorum(0, 1)?;
    /// assert_eq!(vigil::Barrier::peek(dir.join("b"))?.epoch, 1);
    /// # drop(barrier); drop(_me); drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn peek<P: AsRef<Path>>(path: P) -> Result<BarrierState> {
        let c = c_path(path.as_ref())?;
        let mut out = sys::Spare::<sys::vigil_barrier_state>::zeroed();
        // SAFETY: c is a C string; out has room for a longer struct.
        check(unsafe { sys::vigil_barrier_peek(c.as_ptr(), &mut out.value) })?;
        let s = out.value;
        Ok(BarrierState {
            capacity: s.capacity,
            epoch: s.epoch,
            arrived: s.arrived,
            recorded: s.recorded,
            grace_epochs: s.grace_epochs,
            sleepers: s.sleepers,
            withdrawals: s.withdrawals,
        })
    }

    /// Binds this handle to `slot` (this process's registration): its
    /// arrivals are recorded per slot, and its waits keep the slot beating.
    /// [`Error::Vacant`](crate::Error::Vacant) for a vacant slot.
    ///
    /// A bound handle stands for one peer, so its waits take turns: a wait
    /// that another thread makes on it meanwhile begins when the one in
    /// progress ends (its timeout running from its call), and is then an
    /// arrival of the same peer (a round already passed returns at once).
    /// Binding takes `&mut self`, so it happens before the handle is
    /// shared, never under a wait in progress. Threads that are peers of
    /// their own register a slot each and bind a handle each.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-bind-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 8)?;
    /// let mut barrier = vigil::Barrier::create(dir.join("b"), &table, 5)?;
    /// let me = table.register()?;
    /// barrier.bind(me.slot())?;
    /// assert!(matches!(barrier.bind(7), Err(vigil::Error::Vacant)));
    /// # drop(barrier); drop(me); drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    pub fn bind(&mut self, slot: u32) -> Result<()> {
        self.raw.bind(slot)
    }

    /// The safe start of a group of `participants` (`vigil_barrier_start`):
    /// call it once per member, after registering and [`bind`](Self::bind),
    /// then wait [`Start::first_round`], the round after, and so on. It
    /// waits at the round the barrier is at until `participants` callers
    /// have arrived there and no live peer of the table is left out, and
    /// returns the round after it: the same for every member, whenever each
    /// started, and whatever round a reused barrier file was at.
    ///
    /// A caller that comes when the group is already under way (a member
    /// that restarted) gets the round the group is at, and leaves in step
    /// with it. Waiting from round 0 instead is unsafe (see [`Barrier`]).
    /// [`Error::OutOfRange`](crate::Error::OutOfRange) for 0 participants;
    /// [`Error::Lost`](crate::Error::Lost) when the bound registration is
    /// gone (reclaimed).
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-bstart-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 8)?;
    /// let mut barrier = vigil::Barrier::create(dir.join("b"), &table, 5)?;
    /// let me = table.register()?;
    /// barrier.bind(me.slot())?;
    /// let start = barrier.start(1)?; // the group's size: here, one
    /// for round in start.first_round.. {
    ///     // ... this phase's work ...
    ///     barrier.wait(round)?;
    ///     if round == start.first_round + 2 {
    ///         break;
    ///     }
    /// }
    /// assert!(matches!(barrier.start(0), Err(vigil::Error::OutOfRange)));
    /// # drop(barrier); drop(me); drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn start(&self, participants: u32) -> Result<Start> {
        self.raw.start(participants, None)
    }

    /// As [`start`](Self::start), giving up after `timeout` with
    /// [`Error::Timeout`](crate::Error::Timeout), the arrival withdrawn.
    ///
    /// ```
    /// use std::time::Duration;
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-bstartt-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 8)?;
    /// let mut barrier = vigil::Barrier::create(dir.join("b"), &table, 5)?;
    /// let me = table.register()?;
    /// barrier.bind(me.slot())?;
    /// // A group of two with only one member here.
    /// let r = barrier.start_timeout(2, Duration::from_millis(20));
    /// assert!(matches!(r, Err(vigil::Error::Timeout)));
    /// assert_eq!(vigil::Barrier::peek(dir.join("b"))?.arrived, 0); // withdrawn
    /// # drop(barrier); drop(me); drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn start_timeout(&self, participants: u32, timeout: Duration) -> Result<Start> {
        self.raw.start(participants, Some(timeout))
    }

    /// Arrives at round `epoch` and waits until every live peer has. A
    /// round already passed returns at once; with no live peer at entry,
    /// [`Error::NoPeers`](crate::Error::NoPeers).
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-bwait-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 8)?;
    /// let mut barrier = vigil::Barrier::create(dir.join("b"), &table, 5)?;
    /// assert!(matches!(barrier.wait(0), Err(vigil::Error::NoPeers)));
    /// let me = table.register()?;
    /// barrier.bind(me.slot())?;
    /// assert!(barrier.wait(0)?.is_serial());
    /// assert_eq!(barrier.wait(0)?, vigil::WaitOutcome::Released); // passed already
    /// # drop(barrier); drop(me); drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn wait(&self, epoch: u32) -> Result<WaitOutcome> {
        self.raw.wait(epoch, None, None)
    }

    /// Arrives at round `epoch` and waits until `quorum` arrivals (of peers
    /// still live, or unbound). Quorum 0 is
    /// [`Error::OutOfRange`](crate::Error::OutOfRange). To start a group,
    /// use [`start`](Self::start), not round 0 with a quorum of the group.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-bquorum-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 8)?;
    /// let barrier = vigil::Barrier::create(dir.join("b"), &table, 5)?;
    /// assert!(matches!(barrier.wait_quorum(0, 0), Err(vigil::Error::OutOfRange)));
    /// assert!(barrier.wait_quorum(0, 1)?.is_serial());
    /// # drop(barrier); drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn wait_quorum(&self, epoch: u32, quorum: u32) -> Result<WaitOutcome> {
        self.raw.wait(epoch, Some(quorum), None)
    }

    /// As [`wait`](Self::wait), giving up after `timeout` with
    /// [`Error::Timeout`](crate::Error::Timeout); the arrival is withdrawn,
    /// so it never helps release a round it has left.
    ///
    /// ```
    /// use std::time::Duration;
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-btimeout-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 8)?;
    /// let mut barrier = vigil::Barrier::create(dir.join("b"), &table, 5)?;
    /// let me = table.register()?;
    /// let _peer = table.register_pid(std::process::id())?; // a peer that never comes
    /// barrier.bind(me.slot())?;
    /// let r = barrier.wait_timeout(0, Duration::from_millis(20));
    /// assert!(matches!(r, Err(vigil::Error::Timeout)));
    /// # drop(barrier); drop(me); drop(_peer); drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn wait_timeout(&self, epoch: u32, timeout: Duration) -> Result<WaitOutcome> {
        self.raw.wait(epoch, None, Some(timeout))
    }

    /// As [`wait_quorum`](Self::wait_quorum), giving up after `timeout`.
    ///
    /// ```
    /// use std::time::Duration;
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-bqt-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 8)?;
    /// let barrier = vigil::Barrier::create(dir.join("b"), &table, 5)?;
    /// let r = barrier.wait_quorum_timeout(0, 2, Duration::from_millis(20));
    /// assert!(matches!(r, Err(vigil::Error::Timeout)));
    /// # drop(barrier); drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn wait_quorum_timeout(&self, epoch: u32, quorum: u32, timeout: Duration) -> Result<WaitOutcome> {
        self.raw.wait(epoch, Some(quorum), Some(timeout))
    }

    /// The round now gathering.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-bepoch-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 8)?;
    /// let barrier = vigil::Barrier::create(dir.join("b"), &table, 5)?;
    /// barrier.wait_quorum(0, 1)?;
    /// assert_eq!(barrier.epoch(), 1);
    /// # drop(barrier); drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn epoch(&self) -> u32 {
        self.raw.epoch()
    }

    /// Number of live peers in the table, by this handle's grace.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-blive-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 8)?;
    /// let barrier = vigil::Barrier::create(dir.join("b"), &table, 5)?;
    /// let _me = table.register()?;
    /// assert_eq!(barrier.live_peers(), 1);
    /// # drop(barrier); drop(_me); drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn live_peers(&self) -> u32 {
        self.raw.live_peers()
    }

    /// Counters of the barrier's events since it was created.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-bstats-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 8)?;
    /// let barrier = vigil::Barrier::create(dir.join("b"), &table, 5)?;
    /// barrier.wait_quorum(0, 1)?;
    /// assert_eq!(barrier.stats()?.releases, 1);
    /// # drop(barrier); drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn stats(&self) -> Result<BarrierCounters> {
        self.raw.stats()
    }

    /// Who released round `round` counted and left out, as its record says
    /// (the last eight releases are kept): `None` when it has not been
    /// released or is no longer kept. See vigil_barrier_wait_info(3).
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-bround-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 8)?;
    /// let mut barrier = vigil::Barrier::create(dir.join("b"), &table, 5)?;
    /// let me = table.register()?;
    /// barrier.bind(me.slot())?;
    /// assert!(barrier.round_info(0)?.is_none()); // not released yet
    /// barrier.wait(0)?;
    /// let round = barrier.round_info(0)?.expect("just released");
    /// assert_eq!(round.counted.len(), 1);
    /// assert_eq!(round.counted[0].slot, me.slot());
    /// assert_eq!(round.serial.map(|(slot, _)| slot), Some(me.slot()));
    /// # drop(barrier); drop(me); drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn round_info(&self, round: u32) -> Result<Option<BarrierRound>> {
        self.raw.round_info(round, self.table.capacity())
    }

    /// The heartbeat table the barrier counts peers in.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-btable-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 8)?;
    /// let barrier = vigil::Barrier::create(dir.join("b"), &table, 5)?;
    /// assert_eq!(barrier.table().capacity(), 8);
    /// # drop(barrier); drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn table(&self) -> &'t HeartbeatTable {
        self.table
    }

    /// The barrier file's path.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-bpath-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 8)?;
    /// let barrier = vigil::Barrier::create(dir.join("b"), &table, 5)?;
    /// assert!(barrier.path().ends_with("b"));
    /// # drop(barrier); drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl fmt::Debug for Barrier<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Barrier")
            .field("path", &self.path)
            .field("table", &self.table.path())
            .field("epoch", &self.epoch())
            .finish()
    }
}
