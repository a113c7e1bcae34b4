//! The heartbeat table: one 64-byte slot per process in a shared mapping.

use std::fmt;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{check, Result};
use crate::sys;
use crate::util::{c_path, Turn};

/// A heartbeat table: a file of one 64-byte slot per process, mapped
/// shared. Processes [`register`](Self::register) a slot, beat it, and
/// record the units of work they hold; a watchdog ticks the epoch and
/// reclaims the slots (and units) of processes that stopped beating.
///
/// The handle is `Send + Sync`: every operation is an atomic protocol on
/// the shared mapping, safe from any number of threads and processes.
/// Dropping it unmaps the file; [`Registration`]s, [`Beater`]s and
/// [`Barrier`](crate::Barrier)s borrow it, so it outlives them.
///
/// ```
/// use vigil::HeartbeatTable;
///
/// # let dir = std::env::temp_dir().join(format!("vigil-doc-hb-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// let table = HeartbeatTable::create(dir.join("workers"), 64)?;
/// let me = table.register()?;          // this process, first vacant slot
/// me.mark(7)?;                         // unit 7 is in flight
/// table.tick();                        // the watchdog's epoch
/// me.beat();                           // still alive
/// assert_eq!(table.live_count(1), 1);
/// assert_eq!(table.snapshot(me.slot())?.in_flight, 1 << 7);
/// # drop(me); drop(table); std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct HeartbeatTable {
    raw: NonNull<sys::vigil_hb>,
    path: PathBuf,
    capacity: u32,
    readonly: bool,
    // For beat(slot) without a call: the epoch word, slot 0's
    // last_seen_epoch and the distance between two slots' words, all
    // taken from vigil_hb_beater (so no layout is assumed here).
    epoch: NonNull<AtomicU64>,
    seen0: NonNull<AtomicU64>,
    stride: usize,
    // vigil_failover_wait: one wait at a time per handle, its turn taken
    // within the wait's own timeout.
    pub(crate) wait_turn: Turn,
}

// INVARIANT: `raw` is an open handle from `wrap` until `drop` (which has
// `&mut self`, so nothing borrows the table then): every call below that
// says "an open handle" rests on it. `epoch`, `seen0` and `stride` are
// the words vigil_hb_beater gave for it, inside its mapping.

// SAFETY: the C handle keeps no state of a thread's: its fields are fixed
// at open or atomics, and the mapping changes only by atomic operations;
// it may be closed on any thread.
unsafe impl Send for HeartbeatTable {}
// SAFETY: every call through `&HeartbeatTable` is an atomic protocol on
// the shared mapping or reads fields fixed at open (register's note of the
// handle's own registrations is an atomic store per slot); the one call
// that keeps per-handle state, vigil_failover_wait, runs only while
// holding `wait_turn` (failover.rs), so never twice at once.
unsafe impl Sync for HeartbeatTable {}

