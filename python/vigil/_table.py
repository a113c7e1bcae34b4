# SPDX-License-Identifier: MIT
"""The heartbeat table: one 64-byte slot per process in a shared mapping."""
from __future__ import annotations

import os
import weakref
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Union

from . import _ffi
from ._errors import VIGIL_ERANGE, VIGIL_EVACANT, OutOfRange, Vacant, check, exception
from ._ffi import ffi, lib

PathLike = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]

ROLE_WORKER = 0
ROLE_COORDINATOR = 1


@dataclass(frozen=True)
class SlotInfo:
    """A consistent read of one slot (vigil_slot_info)."""

    pid: int
    role: int
    last_seen_epoch: int
    in_flight: int


@dataclass(frozen=True)
class Reclaim:
    """A slot a failover scan vacated, with the work units it held."""

    slot: int
    pid: int
    in_flight: int


@dataclass(frozen=True)
class Leader:
    """The coordinator after an election; `changed` when this call changed it."""

    slot: int
    pid: int
    term: int
    changed: bool = False


class _Handle:
    """What every vigil handle shares: close once, refuse use after close,
    and close the handles that depend on this one first (a barrier on a
    table, a keepalive on a store), since theirs point into its memory."""

    _ptr: Any = ffi.NULL
    _closer: Any = None

    def _init_handle(self) -> None:
        self._dependents: "weakref.WeakSet[Any]" = weakref.WeakSet()

    def _p(self) -> Any:
        ptr = self._ptr
        if ptr == ffi.NULL:
            raise ValueError(f"{type(self).__name__} is closed")
        return ptr

    @property
    def closed(self) -> bool:
        return self._ptr == ffi.NULL

    def close(self) -> None:
        """Unmap the file; idempotent. Handles built on this one are closed first."""
        if self._ptr == ffi.NULL:
            return
        for dep in list(self._dependents):
            dep.close()
        ptr, self._ptr = self._ptr, ffi.NULL
        type(self)._closer(ptr)

    def __enter__(self):
        self._p()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: the library may be gone
            pass


def _words(raw: Any) -> "tuple[Any, Any]":
    """The beater's two words as the cheapest handles Python has on them:
    8-byte memoryviews, each access one aligned 8-byte load or store."""
    return (memoryview(ffi.buffer(raw.epoch, 8)).cast("Q"), memoryview(ffi.buffer(raw.seen, 8)).cast("Q"))


class Beater:
    """One slot's beat, looked up once: `beat()` is the load and the store alone.

    Valid while its table is open; the table's close makes it inert."""

    __slots__ = ("_raw", "_epoch", "_seen", "__weakref__")

    def __init__(self, raw: Any) -> None:
        self._arm(raw)

    def _arm(self, raw: Any) -> None:
        self._raw = raw
        self._epoch, self._seen = _words(raw)

    if _ffi.atomic_store is None:  # x86-64: the plain pair is the acquire/release pair

        def beat(self) -> None:
            self._seen[0] = self._epoch[0]

    else:

        def beat(self) -> None:
            load, store = _ffi.atomic_load, _ffi.atomic_store
            assert load is not None and store is not None
            store(self._raw.seen, load(self._raw.epoch, _ffi.ATOMIC_ACQUIRE), _ffi.ATOMIC_RELEASE)

    def _disarm(self) -> None:
        # A beater of no slot beats a word of the library's own.
        self._arm(lib.vigil_hb_beater(ffi.NULL, 0))

    def close(self) -> None:
        self._disarm()


