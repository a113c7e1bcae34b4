# SPDX-License-Identifier: MIT
"""The epoch barrier: a phase barrier that counts only live peers."""
import asyncio
import os
import threading
import time
from dataclasses import dataclass
from typing import Any, List, Optional, Tuple, Union

from . import _ffi, _util
from ._aio import finish, pool
from ._errors import VIGIL_ETIMEDOUT, VIGIL_EVACANT, Timeout, check
from ._ffi import ffi, lib
from ._table import HeartbeatTable, _Handle
from ._util import DEFAULT_MODE, PathLike

# A wait is made of slices this long at most, so that a signal handler
# (Ctrl-C) runs in time and an abandoned async wait leaves soon. Between
# two slices the arrival stands (vigil_barrier_wait_slice): to the other
# waiters this caller is a waiter that arrived and is paused, and nothing
# is withdrawn until the wait really ends without the round.
_SLICE = 0.25
_SLICE_NS = int(_SLICE * 1e9)
_ASYNC_SLICE = 0.05  # how long a cancelled wait_async may take to leave
_MASK = 0xFFFFFFFF
_INT_P = ffi.typeof("int *")
_SLICED = _ffi.has("vigil_barrier_wait_slice")

# One `arrived` cell per thread, taken for a wait and given back after it
# (ffi.new costs more than a round): a wait nested in a signal handler
# finds the cell taken and makes its own.
_cells = threading.local()


def _take_cell() -> Any:
    cell = getattr(_cells, "free", None)
    if cell is None:
        return ffi.new(_INT_P)
    _cells.free = None
    return cell


def _give_cell(cell: Any) -> None:
    cell[0] = 0
    _cells.free = cell


@dataclass(frozen=True)
class BarrierStats:
    """What a barrier has done since it was created (vigil_barrier_stats):
    rounds released (the epoch, so it wraps at 2^32) and arrivals withdrawn
    by waits that ended without their round (timeouts, cancellations)."""

    releases: int
    withdrawals: int


_WHY = {1: "counted", 2: "dead", 3: "absent"}
_INFO = _ffi.has("vigil_barrier_round_info")


@dataclass(frozen=True)
class BarrierPeer:
    """A registration as a round's record names it: its slot, why it is
    named ("counted"; left out as "dead", its heartbeat lapsed, or "absent",
    live and not arrived when a quorum released the round), its gen (the
    registration, which never recurs) and its pid while it still holds the
    slot (else 0)."""

    slot: int
    why: str
    gen: int
    pid: int


@dataclass(frozen=True)
class BarrierRound:
    """A released round, as the judgement that released it counted: the bound
    peers counted, the unbound arrivals counted, the peers left out, and the
    slot (None: an unbound handle) of the one whose commit released it."""

    round: int
    counted: List[BarrierPeer]
    unbound: int
    left_out: List[BarrierPeer]
    serial_slot: Optional[int]
    serial_gen: int


