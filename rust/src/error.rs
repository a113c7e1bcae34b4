//! One error type for the whole crate.

use std::ffi::CStr;
use std::fmt;
use std::io;
use std::os::raw::c_int;

use crate::sys;

/// What went wrong in a vigil call.
///
/// vigil's own failures have a variant each; a failed system call is
/// [`Error::Os`] with the `errno` it failed with. The C code of any error
/// is [`Error::code`].
///
/// ```
/// use vigil::{Error, HeartbeatTable};
///
/// let dir = std::env::temp_dir().join(format!("vigil-doc-error-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let path = dir.join("table");
/// let table = HeartbeatTable::create(&path, 1)?;
/// let _me = table.register()?;
/// match table.register() {
///     Err(Error::Full) => {} // one slot, already taken
///     other => panic!("expected Full, got {:?}", other.map(|r| r.slot())),
/// }
/// // A second create never clobbers the table.
/// match HeartbeatTable::create(&path, 1) {
///     Err(Error::Os(e)) => assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists),
///     other => panic!("expected EEXIST, got {:?}", other.map(|t| t.capacity())),
/// }
/// # drop(_me); drop(table); std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// No vacant slot (`VIGIL_EFULL`), or a full lease store.
    Full,
    /// Not a vigil file of this kind, a wrong layout version, or a size that
    /// disagrees with its header (`VIGIL_EBADFILE`).
    BadFile,
    /// The file's capacity differs from the one asked for (`VIGIL_ECAPACITY`).
    CapacityMismatch,
    /// A slot, bit, quorum, key or other argument out of range (`VIGIL_ERANGE`).
    OutOfRange,
    /// The slot is vacant, or nobody holds the key (`VIGIL_EVACANT`).
    Vacant,
    /// The deadline passed (`VIGIL_ETIMEDOUT`).
    Timeout,
    /// Nothing live to wait for (`VIGIL_ENOPEERS`).
    NoPeers,
    /// The lease, or the slot's registration, is someone else's now: a
    /// refused renewal, or a call by a holder whose registration was
    /// reclaimed (`VIGIL_ELOST`).
    Lost,
    /// Held by another owner, or in the middle of a change (`VIGIL_EBUSY`).
    Busy,
    /// The etcd server's TLS certificate failed verification (`VIGIL_ETLS`,
    /// etcd adapter only).
    Tls,
    /// Opening for writing a file that another user could have made or
    /// rewritten (writable by everyone, or owned by another user who is not
    /// root, outside a group arrangement), which can rewrite what this
    /// process relies on or truncate it under every process that maps it
    /// (`VIGIL_EUNTRUSTED`). Open it with
    /// [`OpenOptions::trust_owner`](crate::OpenOptions::trust_owner) if its
    /// owner is trusted.
    Untrusted,
    /// A failed system call, with its `errno`.
    Os(io::Error),
    /// A vigil code this crate does not know (from a newer library).
    Other(i32),
}