impl HeartbeatTable {
    /// Creates a table of `capacity` slots at `path` (mode 0600). Never
    /// clobbers: an existing `path` is `Err(Error::Os)` with
    /// `ErrorKind::AlreadyExists`, and no opener sees a half-made file.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-create-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 8)?;
    /// assert_eq!(table.capacity(), 8);
    /// # drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn create<P: AsRef<Path>>(path: P, capacity: u32) -> Result<HeartbeatTable> {
        Self::create_with_mode(path, capacity, 0o600)
    }

    /// As [`create`](Self::create), with the file's permission bits.
    ///
    /// ```
    /// use std::os::unix::fs::PermissionsExt;
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-mode-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let path = dir.join("shared");
    /// let _table = vigil::HeartbeatTable::create_with_mode(&path, 8, 0o640)?;
    /// assert_eq!(std::fs::metadata(&path)?.permissions().mode() & 0o777, 0o640);
    /// # drop(_table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn create_with_mode<P: AsRef<Path>>(path: P, capacity: u32, mode: u32) -> Result<HeartbeatTable> {
        let path = path.as_ref();
        let c = c_path(path)?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: c is a valid C string; raw is written only on success.
        check(unsafe { sys::vigil_hb_create_mode(c.as_ptr(), capacity, mode, &mut raw) })?;
        Ok(Self::wrap(raw, path, false))
    }

    /// Maps an existing table, whatever its capacity.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-open-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// # let path = dir.join("t");
    /// vigil::HeartbeatTable::create(&path, 4)?;
    /// let table = vigil::HeartbeatTable::open(&path)?;
    /// assert_eq!(table.capacity(), 4);
    /// # drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open<P: AsRef<Path>>(path: P) -> Result<HeartbeatTable> {
        Self::open_raw(path.as_ref(), 0, false)
    }

    /// Maps an existing table that must have `capacity` slots
    /// ([`Error::CapacityMismatch`](crate::Error::CapacityMismatch)
    /// otherwise).
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-openc-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// # let path = dir.join("t");
    /// vigil::HeartbeatTable::create(&path, 4)?;
    /// assert!(matches!(
    ///     vigil::HeartbeatTable::open_with_capacity(&path, 8),
    ///     Err(vigil::Error::CapacityMismatch)
    /// ));
    /// # std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open_with_capacity<P: AsRef<Path>>(path: P, capacity: u32) -> Result<HeartbeatTable> {
        Self::open_raw(path.as_ref(), capacity, false)
    }

    /// Maps a table for looking only (monitors, exporters): read permission
    /// suffices, peers' changes show as they land, and nothing done through
    /// this handle reaches the file.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-ro-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// # let path = dir.join("t");
    /// let table = vigil::HeartbeatTable::create(&path, 4)?;
    /// let me = table.register()?;
    /// let view = vigil::HeartbeatTable::open_readonly(&path)?;
    /// assert_eq!(view.snapshot(me.slot())?.pid, std::process::id());
    /// assert!(view.is_readonly());
    /// # drop(me); drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open_readonly<P: AsRef<Path>>(path: P) -> Result<HeartbeatTable> {
        Self::open_raw(path.as_ref(), 0, true)
    }

    /// Maps an existing table as `options` say (whose file to trust, or for
    /// looking only); `capacity` 0 takes the file's, another must match
    /// it. A file another user could have rewritten is
    /// [`Error::Untrusted`](crate::Error::Untrusted) unless
    /// [`OpenOptions::trust_owner`](crate::OpenOptions::trust_owner).
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-openwith-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// # let path = dir.join("t");
    /// vigil::HeartbeatTable::create(&path, 4)?;
    /// let view = vigil::HeartbeatTable::open_with(&path, 4, vigil::OpenOptions::new().readonly(true))?;
    /// assert!(view.is_readonly());
    /// # drop(view); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open_with<P: AsRef<Path>>(path: P, capacity: u32, options: crate::OpenOptions) -> Result<HeartbeatTable> {
        let path = path.as_ref();
        let c = c_path(path)?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: c is a valid C string; raw is written only on success.
        check(unsafe { sys::vigil_hb_open_flags(c.as_ptr(), capacity, options.flags(), &mut raw) })?;
        Ok(Self::wrap(raw, path, options.is_readonly()))
    }

    /// As [`create_with_mode`](Self::create_with_mode), the file given to
    /// the group `gid` (the caller must be in it) as it is made: with mode
    /// 0o660, the arrangement in which the group's members trust each
    /// other's table (vigil_hb_create_group(3)).
    ///
    /// ```
    /// use std::os::unix::fs::MetadataExt;
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-group-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let gid = std::fs::metadata(&dir)?.gid(); // a group the caller is in
    /// let table = vigil::HeartbeatTable::create_with_group(dir.join("t"), 8, 0o660, gid)?;
    /// assert_eq!(std::fs::metadata(dir.join("t"))?.gid(), gid);
    /// # drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn create_with_group<P: AsRef<Path>>(path: P, capacity: u32, mode: u32, gid: u32) -> Result<HeartbeatTable> {
        let path = path.as_ref();
        let c = c_path(path)?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: c is a valid C string; raw is written only on success.
        check(unsafe { sys::vigil_hb_create_group(c.as_ptr(), capacity, mode, gid, &mut raw) })?;
        Ok(Self::wrap(raw, path, false))
    }

    fn open_raw(path: &Path, capacity: u32, readonly: bool) -> Result<HeartbeatTable> {
        let c = c_path(path)?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: c is a valid C string; raw is written only on success.
        check(unsafe {
            if readonly {
                sys::vigil_hb_open_readonly(c.as_ptr(), capacity, &mut raw)
            } else {
                sys::vigil_hb_open(c.as_ptr(), capacity, &mut raw)
            }
        })?;
        Ok(Self::wrap(raw, path, readonly))
    }

    fn wrap(raw: *mut sys::vigil_hb, path: &Path, readonly: bool) -> HeartbeatTable {
        let raw = NonNull::new(raw).expect("vigil returned success and a NULL handle");
        // SAFETY: raw was just opened; vigil_hb_beater never fails, and its
        // words are the handle's, in its mapping (or the library's sink,
        // for a slot past the end, which lives for ever).
        let (capacity, b0, b1) = unsafe {
            let cap = sys::vigil_hb_capacity(raw.as_ptr());
            (cap, sys::vigil_hb_beater(raw.as_ptr(), 0), sys::vigil_hb_beater(raw.as_ptr(), 1))
        };
        let stride = if capacity >= 2 { b1.seen as usize - b0.seen as usize } else { 0 };
        HeartbeatTable {
            raw,
            path: path.to_path_buf(),
            capacity,
            readonly,
            epoch: NonNull::new(b0.epoch as *mut AtomicU64).expect("beater epoch"),
            seen0: NonNull::new(b0.seen as *mut AtomicU64).expect("beater word"),
            stride,
            wait_turn: Turn::new(),
        }
    }

    #[inline]
    pub(crate) fn raw(&self) -> *mut sys::vigil_hb {
        self.raw.as_ptr()
    }

    /// The path the table was created or opened at.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-path-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 1)?;
    /// assert!(table.path().ends_with("t"));
    /// # drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Number of slots (this process's copy, taken at open: a peer
    /// scribbling on the header cannot change it).
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-cap-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// assert_eq!(vigil::HeartbeatTable::create(dir.join("t"), 3)?.capacity(), 3);
    /// # std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    /// Whether this handle was opened with [`open_readonly`](Self::open_readonly).
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-isro-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// assert!(!vigil::HeartbeatTable::create(dir.join("t"), 1)?.is_readonly());
    /// # std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_readonly(&self) -> bool {
        self.readonly
    }

    /// Registers this process: claims the first vacant slot by CAS (never
    /// the same slot for two registrations, however many race), stamps the
    /// current epoch, role worker, no units. The [`Registration`]
    /// unregisters when dropped. [`Error::Full`](crate::Error::Full) when
    /// no slot is vacant.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-reg-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 2)?;
    /// {
    ///     let me = table.register()?;
    ///     assert_eq!(table.snapshot(me.slot())?.pid, std::process::id());
    /// } // unregistered here
    /// assert_eq!(table.stats()?.occupied, 0);
    /// # drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn register(&self) -> Result<Registration<'_>> {
        self.register_pid(std::process::id())
    }

    /// Registers `pid` (not 0: [`Error::OutOfRange`](crate::Error::OutOfRange)),
    /// as [`register`](Self::register) does for this process. A pid that is
    /// not this process's is never judged dead by probing, only by epochs.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-regpid-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 2)?;
    /// let r = table.register_pid(std::process::id())?;
    /// assert!(matches!(table.register_pid(0), Err(vigil::Error::OutOfRange)));
    /// # drop(r); drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn register_pid(&self, pid: u32) -> Result<Registration<'_>> {
        let mut slot = 0u32;
        // SAFETY: an open handle (the invariant); slot is written only on success.
        check(unsafe { sys::vigil_hb_register(self.raw(), pid, &mut slot) })?;
        Ok(Registration { table: self, slot, armed: true, creator: std::process::id() })
    }

    /// Vacates `slot`. A slot this handle's registration no longer holds
    /// (reclaimed by a watchdog, and perhaps registered again by another)
    /// is left to its new owner, and the call is
    /// [`Error::Lost`](crate::Error::Lost): the caller learns it was stale.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-unreg-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 2)?;
    /// let slot = table.register()?.into_slot(); // keep it past the guard
    /// table.unregister(slot)?;
    /// assert!(matches!(table.snapshot(slot), Err(vigil::Error::Vacant)));
    /// # drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn unregister(&self, slot: u32) -> Result<()> {
        // SAFETY: an open handle (the invariant); C checks the slot's range.
        check(unsafe { sys::vigil_hb_unregister(self.raw(), slot) }).map(drop)
    }

    /// Beats `slot`: one acquire load of the epoch, one release store to
    /// the slot, inline (no call into the library). An out-of-range slot
    /// is ignored. A [`Beater`] saves even the bound check. A beat is not
    /// checked against the registration: a stale one (by a holder whose
    /// slot was reclaimed) only makes the slot's present holder look live
    /// a little longer; ask [`owned`](Self::owned) to learn to stop.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-beat-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 2)?;
    /// let slot = table.register()?.into_slot();
    /// let epoch = table.tick();
    /// table.beat(slot);
    /// assert_eq!(table.snapshot(slot)?.last_seen_epoch, epoch);
    /// # drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn beat(&self, slot: u32) {
        if slot < self.capacity {
            // SAFETY: slot < capacity, and stride is the distance between
            // two slots' words as vigil_hb_beater gave them, so this is slot
            // `slot`'s last_seen_epoch, aligned, inside the mapping, which
            // lives as long as `self` (the invariant); AtomicU64 has the
            // layout of _Atomic uint64_t (sys::tests::atomics_have_the_c_layout).
            let seen = unsafe { &*((self.seen0.as_ptr() as *const u8).add(slot as usize * self.stride) as *const AtomicU64) };
            // SAFETY: the table's epoch word, in the mapping likewise.
            let epoch = unsafe { self.epoch.as_ref() };
            seen.store(epoch.load(Ordering::Acquire), Ordering::Release);
        }
    }

    /// A [`Beater`] for `slot`: the beat's two words looked up once. For an
    /// out-of-range slot, a beater whose beats go nowhere.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-beater-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 2)?;
    /// let me = table.register()?;
    /// let beater = table.beater(me.slot());
    /// table.tick();
    /// beater.beat();
    /// assert_eq!(table.snapshot(me.slot())?.last_seen_epoch, table.epoch());
    /// table.beater(99).beat(); // harmless
    /// # drop(me); drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn beater(&self, slot: u32) -> Beater<'_> {
        // SAFETY: an open handle (the invariant).
        let b = unsafe { sys::vigil_hb_beater(self.raw(), slot) };
        // SAFETY: vigil_hb_beater's words are never NULL and are the
        // table's (or the library's sink, for ever): the Beater borrows
        // `self`, so it cannot outlive them; AtomicU64 has the size,
        // alignment and representation of _Atomic uint64_t.
        unsafe { Beater { epoch: &*b.epoch, seen: &*b.seen, _table: PhantomData } }
    }

    /// Advances the global epoch by one and returns the new value (the
    /// watchdog's job; workers only read it).
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-tick-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 1)?;
    /// let before = table.epoch();
    /// assert_eq!(table.tick(), before + 1);
    /// # drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn tick(&self) -> u64 {
        // SAFETY: an open handle (the invariant).
        unsafe { sys::vigil_hb_tick(self.raw()) }
    }

    /// The global epoch.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-epoch-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 1)?;
    /// table.tick();
    /// assert!(table.epoch() >= 1);
    /// # drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn epoch(&self) -> u64 {
        // SAFETY: an open handle (the invariant).
        unsafe { sys::vigil_hb_epoch(self.raw()) }
    }

    /// Records work unit `bit` (0..64) as in flight on `slot`: one 16-byte
    /// compare-and-swap of the bitmap together with the registration's
    /// generation, a full barrier, so a watchdog that takes the bit sees
    /// what was recorded about the unit before.
    /// [`Error::Lost`](crate::Error::Lost) when this handle's registration
    /// of `slot` was reclaimed (the successor's bits are untouched);
    /// [`Error::Vacant`](crate::Error::Vacant) on a vacant slot,
    /// [`Error::OutOfRange`](crate::Error::OutOfRange) for a bit or slot
    /// out of range.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-mark-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 1)?;
    /// let slot = table.register()?.into_slot();
    /// table.mark(slot, 3)?;
    /// assert_eq!(table.snapshot(slot)?.in_flight, 0b1000);
    /// assert!(matches!(table.mark(slot, 64), Err(vigil::Error::OutOfRange)));
    /// # drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn mark(&self, slot: u32, bit: u32) -> Result<()> {
        // SAFETY: an open handle (the invariant); C checks slot and bit.
        check(unsafe { sys::vigil_hb_mark_in_flight(self.raw(), slot, bit) }).map(drop)
    }

    /// Records work unit `bit` as done (no longer in flight) on `slot`,
    /// fenced as [`mark`](Self::mark) is: [`Error::Lost`](crate::Error::Lost)
    /// when the registration was reclaimed (the unit was handed out again:
    /// do not report it done).
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-clear-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 1)?;
    /// let slot = table.register()?.into_slot();
    /// table.mark(slot, 3)?;
    /// table.clear(slot, 3)?;
    /// assert_eq!(table.snapshot(slot)?.in_flight, 0);
    /// # drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn clear(&self, slot: u32, bit: u32) -> Result<()> {
        // SAFETY: an open handle (the invariant); C checks slot and bit.
        check(unsafe { sys::vigil_hb_clear_in_flight(self.raw(), slot, bit) }).map(drop)
    }

    /// Sets `slot`'s role (leader election sets it for you).
    /// [`Error::Lost`](crate::Error::Lost) when this handle's registration
    /// of `slot` was reclaimed (the successor's role is untouched).
    ///
    /// ```
    /// use vigil::Role;
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-role-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 1)?;
    /// let slot = table.register()?.into_slot();
    /// table.set_role(slot, Role::Coordinator)?;
    /// assert_eq!(table.snapshot(slot)?.role, Role::Coordinator);
    /// # drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_role(&self, slot: u32, role: Role) -> Result<()> {
        // SAFETY: an open handle (the invariant); C checks the slot.
        check(unsafe { sys::vigil_hb_set_role(self.raw(), slot, role.to_raw()) }).map(drop)
    }

    /// A consistent read of `slot`'s fields (SeqLock retry, bounded).
    /// [`Error::Vacant`](crate::Error::Vacant) for a vacant slot,
    /// [`Error::Busy`](crate::Error::Busy) for one wedged mid-change (a
    /// writer killed inside it; the failover scan repairs it).
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-snap-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 2)?;
    /// let me = table.register()?;
    /// let info = table.snapshot(me.slot())?;
    /// assert_eq!((info.pid, info.role, info.in_flight), (std::process::id(), vigil::Role::Worker, 0));
    /// assert!(matches!(table.snapshot(1 - me.slot()), Err(vigil::Error::Vacant)));
    /// # drop(me); drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn snapshot(&self, slot: u32) -> Result<SlotInfo> {
        let mut out = sys::Spare::<sys::vigil_slot_info>::zeroed();
        // SAFETY: an open handle (the invariant); out has room for a longer struct.
        check(unsafe { sys::vigil_hb_snapshot(self.raw(), slot, &mut out.value) })?;
        Ok(SlotInfo::from_raw(&out.value))
    }

    /// Number of live slots: occupied, and beaten within `grace_epochs` of
    /// the epoch (a signed difference: a beat racing the read is live).
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-live-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 2)?;
    /// let _me = table.register()?;
    /// assert_eq!(table.live_count(0), 1);
    /// table.tick();
    /// assert_eq!(table.live_count(0), 0); // one epoch behind, no grace
    /// assert_eq!(table.live_count(1), 1);
    /// # drop(_me); drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn live_count(&self, grace_epochs: u64) -> u32 {
        // SAFETY: an open handle (the invariant).
        unsafe { sys::vigil_hb_live_count(self.raw(), grace_epochs) }
    }

    /// Whether the registration this handle made into `slot` still holds
    /// it: `false` when it was never registered through this handle, was
    /// unregistered, or was reclaimed by a watchdog (and perhaps registered
    /// again by another process). A registration is named by the slot's
    /// generation, which never recurs, so a recycled pid never passes for
    /// a dead owner. Two loads, no system call: cheap enough to ask before
    /// each unit of work. [`Error::OutOfRange`](crate::Error::OutOfRange)
    /// past the table's end.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-owned-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 4)?;
    /// let slot = table.register()?.into_slot();
    /// assert!(table.owned(slot)?);
    /// for _ in 0..3 { table.tick(); }
    /// table.failover_scan(1)?; // a watchdog takes the stale slot
    /// assert!(!table.owned(slot)?);
    /// assert!(matches!(table.mark(slot, 0), Err(vigil::Error::Lost) | Err(vigil::Error::Vacant)));
    /// # drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn owned(&self, slot: u32) -> Result<bool> {
        // SAFETY: an open handle (the invariant); C checks the slot.
        check(unsafe { sys::vigil_hb_owned(self.raw(), slot) }).map(|rc| rc == 1)
    }

    /// Counters of the table's structural events since it was created.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-stats-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 2)?;
    /// drop(table.register()?);
    /// let stats = table.stats()?;
    /// assert_eq!((stats.registers, stats.unregisters, stats.occupied), (1, 1, 0));
    /// # drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn stats(&self) -> Result<HeartbeatCounters> {
        let mut out = sys::Spare::<sys::vigil_hb_counters>::zeroed();
        // SAFETY: an open handle (the invariant); out has room for a longer struct.
        check(unsafe { sys::vigil_hb_stats(self.raw(), &mut out.value) })?;
        let c = out.value;
        Ok(HeartbeatCounters {
            registers: c.registers,
            unregisters: c.unregisters,
            reclaims: c.reclaims,
            repairs: c.repairs,
            leader_changes: c.leader_changes,
            occupied: c.occupied,
        })
    }
}

