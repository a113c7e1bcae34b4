//! Leases: the embedded lease store (one host, in a vigil file), the lease
//! value every backend hands out, and the port a keepalive renews through.

use std::fmt;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::time::Duration;

use crate::error::{check, Error, Result};
use crate::sys;
use crate::util::{c_path, c_string, from_c_chars, ms, timeout_ns, ttl_ms};

/// A lease on a key: who holds it, its fencing token, its TTL. Handed out
/// by [`Leases::acquire`] (and by `Etcd` with the `etcd` feature), given
/// back to renew and release it.
///
/// ```
/// use std::time::Duration;
/// # let dir = std::env::temp_dir().join(format!("vigil-doc-lease-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// let store = vigil::Leases::create(dir.join("leases"), 16)?;
/// let lease = store.acquire("jobs/nightly", "worker-7", Duration::from_secs(10))?;
/// assert_eq!((lease.key(), lease.owner()), ("jobs/nightly", "worker-7"));
/// assert_eq!(lease.ttl(), Duration::from_secs(10));
/// assert!(lease.token() > 0);
/// # store.release(&lease)?; drop(store); std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Lease {
    pub(crate) raw: sys::vigil_lease,
    key: String,
    owner: String,
}

impl Lease {
    pub(crate) fn from_raw(raw: sys::vigil_lease) -> Lease {
        Lease { key: from_c_chars(&raw.key), owner: from_c_chars(&raw.owner), raw }
    }

    /// The key.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-lkey-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// # let store = vigil::Leases::create(dir.join("l"), 4)?;
    /// let lease = store.acquire("k", "me", std::time::Duration::from_secs(5))?;
    /// assert_eq!(lease.key(), "k");
    /// # drop(store); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The owner string given at acquire.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-lowner-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// # let store = vigil::Leases::create(dir.join("l"), 4)?;
    /// let lease = store.acquire("k", "me", std::time::Duration::from_secs(5))?;
    /// assert_eq!(lease.owner(), "me");
    /// # drop(store); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// The fencing token: strictly greater each time the key changes hands.
    /// Pass it with every action the lease authorises, and have the
    /// resource refuse a token lower than one it has seen.
    ///
    /// ```
    /// use std::time::Duration;
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-ltoken-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// # let store = vigil::Leases::create(dir.join("l"), 4)?;
    /// let first = store.acquire("k", "a", Duration::from_secs(5))?;
    /// store.release(&first)?;
    /// let second = store.acquire("k", "b", Duration::from_secs(5))?;
    /// assert!(second.token() > first.token());
    /// # drop(store); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn token(&self) -> u64 {
        self.raw.token
    }

    /// The time to live (whole milliseconds).
    ///
    /// ```
    /// use std::time::Duration;
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-lttl-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// # let store = vigil::Leases::create(dir.join("l"), 4)?;
    /// let lease = store.acquire("k", "me", Duration::from_micros(2_500_100))?;
    /// assert_eq!(lease.ttl(), Duration::from_millis(2501)); // rounded up
    /// # drop(store); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn ttl(&self) -> Duration {
        ms(self.raw.ttl_ms)
    }

    /// The backend's handle: etcd's lease ID, the store's entry + 1.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-lid-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// # let store = vigil::Leases::create(dir.join("l"), 4)?;
    /// let lease = store.acquire("k", "me", std::time::Duration::from_secs(5))?;
    /// assert!(lease.id() >= 1);
    /// # drop(store); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn id(&self) -> i64 {
        self.raw.id
    }
}

impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("key", &self.key)
            .field("owner", &self.owner)
            .field("token", &self.raw.token)
            .field("ttl", &self.ttl())
            .field("id", &self.raw.id)
            .finish()
    }
}

/// The state of a lease entry.
///
/// ```
/// assert_ne!(vigil::LeaseState::Held, vigil::LeaseState::Expired);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LeaseState {
    /// No key: never used, or cleared after a crashed change.
    Vacant,
    /// Unexpired: acquiring the key is [`Error::Busy`].
    Held,
    /// The holder stopped renewing; anyone may acquire it.
    Expired,
    /// Released by its holder; anyone may acquire it.
    Released,
    /// A process is in the middle of changing it.
    Changing,
    /// A value vigil does not define, as found in the file.
    Other(u32),
}

