//! Conversions at the boundary: paths and strings to C, times to the C
//! units, fixed C char arrays back to Rust.

use std::ffi::CString;
use std::os::raw::c_char;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

pub(crate) fn c_path(path: &Path) -> Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| Error::invalid("path contains a NUL byte"))
}

pub(crate) fn c_string(s: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::invalid("string contains a NUL byte"))
}

/// A time limit in ns as C takes it: `None` is no deadline (`UINT64_MAX`);
/// a limit too long for 64 bits of ns is the longest there is short of that.
pub(crate) fn timeout_ns(timeout: Option<Duration>) -> u64 {
    match timeout {
        None => u64::MAX,
        Some(d) => d.as_nanos().min(u128::from(u64::MAX - 1)) as u64,
    }
}

/// A TTL in whole ms, rounded up (a TTL is a promise of at least so long).
pub(crate) fn ttl_ms(ttl: Duration) -> u64 {
    let ms = ttl.as_nanos().saturating_add(999_999) / 1_000_000;
    ms.min(u128::from(u64::MAX)) as u64
}

pub(crate) fn ms(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

/// A NUL-terminated C char array (the C side always terminates it; a
/// missing NUL ends the string at the array's end).
pub(crate) fn from_c_chars(chars: &[c_char]) -> String {
    let bytes: Vec<u8> = chars.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// One call at a time on a handle that keeps state for the call (a bound
/// barrier's waits, a table's failover_wait), taken within the call's own
/// timeout.
pub(crate) struct Turn {
    busy: Mutex<bool>,
    freed: Condvar,
}

/// A turn held; given back when dropped.
pub(crate) struct TurnHeld<'a>(&'a Turn);

impl Turn {
    pub(crate) fn new() -> Turn {
        Turn { busy: Mutex::new(false), freed: Condvar::new() }
    }

    /// Takes the turn, waiting for the call in progress to end, up to
    /// `deadline` ([`Error::Timeout`] then).
    fn take(&self, deadline: Option<Instant>) -> Result<TurnHeld<'_>> {
        // The flag is only ever set and cleared under the lock, so a
        // poisoned lock (a panic elsewhere while holding it) is still right.
        let mut busy = self.busy.lock().unwrap_or_else(|e| e.into_inner());
        while *busy {
            busy = match deadline {
                None => self.freed.wait(busy).unwrap_or_else(|e| e.into_inner()),
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(Error::Timeout);
                    }
                    self.freed.wait_timeout(busy, left).unwrap_or_else(|e| e.into_inner()).0
                }
            };
        }
        *busy = true;
        Ok(TurnHeld(self))
    }

    /// Takes the turn within `timeout` (None: no deadline), and says how
    /// much of it is left for the call ([`Error::Timeout`] when the call
    /// in progress outlasts it).
    pub(crate) fn take_within(&self, timeout: Option<Duration>) -> Result<(TurnHeld<'_>, Option<Duration>)> {
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        let held = self.take(deadline)?;
        // A deadline past what an Instant holds waits as long as asked.
        let left = match (timeout, deadline) {
            (Some(_), Some(d)) => Some(d.saturating_duration_since(Instant::now())),
            (t, _) => t,
        };
        Ok((held, left))
    }
}

impl Drop for TurnHeld<'_> {
    fn drop(&mut self) {
        *self.0.busy.lock().unwrap_or_else(|e| e.into_inner()) = false;
        self.0.freed.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times() {
        assert_eq!(timeout_ns(None), u64::MAX);
        assert_eq!(timeout_ns(Some(Duration::from_millis(5))), 5_000_000);
        assert_eq!(timeout_ns(Some(Duration::MAX)), u64::MAX - 1);
        assert_eq!(ttl_ms(Duration::from_micros(1500)), 2);
        assert_eq!(ttl_ms(Duration::from_secs(10)), 10_000);
        assert_eq!(ttl_ms(Duration::MAX), u64::MAX);
    }

    #[test]
    fn strings() {
        assert!(c_path(Path::new("a\0b")).is_err());
        let chars: Vec<c_char> = b"key\0junk".iter().map(|&b| b as c_char).collect();
        assert_eq!(from_c_chars(&chars), "key");
    }
}