impl Drop for HeartbeatTable {
    fn drop(&mut self) {
        // SAFETY: an open handle (the invariant), closed once; `&mut self`:
        // no Registration, Beater or Barrier borrows the table any more.
        unsafe { sys::vigil_hb_close(self.raw.as_ptr()) }
    }
}

impl fmt::Debug for HeartbeatTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HeartbeatTable")
            .field("path", &self.path)
            .field("capacity", &self.capacity)
            .field("readonly", &self.readonly)
            .finish()
    }
}

/// A slot registered through a [`HeartbeatTable`], vacated when dropped.
///
/// A registration can be lost without its holder knowing: a process
/// stopped (SIGSTOP, a long pause) past the grace window is reclaimed by a
/// watchdog, and its slot may be registered again by another. Every change
/// it then tries (unregister, role, and marks as the library fences them)
/// is [`Error::Lost`](crate::Error::Lost) and leaves the successor's slot
/// alone; [`is_owned`](Self::is_owned) asks first, cheaply. Dropping the
/// guard unregisters and ignores that answer; [`into_slot`](Self::into_slot)
/// keeps the slot registered past the guard.
///
/// **Fork.** The guard belongs to the process that registered. In a child
/// forked while it is held, dropping it does nothing and
/// [`unregister`](Self::unregister) is [`Error::Lost`](crate::Error::Lost):
/// the slot stays the parent's. A child registers a slot of its own.
///
/// ```
/// # let dir = std::env::temp_dir().join(format!("vigil-doc-registration-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// let table = vigil::HeartbeatTable::create(dir.join("t"), 4)?;
/// let me = table.register()?;
/// me.mark(0)?;
/// me.beat();
/// me.clear(0)?;
/// me.unregister()?; // or just drop it
/// assert_eq!(table.stats()?.occupied, 0);
/// # drop(table); std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Registration<'t> {
    table: &'t HeartbeatTable,
    slot: u32,
    armed: bool,
    // The process that registered: in a forked child the guard is the
    // parent's, and leaving it there unregisters nothing.
    creator: u32,
}

