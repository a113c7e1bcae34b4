//! The lease keepalive: a renewer thread that renews a lease at a third of
//! its TTL while the work it authorises runs.

use std::fmt;
use std::os::raw::{c_int, c_void};
use std::os::unix::io::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::NonNull;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{check, Error, Result};
use crate::lease::{sealed, Lease, LeasePort};
use crate::sys;

/// A keepalive's share of its port: an `Arc<P>` held as the pointer
/// `Arc::into_raw` gave, which is also the context its renewer reads (so
/// that a renewal can take a share of its own: see `renew_shared`).
struct PortShare {
    ptr: *const c_void,
    release: unsafe fn(*const c_void),
}

/// Gives back the share `PortShare` holds for an `Arc<P>`.
///
/// # Safety
///
/// `ptr` came from `Arc::<P>::into_raw`, and this is its one release.
unsafe fn release_share<P>(ptr: *const c_void) {
    // SAFETY: the function's contract.
    drop(unsafe { Arc::from_raw(ptr as *const P) });
}

impl PortShare {
    fn new<P: Send + Sync + 'static>(port: Arc<P>) -> PortShare {
        PortShare { ptr: Arc::into_raw(port) as *const c_void, release: release_share::<P> }
    }
}

impl Drop for PortShare {
    fn drop(&mut self) {
        // SAFETY: ptr and release were made together by `new` from an
        // `Arc<P>`, and a PortShare is dropped once.
        unsafe { (self.release)(self.ptr) }
    }
}

// SAFETY: a PortShare is an `Arc<P>` with P: Send + Sync (`new`'s bound),
// which is Send and Sync; the raw pointer only hides P's type.
unsafe impl Send for PortShare {}
// SAFETY: as for Send; through `&PortShare` nothing is reachable.
unsafe impl Sync for PortShare {}

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
/// * The port's own `renew` may stop or drop its keepalive (one it took
///   out of a `static Mutex<Option<Keepalive>>`, say): that stop returns at
///   once (it cannot wait for the renewal it is called from), no renewal
///   starts after that one, and the renewer frees the keepalive, and drops
///   its share of the port, as that renewal returns.
///
/// **It owns a share of its port.** [`start`](Self::start) takes the port
/// as an [`Arc`], and the keepalive holds that share until its renewer is
/// joined: a keepalive that is never stopped (leaked with
/// [`std::mem::forget`], say) keeps its store open and renewing, and can
/// never renew through a store that was closed. To borrow a port instead,
/// use [`with_keepalive`], which runs one for the length of a call.
///
/// **Fork.** In a child forked while it runs, the keepalive is the
/// parent's: the child has no renewer, and dropping or stopping its copy
/// frees the child's memory only, never stopping the parent's renewer.
///
/// `Send + Sync`.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// # let dir = std::env::temp_dir().join(format!("vigil-doc-ka-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// let store = Arc::new(vigil::Leases::create(dir.join("leases"), 16)?);
/// let lease = store.acquire("report", "me", Duration::from_secs(3))?;
/// let ka = vigil::Keepalive::start(store.clone(), &lease)?;
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
///
/// What the types rule out here (a borrowed or borrowing port, one that is
/// not `Sync`) is shown in the crate's documentation.
pub struct Keepalive {
    // Some from start until stop (by value) or drop takes it: whenever a
    // method can be called, it holds a running keepalive.
    raw: Option<NonNull<sys::vigil_keepalive>>,
    // The renewer's port, held until the renewer is joined (the field is
    // dropped after Drop::drop has stopped it), or, when the port's own
    // renewal stopped it, until that renewal returns (it holds a share of
    // its own: renew_shared). None only for the one with_keepalive runs,
    // whose port outlives the call.
    _port: Option<PortShare>,
}

// SAFETY: the renewer is the library's own thread, and
// vigil_keepalive_stop may run on any thread (it joins the renewer, which
// any thread may do; on the renewer itself, inside a renewal, it leaves
// the rest of the stop to the renewer); the port share held is Send +
// Sync (PortShare), and the port of a with_keepalive keepalive is Sync
// (its bound) and never leaves that call's frame. Through `&Keepalive`
// only vigil_keepalive_lost, _fd and _stats run, which read atomics and
// fields fixed at start.
unsafe impl Send for Keepalive {}
// SAFETY: as for Send.
unsafe impl Sync for Keepalive {}

/// Runs `f` with no unwind leaving it: a panic counts as a transient
/// failure (-EIO), and a panic payload whose own drop panics is dropped
/// inside a catch of its own, and leaked if that panics again.
fn no_unwind(f: impl FnOnce() -> c_int) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(rc) => rc,
        Err(payload) => {
            if let Err(again) = catch_unwind(AssertUnwindSafe(move || drop(payload))) {
                std::mem::forget(again);
            }
            -5 // -EIO
        }
    }
}

