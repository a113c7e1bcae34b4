//! How a vigil file is opened for a process: whose file it trusts.

use std::os::raw::c_uint;

use crate::sys;

/// How [`HeartbeatTable::open_with`](crate::HeartbeatTable::open_with),
/// [`Leases::open_with`](crate::Leases::open_with) and
/// [`Barrier::open_with`](crate::Barrier::open_with) open a file
/// (vigil_hb_open_flags(3)). The default is what `open` does.
///
/// A file opened for writing is mapped shared: whoever else may write it
/// can rewrite what this process relies on, keep it from a lease, or
/// truncate the file under every process that maps it. So, as sshd's
/// StrictModes, opening for writing refuses ([`Error::Untrusted`]) a file
/// that another user could have made or rewritten: one writable by
/// everyone, or one owned by another user who is not root unless it is
/// group-writable and of a group the caller is in (the arrangement
/// `create_with_group` makes for a group of trusted peers). Files owned by
/// the caller or by root pass. The check is made on the opened descriptor.
///
/// [`Error::Untrusted`]: crate::Error::Untrusted
///
/// ```
/// use std::os::unix::fs::PermissionsExt;
/// # let dir = std::env::temp_dir().join(format!("vigil-doc-openopts-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// let path = dir.join("t");
/// drop(vigil::HeartbeatTable::create(&path, 4)?);
/// std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666))?; // anyone may write it
/// assert!(matches!(vigil::HeartbeatTable::open(&path), Err(vigil::Error::Untrusted)));
/// let trusting = vigil::OpenOptions::new().trust_owner(true);
/// let table = vigil::HeartbeatTable::open_with(&path, 0, trusting)?;
/// assert_eq!(table.capacity(), 4);
/// # drop(table); std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct OpenOptions {
    readonly: bool,
    trust_owner: bool,
}

impl OpenOptions {
    /// What `open` does: for writing, the file's owner checked.
    ///
    /// ```
    /// assert_eq!(vigil::OpenOptions::new(), vigil::OpenOptions::default());
    /// ```
    pub fn new() -> OpenOptions {
        OpenOptions::default()
    }

    /// Open for looking only (`VIGIL_OPEN_READONLY`): read permission
    /// suffices, nothing reaches the file, and no ownership check applies.
    /// A barrier is always opened for writing: this is
    /// `InvalidInput` for [`Barrier::open_with`](crate::Barrier::open_with).
    ///
    /// ```
    /// let o = vigil::OpenOptions::new().readonly(true);
    /// assert_ne!(o, vigil::OpenOptions::new());
    /// ```
    pub fn readonly(mut self, yes: bool) -> OpenOptions {
        self.readonly = yes;
        self
    }

    /// Trust the file's owner (`VIGIL_OPEN_TRUST_OWNER`, the tool's
    /// `--trust-owner`): no ownership check.
    ///
    /// ```
    /// let o = vigil::OpenOptions::new().trust_owner(true);
    /// assert_ne!(o, vigil::OpenOptions::new());
    /// ```
    pub fn trust_owner(mut self, yes: bool) -> OpenOptions {
        self.trust_owner = yes;
        self
    }

    pub(crate) fn is_readonly(self) -> bool {
        self.readonly
    }

    pub(crate) fn flags(self) -> c_uint {
        let mut flags = 0;
        if self.readonly {
            flags |= sys::VIGIL_OPEN_READONLY;
        }
        if self.trust_owner {
            flags |= sys::VIGIL_OPEN_TRUST_OWNER;
        }
        flags
    }
}