impl<'t> Registration<'t> {
    /// The slot index.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-regslot-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 4)?;
    /// assert_eq!(table.register()?.slot(), 0); // the first vacant slot
    /// # drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn slot(&self) -> u32 {
        self.slot
    }

    /// The table the slot is in.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-regtable-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 4)?;
    /// let me = table.register()?;
    /// assert_eq!(me.table().capacity(), 4);
    /// # drop(me); drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn table(&self) -> &'t HeartbeatTable {
        self.table
    }

    /// Beats the slot ([`HeartbeatTable::beat`]).
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-regbeat-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 4)?;
    /// let me = table.register()?;
    /// table.tick();
    /// me.beat();
    /// assert_eq!(me.snapshot()?.last_seen_epoch, table.epoch());
    /// # drop(me); drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn beat(&self) {
        self.table.beat(self.slot)
    }

    /// A [`Beater`] for the slot.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-regbeater-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 4)?;
    /// let me = table.register()?;
    /// let beater = me.beater();
    /// std::thread::scope(|s| { s.spawn(move || beater.beat()); });
    /// # drop(me); drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn beater(&self) -> Beater<'t> {
        self.table.beater(self.slot)
    }

    /// Marks unit `bit` in flight ([`HeartbeatTable::mark`]).
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-regmark-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 4)?;
    /// let me = table.register()?;
    /// me.mark(5)?;
    /// assert_eq!(me.snapshot()?.in_flight, 1 << 5);
    /// # drop(me); drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn mark(&self, bit: u32) -> Result<()> {
        self.table.mark(self.slot, bit)
    }

    /// Clears unit `bit` ([`HeartbeatTable::clear`]).
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-regclear-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 4)?;
    /// let me = table.register()?;
    /// me.mark(5)?;
    /// me.clear(5)?;
    /// assert_eq!(me.snapshot()?.in_flight, 0);
    /// # drop(me); drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn clear(&self, bit: u32) -> Result<()> {
        self.table.clear(self.slot, bit)
    }

    /// Sets the slot's role ([`HeartbeatTable::set_role`]).
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-regrole-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 4)?;
    /// let me = table.register()?;
    /// me.set_role(vigil::Role::Coordinator)?;
    /// assert_eq!(me.snapshot()?.role, vigil::Role::Coordinator);
    /// # drop(me); drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn set_role(&self, role: Role) -> Result<()> {
        self.table.set_role(self.slot, role)
    }

    /// A consistent read of the slot ([`HeartbeatTable::snapshot`]).
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-regsnap-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 4)?;
    /// let me = table.register()?;
    /// assert_eq!(me.snapshot()?.pid, std::process::id());
    /// # drop(me); drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn snapshot(&self) -> Result<SlotInfo> {
        self.table.snapshot(self.slot)
    }

    /// Whether this registration still holds its slot ([`HeartbeatTable::owned`]).
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-isowned-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 4)?;
    /// let me = table.register()?;
    /// assert!(me.is_owned());
    /// # drop(me); drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_owned(&self) -> bool {
        self.table.owned(self.slot).unwrap_or(false)
    }

    /// Unregisters now, saying how it went (dropping the guard does the
    /// same and ignores the result): [`Error::Lost`](crate::Error::Lost)
    /// when the registration was reclaimed meanwhile (the slot is left to
    /// its new owner).
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-regunreg-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 4)?;
    /// table.register()?.unregister()?;
    /// assert_eq!(table.stats()?.occupied, 0);
    /// # drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn unregister(mut self) -> Result<()> {
        self.armed = false;
        if std::process::id() != self.creator {
            return Err(crate::Error::Lost); // a forked child: the parent's slot
        }
        self.table.unregister(self.slot)
    }

    /// Gives up the guard and returns the slot, still registered (to be
    /// unregistered with [`HeartbeatTable::unregister`], or reclaimed by a
    /// watchdog once this process stops beating).
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-regkeep-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 4)?;
    /// let slot = table.register()?.into_slot();
    /// assert_eq!(table.stats()?.occupied, 1);
    /// table.unregister(slot)?;
    /// # drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn into_slot(mut self) -> u32 {
        self.armed = false;
        self.slot
    }
}