impl LeaseState {
    fn from_raw(raw: u32) -> LeaseState {
        match raw {
            sys::VIGIL_LEASE_VACANT => LeaseState::Vacant,
            sys::VIGIL_LEASE_HELD => LeaseState::Held,
            sys::VIGIL_LEASE_EXPIRED => LeaseState::Expired,
            sys::VIGIL_LEASE_RELEASED => LeaseState::Released,
            sys::VIGIL_LEASE_CHANGING => LeaseState::Changing,
            other => LeaseState::Other(other),
        }
    }
}

/// A read-only view of one lease entry ([`Leases::get`], [`Leases::entry`]).
///
/// ```
/// use std::time::Duration;
/// # let dir = std::env::temp_dir().join(format!("vigil-doc-linfo-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// # let store = vigil::Leases::create(dir.join("l"), 4)?;
/// let lease = store.acquire("k", "me", Duration::from_secs(30))?;
/// let info = store.get("k")?.expect("held");
/// assert_eq!((info.state, info.token, info.pid), (vigil::LeaseState::Held, lease.token(), std::process::id()));
/// assert!(info.expires_in.unwrap() > Duration::ZERO);
/// # drop(store); std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LeaseInfo {
    /// The key.
    pub key: String,
    /// The holder's owner string.
    pub owner: String,
    /// The fencing token of the last hand-over.
    pub token: u64,
    /// The time to live.
    pub ttl: Duration,
    /// Time left, while held.
    pub expires_in: Option<Duration>,
    /// How long ago it expired, once expired.
    pub expired_for: Option<Duration>,
    /// The entry's state.
    pub state: LeaseState,
    /// The acquiring process (or the changing one), where known; else 0.
    pub pid: u32,
}

impl LeaseInfo {
    pub(crate) fn from_raw(raw: &sys::vigil_lease_info) -> LeaseInfo {
        let left = raw.expires_in_ms;
        LeaseInfo {
            key: from_c_chars(&raw.key),
            owner: from_c_chars(&raw.owner),
            token: raw.token,
            ttl: ms(raw.ttl_ms),
            expires_in: if left > 0 { Some(ms(left as u64)) } else { None },
            expired_for: if left < 0 { Some(ms(left.unsigned_abs())) } else { None },
            state: LeaseState::from_raw(raw.state),
            pid: raw.pid,
        }
    }
}

/// Counters of a store's events ([`Leases::stats`]).
///
/// ```
/// # let dir = std::env::temp_dir().join(format!("vigil-doc-lcount-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// # let store = vigil::Leases::create(dir.join("l"), 4)?;
/// store.acquire("k", "me", std::time::Duration::from_secs(5))?;
/// assert_eq!(store.stats()?.handovers, 1);
/// # drop(store); std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct LeasesCounters {
    /// Acquisitions: fencing tokens handed out.
    pub handovers: u64,
    /// Renewals answered [`Error::Lost`].
    pub renewals_refused: u64,
    /// Acquisitions that took over an expired lease.
    pub expiries: u64,
}

