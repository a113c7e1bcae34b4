//! The lease keepalive: a renewer thread that renews a lease at a third of
//! its TTL while the work it authorises runs.

use std::fmt;
use std::marker::PhantomData;
use std::os::raw::{c_int, c_void};
use std::os::unix::io::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::NonNull;
use std::time::Duration;

use crate::error::{check, Error, Result};
use crate::lease::{Lease, LeasePort};
use crate::sys;

/// Renews a lease through a [`LeasePort`] every 0.32 TTL (so two lost
/// renewals in a row are survived) until stopped, on a thread of its own.
///
/// * A refused renewal ([`Error::Lost`]) stops it for good; a transient
///   failure is retried on the next beat.
/// * The lease is also lost, without asking anyone, once its TTL has
///   passed since the last accepted renewal (or the acquisition), even
///   while a renewal hangs inside the port.
/// * Loss is observable: [`is_lost`](Self::is_lost), and the file
///   descriptor of [`AsRawFd`]/[`AsFd`], readable (`POLLIN`) once lost,
///   for `poll`/`epoll` loops and async runtimes.
/// * [`stop`](Self::stop) (or drop) wakes the renewer at once, joins it,
///   and returns only when no renewal is in flight and none can start, so
///   a release that follows can never be undone by a late renewal.
///
/// `Send + Sync`; it borrows the port it renews through.
///
/// ```
/// use std::time::Duration;
/// # let dir = std::env::temp_dir().join(format!("vigil-doc-ka-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// let store = vigil::Leases::create(dir.join("leases"), 16)?;
/// let lease = store.acquire("report", "me", Duration::from_secs(3))?;
/// let ka = vigil::Keepalive::start(&store, &lease)?;
/// for part in 0..3 {
///     if ka.is_lost() {
///         break; // someone else may hold it now: stop acting
///     }
///     // ... part of the report, fenced with lease.token() ...
/// #   let _ = part;
/// }
/// ka.stop()?;
/// store.release(&lease)?; // no renewal can land after this
/// # drop(store); std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Keepalive<'p> {
    raw: Option<NonNull<sys::vigil_keepalive>>,
    _port: PhantomData<&'p ()>,
}

// SAFETY: the C keepalive may be stopped from any thread, and lost(),
// fd() and stats() read atomics or fixed fields; the port it calls is
// Sync (start's bound).
unsafe impl Send for Keepalive<'_> {}
unsafe impl Sync for Keepalive<'_> {}

unsafe extern "C" fn renew_through<P: LeasePort + Sync>(ctx: *mut c_void, lease: *const sys::vigil_lease) -> c_int {
    // SAFETY: ctx is the &P given to start, borrowed for the keepalive's
    // life; lease is the keepalive's own copy.
    let (port, lease) = unsafe { (&*(ctx as *const P), Lease::from_raw(*lease)) };
    // A panic must not unwind into C: it counts as a transient failure
    // (local expiry still ends the lease if the port keeps failing).
    match catch_unwind(AssertUnwindSafe(|| port.renew(&lease))) {
        Ok(Ok(())) => 0,
        Ok(Err(e)) => e.code().min(-1),
        Err(_) => -5, // -EIO
    }
}