/// `Result` with [`Error`] as its error.
///
/// ```
/// fn capacity(path: &std::path::Path) -> vigil::Result<u32> {
///     Ok(vigil::HeartbeatTable::open(path)?.capacity())
/// }
/// assert!(capacity(std::path::Path::new("/nonexistent/table")).is_err());
/// ```
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The error a C call's negative return `rc` stands for.
    ///
    /// ```
    /// use vigil::Error;
    /// assert!(matches!(Error::from_code(-1001), Error::Full));
    /// assert!(matches!(Error::from_code(-2), Error::Os(e) if e.kind() == std::io::ErrorKind::NotFound));
    /// ```
    pub fn from_code(rc: i32) -> Error {
        match rc {
            sys::VIGIL_EFULL => Error::Full,
            sys::VIGIL_EBADFILE => Error::BadFile,
            sys::VIGIL_ECAPACITY => Error::CapacityMismatch,
            sys::VIGIL_ERANGE => Error::OutOfRange,
            sys::VIGIL_EVACANT => Error::Vacant,
            sys::VIGIL_ETIMEDOUT => Error::Timeout,
            sys::VIGIL_ENOPEERS => Error::NoPeers,
            sys::VIGIL_ELOST => Error::Lost,
            sys::VIGIL_EBUSY => Error::Busy,
            sys::VIGIL_ETLS => Error::Tls,
            sys::VIGIL_EUNTRUSTED => Error::Untrusted,
            rc if rc < 0 && rc > -1000 => Error::Os(io::Error::from_raw_os_error(-rc)),
            rc => Error::Other(rc),
        }
    }

    /// The C code of this error: `VIGIL_E*`, or `-errno` (`-EIO` for an
    /// `io::Error` that carries no errno).
    ///
    /// ```
    /// assert_eq!(vigil::Error::Timeout.code(), -1006);
    /// ```
    pub fn code(&self) -> i32 {
        match self {
            Error::Full => sys::VIGIL_EFULL,
            Error::BadFile => sys::VIGIL_EBADFILE,
            Error::CapacityMismatch => sys::VIGIL_ECAPACITY,
            Error::OutOfRange => sys::VIGIL_ERANGE,
            Error::Vacant => sys::VIGIL_EVACANT,
            Error::Timeout => sys::VIGIL_ETIMEDOUT,
            Error::NoPeers => sys::VIGIL_ENOPEERS,
            Error::Lost => sys::VIGIL_ELOST,
            Error::Busy => sys::VIGIL_EBUSY,
            Error::Tls => sys::VIGIL_ETLS,
            Error::Untrusted => sys::VIGIL_EUNTRUSTED,
            Error::Os(e) => -e.raw_os_error().unwrap_or(EIO),
            Error::Other(rc) => *rc,
        }
    }

    pub(crate) fn invalid(what: &'static str) -> Error {
        Error::Os(io::Error::new(io::ErrorKind::InvalidInput, what))
    }
}

const EIO: i32 = 5;

/// `Ok(rc)` for `rc >= 0`, the error otherwise.
#[inline]
pub(crate) fn check(rc: c_int) -> Result<c_int> {
    if rc >= 0 {
        Ok(rc)
    } else {
        Err(Error::from_code(rc))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Os(e) => e.fmt(f),
            other => {
                // SAFETY: vigil_strerror takes any int, never returns NULL,
                // and its strings are static and NUL-terminated.
                let text = unsafe { CStr::from_ptr(sys::vigil_strerror(other.code())) };
                f.write_str(&text.to_string_lossy())
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Os(e) => Some(e),
            _ => None,
        }
    }
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Error {
        Error::Os(e)
    }
}

impl From<Error> for io::Error {
    /// An `io::Error` of the nearest kind, carrying the vigil error.
    fn from(e: Error) -> io::Error {
        let kind = match e {
            Error::Os(inner) => return inner,
            Error::Timeout => io::ErrorKind::TimedOut,
            Error::OutOfRange => io::ErrorKind::InvalidInput,
            Error::BadFile | Error::CapacityMismatch => io::ErrorKind::InvalidData,
            Error::Vacant => io::ErrorKind::NotFound,
            Error::Busy => io::ErrorKind::WouldBlock,
            _ => io::ErrorKind::Other,
        };
        io::Error::new(kind, e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for rc in [-1001, -1002, -1003, -1004, -1005, -1006, -1007, -1008, -1009, -1010, -1042, -2, -22] {
            assert_eq!(Error::from_code(rc).code(), rc, "code {rc}");
        }
    }

    #[test]
    fn display_is_the_library_text() {
        assert!(Error::Full.to_string().contains("slot"), "{}", Error::Full);
        assert!(!Error::from_code(-2).to_string().is_empty());
    }

    #[test]
    fn error_is_send_sync() {
        fn check<T: Send + Sync + std::error::Error + 'static>() {}
        check::<Error>();
    }

    #[test]
    fn into_io_error() {
        let e: io::Error = Error::Timeout.into();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        let e: io::Error = Error::from_code(-2).into();
        assert_eq!(e.raw_os_error(), Some(2));
    }
}
