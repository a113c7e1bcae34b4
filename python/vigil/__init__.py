# SPDX-License-Identifier: MIT
"""vigil: liveness and coordination between processes, for Python.

A binding of the C library libvigil (and libvigil-etcd for `Etcd`) through
cffi: the protocols are the library's, shared with every C process that
maps the same files. The library is the one named by the environment
variable VIGIL_LIBRARY (VIGIL_ETCD_LIBRARY for etcd), else the installed
libvigil.so.0. Times are seconds as floats; errors are `vigil.Error` and
its subclasses, or the OSError Python raises for a failed system call.
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
from ._barrier import Barrier, BarrierStats
from ._leases import Etcd, Lease, LeaseInfo, Leases, LeaseState
from ._keepalive import Heartbeat, Keepalive, KeepaliveStats, LeaseLock, heartbeat, keepalive

__version__ = "0.1.0"

__all__ = [
    "Barrier",
    "BarrierStats",
    "BadFile",
    "Beater",
    "Busy",
    "CapacityMismatch",
    "Error",
    "Etcd",
    "Full",
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
    "NoPeers",
    "OutOfRange",
    "ROLE_COORDINATOR",
    "ROLE_WORKER",
    "Reclaim",
    "Registration",
    "Role",
    "SlotInfo",
    "Timeout",
    "Vacant",
    "VIGIL_EBADFILE",
    "VIGIL_EBUSY",
    "VIGIL_ECAPACITY",
    "VIGIL_EFULL",
    "VIGIL_ELOST",
    "VIGIL_ENOPEERS",
    "VIGIL_ERANGE",
    "VIGIL_ETIMEDOUT",
    "VIGIL_EVACANT",
    "heartbeat",
    "keepalive",
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
