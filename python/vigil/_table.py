# SPDX-License-Identifier: MIT
"""The heartbeat table: one 64-byte slot per process in a shared mapping."""
import asyncio
import enum
import os
import threading
import time
import weakref
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Dict, List, Optional, Tuple, Type, Union

from . import _ffi, _fork, _signals, _util
from ._errors import VIGIL_ELOST, VIGIL_EVACANT, Lost, Vacant, check, exception
from ._ffi import ffi, lib
from ._util import DEFAULT_MODE, PathLike


class Role(enum.IntEnum):
    """A slot's role (VIGIL_ROLE_*): a worker, or the elected coordinator."""

    WORKER = 0
    COORDINATOR = 1


ROLE_WORKER = Role.WORKER
ROLE_COORDINATOR = Role.COORDINATOR


def _role(value: int) -> Union[Role, int]:
    try:
        return Role(value)
    except ValueError:  # a role a newer library knows
        return value


@dataclass(frozen=True)
class SlotInfo:
    """A consistent read of one slot (vigil_slot_info): its owner's pid, its
    role, the epoch of its last beat and its in-flight work units (a 64-bit
    mask, bit i for unit i)."""

    pid: int
    role: Role
    last_seen_epoch: int
    in_flight: int

    @property
    def units(self) -> List[int]:
        """The work units in flight, as a list of bit numbers."""
        return _units(self.in_flight)


@dataclass(frozen=True)
class Reclaim:
    """A slot a failover scan vacated: the dead owner's pid and the work
    units it held (`in_flight`, a mask; `units`, the bit numbers), now the
    caller's to hand out again. Each is given to exactly one scanner."""

    slot: int
    pid: int
    in_flight: int

    @property
    def units(self) -> List[int]:
        """The reclaimed work units, as a list of bit numbers."""
        return _units(self.in_flight)


@dataclass(frozen=True)
class Leader:
    """The coordinator after an election: its slot, pid and term (the
    fencing number: it grows each time leadership changes hands).
    `changed` is True when this call changed it."""

    slot: int
    pid: int
    term: int
    changed: bool = False


def _units(mask: int) -> List[int]:
    return [i for i in range(64) if mask >> i & 1]


