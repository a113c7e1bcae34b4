//! The etcd adapter (libvigil-etcd, feature `etcd`): the lease API across
//! hosts on etcd v3.

use std::ffi::CString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::time::Duration;

use crate::error::{check, Error, Result};
use crate::lease::{blank_lease, sealed, Lease, LeaseInfo, LeasePort};
use crate::sys;
use crate::util::{c_path, c_string, timeout_ns, ttl_ms};

/// A connection to etcd for leases across hosts. A key is held as etcd's
/// own `concurrency` package holds a mutex or an election (the holder of
/// `KEY` is the key `KEY/<lease id in hex>` with the lowest create
/// revision), so a vigil holder and `etcdctl lock KEY` exclude each other.
/// The fencing token is that create revision: the leader's term.
///
/// TTLs round up to whole seconds, and etcd raises anything shorter to its
/// minimum (2 s with default settings). An unreachable server is a
/// transient error ([`Error::Os`]), never [`Error::Lost`].
///
/// `Send + Sync`: one request at a time on the connection (the handle's
/// own lock), shared with its keepalives.
///
/// ```no_run
/// use std::time::Duration;
/// let etcd = vigil::Etcd::connect("http://127.0.0.1:2379")?;
/// let lease = etcd.acquire_wait("service/leader", "host-a", Duration::from_secs(5), None)?;
/// vigil::with_keepalive(&etcd, &lease, |ka| -> vigil::Result<()> {
///     // lead, fencing every action with lease.token(), until ka.is_lost()
///     # let _ = ka;
///     Ok(())
/// })?;
/// etcd.release(&lease)?;
/// # Ok::<(), vigil::Error>(())
/// ```
pub struct Etcd {
    raw: NonNull<sys::vigil_etcd>,
    endpoints: String,
    // The process that connected: a forked child's copy is not closed
    // (its connection and lock are the parent's, caught mid-state by the
    // fork), only forgotten.
    creator: u32,
}

// INVARIANT: `raw` is an open connection from connect until `drop`; every
// call below that says "an open handle" rests on it.

// SAFETY: the C handle keeps no state of a thread's between calls (each
// holds the handle's mutex for all of its requests), and may be closed on
// any thread.
unsafe impl Send for Etcd {}
// SAFETY: every call holds the handle's mutex for all of its requests
// (src/etcd/transport/), so any number of threads may call at once, a keepalive's
// renewer among them.
unsafe impl Sync for Etcd {}

impl Etcd {
    /// Connects to `endpoints` ("http://127.0.0.1:2379[,...]", tried in
    /// turn).
    ///
    /// ```no_run
    /// let etcd = vigil::Etcd::connect("http://10.0.0.1:2379,http://10.0.0.2:2379")?;
    /// # Ok::<(), vigil::Error>(())
    /// ```
    pub fn connect(endpoints: &str) -> Result<Etcd> {
        let c = c_string(endpoints)?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: a C string; raw is written only on success.
        check(unsafe { sys::vigil_etcd_connect(c.as_ptr(), &mut raw) })?;
        Ok(Etcd {
            raw: NonNull::new(raw).expect("vigil returned success and a NULL handle"),
            endpoints: endpoints.to_string(),
            creator: std::process::id(),
        })
    }

