# SPDX-License-Identifier: MIT
"""asyncio helpers shared by the barrier, the leases and the heartbeat."""
import asyncio
import concurrent.futures
import threading
from collections import deque
from typing import Any, Callable, Deque, Optional

from . import _fork

_lock = threading.Lock()
_pool: Optional["WaitPool"] = None


@_fork.at_fork_child
def _fresh_pool() -> None:
    """A forked child has none of the pool's threads (its idle count would
    hand every call to a thread that is not there): a new pool, made at the
    child's first call."""
    global _lock, _pool
    _lock, _pool = threading.Lock(), None


class WaitPool(concurrent.futures.Executor):
    """The threads blocking calls wait in for asyncio: a thread for every call
    in progress, with no cap. A fixed pool (the loop's default executor, or
    any max_workers) can be filled by waits that need one more arrival, from
    a wait still queued behind them: 257 barrier waits of one round in a
    pool of 256 wait for ever. Here a call starts at once on an idle thread,
    or on a new one; a thread idle for IDLE seconds ends."""

    IDLE = 30.0

    def __init__(self) -> None:
        # `with` on the lock itself (its acquire is C): no point where a
        # signal handler could run with it taken and nothing to give it back.
        self._lock = threading.Lock()
        self._cv = threading.Condition(self._lock)
        self._jobs: Deque[Any] = deque()
        self._idle = 0  # threads waiting for a job
        self._threads = 0
        self._shutdown = False

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> "concurrent.futures.Future[Any]":
        """Run fn(*args, **kwargs) on a thread of its own (an idle one, or a
        new one); its Future."""
        fut: "concurrent.futures.Future[Any]" = concurrent.futures.Future()
        job = (fut, fn, args, kwargs)
        with self._lock:
            if self._shutdown:
                raise RuntimeError("cannot schedule new calls after shutdown")
            self._jobs.append(job)
            if self._idle > len(self._jobs) - 1:
                self._cv.notify()
                return fut
            self._threads += 1
        try:
            threading.Thread(target=self._work, name="vigil-wait", daemon=True).start()
        except BaseException:
            with self._lock:
                self._threads -= 1
                # The call is not made: out of the queue, or a thread that
                # freed up meanwhile would run it later for nobody (an
                # acquire whose lease nobody releases). One that took it
                # already runs it: its future is the caller's after all.
                try:
                    self._jobs.remove(job)
                except ValueError:
                    return fut
            fut.cancel()
            raise
        return fut

    def _work(self) -> None:
        while True:
            with self._lock:
                while not self._jobs:
                    if self._shutdown:
                        self._threads -= 1
                        return
                    self._idle += 1
                    woken = self._cv.wait(self.IDLE)
                    self._idle -= 1
                    if not woken and not self._jobs:
                        self._threads -= 1
                        return
                fut, fn, args, kwargs = self._jobs.popleft()
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                result = fn(*args, **kwargs)
            except BaseException as e:
                fut.set_exception(e)
            else:
                fut.set_result(result)
            del fut, fn, args, kwargs

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Refuse new calls; idle threads end (calls in progress finish)."""
        with self._lock:
            self._shutdown = True
            self._cv.notify_all()


def pool() -> WaitPool:
    """The executor vigil's blocking calls wait in under asyncio (not the
    loop's default executor, whose few workers waits could all take)."""
    global _pool
    with _lock:
        if _pool is None:
            _pool = WaitPool()
        return _pool


async def finish(aw: "asyncio.Future[Any]") -> None:  # noqa: UP037
    """Await `aw` to its end even if this task is cancelled meanwhile (then
    re-raise the cancellation): on the way out nothing may stay in flight."""
    cancelled = False
    while not aw.done():
        try:
            await asyncio.shield(aw)
        except asyncio.CancelledError:
            if not aw.done():
                cancelled = True
        except BaseException:
            pass
    if not aw.cancelled():
        aw.exception()  # retrieved: never "exception was never retrieved"
    if cancelled:
        raise asyncio.CancelledError