/// One renewal through `port`: 0, the error's code, or -EIO for a panic
/// (local expiry still ends the lease if the port keeps failing).
fn renew_once<P: LeasePort + ?Sized>(port: &P, lease: &Lease) -> c_int {
    match port.renew(lease) {
        Ok(()) => 0,
        Err(e) => e.code().min(-1),
    }
}

/// The C callback that renews through a port borrowed by
/// [`with_keepalive`].
///
/// # Safety
///
/// `ctx` is a `*const P` valid for the call and `lease` a valid lease:
/// what [`raw_port`] hands the library, for a port that outlives the
/// keepalive's renewer.
unsafe extern "C" fn renew_borrowed<P: LeasePort + Sync>(ctx: *mut c_void, lease: *const sys::vigil_lease) -> c_int {
    // SAFETY: the function's contract: ctx is the `&P` raw_port was given,
    // alive for the whole with_keepalive call, whose keepalive is stopped
    // (and its renewer joined: the body has it only by reference, so the
    // port cannot stop it) before the call returns; lease is the
    // keepalive's own copy, alive while its renewer runs.
    let (port, lease) = unsafe { (&*(ctx as *const P), Lease::from_raw(*lease)) };
    no_unwind(|| renew_once(port, &lease))
}

/// The C callback that renews through a port a [`Keepalive`] holds a share
/// of. The renewal takes a share of its own for its length: the port may
/// drop the keepalive (and with it the keepalive's share) from inside its
/// `renew`, and must outlive the call all the same.
///
/// # Safety
///
/// `ctx` is a pointer `Arc::<P>::into_raw` gave, whose share is held until
/// the renewer has made its last call, and `lease` a valid lease.
unsafe extern "C" fn renew_shared<P: LeasePort + Sync>(ctx: *mut c_void, lease: *const sys::vigil_lease) -> c_int {
    let ptr = ctx as *const P;
    // SAFETY: the function's contract: the keepalive's PortShare is that
    // share. It is released only after vigil_keepalive_stop, which either
    // joined this renewer (so not during this call), or ran on this very
    // thread inside this call (the port's renew stopping its keepalive),
    // which is after the increment here. So the count is at least 1 now,
    // and the Arc made below is this call's own share.
    let port = unsafe {
        Arc::increment_strong_count(ptr);
        Arc::from_raw(ptr)
    };
    // SAFETY: the keepalive's own copy of the lease, which the library
    // frees only after the renewer's last call has returned.
    let lease = unsafe { Lease::from_raw(*lease) };
    let rc = no_unwind(|| renew_once(&*port, &lease));
    // The last share, when the renewal dropped the keepalive: P's drop
    // runs here, caught like the renewal.
    no_unwind(move || {
        drop(port);
        0
    });
    rc
}

/// The C port for `port`: the library's own for its backends, else a call
/// back into Rust through `renew_borrowed`. Valid while `port` is.
fn raw_port<P: LeasePort + Sync>(port: &P) -> sys::vigil_lease_port {
    match port.native_port(sealed::Token(())) {
        Some(native) => native.raw,
        None => sys::vigil_lease_port { ctx: port as *const P as *mut c_void, renew: Some(renew_borrowed::<P>) },
    }
}

