# SPDX-License-Identifier: MIT
"""The epoch barrier: a phase barrier that counts only live peers."""
from __future__ import annotations

import asyncio
import os
import threading
import time
from typing import Any, Optional

from . import _ffi
from ._aio import finish, pool
from ._errors import VIGIL_ERANGE, VIGIL_ETIMEDOUT, OutOfRange, Timeout, check
from ._ffi import ffi, lib
from ._table import HeartbeatTable, PathLike, _Handle

# A wait is made of slices this long at most, so that a signal handler
# (Ctrl-C) runs in time and an abandoned async wait leaves soon. A slice
# that times out withdraws its arrival and the next arrives again, which the
# barrier's rules make harmless: a round released in between is one whose
# epoch has passed, and the next slice returns at once.
_SLICE = 0.25
_SLICE_NS = int(_SLICE * 1e9)
_ASYNC_SLICE = 0.05  # how long a cancelled wait_async may take to leave


class Barrier(_Handle):
    """A barrier file (vigil_barrier) over a heartbeat table. Use `create` or `open`."""

    _closer = lib.vigil_barrier_close

    def __init__(self, ptr: Any, path: bytes, table: HeartbeatTable) -> None:
        self._init_handle()
        self._ptr = ptr
        self.path = os.fsdecode(path)
        self.table = table  # the C handle points into the table's mapping
        table._dependents.add(self)

    @classmethod
    def create(
        cls, path: PathLike, table: HeartbeatTable, grace: int, mode: int = 0o600
    ) -> "Barrier":
        """Make a barrier for `table`'s peers; `grace` (epochs) is stored in the file."""
        p = _ffi.path_bytes(path)
        out = ffi.new("vigil_barrier **")
        check(lib.vigil_barrier_create_mode(p, table._p(), grace, mode, out), os.fsdecode(p))
        return cls(out[0], p, table)

    @classmethod
    def open(cls, path: PathLike, table: HeartbeatTable, grace: int = 0) -> "Barrier":
        """Open a barrier; `grace` 0 uses the file's, another value overrides it for this handle."""
        p = _ffi.path_bytes(path)
        out = ffi.new("vigil_barrier **")
        check(lib.vigil_barrier_open(p, table._p(), grace, out), os.fsdecode(p))
        return cls(out[0], p, table)

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"epoch={self.epoch} live_peers={self.live_peers}"
        return f"<vigil.Barrier {self.path!r} {state}>"

    @property
    def epoch(self) -> int:
        """The round now gathering."""
        return lib.vigil_barrier_epoch(self._p())

    @property
    def live_peers(self) -> int:
        return lib.vigil_barrier_live_peers(self._p())

    def bind(self, slot: int) -> None:
        """Tie this handle to `slot`: its arrivals are recorded per slot and its
        waits keep the slot beating."""
        check(lib.vigil_barrier_bind(self._p(), slot))

    def wait(
        self, epoch: int, *, quorum: Optional[int] = None, timeout: Optional[float] = None
    ) -> bool:
        """Arrive at round `epoch` and wait for it to release (every live peer, or
        `quorum` of them). True for the one caller whose arrival released it;
        Timeout once `timeout` seconds pass (the arrival is then withdrawn)."""
        ptr = self._ptr
        if timeout is None and ptr:
            # The common case in one C call: a round that releases within a slice.
            if quorum is None:
                rc = lib.vigil_barrier_wait_timeout(ptr, epoch & 0xFFFFFFFF, _SLICE_NS)
            elif quorum > 0:
                rc = lib.vigil_barrier_wait_quorum_timeout(ptr, epoch & 0xFFFFFFFF, quorum, _SLICE_NS)
            else:
                rc = VIGIL_ERANGE
            if rc >= 0:
                return rc == 1
            if rc != VIGIL_ETIMEDOUT:
                check(rc)
        return self._wait(epoch, quorum, timeout, None)

    async def wait_async(
        self, epoch: int, *, quorum: Optional[int] = None, timeout: Optional[float] = None
    ) -> bool:
        """`wait` in a worker thread, leaving the event loop free. Cancelled,
        it withdraws the arrival (within a slice) before the cancellation
        completes, so the handle is free for the next wait."""
        loop = asyncio.get_running_loop()
        gone = threading.Event()
        fut = loop.run_in_executor(pool(), self._wait, epoch, quorum, timeout, gone, _ASYNC_SLICE)
        try:
            return await asyncio.shield(fut)
        except asyncio.CancelledError:
            gone.set()  # the thread sees it at its next slice and leaves
            await finish(fut)
            raise

    def _wait(
        self,
        epoch: int,
        quorum: Optional[int],
        timeout: Optional[float],
        gone: Optional[threading.Event],
        slice_max: float = _SLICE,
    ) -> bool:
        if quorum is not None and quorum <= 0:
            raise OutOfRange(VIGIL_ERANGE, f"quorum {quorum} must be at least 1")
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        my_epoch = epoch & 0xFFFFFFFF
        ptr = self._p()
        while True:
            if gone is not None and gone.is_set():
                return False
            slice_s = slice_max
            if deadline is not None:
                slice_s = min(slice_s, max(0.0, deadline - time.monotonic()))
            ns = _ffi.timeout_ns(slice_s)
            if quorum is None:
                rc = lib.vigil_barrier_wait_timeout(ptr, my_epoch, ns)
            else:
                rc = lib.vigil_barrier_wait_quorum_timeout(ptr, my_epoch, quorum, ns)
            if rc != VIGIL_ETIMEDOUT:
                return check(rc) == 1
            if deadline is not None and time.monotonic() >= deadline:
                raise Timeout(VIGIL_ETIMEDOUT, f"barrier round {my_epoch}: deadline passed")
            ptr = self._p()  # closed from another thread: ValueError, not a crash