impl<'p> Keepalive<'p> {
    /// Starts renewing `lease` through `port`. The lease's TTL must be at
    /// least 3 ms ([`Error::OutOfRange`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-kastart-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// # let store = vigil::Leases::create(dir.join("l"), 4)?;
    /// let lease = store.acquire("k", "me", Duration::from_secs(3))?;
    /// let ka = vigil::Keepalive::start(&store, &lease)?;
    /// # drop(ka); drop(store); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn start<P: LeasePort + Sync>(port: &'p P, lease: &Lease) -> Result<Keepalive<'p>> {
        let raw_port = match port.native_port() {
            Some(native) => native.0,
            None => sys::vigil_lease_port {
                ctx: port as *const P as *mut c_void,
                renew: Some(renew_through::<P>),
            },
        };
        let mut raw = std::ptr::null_mut();
        // SAFETY: the port (and its ctx) outlives the keepalive ('p); the
        // lease is copied by C; raw is written only on success.
        check(unsafe { sys::vigil_keepalive_start(&raw_port, &lease.raw, &mut raw) })?;
        Ok(Keepalive { raw: NonNull::new(raw), _port: PhantomData })
    }

    fn ptr(&self) -> *mut sys::vigil_keepalive {
        self.raw.map_or(std::ptr::null_mut(), NonNull::as_ptr)
    }

    /// Whether the lease is lost (refused, or its TTL passed unrenewed).
    /// Once true, never false again.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-kalost-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// # let store = vigil::Leases::create(dir.join("l"), 4)?;
    /// let lease = store.acquire("k", "me", std::time::Duration::from_secs(3))?;
    /// let ka = vigil::Keepalive::start(&store, &lease)?;
    /// assert!(!ka.is_lost());
    /// # drop(ka); drop(store); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_lost(&self) -> bool {
        // SAFETY: a running keepalive.
        unsafe { sys::vigil_keepalive_lost(self.ptr()) }
    }

    /// Stops and joins the renewer: `Ok(())`, or [`Error::Lost`] if the
    /// lease was lost meanwhile. When it returns, no renewal is in flight
    /// and none can start.
    ///
    /// ```
    /// use std::time::Duration;
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-kastop-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// # let store = vigil::Leases::create(dir.join("l"), 4)?;
    /// let lease = store.acquire("k", "me", Duration::from_secs(3))?;
    /// let ka = vigil::Keepalive::start(&store, &lease)?;
    /// ka.stop()?;
    /// store.release(&lease)?;
    /// # drop(store); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn stop(mut self) -> Result<()> {
        self.stop_now()
    }

    fn stop_now(&mut self) -> Result<()> {
        match self.raw.take() {
            // SAFETY: a running keepalive, stopped once (raw is taken).
            Some(raw) => check(unsafe { sys::vigil_keepalive_stop(raw.as_ptr()) }).map(drop),
            None => Ok(()),
        }
    }

    /// What the keepalive has done so far.
    ///
    /// ```
    /// use std::time::Duration;
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-kastats-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// # let store = vigil::Leases::create(dir.join("l"), 4)?;
    /// let lease = store.acquire("k", "me", Duration::from_secs(3))?;
    /// let ka = vigil::Keepalive::start(&store, &lease)?;
    /// assert_eq!(ka.stats()?.period, Duration::from_millis(960)); // 0.32 TTL
    /// # drop(ka); drop(store); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn stats(&self) -> Result<KeepaliveStats> {
        let mut out = sys::Spare::<sys::vigil_keepalive_info>::zeroed();
        // SAFETY: a running keepalive; out has room for a longer struct.
        check(unsafe { sys::vigil_keepalive_stats(self.ptr(), &mut out.value) })?;
        let v = out.value;
        Ok(KeepaliveStats {
            period: Duration::from_nanos(v.period_ns),
            renewals: v.renewals,
            failures: v.failures,
            consecutive_failures: v.consecutive_failures,
            lost: v.lost != 0,
            cpu: Duration::from_nanos(v.cpu_ns),
        })
    }
}

impl Drop for Keepalive<'_> {
    fn drop(&mut self) {
        let _ = self.stop_now();
    }
}