impl Drop for Registration<'_> {
    #[inline]
    fn drop(&mut self) {
        // Never in a forked child: the registration is the parent's.
        if self.armed && std::process::id() == self.creator {
            let _ = self.table.unregister(self.slot);
        }
    }
}

impl fmt::Debug for Registration<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registration").field("slot", &self.slot).field("table", &self.table.path).finish()
    }
}

/// One slot's beat, precomputed: the table's epoch word and the slot's
/// `last_seen_epoch` word. [`beat`](Self::beat) is the bare acquire load
/// and release store, inline, as `vigil_beater_beat` is in C: no bound
/// check, no handle, no call.
///
/// A beater is `Copy`, `Send` and `Sync`, and valid while its table is
/// open (the borrow says so).
///
/// ```
/// # let dir = std::env::temp_dir().join(format!("vigil-doc-beaterty-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// let table = vigil::HeartbeatTable::create(dir.join("t"), 4)?;
/// let me = table.register()?;
/// let beater = me.beater();
/// for _ in 0..1000 {
///     beater.beat(); // about a nanosecond each
/// }
/// # drop(me); drop(table); std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy)]
pub struct Beater<'t> {
    epoch: &'t AtomicU64,
    seen: &'t AtomicU64,
    _table: PhantomData<&'t HeartbeatTable>,
}