/// Something a [`Keepalive`](crate::Keepalive) renews a lease through:
/// [`Leases`], `Etcd` (feature `etcd`), or your own backend.
///
/// `renew` answers `Ok(())` when renewed, [`Error::Lost`] when refused for
/// good (the keepalive stops), and any other error for a transient failure
/// (retried on the next beat). It runs on the keepalive's own thread.
///
/// ```
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use std::time::Duration;
/// use vigil::{Lease, LeasePort, Result};
///
/// /// A backend that counts renewals and refuses the third.
/// struct Counting(AtomicU32);
/// impl LeasePort for Counting {
///     fn renew(&self, _lease: &Lease) -> Result<()> {
///         if self.0.fetch_add(1, Ordering::SeqCst) == 2 { Err(vigil::Error::Lost) } else { Ok(()) }
///     }
/// }
/// # let dir = std::env::temp_dir().join(format!("vigil-doc-port-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// # let store = vigil::Leases::create(dir.join("l"), 4)?;
/// let lease = store.acquire("k", "me", Duration::from_millis(30))?;
/// let port = std::sync::Arc::new(Counting(AtomicU32::new(0)));
/// let ka = vigil::Keepalive::start(port.clone(), &lease)?;
/// for _ in 0..2000 {
///     if ka.is_lost() { break; }
///     std::thread::sleep(Duration::from_millis(5));
/// }
/// assert!(matches!(ka.stop(), Err(vigil::Error::Lost)));
/// # drop(store); std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait LeasePort {
    /// Renews `lease`: `Ok(())`, [`Error::Lost`] refused, else transient.
    ///
    /// ```
    /// use vigil::LeasePort;
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-portrenew-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let store = vigil::Leases::create(dir.join("l"), 4)?;
    /// let lease = store.acquire("k", "me", std::time::Duration::from_secs(5))?;
    /// let port: &dyn LeasePort = &store; // the store is a port
    /// port.renew(&lease)?;
    /// # drop(store); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn renew(&self, lease: &Lease) -> Result<()>;

    /// The C port of a backend the library implements itself (the store,
    /// etcd), renewed without a call back into Rust. Sealed: only this
    /// crate can name the token and the port, so it can neither be called
    /// nor overridden elsewhere, and the port borrows `self`.
    #[doc(hidden)]
    fn native_port(&self, _: sealed::Token) -> Option<sealed::NativePort<'_>> {
        None
    }
}

/// What only this crate can name: a port's native form is no one else's to
/// make or take.
pub(crate) mod sealed {
    use std::fmt;
    use std::marker::PhantomData;

    use crate::sys;

    /// The key to [`LeasePort::native_port`](super::LeasePort::native_port):
    /// made only inside the crate.
    #[derive(Debug)]
    pub struct Token(pub(crate) ());

    /// A C port (`vigil_lease_port`) of a backend the library implements,
    /// valid for as long as the backend it was taken from is borrowed.
    pub struct NativePort<'p> {
        pub(crate) raw: sys::vigil_lease_port,
        pub(crate) _of: PhantomData<&'p ()>,
    }

    impl fmt::Debug for NativePort<'_> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("NativePort")
        }
    }
}

/// The embedded lease store: leases on keys in a vigil file, for processes
/// on one host. Acquire is exclusive while the holder keeps renewing;
/// every hand-over raises the key's fencing token; a waiter sleeps on a
/// futex in the file until a release or the holder's expiry.
///
/// `Send + Sync`: every operation is a protocol on the shared file.
///
/// ```
/// use std::time::Duration;
/// # let dir = std::env::temp_dir().join(format!("vigil-doc-leases-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// let store = vigil::Leases::create(dir.join("leases"), 64)?;
/// let lease = store.acquire("db/migrate", "host-a", Duration::from_secs(10))?;
/// assert!(matches!(store.acquire("db/migrate", "host-b", Duration::from_secs(10)), Err(vigil::Error::Busy)));
/// store.renew(&lease)?;
/// store.release(&lease)?;
/// assert!(store.get("db/migrate")?.is_none());
/// # drop(store); std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Leases {
    raw: NonNull<sys::vigil_leases>,
    path: PathBuf,
}

// INVARIANT: `raw` is an open store from `wrap` until `drop` (which has
// `&mut self`: no borrow, no NativePort, is left); every call below that
// says "an open handle" rests on it.

// SAFETY: the C store keeps no state of a thread's (its fields are fixed
// at open), and may be closed on any thread.
unsafe impl Send for Leases {}
// SAFETY: every call through `&Leases` is a protocol on the shared mapping
// (entry locks held by a process are judged by the process, not the
// thread) or reads fields fixed at open: any number of threads may make
// them at once, a keepalive's renewer among them.
unsafe impl Sync for Leases {}