    /// Connects to `endpoints` with TLS, authentication, a key namespace or
    /// time limits ([`EtcdOptions`]). A bare `host:port` is `https://`
    /// when TLS files are given, as `etcdctl` takes it.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// let opts = vigil::EtcdOptions::new()
    ///     .cacert("/etc/etcd/ca.pem")
    ///     .cert("/etc/etcd/client.pem")
    ///     .key("/etc/etcd/client-key.pem")
    ///     .request_timeout(Duration::from_secs(2));
    /// let etcd = vigil::Etcd::connect_with("etcd-1:2379,etcd-2:2379", &opts)?;
    /// # Ok::<(), vigil::Error>(())
    /// ```
    pub fn connect_with(endpoints: &str, options: &EtcdOptions) -> Result<Etcd> {
        let c = c_string(endpoints)?;
        let strings = options.c_strings()?;
        let ptr = |s: &Option<CString>| s.as_ref().map_or(std::ptr::null(), |s| s.as_ptr());
        let ms = |d: Option<Duration>| d.map_or(0, |d| d.as_millis().clamp(1, u128::from(u32::MAX)) as u32);
        let raw_opts = sys::vigil_etcd_options {
            cacert: ptr(&strings[0]),
            cert: ptr(&strings[1]),
            key: ptr(&strings[2]),
            user: ptr(&strings[3]),
            password: ptr(&strings[4]),
            namespace: ptr(&strings[5]),
            dial_timeout_ms: ms(options.dial_timeout),
            request_timeout_ms: ms(options.request_timeout),
        };
        let mut raw = std::ptr::null_mut();
        // SAFETY: C strings alive for the call (the library copies them);
        // raw is written only on success.
        check(unsafe { sys::vigil_etcd_connect_opts(c.as_ptr(), &raw_opts, &mut raw) })?;
        Ok(Etcd {
            raw: NonNull::new(raw).expect("vigil returned success and a NULL handle"),
            endpoints: endpoints.to_string(),
            creator: std::process::id(),
        })
    }

    fn ptr(&self) -> *mut sys::vigil_etcd {
        self.raw.as_ptr()
    }

    /// Limits for each request on this handle (defaults 1 s to connect,
    /// 3 s in all); each endpoint tried costs at most `total`.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// let etcd = vigil::Etcd::connect("http://127.0.0.1:2379")?;
    /// etcd.set_timeout(Duration::from_millis(200), Duration::from_secs(1))?;
    /// # Ok::<(), vigil::Error>(())
    /// ```
    pub fn set_timeout(&self, connect: Duration, total: Duration) -> Result<()> {
        let ms = |d: Duration| d.as_millis().clamp(1, u128::from(u32::MAX)) as u32;
        // SAFETY: an open handle (the invariant).
        check(unsafe { sys::vigil_etcd_set_timeout(self.ptr(), ms(connect), ms(total)) }).map(drop)
    }

    /// Acquires `key` for `owner`, or [`Error::Busy`] while another holds it.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// let etcd = vigil::Etcd::connect("http://127.0.0.1:2379")?;
    /// match etcd.acquire("jobs/nightly", "host-a", Duration::from_secs(10)) {
    ///     Ok(lease) => println!("ours, token {}", lease.token()),
    ///     Err(vigil::Error::Busy) => println!("someone else runs it"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok::<(), vigil::Error>(())
    /// ```
    pub fn acquire(&self, key: &str, owner: &str, ttl: Duration) -> Result<Lease> {
        let (k, o) = (c_string(key)?, c_string(owner)?);
        let mut out = blank_lease();
        // SAFETY: an open handle (the invariant), C strings; out is written only on success.
        check(unsafe { sys::vigil_etcd_acquire(self.ptr(), k.as_ptr(), o.as_ptr(), ttl_ms(ttl), &mut out) })?;
        Ok(Lease::from_raw(out))
    }

    /// Acquires `key`, waiting on an etcd watch (never polling) up to
    /// `timeout` (`None`: for ever): leader election across hosts.
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// let etcd = vigil::Etcd::connect("http://127.0.0.1:2379")?;
    /// let lease = etcd.acquire_wait("svc/leader", "host-a", Duration::from_secs(5), Some(Duration::from_secs(60)))?;
    /// # Ok::<(), vigil::Error>(())
    /// ```
    pub fn acquire_wait(&self, key: &str, owner: &str, ttl: Duration, timeout: Option<Duration>) -> Result<Lease> {
        let (k, o) = (c_string(key)?, c_string(owner)?);
        let mut out = blank_lease();
        // SAFETY: an open handle (the invariant), C strings; out is written only on success.
        check(unsafe {
            sys::vigil_etcd_acquire_wait(self.ptr(), k.as_ptr(), o.as_ptr(), ttl_ms(ttl), timeout_ns(timeout), &mut out)
        })?;
        Ok(Lease::from_raw(out))
    }