impl Beater<'_> {
    /// One acquire load of the epoch, one release store to the slot. The
    /// acquire pairs with the tick's increment, so the stored epoch is
    /// never older than one this process has acted on; the release
    /// publishes the work done before the beat to a watchdog reading the
    /// slot. The slot's SeqLock version is untouched (a beat changes one
    /// word, which no reader sees torn).
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-beaterbeat-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 4)?;
    /// let me = table.register()?;
    /// let beater = me.beater();
    /// let now = table.tick();
    /// beater.beat();
    /// assert_eq!(me.snapshot()?.last_seen_epoch, now);
    /// # drop(me); drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline(always)]
    pub fn beat(&self) {
        self.seen.store(self.epoch.load(Ordering::Acquire), Ordering::Release);
    }
}

impl fmt::Debug for Beater<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Beater").field("seen", &(self.seen as *const AtomicU64)).finish()
    }
}

/// A slot's role.
///
/// ```
/// assert_eq!(vigil::Role::default(), vigil::Role::Worker);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Role {
    /// A worker (0), the role every registration starts with.
    #[default]
    Worker,
    /// The coordinator (1): the leader, as [`HeartbeatTable::leader_elect`]
    /// makes it.
    Coordinator,
    /// A value vigil does not define, as found in the file.
    Other(u32),
}

