//! Failover and leader election on the heartbeat table.

use std::time::Duration;

use crate::error::{check, Error, Result};
use crate::heartbeat::HeartbeatTable;
use crate::sys;
use crate::util::timeout_ns;

/// The most entries one scan or wait hands back; the rest wait for the
/// next call (a table's capacity can be far larger than any real pool).
const MAX_RECLAIMS: u32 = 1024;

/// A slot a watchdog vacated, with the units of work its owner held: this
/// caller, and no other, now owns those units.
///
/// ```
/// let r = vigil::Reclaim { slot: 2, pid: 4242, in_flight: 0b1010, reason: vigil::ReclaimReason::Stale };
/// assert_eq!(r.units().collect::<Vec<_>>(), vec![1, 3]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Reclaim {
    /// The slot, vacant now.
    pub slot: u32,
    /// Its owner's pid.
    pub pid: u32,
    /// Bitmap of the units its owner had in flight.
    pub in_flight: u64,
    /// Why it was reclaimed.
    pub reason: ReclaimReason,
}

impl Reclaim {
    /// The units (bit numbers of [`in_flight`](Self::in_flight)), lowest first.
    ///
    /// ```
    /// let r = vigil::Reclaim { slot: 0, pid: 1, in_flight: 1 << 63 | 1, reason: vigil::ReclaimReason::Exited };
    /// assert_eq!(r.units().collect::<Vec<_>>(), vec![0, 63]);
    /// ```
    pub fn units(&self) -> impl Iterator<Item = u32> {
        let bits = self.in_flight;
        (0..64u32).filter(move |b| bits >> b & 1 == 1)
    }
}

/// Why a slot was reclaimed.
///
/// ```
/// assert_ne!(vigil::ReclaimReason::Stale, vigil::ReclaimReason::Exited);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ReclaimReason {
    /// Its heartbeat lapsed past the grace window.
    Stale,
    /// Its owner is provably dead (exited, or its pid reused).
    Exited,
    /// Stale or provably dead; the call does not say which
    /// ([`HeartbeatTable::failover_scan_probe`]).
    StaleOrExited,
}

/// The coordinator a leader election chose.
///
/// ```
/// let l = vigil::Leader { slot: 0, pid: 100, term: 1 };
/// assert_eq!(l.term, 1);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Leader {
    /// The leader's slot.
    pub slot: u32,
    /// The leader's pid (the lowest live pid).
    pub pid: u32,
    /// The leader term: +1 on every change of leader, the fencing token
    /// for the leader's actions.
    pub term: u64,
}

/// What [`HeartbeatTable::leader_elect`] found.
///
/// ```
/// let e = vigil::Election { leader: vigil::Leader { slot: 0, pid: 1, term: 3 }, changed: false };
/// assert!(!e.changed);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Election {
    /// The leader now.
    pub leader: Leader,
    /// Whether this call changed the leader (and raised the term).
    pub changed: bool,
}

/// What the last [`HeartbeatTable::failover_wait`] could watch.
///
/// ```
/// # let dir = std::env::temp_dir().join(format!("vigil-doc-watchinfo-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// let table = vigil::HeartbeatTable::create(dir.join("t"), 4)?;
/// let _me = table.register()?;
/// table.failover_wait(5, Some(std::time::Duration::from_millis(1)))?;
/// let info = table.failover_wait_info()?;
/// assert!(info.watched + info.by_epochs >= 1);
/// # drop(_me); drop(table); std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct FailoverWatchInfo {
    /// Process file descriptors held (0 where the kernel has none).
    pub pidfds: u32,
    /// Slots whose owner's exit wakes the wait at once.
    pub watched: u32,
    /// Occupied slots left to epochs alone (an owner in another pid
    /// namespace, or of none recorded).
    pub by_epochs: u32,
    /// Occupied slots on epochs only until a pidfd can be made (the
    /// process was out of descriptors or memory; tried again at every look).
    pub retrying: u32,
}

fn reclaims(raw: &[sys::vigil_reclaim], why: Option<&[u32]>) -> Vec<Reclaim> {
    raw.iter()
        .enumerate()
        .map(|(i, r)| Reclaim {
            slot: r.slot,
            pid: r.pid,
            in_flight: r.in_flight,
            reason: match why.map(|w| w[i]) {
                None => ReclaimReason::Stale,
                Some(sys::VIGIL_RECLAIM_EXITED) => ReclaimReason::Exited,
                Some(sys::VIGIL_RECLAIM_STALE) => ReclaimReason::Stale,
                Some(_) => ReclaimReason::StaleOrExited,
            },
        })
        .collect()
}