    /// Renews `lease`; [`Error::Lost`] once etcd no longer has it.
    ///
    /// ```no_run
    /// # let etcd = vigil::Etcd::connect("http://127.0.0.1:2379")?;
    /// # let lease = etcd.acquire("k", "me", std::time::Duration::from_secs(5))?;
    /// etcd.renew(&lease)?;
    /// # Ok::<(), vigil::Error>(())
    /// ```
    pub fn renew(&self, lease: &Lease) -> Result<()> {
        // SAFETY: an open handle and a lease value.
        check(unsafe { sys::vigil_etcd_renew(self.ptr(), &lease.raw) }).map(drop)
    }

    /// Releases `lease` (revokes it); [`Error::Lost`] if it was gone.
    ///
    /// ```no_run
    /// # let etcd = vigil::Etcd::connect("http://127.0.0.1:2379")?;
    /// # let lease = etcd.acquire("k", "me", std::time::Duration::from_secs(5))?;
    /// etcd.release(&lease)?;
    /// # Ok::<(), vigil::Error>(())
    /// ```
    pub fn release(&self, lease: &Lease) -> Result<()> {
        // SAFETY: an open handle and a lease value.
        check(unsafe { sys::vigil_etcd_release(self.ptr(), &lease.raw) }).map(drop)
    }