impl Keepalive {
    /// Starts renewing `lease` through `port`, a share of which it holds
    /// until stopped. The lease's TTL must be at least 3 ms
    /// ([`Error::OutOfRange`]).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-kastart-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// # let store = Arc::new(vigil::Leases::create(dir.join("l"), 4)?);
    /// let lease = store.acquire("k", "me", Duration::from_secs(3))?;
    /// let ka = vigil::Keepalive::start(store.clone(), &lease)?;
    /// drop(store); // the keepalive's share keeps the store open
    /// assert!(!ka.is_lost());
    /// # drop(ka); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn start<P: LeasePort + Send + Sync + 'static>(port: Arc<P>, lease: &Lease) -> Result<Keepalive> {
        let native = port.native_port(sealed::Token(())).map(|n| n.raw);
        let share = PortShare::new(port);
        let raw_port = native.unwrap_or(sys::vigil_lease_port {
            ctx: share.ptr as *mut c_void,
            renew: Some(renew_shared::<P>),
        });
        // SAFETY: raw_port's context is the store inside the port (native)
        // or the port itself (renew_shared's contract: `share` is the
        // Arc::into_raw pointer), and the keepalive holds `share` until its
        // renewer is joined, or, when the port's renewal stopped it, until
        // that renewal (which holds a share of its own) returns, and for
        // ever if the keepalive is leaked; P is 'static, so nothing it
        // borrows can end first.
        unsafe { Self::start_raw(&raw_port, lease, Some(share)) }
    }

    /// # Safety
    ///
    /// What `port` points to (its context) stays valid until the returned
    /// keepalive is stopped or dropped, and until for ever if it is leaked.
    unsafe fn start_raw(port: &sys::vigil_lease_port, lease: &Lease, owner: Option<PortShare>) -> Result<Keepalive> {
        let mut raw = std::ptr::null_mut();
        // SAFETY: the port is valid as long as the keepalive (this
        // function's contract); the library copies the port and the lease;
        // raw is written only on success.
        check(unsafe { sys::vigil_keepalive_start(port, &lease.raw, &mut raw) })?;
        Ok(Keepalive { raw: NonNull::new(raw), _port: owner })
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
    /// # let store = std::sync::Arc::new(vigil::Leases::create(dir.join("l"), 4)?);
    /// let lease = store.acquire("k", "me", std::time::Duration::from_secs(3))?;
    /// let ka = vigil::Keepalive::start(store.clone(), &lease)?;
    /// assert!(!ka.is_lost());
    /// # drop(ka); drop(store); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_lost(&self) -> bool {
        // SAFETY: a running keepalive (or NULL, which the call accepts).
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
    /// # let store = std::sync::Arc::new(vigil::Leases::create(dir.join("l"), 4)?);
    /// let lease = store.acquire("k", "me", Duration::from_secs(3))?;
    /// let ka = vigil::Keepalive::start(store.clone(), &lease)?;
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
    /// # let store = std::sync::Arc::new(vigil::Leases::create(dir.join("l"), 4)?);
    /// let lease = store.acquire("k", "me", Duration::from_secs(3))?;
    /// let ka = vigil::Keepalive::start(store.clone(), &lease)?;
    /// assert_eq!(ka.stats()?.period, Duration::from_millis(960)); // 0.32 TTL
    /// # drop(ka); drop(store); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn stats(&self) -> Result<KeepaliveStats> {
        let mut out = sys::Spare::<sys::vigil_keepalive_info>::zeroed();
        // SAFETY: a running keepalive (or NULL: -EINVAL); out has room for
        // a longer struct.
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

impl Drop for Keepalive {
    fn drop(&mut self) {
        // The renewer is joined here; the port share (a field) is dropped
        // after, when nothing can call it any more.
        let _ = self.stop_now();
    }
}

impl AsRawFd for Keepalive {
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
    /// let ka = vigil::Keepalive::start(std::sync::Arc::new(Refusing), &lease)?;
    /// let mut p = PollFd { fd: ka.as_raw_fd(), events: 1 /* POLLIN */, revents: 0 };
    /// assert_eq!(unsafe { poll(&mut p, 1, 5_000) }, 1); // readable: lost
    /// assert!(ka.is_lost());
    /// # drop(ka); drop(store); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn as_raw_fd(&self) -> RawFd {
        // SAFETY: a running keepalive (`raw` is Some while `&self` can be
        // had: only stop, by value, and drop take it).
        unsafe { sys::vigil_keepalive_fd(self.ptr()) }
    }
}

impl AsFd for Keepalive {
    /// As [`as_raw_fd`](AsRawFd::as_raw_fd), borrowed for as long as the
    /// keepalive is.
    fn as_fd(&self) -> BorrowedFd<'_> {
        let fd = self.as_raw_fd();
        assert!(fd >= 0, "a running keepalive has a descriptor");
        // SAFETY: fd is the running keepalive's own descriptor (not -1),
        // open until it stops, which takes the keepalive by value or drops
        // it: after the borrow of `self` this BorrowedFd carries ends.
        unsafe { BorrowedFd::borrow_raw(fd) }
    }
}

impl fmt::Debug for Keepalive {
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
/// The port is borrowed for the call: the keepalive lives in this call's
/// frame, the body sees it only by reference, and it is stopped before the
/// call returns or unwinds.
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
///
pub fn with_keepalive<P, T, E, F>(port: &P, lease: &Lease, body: F) -> std::result::Result<T, E>
where
    P: LeasePort + Sync,
    E: From<Error>,
    F: FnOnce(&Keepalive) -> std::result::Result<T, E>,
{
    let raw_port = raw_port(port);
    // SAFETY: `ka` is a local of this frame that is never moved out (the
    // body gets `&ka`, for the length of its call only): it is stopped by
    // `stop` below, or dropped (and so stopped) when `body` unwinds, before
    // this call ends and with it the borrow of `port` the context points
    // into. Forgetting a reference leaks nothing.
    let ka = unsafe { Keepalive::start_raw(&raw_port, lease, None) }?;
    let result = body(&ka);
    let stopped = ka.stop();
    match (result, stopped) {
        (Ok(_), Err(e)) => Err(e.into()),
        (result, _) => result,
    }
}