impl HeartbeatTable {
    fn reclaim_room(&self) -> u32 {
        self.capacity().clamp(1, MAX_RECLAIMS)
    }

    /// Vacates every slot whose heartbeat lapsed past `grace_epochs` and
    /// hands its units to the caller, exactly once even when several
    /// watchdogs (in any processes) scan at once. At most 1024 entries per
    /// call; the rest wait for the next.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-scan-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 4)?;
    /// let gone = table.register()?;
    /// gone.mark(9)?;
    /// let slot = gone.into_slot(); // it stops beating, still registered
    /// for _ in 0..3 { table.tick(); }
    /// let taken = table.failover_scan(2)?;
    /// assert_eq!((taken[0].slot, taken[0].in_flight), (slot, 1 << 9));
    /// assert!(table.failover_scan(2)?.is_empty()); // exactly once
    /// # drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn failover_scan(&self, grace_epochs: u64) -> Result<Vec<Reclaim>> {
        let mut out = vec![sys::vigil_reclaim { slot: 0, pid: 0, in_flight: 0 }; self.reclaim_room() as usize];
        // SAFETY: an open handle (the table's invariant); out holds the max entries we pass.
        let n = check(unsafe {
            sys::vigil_failover_scan(self.raw(), grace_epochs, out.as_mut_ptr(), out.len() as u32)
        })?;
        Ok(reclaims(&out[..n as usize], None))
    }

    /// As [`failover_scan`](Self::failover_scan), and also reclaims, inside
    /// the grace window, every slot whose owner is provably dead (one
    /// `kill(2)` and at most one `/proc` read per occupied slot: for a
    /// watchdog, not a loop).
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-scanprobe-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 4)?;
    /// let _me = table.register()?; // alive: never taken
    /// assert!(table.failover_scan_probe(5)?.is_empty());
    /// # drop(_me); drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn failover_scan_probe(&self, grace_epochs: u64) -> Result<Vec<Reclaim>> {
        let mut out = vec![sys::vigil_reclaim { slot: 0, pid: 0, in_flight: 0 }; self.reclaim_room() as usize];
        // SAFETY: an open handle (the table's invariant); out holds the max entries we pass.
        let n = check(unsafe {
            sys::vigil_failover_scan_probe(self.raw(), grace_epochs, out.as_mut_ptr(), out.len() as u32)
        })?;
        let why = vec![u32::MAX; n as usize];
        Ok(reclaims(&out[..n as usize], Some(&why)))
    }

    /// Blocks until at least one slot can be reclaimed, reclaims it (and
    /// any others, up to 1024) and returns them; an empty `Vec` when
    /// `timeout` passed first (`None`: no deadline). A slot is reclaimed
    /// when stale by epochs, or at once when its owner is provably dead:
    /// the handle holds a pidfd per occupied slot's owner and wakes the
    /// moment one exits. Exactly once against any scans and waits, in any
    /// process. Calls on one handle take turns, each within its own
    /// timeout (a wait behind a longer one returns empty at its deadline).
    ///
    /// ```
    /// use std::time::Duration;
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-fwait-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 4)?;
    /// let _me = table.register()?;
    /// // Nothing to take: the wait times out empty.
    /// assert!(table.failover_wait(5, Some(Duration::from_millis(10)))?.is_empty());
    /// # drop(_me); drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn failover_wait(&self, grace_epochs: u64, timeout: Option<Duration>) -> Result<Vec<Reclaim>> {
        let room = self.reclaim_room() as usize;
        let mut out = vec![sys::vigil_reclaim { slot: 0, pid: 0, in_flight: 0 }; room];
        let mut why = vec![0u32; room];
        // The turn within the wait's own timeout: a wait in progress that
        // outlasts it makes this one time out empty, as the C call would.
        let (_turn, left) = match self.wait_turn.take_within(timeout) {
            Ok(taken) => taken,
            Err(Error::Timeout) => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        // SAFETY: an open handle (the table's invariant); `_turn` holds
        // wait_turn, so this is the handle's only wait in progress; out and
        // why hold the max entries we pass.
        let n = check(unsafe {
            sys::vigil_failover_wait_why(
                self.raw(),
                grace_epochs,
                timeout_ns(left),
                out.as_mut_ptr(),
                why.as_mut_ptr(),
                room as u32,
            )
        })?;
        Ok(reclaims(&out[..n as usize], Some(&why[..n as usize])))
    }

    /// What the last [`failover_wait`](Self::failover_wait) on this handle
    /// could watch (pidfds, slots woken by exit, slots left to epochs).
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-fwinfo-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 4)?;
    /// assert_eq!(table.failover_wait_info()?.watched, 0); // no wait yet
    /// # drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn failover_wait_info(&self) -> Result<FailoverWatchInfo> {
        let mut out = sys::Spare::<sys::vigil_failover_watch_info>::zeroed();
        // SAFETY: an open handle (the table's invariant); out has room for a longer struct.
        check(unsafe { sys::vigil_failover_wait_info(self.raw(), &mut out.value) })?;
        let v = out.value;
        Ok(FailoverWatchInfo { pidfds: v.pidfds, watched: v.watched, by_epochs: v.by_epochs, retrying: v.retrying })
    }

    /// Makes the lowest live pid the coordinator ([`Role::Coordinator`](crate::Role))
    /// and every other slot a worker, raising the term exactly when the
    /// leader changes. [`Error::NoPeers`](crate::Error::NoPeers) with no live slot.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-elect-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 4)?;
    /// let me = table.register()?;
    /// let first = table.leader_elect(5)?;
    /// assert!(first.changed);
    /// assert_eq!(first.leader.slot, me.slot());
    /// assert!(!table.leader_elect(5)?.changed); // same leader, same term
    /// assert!(table.leader_is(me.slot(), 5));
    /// # drop(me); drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn leader_elect(&self, grace_epochs: u64) -> Result<Election> {
        let mut out = sys::vigil_leader { slot: 0, pid: 0, term: 0 };
        // SAFETY: an open handle (the table's invariant); out is written only on success.
        let rc = check(unsafe { sys::vigil_leader_elect(self.raw(), grace_epochs, &mut out) })?;
        Ok(Election { leader: Leader { slot: out.slot, pid: out.pid, term: out.term }, changed: rc == 1 })
    }

    /// Whether `slot` is live, the coordinator, and holds the lowest live pid.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-leaderis-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 4)?;
    /// let me = table.register()?;
    /// assert!(!table.leader_is(me.slot(), 5)); // no election yet
    /// # drop(me); drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn leader_is(&self, slot: u32, grace_epochs: u64) -> bool {
        // SAFETY: an open handle (the table's invariant).
        unsafe { sys::vigil_leader_is(self.raw(), slot, grace_epochs) }
    }

    /// The leader and term the last election recorded, without electing.
    /// [`Error::NoPeers`](crate::Error::NoPeers) when none was named,
    /// [`Error::Busy`](crate::Error::Busy) while an election installs one.
    /// The leader named may since have died: [`leader_is`](Self::leader_is)
    /// says whether it still holds.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-leader-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 4)?;
    /// assert!(matches!(table.leader(), Err(vigil::Error::NoPeers)));
    /// let _me = table.register()?;
    /// let elected = table.leader_elect(5)?.leader;
    /// assert_eq!(table.leader()?, elected);
    /// # drop(_me); drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn leader(&self) -> Result<Leader> {
        let mut out = sys::vigil_leader { slot: 0, pid: 0, term: 0 };
        // SAFETY: an open handle (the table's invariant); out is written only on success.
        check(unsafe { sys::vigil_leader_get(self.raw(), &mut out) })?;
        Ok(Leader { slot: out.slot, pid: out.pid, term: out.term })
    }

    /// Whether `slot`'s owner is alive (`Ok(true)`) or provably dead
    /// (`Ok(false)`: gone, or its pid reused by another process), without
    /// waiting for the grace window; an error when it cannot tell.
    ///
    /// ```
    /// # let dir = std::env::temp_dir().join(format!("vigil-doc-probe-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let table = vigil::HeartbeatTable::create(dir.join("t"), 4)?;
    /// let me = table.register()?;
    /// assert!(table.probe(me.slot())?);
    /// # drop(me); drop(table); std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn probe(&self, slot: u32) -> Result<bool> {
        // SAFETY: an open handle (the table's invariant).
        check(unsafe { sys::vigil_hb_probe(self.raw(), slot) }).map(|rc| rc == 1)
    }
}