class HeartbeatTable(_Handle):
    """A heartbeat table file (vigil_hb). Use `create` or `open`; a context manager."""

    _closer = lib.vigil_hb_close

    def __init__(self, ptr: Any, path: bytes) -> None:
        self._init_handle()
        self._ptr = ptr
        self.path = os.fsdecode(path)
        self._beaters: Dict[int, Beater] = {}

    @classmethod
    def create(cls, path: PathLike, capacity: int, mode: int = 0o600) -> "HeartbeatTable":
        """Make a new table of `capacity` slots; FileExistsError if `path` exists."""
        p = _ffi.path_bytes(path)
        out = ffi.new("vigil_hb **")
        check(lib.vigil_hb_create_mode(p, capacity, mode, out), os.fsdecode(p))
        return cls(out[0], p)

    @classmethod
    def open(cls, path: PathLike, capacity: int = 0, *, readonly: bool = False) -> "HeartbeatTable":
        """Map an existing table; `capacity` 0 takes the file's (else CapacityMismatch)."""
        p = _ffi.path_bytes(path)
        out = ffi.new("vigil_hb **")
        fn = lib.vigil_hb_open_readonly if readonly else lib.vigil_hb_open
        check(fn(p, capacity, out), os.fsdecode(p))
        return cls(out[0], p)

    def close(self) -> None:
        for b in self._beaters.values():
            b._disarm()
        self._beaters.clear()
        super().close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"capacity={self.capacity} epoch={self.epoch}"
        return f"<vigil.HeartbeatTable {self.path!r} {state}>"

    @property
    def capacity(self) -> int:
        return lib.vigil_hb_capacity(self._p())

    @property
    def epoch(self) -> int:
        return lib.vigil_hb_epoch(self._p())

    def register(self, pid: Optional[int] = None) -> int:
        """Claim the first vacant slot for `pid` (this process by default); Full when none."""
        out = ffi.new("uint32_t *")
        check(lib.vigil_hb_register(self._p(), os.getpid() if pid is None else pid, out))
        return out[0]

    def unregister(self, slot: int) -> None:
        self._beaters.pop(slot, None)
        check(lib.vigil_hb_unregister(self._p(), slot))

    def beater(self, slot: int) -> Beater:
        """A `Beater` for `slot`: the cheapest beat Python can make."""
        b = Beater(lib.vigil_hb_beater(self._p(), slot))
        self._dependents.add(b)
        return b

    def beat(self, slot: int) -> None:
        """Say `slot` is alive at the current epoch; an out-of-range slot is ignored."""
        try:
            b = self._beaters[slot]
        except KeyError:
            if not 0 <= slot < 1 << 32:
                return
            b = self._beaters[slot] = Beater(lib.vigil_hb_beater(self._p(), slot))
        if _ffi.atomic_store is None:
            b._seen[0] = b._epoch[0]  # Beater.beat, inline: a call less
        else:
            b.beat()

    def tick(self) -> int:
        """Advance the global epoch; returns the new one."""
        return lib.vigil_hb_tick(self._p())

    def mark(self, slot: int, bit: int) -> None:
        """Record work unit `bit` (0..63) as in flight on `slot`."""
        check(lib.vigil_hb_mark_in_flight(self._p(), slot, _bit(bit)))

    def clear(self, slot: int, bit: int) -> None:
        """Record work unit `bit` as done."""
        check(lib.vigil_hb_clear_in_flight(self._p(), slot, _bit(bit)))

    def set_role(self, slot: int, role: int) -> None:
        check(lib.vigil_hb_set_role(self._p(), slot, role))

    def snapshot(self, slot: int) -> SlotInfo:
        """A consistent read of `slot`; Vacant if nobody holds it, Busy if it stays mid-change."""
        buf = ffi.new("vigil_py_slot_info *")
        rc = lib.vigil_hb_snapshot(self._p(), slot, ffi.addressof(buf, "v"))
        if rc == VIGIL_EVACANT:
            raise Vacant(rc, f"slot {slot} is vacant")
        check(rc)
        v = buf.v
        return SlotInfo(v.pid, v.role, v.last_seen_epoch, v.in_flight)

    def live_count(self, grace: int) -> int:
        """Slots whose last beat is at most `grace` epochs old."""
        return lib.vigil_hb_live_count(self._p(), grace)

    def failover_scan(self, grace: int, max: int = 64, *, probe: bool = False) -> List[Reclaim]:
        """Vacate every slot stale past `grace` (and, with `probe`, every slot whose
        owner is provably dead) and hand over its work units, exactly once."""
        out = ffi.new("vigil_reclaim[]", max)
        fn = lib.vigil_failover_scan_probe if probe else lib.vigil_failover_scan
        n = check(fn(self._p(), grace, out, max))
        return [Reclaim(out[i].slot, out[i].pid, out[i].in_flight) for i in range(n)]

    def failover_wait(self, grace: int, timeout: Optional[float] = None, max: int = 64) -> List[Reclaim]:
        """Block until some slot can be reclaimed (stale, or its owner exited) and
        reclaim it; [] when `timeout` seconds pass first. One wait per table at a time."""
        out = ffi.new("vigil_reclaim[]", max)
        n = check(lib.vigil_failover_wait(self._p(), grace, _ffi.timeout_ns(timeout), out, max))
        return [Reclaim(out[i].slot, out[i].pid, out[i].in_flight) for i in range(n)]

    def leader_elect(self, grace: int) -> Leader:
        """Make the lowest live pid the coordinator; NoPeers when nothing is live."""
        out = ffi.new("vigil_leader *")
        rc = check(lib.vigil_leader_elect(self._p(), grace, out))
        return Leader(out.slot, out.pid, out.term, rc == 1)

    def leader_is(self, slot: int, grace: int) -> bool:
        return bool(lib.vigil_leader_is(self._p(), slot, grace))

    def leader(self) -> Leader:
        """The leader the last election recorded, without electing."""
        out = ffi.new("vigil_leader *")
        check(lib.vigil_leader_get(self._p(), out))
        return Leader(out.slot, out.pid, out.term, False)

    def probe(self, slot: int) -> Optional[bool]:
        """True if `slot`'s owner is alive, False if provably dead, None if it
        cannot tell; Vacant when nobody holds the slot."""
        if not 0 <= slot < self.capacity:
            raise OutOfRange(VIGIL_ERANGE, f"slot {slot} is out of range")
        rc = lib.vigil_hb_probe(self._p(), slot)
        if rc == 1:
            return True
        if rc == 0:
            return False
        if rc == VIGIL_EVACANT:
            raise exception(rc, f"slot {slot}")
        return None


def _bit(bit: int) -> int:
    if not 0 <= bit < 64:
        raise OutOfRange(VIGIL_ERANGE, f"bit {bit} is out of range 0..63")
    return bit