    /// The holder of `key` (vigil's, or etcd's own lock or election), or
    /// `None` when nobody holds it.
    ///
    /// ```no_run
    /// let etcd = vigil::Etcd::connect("http://127.0.0.1:2379")?;
    /// if let Some(holder) = etcd.get("svc/leader")? {
    ///     println!("{} leads, term {}", holder.owner, holder.token);
    /// }
    /// # Ok::<(), vigil::Error>(())
    /// ```
    pub fn get(&self, key: &str) -> Result<Option<LeaseInfo>> {
        let k = c_string(key)?;
        let mut out = sys::Spare::<sys::vigil_lease_info>::zeroed();
        // SAFETY: an open handle (the invariant), a C string; out has room for a longer struct.
        match check(unsafe { sys::vigil_etcd_get(self.ptr(), k.as_ptr(), &mut out.value) }) {
            Ok(_) => Ok(Some(LeaseInfo::from_raw(&out.value))),
            Err(Error::Vacant) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The endpoints given at connect.
    ///
    /// ```no_run
    /// let etcd = vigil::Etcd::connect("http://127.0.0.1:2379")?;
    /// assert_eq!(etcd.endpoints(), "http://127.0.0.1:2379");
    /// # Ok::<(), vigil::Error>(())
    /// ```
    pub fn endpoints(&self) -> &str {
        &self.endpoints
    }
}

/// How to reach a production etcd ([`Etcd::connect_with`]): TLS files,
/// authentication, a namespace prepended to every key, time limits. What
/// is not set keeps [`Etcd::connect`]'s behaviour. The password is never
/// shown by `Debug`.
///
/// ```
/// let opts = vigil::EtcdOptions::new().cacert("/etc/etcd/ca.pem").user("svc", "secret");
/// assert!(!format!("{opts:?}").contains("secret"));
/// ```
#[derive(Clone, Default)]
pub struct EtcdOptions {
    cacert: Option<PathBuf>,
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
    user: Option<String>,
    password: Option<String>,
    namespace: Option<String>,
    dial_timeout: Option<Duration>,
    request_timeout: Option<Duration>,
}

impl EtcdOptions {
    /// No options: [`Etcd::connect`]'s behaviour.
    ///
    /// ```
    /// let _plain = vigil::EtcdOptions::new();
    /// ```
    pub fn new() -> EtcdOptions {
        EtcdOptions::default()
    }

    /// The CA certificate (PEM) to verify the servers with, instead of the
    /// system's store.
    ///
    /// ```
    /// let _o = vigil::EtcdOptions::new().cacert("/etc/etcd/ca.pem");
    /// ```
    pub fn cacert<P: AsRef<Path>>(mut self, path: P) -> EtcdOptions {
        self.cacert = Some(path.as_ref().to_path_buf());
        self
    }

    /// This client's certificate (PEM), for servers that ask for one.
    ///
    /// ```
    /// let _o = vigil::EtcdOptions::new().cert("client.pem").key("client-key.pem");
    /// ```
    pub fn cert<P: AsRef<Path>>(mut self, path: P) -> EtcdOptions {
        self.cert = Some(path.as_ref().to_path_buf());
        self
    }

    /// The private key (PEM) of [`cert`](Self::cert).
    ///
    /// ```
    /// let _o = vigil::EtcdOptions::new().cert("client.pem").key("client-key.pem");
    /// ```
    pub fn key<P: AsRef<Path>>(mut self, path: P) -> EtcdOptions {
        self.key = Some(path.as_ref().to_path_buf());
        self
    }

    /// etcd authentication as `user` with `password`.
    ///
    /// ```
    /// let _o = vigil::EtcdOptions::new().user("svc", "secret");
    /// ```
    pub fn user(mut self, user: &str, password: &str) -> EtcdOptions {
        self.user = Some(user.to_string());
        self.password = Some(password.to_string());
        self
    }

    /// A prefix put before every key, so several tenants share one etcd.
    ///
    /// ```
    /// let _o = vigil::EtcdOptions::new().namespace("/team-a/");
    /// ```
    pub fn namespace(mut self, prefix: &str) -> EtcdOptions {
        self.namespace = Some(prefix.to_string());
        self
    }

    /// The limit to connect to one endpoint (whole ms; default 1 s).
    ///
    /// ```
    /// let _o = vigil::EtcdOptions::new().dial_timeout(std::time::Duration::from_millis(200));
    /// ```
    pub fn dial_timeout(mut self, limit: Duration) -> EtcdOptions {
        self.dial_timeout = Some(limit);
        self
    }

    /// The limit for a whole request to one endpoint (whole ms; default 3 s).
    ///
    /// ```
    /// let _o = vigil::EtcdOptions::new().request_timeout(std::time::Duration::from_secs(2));
    /// ```
    pub fn request_timeout(mut self, limit: Duration) -> EtcdOptions {
        self.request_timeout = Some(limit);
        self
    }

    fn c_strings(&self) -> Result<[Option<CString>; 6]> {
        let path = |p: &Option<PathBuf>| p.as_deref().map(c_path).transpose();
        let text = |t: &Option<String>| t.as_deref().map(c_string).transpose();
        Ok([
            path(&self.cacert)?,
            path(&self.cert)?,
            path(&self.key)?,
            text(&self.user)?,
            text(&self.password)?,
            text(&self.namespace)?,
        ])
    }
}

impl fmt::Debug for EtcdOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdOptions")
            .field("cacert", &self.cacert)
            .field("cert", &self.cert)
            .field("key", &self.key)
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "(set)"))
            .field("namespace", &self.namespace)
            .field("dial_timeout", &self.dial_timeout)
            .field("request_timeout", &self.request_timeout)
            .finish()
    }
}

impl LeasePort for Etcd {
    fn renew(&self, lease: &Lease) -> Result<()> {
        Etcd::renew(self, lease)
    }

    fn native_port(&self, _: sealed::Token) -> Option<sealed::NativePort<'_>> {
        // SAFETY: an open handle (the invariant). The port points into it, and the
        // NativePort borrows `self`, so it cannot outlive the handle.
        let raw = unsafe { sys::vigil_etcd_port(self.ptr()) };
        Some(sealed::NativePort { raw, _of: std::marker::PhantomData })
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        if std::process::id() != self.creator {
            // A forked child: closing would end a connection (a TLS
            // session) the parent still uses. The child's copy is leaked.
            return;
        }
        // SAFETY: an open handle (the invariant), closed once; `&mut self`:
        // nothing borrows it (a keepalive on it holds an Arc of it).
        unsafe { sys::vigil_etcd_close(self.ptr()) }
    }
}

impl fmt::Debug for Etcd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Etcd").field("endpoints", &self.endpoints).finish()
    }
}