class Barrier(_Handle):
    """An epoch barrier (vigil_barrier) over a heartbeat table's peers: a
    round releases when every live peer has arrived (or a quorum has), so a
    peer killed mid-phase never deadlocks the others. Make one with
    `create`, open it with `open`; a context manager."""

    _closer = lib.vigil_barrier_close

    def __init__(self, ptr: Any, path: bytes, table: HeartbeatTable) -> None:
        """Not called directly: use `Barrier.create` or `Barrier.open`."""
        self._init_handle()
        self._ptr = ptr
        self.path = os.fsdecode(path)
        self.table = table  # the C handle points into the table's mapping
        self._capacity = table.capacity  # fixed at create: checked against quorums without a call
        # A bound handle stands for one peer: its waits take turns, and the
        # binding changes only while no wait is in progress.
        self._turns = _util.Turns()
        self._bound = False
        table._dependents.add(self)

    @classmethod
    def create(cls, path: PathLike, table: HeartbeatTable, grace: int, mode: int = DEFAULT_MODE, *,
               group: Union[int, str, None] = None) -> "Barrier":
        """Make a barrier for `table`'s peers; `grace` (epochs: how long a
        silent peer still counts as live) is stored in the file, created with
        `mode` and given to `group` (a gid or a name) if given, as
        `HeartbeatTable.create`. FileExistsError if `path` exists."""
        p = _ffi.path_bytes(path)
        g, md = _util.uint(grace, "grace", _util.U64_MAX), _util.mode(mode)
        out = ffi.new("vigil_barrier **")
        _util.created(p, "barrier", (table._p(), g), md, group, out)
        return cls(out[0], p, table)

    @classmethod
    def open(cls, path: PathLike, table: HeartbeatTable, grace: int = 0, *, trust_owner: bool = False) -> "Barrier":
        """Open a barrier made for `table` (CapacityMismatch for another
        table's); `grace` 0 uses the file's, another value overrides it for
        this handle. A file of another kind is BadFile, saying what it is;
        one another user could have made or rewritten is Untrusted unless
        `trust_owner` (as `HeartbeatTable.open`)."""
        p = _ffi.path_bytes(path)
        g = _util.uint(grace, "grace", _util.U64_MAX)
        out = ffi.new("vigil_barrier **")
        flagged = lib.vigil_barrier_open_flags if _ffi.has("vigil_barrier_open_flags") else None
        rc = _util.opened(p, lib.vigil_barrier_open, flagged, (table._p(), g), _util.open_flags(False, trust_owner),
                          out)
        if rc < 0:
            raise _util.open_error(rc, os.fsdecode(p), _util.KIND_BARRIER, table.capacity)
        return cls(out[0], p, table)

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"epoch={self.epoch} live_peers={self.live_peers}"
        return f"<vigil.Barrier {self.path!r} {state}>"

    @property
    def epoch(self) -> int:
        """The round now gathering (wraps at 2^32)."""
        return lib.vigil_barrier_epoch(self._p())

    @property
    def live_peers(self) -> int:
        """How many peers the all-live rule would wait for now."""
        return lib.vigil_barrier_live_peers(self._p())

    def bind(self, slot: int) -> None:
        """Tie this handle to `slot` (this process's registration): its
        arrivals are recorded per slot, which makes the release rule exact,
        and its waits keep the slot beating. One handle per slot.

        A bound handle stands for one peer, so its waits take turns: a wait
        another thread makes on it meanwhile begins when the one in progress
        ends (its timeout running from its call), and is then an arrival of
        the same peer. bind waits for the waits in progress to end. Threads
        that are peers of their own register a slot each and bind a handle
        each."""
        s = _util.slot(slot, self.table.capacity)
        self._turns.when_idle(lambda: self._bind(s))

    def _bind(self, slot: int) -> None:
        check(lib.vigil_barrier_bind(self._p(), slot), self.path)
        self._bound = True

    def stats(self) -> BarrierStats:
        """Rounds released and arrivals withdrawn since the barrier was created."""
        buf = ffi.new("vigil_py_barrier_counters *")
        check(lib.vigil_barrier_stats(self._p(), ffi.addressof(buf, "v")), self.path)
        return BarrierStats(buf.v.releases, buf.v.withdrawals)

    def _quorum(self, quorum: Optional[int]) -> int:
        if quorum is None:
            return 0
        cap = self._capacity
        q = _util.uint(quorum, "quorum")
        if not 1 <= q <= cap:
            raise _util.out_of_range(f"quorum {q} is out of range 1..{cap} (the table has {cap} slots)")
        return q

    def wait(self, epoch: int, *, quorum: Optional[int] = None, timeout: Optional[float] = None) -> bool:
        """Arrive at round `epoch` and wait until it releases: when every live
        peer has arrived, or `quorum` of them (1..the table's capacity).
        True for the one caller whose arrival released it, False for the
        others (and at once for a round that has passed). Timeout once
        `timeout` seconds pass (the arrival is then withdrawn: it never
        helps release a round it left); NoPeers when nobody is live.
        Start a group at the round `start` returns, not at `epoch`."""
        q = self._quorum(quorum)
        if timeout is not None:
            _util.timeout_ns(timeout)  # checked now: OutOfRange naming the limit
        return self._wait(_epoch(epoch), q, timeout, None)

    def wait_info(self, epoch: int, *, quorum: Optional[int] = None,
                  timeout: Optional[float] = None) -> Tuple[bool, Optional[BarrierRound]]:
        """`wait`, and who the round counted and left out (`round_info`)."""
        serial = self.wait(epoch, quorum=quorum, timeout=timeout)
        return serial, self.round_info(epoch)

    def round_info(self, epoch: int) -> Optional[BarrierRound]:
        """Round `epoch`'s release as its record says (vigil_barrier_round_info):
        None when it has not been released or is no longer kept (the last
        eight releases are)."""
        if not _INFO:
            raise NotImplementedError("this libvigil has no vigil_barrier_round_info: update it")
        n = self._capacity
        e = _epoch(epoch)
        info = ffi.new("vigil_barrier_round *")
        counted = ffi.new("vigil_barrier_peer[]", n)
        left = ffi.new("vigil_barrier_peer[]", n)
        info.counted_peers, info.counted_cap = counted, n
        info.left_out_peers, info.left_out_cap = left, n
        rc = lib.vigil_barrier_round_info(self._p(), e, info)
        if rc == VIGIL_EVACANT:
            return None
        check(rc, self.path)

        def peers(arr: Any, k: int) -> List[BarrierPeer]:
            return [BarrierPeer(arr[i].slot, _WHY.get(arr[i].why, "?"), arr[i].gen, arr[i].pid)
                    for i in range(min(k, n))]

        return BarrierRound(info.round, peers(counted, info.counted), info.unbound, peers(left, info.left_out),
                            info.serial_slot - 1 if info.serial_slot else None, info.serial_gen)

    def start(self, participants: int, *, timeout: Optional[float] = None) -> int:
        """The safe start of a group: call once per member, after registering
        and `bind`; returns the first round, the same for every member, once
        `participants` members have arrived (and no live peer of the table is
        left out). Then wait that round, the next, and so on. Waiting from
        `epoch` instead is unsafe when members start at different times (a
        round can release before a late member registers). Timeout after
        `timeout` seconds, the arrival withdrawn."""
        n = _util.uint(participants, "participants", low=1)
        if timeout is not None:
            _util.timeout_ns(timeout)  # checked now: OutOfRange naming the limit
        return self._start(n, timeout, None)

    async def start_async(self, participants: int, *, timeout: Optional[float] = None) -> int:
        """`start` in a worker thread, leaving the event loop free; cancelled,
        it withdraws the arrival before the cancellation completes."""
        n = _util.uint(participants, "participants", low=1)
        if timeout is not None:
            _util.timeout_ns(timeout)  # checked now: OutOfRange naming the limit
        loop = asyncio.get_running_loop()
        gone = threading.Event()
        fut = loop.run_in_executor(pool(), self._start, n, timeout, gone, _ASYNC_SLICE)
        try:
            return await asyncio.shield(fut)
        except asyncio.CancelledError:
            gone.set()
            await finish(fut)
            raise

    def _start(self, participants: int, timeout: Optional[float], gone: Optional[threading.Event],
               slice_max: float = _SLICE) -> int:
        """The start in slices that keep the arrival, as `_wait`, in turn."""
        return self._turns.run(self._bound, timeout, gone,
                               lambda left: self._start_turn(participants, left, gone, slice_max),
                               lambda: self._missed(gone, 0, f"the start of {participants}"))

    def _missed(self, gone: Optional[threading.Event], abandoned: Any, what: str) -> Any:
        """The turn of a bound handle did not come in time: `abandoned` for a
        wait given up (gone), else Timeout."""
        if gone is not None and gone.is_set():
            return abandoned
        raise Timeout(VIGIL_ETIMEDOUT, f"{self.path}: {what}: deadline passed "
                                       f"(another thread was waiting on this bound handle)")

    def _start_turn(self, participants: int, timeout: Optional[float], gone: Optional[threading.Event],
                    slice_max: float) -> int:
        if not _ffi.has("vigil_barrier_start_slice"):
            if not _ffi.has("vigil_barrier_start"):
                raise NotImplementedError("the loaded libvigil has no vigil_barrier_start")
            first = ffi.new("uint32_t *")  # an older library: one call, not interruptible
            check(lib.vigil_barrier_start(self._p(), participants, _util.timeout_ns(timeout), first), self.path)
            return first[0]
        self._p()  # closed: ValueError before anything
        arrived, where = ffi.new(_INT_P), ffi.new("uint32_t *")
        slice_ns = int(slice_max * 1e9)
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            while True:
                if deadline is not None:
                    slice_ns = min(slice_ns, max(0, int((deadline - time.monotonic()) * 1e9)))
                rc = self._call(lib.vigil_barrier_start_slice, participants, slice_ns, arrived, where)
                if rc != VIGIL_ETIMEDOUT:
                    check(rc, self.path)
                    return where[0]
                if (deadline is not None and time.monotonic() >= deadline) or (gone is not None and gone.is_set()):
                    if arrived[0]:
                        rc = self._call(lib.vigil_barrier_withdraw, where[0], arrived)
                        if rc != VIGIL_ETIMEDOUT:
                            check(rc, self.path)
                            return (where[0] + 1) & _MASK  # the start released with us before we left
                    if gone is not None and gone.is_set():
                        return 0
                    raise Timeout(VIGIL_ETIMEDOUT, f"{self.path}: the start of {participants}: deadline passed")
        except BaseException:
            if arrived[0] and not self.closed:
                try:
                    self._call(lib.vigil_barrier_withdraw, where[0], arrived)
                except ValueError:
                    pass  # closed meanwhile: the arrival went with the handle
            raise

    async def wait_async(self, epoch: int, *, quorum: Optional[int] = None,
                         timeout: Optional[float] = None) -> bool:
        """`wait` in a worker thread, leaving the event loop free. Cancelled,
        it withdraws the arrival (within 50 ms) before the cancellation
        completes, so the handle is free for the next wait."""
        q = self._quorum(quorum)
        if timeout is not None:
            _util.timeout_ns(timeout)  # checked now: OutOfRange naming the limit
        loop = asyncio.get_running_loop()
        gone = threading.Event()
        e = _epoch(epoch)
        fut = loop.run_in_executor(pool(), self._wait, e, q, timeout, gone, _ASYNC_SLICE)
        try:
            return await asyncio.shield(fut)
        except asyncio.CancelledError:
            gone.set()  # the thread sees it at its next slice and leaves
            await finish(fut)
            raise

    def _wait(self, my_epoch: int, quorum: int, timeout: Optional[float],
              gone: Optional[threading.Event], slice_max: float = _SLICE) -> bool:
        """The wait, in turn on a bound handle."""
        return self._turns.run(self._bound, timeout, gone,
                               lambda left: self._wait_turn(my_epoch, quorum, left, gone, slice_max),
                               lambda: self._missed(gone, False, f"round {my_epoch}"))

    def _wait_turn(self, my_epoch: int, quorum: int, timeout: Optional[float],
                   gone: Optional[threading.Event], slice_max: float) -> bool:
        """The wait, in slices that keep the arrival; any exception between
        two of them (Ctrl-C, the handle closed) withdraws it."""
        if not _SLICED:
            return self._wait_withdrawing(my_epoch, quorum, timeout, gone, slice_max)
        self._p()  # closed: ValueError before anything
        arrived = _take_cell()
        slice_ns = _SLICE_NS if slice_max == _SLICE else int(slice_max * 1e9)
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            while True:
                if deadline is not None:
                    slice_ns = min(slice_ns, max(0, int((deadline - time.monotonic()) * 1e9)))
                rc = self._call(lib.vigil_barrier_wait_slice, my_epoch, quorum, slice_ns, arrived)
                if rc != VIGIL_ETIMEDOUT:
                    return rc == 1 if rc >= 0 else check(rc, self.path) == 1
                if (deadline is not None and time.monotonic() >= deadline) or (gone is not None and gone.is_set()):
                    rc = self._call(lib.vigil_barrier_withdraw, my_epoch, arrived)
                    if rc != VIGIL_ETIMEDOUT:
                        return check(rc, self.path) == 1  # released before we could leave: passed
                    if gone is not None and gone.is_set():
                        return False
                    raise Timeout(VIGIL_ETIMEDOUT, f"{self.path}: round {my_epoch}: deadline passed")
                # Closed from another thread: the next slice raises ValueError
                # (the close waited for this one), not a crash.
        except BaseException:
            # Ctrl-C between two slices, or the handle closed: leave the round.
            if arrived[0] and not self.closed:
                try:
                    self._call(lib.vigil_barrier_withdraw, my_epoch, arrived)
                except ValueError:
                    pass  # closed meanwhile: the arrival went with the handle
            raise
        finally:
            if not arrived[0]:  # else the handle closed with it standing: keep it out of reuse
                _give_cell(arrived)

    def _wait_withdrawing(self, my_epoch: int, quorum: int, timeout: Optional[float],
                          gone: Optional[threading.Event], slice_max: float) -> bool:
        """For a libvigil without vigil_barrier_wait_slice: each slice that
        ends withdraws and the next arrives again (harmless to the rules,
        but counted in the withdrawals statistic)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        ptr = self._p()
        while True:
            if gone is not None and gone.is_set():
                return False
            slice_s = slice_max
            if deadline is not None:
                slice_s = min(slice_s, max(0.0, deadline - time.monotonic()))
            ns = _util.timeout_ns(slice_s)
            if quorum == 0:
                rc = lib.vigil_barrier_wait_timeout(ptr, my_epoch, ns)
            else:
                rc = lib.vigil_barrier_wait_quorum_timeout(ptr, my_epoch, quorum, ns)
            if rc != VIGIL_ETIMEDOUT:
                return check(rc, self.path) == 1
            if deadline is not None and time.monotonic() >= deadline:
                raise Timeout(VIGIL_ETIMEDOUT, f"{self.path}: round {my_epoch}: deadline passed")
            ptr = self._p()


def _epoch(epoch: int) -> int:
    """A round number: 0..2^32-1 (rounds wrap there; a larger or negative
    number is OutOfRange, never cut to 32 bits)."""
    return _util.uint(epoch, "epoch", _MASK)


_util.resolve_annotations(BarrierStats, Barrier)
