# SPDX-License-Identifier: MIT
"""vigil: liveness and coordination between processes, for Python.

A binding of the C library libvigil (and libvigil-etcd for `Etcd`) through
cffi: the protocols are the library's, shared with every C process that
maps the same files.

    with vigil.HeartbeatTable.open("/run/vigil/pool.hb") as table, table.registered() as slot:
        table.mark(slot, 3); table.beat(slot)            # a worker
    with vigil.Leases.open("/run/vigil/locks.ls") as store:
        with store.lock("report", "worker-7", ttl=10.0) as lease:
            write_report(fencing_token=lease.token)      # a lease kept alive for the block

`HeartbeatTable` (slots, beats, failover, leader election), `Barrier`
(phases that count only live peers), `Leases` and `Etcd` (leases with
fencing tokens, `lock()`, async twins), `keepalive` and `keepalive_async`
(a held lease kept alive, sync and asyncio; `heartbeat` is the async
one's first name). Times are seconds as floats;
errors are `vigil.Error` and its subclasses, or the OSError Python raises
for a failed system call. The library is found by the dynamic loader
(LD_LIBRARY_PATH), or named by VIGIL_LIBRARY (VIGIL_ETCD_LIBRARY for etcd).
"""
from ._errors import (
    VIGIL_EBADFILE,
    VIGIL_EBUSY,
    VIGIL_ECAPACITY,
    VIGIL_EFULL,
    VIGIL_ELOST,
    VIGIL_ENOPEERS,
    VIGIL_ERANGE,
    VIGIL_ETIMEDOUT,
    VIGIL_EUNTRUSTED,
    VIGIL_EVACANT,
    BadFile,
    Busy,
    CapacityMismatch,
    Error,
    Full,
    Lost,
    NoPeers,
    OutOfRange,
    Timeout,
    Untrusted,
    Vacant,
    strerror,
)
from ._table import (
    ROLE_COORDINATOR,
    ROLE_WORKER,
    Beater,
    HeartbeatTable,
    Leader,
    Reclaim,
    Registration,
    Role,
    SlotInfo,
)
from ._barrier import Barrier, BarrierPeer, BarrierRound, BarrierStats
from ._leases import Etcd, Lease, LeaseInfo, Leases, LeaseState
from ._keepalive import (
    AsyncKeepalive,
    Heartbeat,
    Keepalive,
    KeepaliveStats,
    LeaseLock,
    heartbeat,
    keepalive,
    keepalive_async,
)
from ._group import Group, GroupEvent, GroupStats, GroupWatch, MemberInfo, Peer, RoundInfo, Unit

__version__ = "0.1.0"

__all__ = [
    "AsyncKeepalive",
    "Barrier",
    "BarrierPeer",
    "BarrierRound",
    "BarrierStats",
    "BadFile",
    "Beater",
    "Busy",
    "CapacityMismatch",
    "Error",
    "Etcd",
    "Full",
    "Group",
    "GroupEvent",
    "GroupStats",
    "GroupWatch",
    "Heartbeat",
    "HeartbeatTable",
    "Keepalive",
    "KeepaliveStats",
    "Leader",
    "Lease",
    "LeaseInfo",
    "LeaseLock",
    "LeaseState",
    "Leases",
    "Lost",
    "MemberInfo",
    "NoPeers",
    "OutOfRange",
    "ROLE_COORDINATOR",
    "ROLE_WORKER",
    "Peer",
    "Reclaim",
    "Registration",
    "Role",
    "RoundInfo",
    "SlotInfo",
    "Timeout",
    "Unit",
    "Untrusted",
    "Vacant",
    "VIGIL_EBADFILE",
    "VIGIL_EBUSY",
    "VIGIL_ECAPACITY",
    "VIGIL_EFULL",
    "VIGIL_ELOST",
    "VIGIL_ENOPEERS",
    "VIGIL_ERANGE",
    "VIGIL_ETIMEDOUT",
    "VIGIL_EUNTRUSTED",
    "VIGIL_EVACANT",
    "heartbeat",
    "keepalive",
    "keepalive_async",
    "strerror",
]

# Public names are shown, and pickled, as vigil.X, not vigil._module.X.
for _name in __all__:
    _obj = globals()[_name]
    if getattr(_obj, "__module__", "").startswith("vigil._"):
        try:
            _obj.__module__ = __name__
        except (AttributeError, TypeError):
            pass
del _name, _obj