impl Leases {
    /// Creates a store of `capacity` entries at `path` (mode 0600, never
    /// clobbering).
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-lcreate-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let store = vigil::Leases::create(dir.join("l"), 16)?;
    /// assert_eq!(store.capacity(), 16);
    /// # drop(store); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn create<P: AsRef<Path>>(path: P, capacity: u32) -> Result<Leases> {
        Self::create_with_mode(path, capacity, 0o600)
    }

    /// As [`create`](Self::create), with the file's permission bits.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-lmode-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let store = vigil::Leases::create_with_mode(dir.join("l"), 16, 0o640)?;
    /// # drop(store); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn create_with_mode<P: AsRef<Path>>(path: P, capacity: u32, mode: u32) -> Result<Leases> {
        let path = path.as_ref();
        let c = c_path(path)?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: c is a C string; raw is written only on success.
        check(unsafe { sys::vigil_leases_create_mode(c.as_ptr(), capacity, mode, &mut raw) })?;
        Ok(Self::wrap(raw, path))
    }

    /// Opens an existing store.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-lopen-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// vigil::Leases::create(dir.join("l"), 16)?;
    /// let store = vigil::Leases::open(dir.join("l"))?;
    /// # drop(store); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open<P: AsRef<Path>>(path: P) -> Result<Leases> {
        Self::open_raw(path.as_ref(), false)
    }

    /// Opens a store for looking only: read permission suffices and
    /// nothing done through the handle reaches the file.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-lro-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let store = vigil::Leases::create(dir.join("l"), 16)?;
    /// store.acquire("k", "me", std::time::Duration::from_secs(5))?;
    /// let view = vigil::Leases::open_readonly(dir.join("l"))?;
    /// assert_eq!(view.get("k")?.unwrap().owner, "me");
    /// # drop(store); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open_readonly<P: AsRef<Path>>(path: P) -> Result<Leases> {
        Self::open_raw(path.as_ref(), true)
    }

    /// Opens an existing store as `options` say (whose file to trust, or for
    /// looking only): see [`OpenOptions`](crate::OpenOptions).
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-lopenwith-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// vigil::Leases::create(dir.join("l"), 16)?;
    /// let store = vigil::Leases::open_with(dir.join("l"), vigil::OpenOptions::new().trust_owner(true))?;
    /// # drop(store); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open_with<P: AsRef<Path>>(path: P, options: crate::OpenOptions) -> Result<Leases> {
        let path = path.as_ref();
        let c = c_path(path)?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: c is a C string; raw is written only on success.
        check(unsafe { sys::vigil_leases_open_flags(c.as_ptr(), options.flags(), &mut raw) })?;
        Ok(Self::wrap(raw, path))
    }

    /// As [`create_with_mode`](Self::create_with_mode), the file given to
    /// the group `gid` (the caller must be in it) as it is made
    /// (vigil_leases_create_group(3)).
    ///
    /// ```
    /// use std::os::unix::fs::MetadataExt;
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-lgroup-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let gid = std::fs::metadata(&dir)?.gid();
    /// let store = vigil::Leases::create_with_group(dir.join("l"), 16, 0o660, gid)?;
    /// assert_eq!(std::fs::metadata(dir.join("l"))?.gid(), gid);
    /// # drop(store); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn create_with_group<P: AsRef<Path>>(path: P, capacity: u32, mode: u32, gid: u32) -> Result<Leases> {
        let path = path.as_ref();
        let c = c_path(path)?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: c is a C string; raw is written only on success.
        check(unsafe { sys::vigil_leases_create_group(c.as_ptr(), capacity, mode, gid, &mut raw) })?;
        Ok(Self::wrap(raw, path))
    }

    fn open_raw(path: &Path, readonly: bool) -> Result<Leases> {
        let c = c_path(path)?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: c is a C string; raw is written only on success.
        check(unsafe {
            if readonly {
                sys::vigil_leases_open_readonly(c.as_ptr(), &mut raw)
            } else {
                sys::vigil_leases_open(c.as_ptr(), &mut raw)
            }
        })?;
        Ok(Self::wrap(raw, path))
    }

    fn wrap(raw: *mut sys::vigil_leases, path: &Path) -> Leases {
        Leases {
            raw: NonNull::new(raw).expect("vigil returned success and a NULL store"),
            path: path.to_path_buf(),
        }
    }

    fn ptr(&self) -> *mut sys::vigil_leases {
        self.raw.as_ptr()
    }

    /// The path the store was created or opened at.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-lpath-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let store = vigil::Leases::create(dir.join("l"), 4)?;
    /// assert!(store.path().ends_with("l"));
    /// # drop(store); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Number of entries.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-lcap-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// assert_eq!(vigil::Leases::create(dir.join("l"), 4)?.capacity(), 4);
    /// # std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn capacity(&self) -> u32 {
        // SAFETY: an open handle (the invariant).
        unsafe { sys::vigil_leases_capacity(self.ptr()) }
    }

    /// Acquires `key` for `owner` for `ttl` (rounded up to whole ms; under
    /// 3 ms is [`Error::OutOfRange`]). [`Error::Busy`] while anyone holds
    /// it unexpired (the same owner string included), [`Error::Full`] for
    /// a full store, [`Error::OutOfRange`] for a key over 127 bytes or an
    /// owner over 63.
    ///
    /// ```
    /// use std::time::Duration;
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-lacq-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// # let store = vigil::Leases::create(dir.join("l"), 4)?;
    /// let lease = store.acquire("k", "me", Duration::from_secs(5))?;
    /// assert!(matches!(store.acquire("k", "me", Duration::from_secs(5)), Err(vigil::Error::Busy)));
    /// # drop(store); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acquire(&self, key: &str, owner: &str, ttl: Duration) -> Result<Lease> {
        let (k, o) = (c_string(key)?, c_string(owner)?);
        let mut out = blank_lease();
        // SAFETY: an open handle (the invariant), C strings; out is written only on success.
        check(unsafe { sys::vigil_leases_acquire(self.ptr(), k.as_ptr(), o.as_ptr(), ttl_ms(ttl), &mut out) })?;
        Ok(Lease::from_raw(out))
    }

    /// Acquires `key`, waiting (asleep on a futex in the file, woken by a
    /// release or at the holder's expiry; never polling) up to `timeout`
    /// (`None`: for ever). [`Error::Timeout`] when it passed first.
    ///
    /// ```
    /// use std::time::Duration;
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-lacqw-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// # let store = vigil::Leases::create(dir.join("l"), 4)?;
    /// let held = store.acquire("k", "a", Duration::from_millis(50))?;
    /// // a's lease is never renewed: b gets the key once it lapses.
    /// let next = store.acquire_wait("k", "b", Duration::from_secs(5), Some(Duration::from_secs(10)))?;
    /// assert!(next.token() > held.token());
    /// # drop(store); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acquire_wait(&self, key: &str, owner: &str, ttl: Duration, timeout: Option<Duration>) -> Result<Lease> {
        let (k, o) = (c_string(key)?, c_string(owner)?);
        let mut out = blank_lease();
        // SAFETY: an open handle (the invariant), C strings; out is written only on success.
        check(unsafe {
            sys::vigil_leases_acquire_wait(self.ptr(), k.as_ptr(), o.as_ptr(), ttl_ms(ttl), timeout_ns(timeout), &mut out)
        })?;
        Ok(Lease::from_raw(out))
    }

    /// Renews `lease` for another TTL. [`Error::Lost`] once it expired or
    /// changed hands. A [`Keepalive`](crate::Keepalive) does this for you.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-lrenew-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// # let store = vigil::Leases::create(dir.join("l"), 4)?;
    /// let lease = store.acquire("k", "me", std::time::Duration::from_secs(5))?;
    /// store.renew(&lease)?;
    /// store.release(&lease)?;
    /// assert!(matches!(store.renew(&lease), Err(vigil::Error::Lost)));
    /// # drop(store); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn renew(&self, lease: &Lease) -> Result<()> {
        // SAFETY: an open handle and a lease value.
        check(unsafe { sys::vigil_leases_renew(self.ptr(), &lease.raw) }).map(drop)
    }

    /// Releases `lease`, waking any waiter. [`Error::Lost`] if it was no
    /// longer held.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-lrel-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// # let store = vigil::Leases::create(dir.join("l"), 4)?;
    /// let lease = store.acquire("k", "me", std::time::Duration::from_secs(5))?;
    /// store.release(&lease)?;
    /// assert!(matches!(store.release(&lease), Err(vigil::Error::Lost)));
    /// # drop(store); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn release(&self, lease: &Lease) -> Result<()> {
        // SAFETY: an open handle and a lease value.
        check(unsafe { sys::vigil_leases_release(self.ptr(), &lease.raw) }).map(drop)
    }

    /// The holder of `key`, or `None` when nobody holds it.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-lget-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// # let store = vigil::Leases::create(dir.join("l"), 4)?;
    /// assert!(store.get("k")?.is_none());
    /// let _lease = store.acquire("k", "me", std::time::Duration::from_secs(5))?;
    /// assert_eq!(store.get("k")?.unwrap().owner, "me");
    /// # drop(store); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn get(&self, key: &str) -> Result<Option<LeaseInfo>> {
        let k = c_string(key)?;
        let mut out = sys::Spare::<sys::vigil_lease_info>::zeroed();
        // SAFETY: an open handle (the invariant), a C string; out has room for a longer struct.
        match check(unsafe { sys::vigil_leases_get(self.ptr(), k.as_ptr(), &mut out.value) }) {
            Ok(_) => Ok(Some(LeaseInfo::from_raw(&out.value))),
            Err(Error::Vacant) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Entry `index` (0..capacity) whatever its state, for monitoring.
    /// [`Error::OutOfRange`] past the end.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-lentry-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// # let store = vigil::Leases::create(dir.join("l"), 4)?;
    /// let _lease = store.acquire("k", "me", std::time::Duration::from_secs(5))?;
    /// let held: Vec<_> = (0..store.capacity())
    ///     .map(|i| store.entry(i))
    ///     .collect::<vigil::Result<Vec<_>>>()?
    ///     .into_iter()
    ///     .filter(|e| e.state == vigil::LeaseState::Held)
    ///     .collect();
    /// assert_eq!(held.len(), 1);
    /// # drop(store); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn entry(&self, index: u32) -> Result<LeaseInfo> {
        let mut out = sys::Spare::<sys::vigil_lease_info>::zeroed();
        // SAFETY: an open handle (the invariant); out has room for a longer struct.
        match check(unsafe { sys::vigil_leases_entry(self.ptr(), index, &mut out.value) }) {
            // Vacant and stuck-in-a-change entries are filled in too.
            Ok(_) | Err(Error::Vacant) | Err(Error::Busy) => Ok(LeaseInfo::from_raw(&out.value)),
            Err(e) => Err(e),
        }
    }

    /// Counters of the store's events since it was created.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-lstats-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// # let store = vigil::Leases::create(dir.join("l"), 4)?;
    /// assert_eq!(store.stats()?, vigil::LeasesCounters::default());
    /// # drop(store); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn stats(&self) -> Result<LeasesCounters> {
        let mut out = sys::Spare::<sys::vigil_leases_counters>::zeroed();
        // SAFETY: an open handle (the invariant); out has room for a longer struct.
        check(unsafe { sys::vigil_leases_stats(self.ptr(), &mut out.value) })?;
        let c = out.value;
        Ok(LeasesCounters { handovers: c.handovers, renewals_refused: c.renewals_refused, expiries: c.expiries })
    }
}

impl LeasePort for Leases {
    fn renew(&self, lease: &Lease) -> Result<()> {
        Leases::renew(self, lease)
    }

    fn native_port(&self, _: sealed::Token) -> Option<sealed::NativePort<'_>> {
        // SAFETY: an open handle (the invariant). The port points into it, and the
        // NativePort borrows `self`, so it cannot outlive the handle.
        let raw = unsafe { sys::vigil_leases_port(self.ptr()) };
        Some(sealed::NativePort { raw, _of: std::marker::PhantomData })
    }
}

impl Drop for Leases {
    fn drop(&mut self) {
        // SAFETY: an open handle (the invariant), closed once; `&mut self`:
        // nothing borrows the store (a keepalive holds an Arc of it, so a
        // running one keeps it from being dropped at all).
        unsafe { sys::vigil_leases_close(self.ptr()) }
    }
}

impl fmt::Debug for Leases {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Leases").field("path", &self.path).field("capacity", &self.capacity()).finish()
    }
}

pub(crate) fn blank_lease() -> sys::vigil_lease {
    sys::vigil_lease { key: [0; 128], owner: [0; 64], token: 0, ttl_ms: 0, id: 0 }
}