impl AsRawFd for Keepalive<'_> {
    /// A descriptor readable (`POLLIN`) once the lease is lost; owned by
    /// the keepalive, valid until it stops. For `poll`/`epoll` loops and
    /// async runtimes (e.g. tokio's `AsyncFd`).
    ///
    /// ```
    /// use std::os::unix::io::AsRawFd;
    /// use std::time::Duration;
    ///
    /// #[repr(C)]
    /// struct PollFd { fd: i32, events: i16, revents: i16 }
    /// extern "C" { fn poll(fds: *mut PollFd, n: u64, timeout_ms: i32) -> i32; }
    ///
    /// /// A backend that refuses every renewal: the lease is lost at once.
    /// struct Refusing;
    /// impl vigil::LeasePort for Refusing {
    ///     fn renew(&self, _: &vigil::Lease) -> vigil::Result<()> { Err(vigil::Error::Lost) }
    /// }
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-kafd-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// # let store = vigil::Leases::create(dir.join("l"), 4)?;
    /// let lease = store.acquire("k", "me", Duration::from_millis(30))?;
    /// let ka = vigil::Keepalive::start(&Refusing, &lease)?;
    /// let mut p = PollFd { fd: ka.as_raw_fd(), events: 1 /* POLLIN */, revents: 0 };
    /// assert_eq!(unsafe { poll(&mut p, 1, 5_000) }, 1); // readable: lost
    /// assert!(ka.is_lost());
    /// # drop(ka); drop(store); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn as_raw_fd(&self) -> RawFd {
        // SAFETY: a running keepalive.
        unsafe { sys::vigil_keepalive_fd(self.ptr()) }
    }
}

impl AsFd for Keepalive<'_> {
    /// As [`as_raw_fd`](AsRawFd::as_raw_fd), borrowed for as long as the
    /// keepalive is.
    fn as_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: the descriptor is open until the keepalive stops, which
        // needs it by value or dropped: after this borrow ends.
        unsafe { BorrowedFd::borrow_raw(self.as_raw_fd()) }
    }
}

impl fmt::Debug for Keepalive<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Keepalive").field("lost", &self.is_lost()).finish()
    }
}

/// What a [`Keepalive`] has done so far ([`Keepalive::stats`]).
///
/// ```
/// let s = vigil::KeepaliveStats::default();
/// assert!(!s.lost);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct KeepaliveStats {
    /// The renewal period: 0.32 of the TTL.
    pub period: Duration,
    /// Renewals the port accepted.
    pub renewals: u64,
    /// Transient failures, each retried on the next beat.
    pub failures: u64,
    /// Failures since the last accepted renewal (two are survivable).
    pub consecutive_failures: u32,
    /// Whether the lease is lost.
    pub lost: bool,
    /// CPU time of the renewer thread, zero if unknown.
    pub cpu: Duration,
}

/// Runs `body` while a [`Keepalive`] renews `lease` through `port`, and
/// stops and joins it on every way out (panics included). The body's own
/// error is returned as it is; a body that succeeded while the lease was
/// lost gives [`Error::Lost`] (converted into `E`), since what it did may
/// no longer have been authorised. The body can watch the keepalive it is
/// given (e.g. stop early when [`Keepalive::is_lost`]).
///
/// ```
/// use std::time::Duration;
/// # let dir = std::env::temp_dir().join(format!("vigil-doc-withka-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// let store = vigil::Leases::create(dir.join("leases"), 16)?;
/// let lease = store.acquire("nightly", "me", Duration::from_secs(3))?;
/// let rows = vigil::with_keepalive(&store, &lease, |ka| -> vigil::Result<u32> {
///     let mut done = 0;
///     while done < 10 && !ka.is_lost() {
///         std::thread::sleep(Duration::from_millis(5)); // a step of a long job
///         done += 1;
///     }
///     Ok(done)
/// })?;
/// assert_eq!(rows, 10);
/// store.release(&lease)?;
/// # drop(store); std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn with_keepalive<P, T, E, F>(port: &P, lease: &Lease, body: F) -> std::result::Result<T, E>
where
    P: LeasePort + Sync,
    E: From<Error>,
    F: FnOnce(&Keepalive<'_>) -> std::result::Result<T, E>,
{
    let mut ka = Keepalive::start(port, lease)?;
    let result = body(&ka);
    let stopped = ka.stop_now();
    match (result, stopped) {
        (Ok(_), Err(e)) => Err(e.into()),
        (result, _) => result,
    }
}