class _Handle:
    """What every vigil handle shares: close once, refuse use after close,
    and close the handles that depend on this one first (a barrier on a
    table, a keepalive on a store), since theirs point into its memory."""

    _ptr: Any = ffi.NULL
    _closer: Any = None

    def _init_handle(self) -> None:
        self._pid = os.getpid()  # the process that opened it (fork: see the subclasses)
        self._dependents: "weakref.WeakSet[Any]" = weakref.WeakSet()
        self._inside: Dict[int, int] = {}  # thread -> its calls in progress that close() waits for
        # Entered through `with` on the lock itself, whose acquire is C: no
        # point where a signal handler could run between taking it and the
        # block that gives it back (threading.Condition's __enter__ is
        # Python, and has one).
        self._quiet_lock = threading.Lock()
        self._quiet = threading.Condition(self._quiet_lock)
        _fork.renew_in_child(self)

    def _after_fork(self) -> None:
        """In a forked child: a fresh lock, and only this thread's calls
        counted (the others' threads are not there to end them)."""
        self._quiet_lock = threading.Lock()
        self._quiet = threading.Condition(self._quiet_lock)
        me = threading.get_ident()
        self._inside = {me: self._inside[me]} if me in self._inside else {}

    def _call(self, fn: Any, *args: Any) -> Any:
        """fn(pointer, *args), a bounded blocking call (a barrier slice) that
        a close() on another thread waits for instead of unmapping under it;
        ValueError once closed."""
        me, counted = threading.get_ident(), False
        try:
            with self._quiet_lock:
                ptr = self._p()
                self._inside[me] = self._inside.get(me, 0) + 1
                counted = True  # with the count: no call between them
            return fn(ptr, *args)
        finally:
            if counted:
                with self._quiet_lock:
                    n = self._inside[me]
                    if n == 1:
                        del self._inside[me]
                    else:
                        self._inside[me] = n - 1
                    self._quiet.notify_all()

    def _p(self) -> Any:
        ptr = self._ptr
        if ptr == ffi.NULL:
            raise ValueError(f"{type(self).__name__} is closed")
        return ptr

    @property
    def closed(self) -> bool:
        """Whether `close` has run: every other call then raises ValueError."""
        return self._ptr == ffi.NULL

    def close(self) -> None:
        """Unmap the file; idempotent. Handles built on this one are closed first."""
        if self._ptr == ffi.NULL:
            return
        for dep in list(self._dependents):
            dep.close()
        quiet = getattr(self, "_quiet_lock", None)
        if quiet is None:  # made without _init_handle
            ptr, self._ptr = self._ptr, ffi.NULL
        else:
            with quiet:
                if self._ptr == ffi.NULL:
                    return
                ptr, self._ptr = self._ptr, ffi.NULL
                # A call in progress on another thread (a slice: bounded)
                # returns before the memory goes; this thread's own would
                # be waiting for itself. (A wake lost to a signal in a
                # notify costs a look 50 ms later.)
                me = threading.get_ident()
                while any(t != me for t in self._inside):
                    self._quiet.wait(0.05)
        type(self)._closer(ptr)

    def __enter__(self) -> Any:
        self._p()
        return self

    def __exit__(self, et: Optional[Type[BaseException]], ev: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: the library may be gone
            pass


def _words(raw: Any) -> Tuple[Any, Any]:
    """The beater's two words as the cheapest handles Python has on them:
    8-byte memoryviews, each access one aligned 8-byte load or store."""
    return (memoryview(ffi.buffer(raw.epoch, 8)).cast("Q"), memoryview(ffi.buffer(raw.seen, 8)).cast("Q"))


class Beater:
    """One slot's beat, looked up once: `beat()` is the load and the store alone.

    Valid while its table is open; the table's close makes it inert."""

    __slots__ = ("_raw", "_epoch", "_seen", "__weakref__")

    def __init__(self, raw: Any) -> None:
        """Not made directly: `HeartbeatTable.beater(slot)`."""
        self._arm(raw)

    def _arm(self, raw: Any) -> None:
        self._raw = raw
        self._epoch, self._seen = _words(raw)

    if _ffi.atomic_store is None:  # x86-64: the plain pair is the acquire/release pair

        def beat(self) -> None:
            """Say the slot is alive at the current epoch: one load, one store."""
            self._seen[0] = self._epoch[0]

    else:

        def beat(self) -> None:
            """Say the slot is alive at the current epoch: one load, one store."""
            load, store = _ffi.atomic_load, _ffi.atomic_store
            assert load is not None and store is not None
            store(self._raw.seen, load(self._raw.epoch, _ffi.ATOMIC_ACQUIRE), _ffi.ATOMIC_RELEASE)

    def _disarm(self) -> None:
        # A beater of no slot beats a word of the library's own.
        self._arm(lib.vigil_hb_beater(ffi.NULL, 0))

    def close(self) -> None:
        """Make this beater inert: its beats touch no table any more."""
        self._disarm()


class Registration:
    """`with table.registered() as slot:`: a slot held for the block.

    On exit the slot is unregistered. If a failover scan took it meanwhile
    (this process was judged dead: stopped, or not beating), the exit
    raises Lost, unless the block raised an exception of its own.

    No way out leaves the slot registered: a signal (Ctrl-C) landing on the
    way in is raised after the slot is given back, one on the way out after
    it is. In a child forked inside the block, leaving it unregisters
    nothing: the slot is the parent's (the child registers its own)."""

    def __init__(self, table: "HeartbeatTable", pid: Optional[int]) -> None:
        """Made by `HeartbeatTable.registered`."""
        self.table = table
        self.pid = pid
        self.slot: Optional[int] = None
        self._owner = os.getpid()  # the process that registered
        self._armed: Any = None  # the block's hold on the signal guard

    def __enter__(self) -> int:
        pid = os.getpid()
        slot, self._armed = _signals.enter(lambda: self.table.register(self.pid), self.table._unregister_quietly)
        self.slot, self._owner = slot, pid  # no call since enter() returned
        return slot

    async def __aenter__(self) -> int:
        """`async with table.registered() as slot:` registering is one call
        that never blocks: the same way in as `with`."""
        return self.__enter__()

    # The ways out disarm in their own frame: a signal noted in one is
    # delivered when it settles (a nested protected frame would leave it
    # to an outer one).

    @_signals.protected
    async def __aexit__(self, et: Optional[Type[BaseException]], ev: Optional[BaseException],
                        tb: Optional[TracebackType]) -> None:
        """The same way out as `with` (unregistering never blocks)."""
        armed, self._armed = self._armed, None
        try:
            self._leave(et)
        finally:
            _signals.disarm(armed)

    @_signals.protected
    def __exit__(self, et: Optional[Type[BaseException]], ev: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        armed, self._armed = self._armed, None
        try:
            self._leave(et)
        finally:
            _signals.disarm(armed)

    def _leave(self, et: Optional[Type[BaseException]]) -> None:
        slot, self.slot = self.slot, None
        if slot is None or self.table.closed or os.getpid() != self._owner:
            return  # nothing, or a forked child's copy of the parent's slot
        try:
            self.table.unregister(slot)
        except (Vacant, Lost) as e:
            if et is None:
                raise Lost(VIGIL_ELOST, f"{self.table.path}: slot {slot} was taken from this registration "
                                        f"(reclaimed by failover)") from e


class HeartbeatTable(_Handle):
    """A heartbeat table (vigil_hb): one 64-byte slot per process in a file
    every process maps. Make one with `create`, map it with `open`; a
    context manager that closes it on exit."""

    _closer = lib.vigil_hb_close

    def __init__(self, ptr: Any, path: bytes) -> None:
        """Not called directly: use `HeartbeatTable.create` or `HeartbeatTable.open`."""
        self._init_handle()
        self._ptr = ptr
        self.path = os.fsdecode(path)
        self._beaters: Dict[int, Beater] = {}
        # vigil_failover_wait keeps state in the handle: one wait at a time.
        self._failover_turns = _util.Turns()

    @classmethod
    def create(cls, path: PathLike, capacity: int, mode: int = DEFAULT_MODE, *,
               group: Union[int, str, None] = None) -> "HeartbeatTable":
        """Make a new table of `capacity` slots (1..1048576), its file created
        with `mode` (0o600: only its owner can map it) and, given `group` (a
        gid or a group's name, one the caller is in), given to that group as
        it is made: with mode 0o660, the arrangement in which the group's
        members trust each other's file. FileExistsError if `path` exists."""
        p = _ffi.path_bytes(path)
        cap, md = _util.capacity(capacity), _util.mode(mode)
        out = ffi.new("vigil_hb **")
        _util.created(p, "hb", (cap,), md, group, out)
        return cls(out[0], p)

    @classmethod
    def open(cls, path: PathLike, capacity: int = 0, *, readonly: bool = False,
             trust_owner: bool = False) -> "HeartbeatTable":
        """Map an existing table; `capacity` 0 takes the file's (another value
        must match it: CapacityMismatch). `readonly` maps it for reading only
        (snapshots, counts, the leader), as `vigil inspect` does. A file of
        another kind is BadFile, saying what the file is. Opened for
        writing, a file that another user could have made or rewritten
        (writable by everyone, or another user's outside a group
        arrangement) is Untrusted, naming its owner and mode, unless
        `trust_owner`."""
        p = _ffi.path_bytes(path)
        cap = _util.uint(capacity, "capacity", _util.MAX_CAPACITY)
        out = ffi.new("vigil_hb **")
        flagged = lib.vigil_hb_open_flags if _ffi.has("vigil_hb_open_flags") else None
        plain = lib.vigil_hb_open_readonly if readonly else lib.vigil_hb_open
        rc = _util.opened(p, plain, flagged, (cap,), _util.open_flags(readonly, trust_owner), out)
        if rc < 0:
            raise _util.open_error(rc, os.fsdecode(p), _util.KIND_HEARTBEAT, cap)
        return cls(out[0], p)

    def close(self) -> None:
        """Unmap the table; idempotent. Barriers opened on it are closed first
        and its beaters made inert."""
        for b in self._beaters.values():
            b._disarm()
        self._beaters.clear()
        super().close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"capacity={self.capacity} epoch={self.epoch}"
        return f"<vigil.HeartbeatTable {self.path!r} {state}>"

    @property
    def capacity(self) -> int:
        """The number of slots, fixed at create."""
        return lib.vigil_hb_capacity(self._p())

    @property
    def epoch(self) -> int:
        """The global epoch: how many times the table has been ticked."""
        return lib.vigil_hb_epoch(self._p())

    def register(self, pid: Optional[int] = None) -> int:
        """Claim the first vacant slot for `pid` (this process by default) and
        return its number; Full when every slot is taken. A signal (Ctrl-C)
        landing in the call gives the slot back before it is raised: the
        call returns the slot, or leaves nothing registered."""
        out = ffi.new("uint32_t *", _NO_SLOT)  # written by the library only on success
        p = os.getpid() if pid is None else _util.uint(pid, "pid", low=1)
        ptr = self._p()
        try:
            check(lib.vigil_hb_register(ptr, p, out), self.path)
            return out[0]
        except BaseException:
            # Registered, never handed over: given back, past a second
            # signal landing as that starts too (the loop is in this frame:
            # its first point where a signal can land is inside the try).
            while out[0] != _NO_SLOT:
                try:
                    self._unregister_quietly(out[0], out)
                except Exception:
                    break
                except BaseException:
                    pass  # a second signal: the first is raised once it is given back
            raise

    @_signals.protected
    def _unregister_quietly(self, slot: int, out: Any = None) -> None:
        """Give back a slot this handle just registered (the caller never got
        it), the signals held back meanwhile; `out`, where register wrote
        it, is marked empty once it is (so a run again after a signal
        unregisters nothing twice)."""
        armed = _signals.arm()
        try:
            self._beaters.pop(slot, None)
            if self._ptr != ffi.NULL:
                lib.vigil_hb_unregister(self._ptr, slot)
            if out is not None:
                out[0] = _NO_SLOT
        finally:
            _signals.disarm(armed)

    def registered(self, pid: Optional[int] = None) -> Registration:
        """`with table.registered() as slot:` (or `async with`) registers on
        entry and unregisters on exit (Lost on exit if failover took the slot
        meanwhile)."""
        return Registration(self, pid)

    def unregister(self, slot: int) -> None:
        """Give `slot` up (its work units with it); Vacant if nobody holds it;
        Lost if the registration this handle made there was taken by failover
        (the successor that may hold the slot now keeps it)."""
        s = _util.slot(slot, self.capacity)
        self._beaters.pop(s, None)
        check(lib.vigil_hb_unregister(self._p(), s), f"{self.path}: slot {s}")

    def owned(self, slot: int) -> bool:
        """Whether the registration this handle made into `slot` still holds
        it: False once it was unregistered, or taken by a failover scan or
        wait (this process stalled past the grace window, or was judged
        dead), or when `slot` was never registered through this handle.

        A registration is named by the slot's generation, which never
        recurs, so a recycled pid never passes for the old owner. Two loads
        and no system call (vigil_hb_owned): cheap enough to ask before each
        unit of work. The answer is a moment's; `mark`, `clear`, `set_role`
        and `unregister` stay the fence and raise Lost for a taken slot."""
        s = _util.slot(slot, self.capacity)
        return check(lib.vigil_hb_owned(self._p(), s), f"{self.path}: slot {s}") == 1

    def beater(self, slot: int) -> Beater:
        """A `Beater` for `slot`: the cheapest beat Python can make."""
        b = Beater(lib.vigil_hb_beater(self._p(), _util.slot(slot, self.capacity)))
        self._dependents.add(b)
        return b

    def beat(self, slot: int) -> None:
        """Say `slot` is alive at the current epoch; an out-of-range slot is
        ignored, as by the C inline (this is the hot path: no checks)."""
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
        """Advance the global epoch (the watchdog's job); returns the new one."""
        return lib.vigil_hb_tick(self._p())

    def mark(self, slot: int, bit: int) -> None:
        """Record work unit `bit` (0..63) as in flight on `slot`; Vacant if
        nobody holds it, Lost if this handle's registration there was taken
        by failover (nothing is marked in a successor's slot)."""
        check(lib.vigil_hb_mark_in_flight(self._p(), _util.slot(slot, self.capacity), _bit(bit)),
              f"{self.path}: slot {slot}")

    def clear(self, slot: int, bit: int) -> None:
        """Record work unit `bit` (0..63) as done; Lost, clearing nothing, if
        this handle's registration of `slot` was taken by failover (the unit
        was handed to a watchdog: someone may be redoing it)."""
        check(lib.vigil_hb_clear_in_flight(self._p(), _util.slot(slot, self.capacity), _bit(bit)),
              f"{self.path}: slot {slot}")

    def set_role(self, slot: int, role: int) -> None:
        """Set `slot`'s role (a `Role`); elections set it themselves. Lost if
        this handle's registration there was taken by failover."""
        r = _util.uint(role, "role", max(Role))
        check(lib.vigil_hb_set_role(self._p(), _util.slot(slot, self.capacity), r), f"{self.path}: slot {slot}")

    def snapshot(self, slot: int) -> SlotInfo:
        """A consistent read of `slot`; Vacant if nobody holds it, Busy if it
        stays mid-change (a writer killed in the middle: the next failover
        scan repairs it)."""
        s = _util.slot(slot, self.capacity)
        buf = ffi.new("vigil_py_slot_info *")
        rc = lib.vigil_hb_snapshot(self._p(), s, ffi.addressof(buf, "v"))
        if rc == VIGIL_EVACANT:
            raise Vacant(rc, f"{self.path}: slot {s} is vacant")
        check(rc, f"{self.path}: slot {s}")
        v = buf.v
        return SlotInfo(v.pid, _role(v.role), v.last_seen_epoch, v.in_flight)  # type: ignore[arg-type]

    def live_count(self, grace: int) -> int:
        """How many slots beat within the last `grace` epochs."""
        return lib.vigil_hb_live_count(self._p(), _grace(grace))

    def _reclaim_room(self, max: int) -> int:
        """Entries for at most `max` reclaims (1..the largest capacity): never
        more than the table has slots."""
        return min(_util.uint(max, "max", _util.MAX_CAPACITY, 1), self.capacity)

    def failover_scan(self, grace: int, max: int = 64, *, probe: bool = False) -> List[Reclaim]:
        """Vacate every slot stale past `grace` epochs (and, with `probe`,
        every slot whose owner is provably dead) and return at most `max`
        (1..1048576) of them with their work units, each handed to exactly
        one scanner."""
        n_max = self._reclaim_room(max)
        g = _grace(grace)
        out = ffi.new("vigil_reclaim[]", n_max)
        fn = lib.vigil_failover_scan_probe if probe else lib.vigil_failover_scan
        n = check(fn(self._p(), g, out, n_max), self.path)
        return [Reclaim(out[i].slot, out[i].pid, out[i].in_flight) for i in range(n)]

    def failover_wait(self, grace: int, timeout: Optional[float] = None, max: int = 64) -> List[Reclaim]:
        """Block until some slot can be reclaimed (stale past `grace`, or its
        owner exited: seen at once through pidfds) and reclaim it, as
        `failover_scan`; [] when `timeout` seconds pass first (None: no
        deadline). Waits on one table handle take turns (the handle holds
        the wait's pidfds): a second thread's wait begins when the first's
        ends, its timeout running from its call. Ctrl-C ends it within a
        quarter of a second."""
        n_max = self._reclaim_room(max)
        g = _grace(grace)
        _util.timeout_ns(timeout)  # checked now: OutOfRange naming the limit
        out = ffi.new("vigil_reclaim[]", n_max)

        def wait(timeout: Optional[float]) -> List[Reclaim]:
            deadline = _util.deadline(timeout)
            while True:
                # In slices, so that a signal handler (Ctrl-C) runs while it
                # waits; the handle keeps its pidfds from one to the next.
                left = None if deadline is None else max_(0.0, deadline - time.monotonic())
                s = _WAIT_SLICE if left is None else min(left, _WAIT_SLICE)
                n = check(lib.vigil_failover_wait(self._p(), g, _util.timeout_ns(s), out, n_max), self.path)
                if n > 0 or (left is not None and left <= s):
                    return [Reclaim(out[i].slot, out[i].pid, out[i].in_flight) for i in range(n)]

        return self._failover_turns.run(True, timeout, None, wait, list)

    def failover_fileno(self) -> int:
        """The descriptor this table's failover waits sleep on, for an event
        loop (vigil_failover_wait_fd): it polls readable while the owner of
        a watched slot has exited and the slot is not yet reclaimed. Only a
        wait adds owners to it and reclaims: call `failover_wait(grace,
        timeout=0)` when it is readable, and at every tick too (a slot stale
        by epochs, or registered since the last wait, is seen only by a
        wait). `failover_wait_async` does all that. Owned by the table,
        valid until it is closed; never read or close it. OSError (ENOSYS)
        on a kernel without pidfds. (failover_wait_async watches a
        duplicate of it: a reader of one's own on this one is left alone.)"""
        if not _ffi.has("vigil_failover_wait_fd"):
            raise NotImplementedError("the loaded libvigil has no vigil_failover_wait_fd")
        return check(lib.vigil_failover_wait_fd(self._p()), self.path)

    async def failover_wait_async(self, grace: int, timeout: Optional[float] = None, max: int = 64) -> List[Reclaim]:
        """`failover_wait` without blocking the event loop and without a
        thread: the loop watches `failover_fileno()`, so an owner's death
        wakes it at once, and looks again every 50 ms for slots stale by
        epochs and slots registered meanwhile. [] when `timeout` seconds
        pass first (None: no deadline). Cancelled, it leaves nothing behind
        (each look is a call that does not block: a reclaim it made is
        returned, never dropped). A look made while another thread's wait
        holds this table's turn finds nothing and waits again."""
        n_max = self._reclaim_room(max)
        g = _grace(grace)
        _util.timeout_ns(timeout)  # checked now: OutOfRange naming the limit
        until = _util.deadline(timeout)
        loop = asyncio.get_running_loop()
        fd: Optional[int] = None
        try:
            try:
                # A descriptor of this wait's own, a duplicate of the
                # table's (the same epoll instance): the table may be closed
                # meanwhile, and its descriptor's number given to another
                # file, whose reader on this loop ours must never replace
                # nor remove. Each wait has its own reader, too.
                fd = os.dup(self.failover_fileno())
            except (NotImplementedError, OSError):
                pass  # no pidfds (or an older library): the looks alone
            while True:
                got = self.failover_wait(g, timeout=0, max=n_max)
                if got:
                    return got
                left = _ASYNC_LOOK if until is None else min(_ASYNC_LOOK, until - time.monotonic())
                if left <= 0:
                    return []
                woken: "asyncio.Future[None]" = loop.create_future()
                if fd is not None:
                    loop.add_reader(fd, _wake, woken)
                try:
                    await asyncio.wait((woken,), timeout=left)
                finally:
                    if fd is not None:
                        loop.remove_reader(fd)
                    woken.cancel()
        finally:
            if fd is not None:
                os.close(fd)

    def leader_elect(self, grace: int) -> Leader:
        """Make the lowest live pid the coordinator and return it (its term
        grows when leadership changes hands); NoPeers when nothing is live."""
        out = ffi.new("vigil_leader *")
        rc = check(lib.vigil_leader_elect(self._p(), _grace(grace), out), self.path)
        return Leader(out.slot, out.pid, out.term, rc == 1)

    def leader_is(self, slot: int, grace: int) -> bool:
        """Whether `slot` is the recorded leader and still live within `grace`:
        a coordinator asks this before each act it must be leader for."""
        return bool(lib.vigil_leader_is(self._p(), _util.slot(slot, self.capacity), _grace(grace)))

    def leader(self) -> Leader:
        """The leader the last election recorded, without electing (it may
        have died since: `leader_is` says whether it holds); NoPeers when no
        election has named one, Busy while one is installing a new leader."""
        out = ffi.new("vigil_leader *")
        check(lib.vigil_leader_get(self._p(), out), self.path)
        return Leader(out.slot, out.pid, out.term, False)

    def probe(self, slot: int) -> Optional[bool]:
        """True if `slot`'s owner is alive, False if provably dead (gone, a
        zombie, or its pid reused), None if it cannot tell (another pid
        namespace, no /proc); Vacant when nobody holds the slot."""
        s = _util.slot(slot, self.capacity)
        rc = lib.vigil_hb_probe(self._p(), s)
        if rc == 1:
            return True
        if rc == 0:
            return False
        if rc == VIGIL_EVACANT:
            raise exception(rc, f"{self.path}: slot {s}")
        return None


_WAIT_SLICE = 0.25  # failover_wait in slices of this at most, for Ctrl-C
_ASYNC_LOOK = 0.05  # failover_wait_async looks at the table at least this often


def _wake(woken: "asyncio.Future[None]") -> None:
    """failover_wait_async's reader: the wait's descriptor is readable."""
    if not woken.done():
        woken.set_result(None)
_NO_SLOT = _util.U32_MAX  # never a slot: capacities stop at 2^20
max_ = max  # the builtin, under the parameter named max


def _bit(bit: int) -> int:
    return _util.uint(bit, "bit", 63)


def _grace(grace: int) -> int:
    return _util.uint(grace, "grace", _util.U64_MAX)


_util.resolve_annotations(SlotInfo, Reclaim, Leader, _Handle, Beater, Registration, HeartbeatTable)