impl Role {
    fn from_raw(raw: u32) -> Role {
        match raw {
            sys::VIGIL_ROLE_WORKER => Role::Worker,
            sys::VIGIL_ROLE_COORDINATOR => Role::Coordinator,
            other => Role::Other(other),
        }
    }

    /// The value stored in the slot.
    ///
    /// ```
    /// assert_eq!(vigil::Role::Coordinator.to_raw(), 1);
    /// ```
    pub fn to_raw(self) -> u32 {
        match self {
            Role::Worker => sys::VIGIL_ROLE_WORKER,
            Role::Coordinator => sys::VIGIL_ROLE_COORDINATOR,
            Role::Other(raw) => raw,
        }
    }
}

/// A consistent read of one slot ([`HeartbeatTable::snapshot`]).
///
/// ```
/// # let dir = std::env::temp_dir().join(format!("vigil-doc-slotinfo-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// let table = vigil::HeartbeatTable::create(dir.join("t"), 4)?;
/// let me = table.register()?;
/// let vigil::SlotInfo { pid, role, last_seen_epoch, in_flight } = me.snapshot()?;
/// assert_eq!((pid, role, last_seen_epoch, in_flight), (std::process::id(), vigil::Role::Worker, 0, 0));
/// # drop(me); drop(table); std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SlotInfo {
    /// The owner's pid; 0 when vacant.
    pub pid: u32,
    /// The owner's role.
    pub role: Role,
    /// The epoch of the owner's last beat.
    pub last_seen_epoch: u64,
    /// Bitmap of the units of work in flight.
    pub in_flight: u64,
}

impl SlotInfo {
    pub(crate) fn from_raw(raw: &sys::vigil_slot_info) -> SlotInfo {
        SlotInfo {
            pid: raw.pid,
            role: Role::from_raw(raw.role),
            last_seen_epoch: raw.last_seen_epoch,
            in_flight: raw.in_flight,
        }
    }
}

/// Counters of a table's structural events ([`HeartbeatTable::stats`]).
///
/// ```
/// # let dir = std::env::temp_dir().join(format!("vigil-doc-counters-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// let table = vigil::HeartbeatTable::create(dir.join("t"), 4)?;
/// assert_eq!(table.stats()?, vigil::HeartbeatCounters::default());
/// # drop(table); std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct HeartbeatCounters {
    /// Vacant slots claimed by a registration.
    pub registers: u64,
    /// Owners gone by unregistering.
    pub unregisters: u64,
    /// Owners vacated by a failover scan or wait.
    pub reclaims: u64,
    /// Slots repaired after their writer died mid-change.
    pub repairs: u64,
    /// Changes of leader (the leader term).
    pub leader_changes: u64,
    /// Slots with an owner now.
    pub occupied: u32,
}
