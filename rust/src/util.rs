//! Conversions at the boundary: paths and strings to C, times to the C
//! units, fixed C char arrays back to Rust.

use std::ffi::CString;
use std::os::raw::c_char;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::Duration;

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
