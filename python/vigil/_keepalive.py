# SPDX-License-Identifier: MIT
"""Keeping a lease alive while the work it authorises runs.

`keepalive` is the C keepalive as a context manager: a renewer thread in
the library renews at 0.32 of the TTL, stops for good on a refusal, and is
joined on the way out so that no renewal lands after the caller releases.

`keepalive_async` is the same promise for asyncio (`heartbeat` is its
first name, kept: not to be confused with a heartbeat table's beat,
which says a process is alive, not a lease). For a vigil store the C
keepalive renews, and the event loop watches its descriptor, so a loss is
known at once without a Python thread per lease. For any other object with
a `renew(lease)` method (plain or async) an asyncio task renews on the same
schedule and with the same rules.
"""
import asyncio
import errno
import inspect
import os
import threading
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Callable, Optional, Tuple, Type

from . import _ffi, _fork, _leases, _signals, _util
from ._aio import finish, pool
from ._errors import VIGIL_ELOST, Lost, check, exception
from ._ffi import ffi, lib
from ._leases import Lease, _Store, c_lease

ExcInfo = Tuple[Optional[Type[BaseException]], Optional[BaseException], Optional[TracebackType]]

PERIOD = 0.32  # of the TTL, as the C keepalive: the renewal after two lost ones lands in time


@dataclass(frozen=True)
class KeepaliveStats:
    """What a keepalive has done so far (vigil_keepalive_info); times in seconds."""

    period: float
    renewals: int
    failures: int
    consecutive_failures: int
    lost: bool
    cpu: float


class _Renewal:
    """What the C renewer calls through a Python port: `renew(lease)`.
    Reached from the one module-level callback through a cffi handle that
    the keepalive holds (a callback per keepalive, freed by a stop made from
    inside its own call, would free the code the call returns through)."""

    __slots__ = ("renew", "lease", "thread")

    def __init__(self, renew: Callable[[Any], Any], lease: Any) -> None:
        self.renew = renew
        self.lease = lease
        self.thread: Optional[int] = None  # the renewer's ident, while it is inside renew


def _renew_through(ctx: Any, _clease: Any) -> int:
    """The C port's renew for a Python `renew(lease)`: False or Lost is a
    refusal, another exception a transient failure. `ctx` is resolved to
    its _Renewal first: from then on the call holds it, so a stop made by
    renew itself (which lets the keepalive's handle go) frees nothing the
    call still uses."""
    state: _Renewal = ffi.from_handle(ctx)
    state.thread = threading.get_ident()  # only while inside: an ident is reused once its thread ends
    try:
        result = state.renew(state.lease)
    except Lost:
        return VIGIL_ELOST
    except Exception:
        return -errno.EIO
    finally:
        state.thread = None
    if inspect.isawaitable(result):
        close = getattr(result, "close", None)
        if close:
            close()
        return -errno.EINVAL
    return VIGIL_ELOST if result is False else 0


# Made once and never freed: no C call can return through freed code.
_RENEW_THROUGH = ffi.callback("int(void *, const vigil_lease *)", _renew_through, error=-errno.EIO)


class Keepalive:
    """A running C keepalive for one lease (`vigil.keepalive(store, lease)`).

    `lost` says whether the lease was lost; `fileno()` becomes readable at
    that moment (for select, poll, asyncio). A loss is told once: if the
    block read `lost` as True it has been told, else the exit raises Lost.

    It belongs to the process that started it: in a child forked while it
    runs, stopping, closing or leaving the block frees the child's copy and
    never stops the parent's renewer.

    Any thread may read `lost`, `stats()` and `fileno()` while another
    stops it: each reads the C keepalive under `_using`, and stop takes the
    keepalive out from under the same lock, so the library frees it (at
    once, or when the renewer's own renewal returns) only once no reader
    is inside (issue 27's review: a watchdog thread reading `lost` read
    freed memory)."""

    def __init__(self, store: Any, lease: Any) -> None:
        """Not started yet: `start()`, or enter it with `with`."""
        self.store = store
        self.lease = lease
        self._ka: Any = ffi.NULL
        self._keep: tuple = ()
        self._rc: Optional[int] = None
        self._told = False
        self._stopping = threading.Lock()
        # Held by a reader's C call on _ka and by stop taking _ka away (a
        # moment each: never across a join). Reentrant: a signal handler
        # run on the main thread inside a reader may read or stop it too.
        self._using = threading.RLock()
        self._renewal: Optional[_Renewal] = None  # a Python port's, while it runs
        self._armed: Any = None  # a `with` block's hold on the signal guard
        _fork.renew_in_child(self)

    def _after_fork(self) -> None:
        self._stopping = threading.Lock()  # a parent's thread may have been stopping it
        self._using = threading.RLock()  # or reading it

    def _port(self) -> Tuple[Any, Any, tuple, Optional[_Renewal]]:
        """The C port, the C lease, what must outlive the renewer, and the
        Python port's renewal (None for a store's own port)."""
        port = ffi.new("vigil_lease_port *")
        keep: tuple = ()
        renewal = None
        if isinstance(self.store, _Store):
            port[0] = self.store._port()
        else:
            renew = getattr(self.store, "renew", None)
            if renew is not None:
                if inspect.iscoroutinefunction(renew):
                    raise TypeError("keepalive needs a plain renew(); use `async with vigil.keepalive_async(...)`")
                renewal = _Renewal(renew, self.lease)
                handle = ffi.new_handle(renewal)
                port.ctx, port.renew = handle, _RENEW_THROUGH
                keep = (handle,)
        clease = c_lease(self.lease) if isinstance(self.store, _Store) else _loose_c_lease(self.lease)
        return port, clease, (port, clease) + keep, renewal

    def start(self) -> "Keepalive":
        """Start renewing at 0.32 of the lease's TTL; returns self. A signal
        (Ctrl-C) landing in the call stops the renewer before it is raised."""
        if self._ka != ffi.NULL:
            raise RuntimeError("keepalive already running")
        port, clease, keep, renewal = self._port()
        out = ffi.new("vigil_keepalive **")  # NULL until the library starts one
        try:
            check(lib.vigil_keepalive_start(port, clease, out))
            self._ka, self._keep, self._renewal, self._rc, self._told = out[0], keep, renewal, None, False
            deps = getattr(self.store, "_dependents", None)
            if deps is not None:
                deps.add(self)  # closing the store stops this first
            return self
        except BaseException:
            # Started, never handed over: stopped, past a second signal
            # landing as that starts too (the loop is in this frame: its
            # first point where a signal can land is inside the try).
            owned = self._ka == out[0]  # decided once: stop() empties self._ka
            while out[0] != ffi.NULL:
                try:
                    if owned:
                        self.stop()  # idempotent
                        out[0] = ffi.NULL
                    else:
                        _stop_unowned(out)
                except Exception:
                    break
                except BaseException:
                    pass  # a second signal: the first is raised once it is stopped
            raise

    def _read(self, call: Callable[[Any], Any]) -> Any:
        """call(the C keepalive), with stop held off until it returns;
        ValueError once stopped."""
        with self._using:
            if self._ka == ffi.NULL:
                raise ValueError("keepalive is not running")
            return call(self._ka)

    @property
    def running(self) -> bool:
        """Whether the renewer runs (started and not stopped)."""
        return self._ka != ffi.NULL

    def _is_lost(self) -> bool:
        with self._using:
            if self._ka == ffi.NULL:
                return self._rc == VIGIL_ELOST
            return bool(lib.vigil_keepalive_lost(self._ka))

    @property
    def lost(self) -> bool:
        """Whether the lease was lost (a renewal refused, or the TTL passed
        with none accepted). Reading True counts as being told: the exit then
        raises nothing for it."""
        lost = self._is_lost()
        if lost:
            self._told = True
        return lost

    def fileno(self) -> int:
        """A descriptor that polls readable once the lease is lost; valid until stop."""
        if not _ffi.has("vigil_keepalive_fd"):
            raise NotImplementedError("the loaded libvigil has no vigil_keepalive_fd")
        return check(self._read(lib.vigil_keepalive_fd))

    def stats(self) -> KeepaliveStats:
        """The renewer's period, renewals, failures and CPU time so far."""
        buf = ffi.new("vigil_py_keepalive_info *")
        check(self._read(lambda ka: lib.vigil_keepalive_stats(ka, ffi.addressof(buf, "v"))))
        v = buf.v
        return KeepaliveStats(v.period_ns / 1e9, v.renewals, v.failures, v.consecutive_failures,
                              bool(v.lost), v.cpu_ns / 1e9)

    @_signals.protected
    def stop(self) -> int:
        """Stop and join the renewer: 0, or VIGIL_ELOST if the lease was lost.
        Idempotent. Threads stopping it at once: one stops it, the others
        wait for that stop and return its verdict. A thread reading `lost`,
        `stats()` or `fileno()` meanwhile is waited for (a C call's moment),
        never left with a freed keepalive: after the stop, `lost` is the
        stop's verdict, `stats()` and `fileno()` raise ValueError. In a
        forked child it frees the child's copy only (the library knows
        whose it is).

        A port's renew may stop its own keepalive: that stop cannot wait for
        the renewal it is called from, so it returns at once (no renewal
        follows it) with the verdict known then, and the library frees the
        keepalive when that renewal returns. If another thread is stopping
        it meanwhile (and so waiting for this renewal), it returns 0 at
        once, and that thread's stop returns the verdict."""
        armed = _signals.arm()
        try:
            renewal = self._renewal
            on_renewer = renewal is not None and renewal.thread == threading.get_ident()
            # The renewer never waits for the lock: a stop holding it on
            # another thread is joining the renewer, i.e. waiting for us.
            if not self._stopping.acquire(blocking=not on_renewer):
                return 0
            try:
                if self._ka != ffi.NULL:
                    # Taken away once no reader is inside (readers are a C
                    # call each, never waiting for the renewer: the
                    # renewer's own stop waits a moment at most).
                    with self._using:
                        ka, self._ka = self._ka, ffi.NULL
                    self._rc = lib.vigil_keepalive_stop(ka)
                    self._keep, self._renewal = (), None
                return self._rc if self._rc is not None else 0
            finally:
                self._stopping.release()
        finally:
            _signals.disarm(armed)

    def close(self) -> None:
        """`stop`, for closing code that expects close()."""
        self.stop()

    def __enter__(self) -> "Keepalive":
        _, self._armed = _signals.enter(self.start, lambda ka: ka.stop())
        return self

    @_signals.protected
    def __exit__(self, et: Optional[Type[BaseException]], ev: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        armed, self._armed = self._armed, None
        try:
            rc = self.stop()
            if rc == VIGIL_ELOST and self._told:
                return
            if rc < 0 and et is None:  # the body's own exception wins
                raise exception(rc, f"lease {self.lease.key}")
        finally:
            _signals.disarm(armed)

    def __del__(self) -> None:
        try:
            if self._ka != ffi.NULL:
                self.stop()
        except Exception:
            pass


@_signals.protected
def _stop_unowned(out: Any) -> None:
    """Stop the keepalive in `out` that no Keepalive owns yet, once: it is
    taken out of `out` and stopped with the signals held back, so that
    running this again (after a signal at its start) never stops it twice."""
    armed = _signals.arm()
    try:
        if out[0] != ffi.NULL:
            ka, out[0] = out[0], ffi.NULL
            lib.vigil_keepalive_stop(ka)
    finally:
        _signals.disarm(armed)


def keepalive(store: Any, lease: Any) -> Keepalive:
    """`with vigil.keepalive(store, lease) as ka:` renews `lease` while the block runs.

    On exit the renewer is stopped and joined, so no renewal lands after the
    caller releases; then Lost is raised if the lease was lost, unless the
    block raised or already saw it (`ka.lost` read True). `store` is a
    `Leases` or `Etcd`, or any object with a plain `renew(lease)`. The
    lease stays held after the block: release it, or use `store.lock()`,
    which does all three."""
    return Keepalive(store, lease)


async def _call(fn: Callable[..., Any], *args: Any) -> Any:
    """fn(*args), awaited if it is a coroutine function's."""
    result = fn(*args)
    if inspect.isawaitable(result):
        result = await result
    return result


class AsyncKeepalive:
    """`async with vigil.keepalive_async(leases, lease) as ka:` keeps `lease`
    alive while the block runs (`vigil.Heartbeat` is its first name). `hb.lost` tells the body (reading True counts as
    being told), `await hb.wait_lost()` sleeps until the loss."""

    def __init__(self, leases: Any, lease: Any) -> None:
        """Not started yet: enter it with `async with`."""
        self.leases = leases
        self.lease = lease
        self._lost = False
        self._told = False
        self._event: Optional[asyncio.Event] = None
        self._task: Optional["asyncio.Task[None]"] = None
        self._ka: Optional[Keepalive] = None
        self._fd: Optional[int] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._pid = os.getpid()
        self._armed: Any = None  # the block's hold on the signal guard

    def _is_lost(self) -> bool:
        if not self._lost and self._ka is not None and self._ka._is_lost():
            self._mark_lost()
        return self._lost

    @property
    def lost(self) -> bool:
        """Whether the lease was lost. Reading True counts as being told: the
        exit then raises nothing for it."""
        lost = self._is_lost()
        if lost:
            self._told = True
        return lost

    async def wait_lost(self) -> None:
        """Return once the lease is lost (never, if it is kept to the end);
        its return counts as being told."""
        if not self._is_lost():
            assert self._event is not None
            await self._event.wait()
        self._told = True

    def _mark_lost(self) -> None:
        self._lost = True
        if self._event is not None:
            self._event.set()

    async def __aenter__(self) -> "AsyncKeepalive":
        _, self._armed = _signals.enter(self._start, lambda _: self._unstart())
        return self

    def _start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._event = asyncio.Event()
        self._pid = os.getpid()
        if isinstance(self.leases, _Store):
            self._ka = Keepalive(self.leases, self.lease).start()
            try:
                if _ffi.has("vigil_keepalive_fd"):
                    self._fd = self._ka.fileno()
                    self._loop.add_reader(self._fd, self._on_fd)
                else:  # an older library: look at the flag a few times a TTL
                    self._task = asyncio.create_task(self._poll(_ttl(self.lease) / 8))
            except BaseException:
                self._unstart()
                raise
        else:
            renew = getattr(self.leases, "renew", None)
            if renew is not None:  # a port without renew is accepted and not renewed
                self._task = asyncio.create_task(self._beat(renew, _ttl(self.lease)))

    def _detach(self) -> Tuple[Optional["asyncio.Task[None]"], Optional[Keepalive]]:
        """The loss reader taken off the loop, and the renewal (a task or a
        keepalive) taken off the heartbeat, for the caller to stop."""
        if self._fd is not None and self._loop is not None:
            self._loop.remove_reader(self._fd)
        self._fd = None
        task, ka, self._task, self._ka = self._task, self._ka, None, None
        return task, ka

    def _unstart(self) -> None:
        """Undo _start at once (no await): the reader, the task, the keepalive."""
        task, ka = self._detach()
        if task is not None:
            task.cancel()
        if ka is not None:
            ka.stop()

    def _on_fd(self) -> None:
        assert self._loop is not None and self._fd is not None
        self._loop.remove_reader(self._fd)  # stays readable: once is news enough
        self._fd = None
        self._mark_lost()

    async def _poll(self, every: float) -> None:
        while not self._is_lost():
            await asyncio.sleep(min(every, 0.1))

    async def _beat(self, renew: Callable[[Any], Any], ttl: float) -> None:
        """The C keepalive's schedule and rules on the event loop: renew every
        0.32 ttl; False or Lost stops for good; another exception is retried
        on the next beat; no renewal accepted within the ttl is a loss."""
        loop = asyncio.get_running_loop()
        period = PERIOD * ttl
        ok_at = loop.time()  # start of the request that last renewed (here: the start)
        next_at = ok_at + period
        while True:
            expiry = ok_at + ttl
            await asyncio.sleep(max(0.0, min(next_at, expiry) - loop.time()))
            if loop.time() >= expiry:
                break
            started = loop.time()
            next_at += period
            try:
                result = renew(self.lease)
                if inspect.isawaitable(result):
                    # Local expiry fires even while a renewal is blocked in the port.
                    result = await asyncio.wait_for(result, max(0.0, expiry - started))
            except Lost:
                break
            except Exception:
                if loop.time() >= expiry:
                    break
                continue  # transient: the next beat retries
            if result is False or loop.time() >= expiry:
                break
            ok_at = started
        self._mark_lost()

    async def _stop(self, et: Optional[Type[BaseException]]) -> None:
        """Stop renewing, on every way out: nothing is in flight after it."""
        task, ka = self._detach()
        if task is not None:
            task.cancel()
            await finish(task)
        if ka is not None:
            # stop joins the renewer, which may be inside a network request:
            # in a thread, so the loop runs meanwhile.
            assert self._loop is not None
            rc = 0
            try:
                fut = self._loop.run_in_executor(pool(), ka.stop)
                await finish(fut)
                rc = fut.result()
            finally:
                ka.stop()  # already stopped, unless the executor could not run it
            if rc == VIGIL_ELOST:
                self._mark_lost()
            elif rc < 0 and et is None:
                raise exception(rc, f"lease {self.lease.key}")

    async def _release(self) -> None:
        """Give the lease up for the caller, quietly (an exit by exception)."""
        if isinstance(self.leases, _Store):
            assert self._loop is not None
            await finish(self._loop.run_in_executor(pool(), self.leases._release_for_you, self.lease))
            return
        release = getattr(self.leases, "release", None)
        if release is not None:
            try:
                await _call(release, self.lease)
            except Exception:
                pass

    def _raise_untold(self, et: Optional[Type[BaseException]]) -> None:
        if self._lost and not self._told and et is None:
            raise Lost(VIGIL_ELOST, f"lease {getattr(self.lease, 'key', self.lease)!r} was lost")

    @_signals.protected
    async def __aexit__(self, et: Optional[Type[BaseException]], ev: Optional[BaseException],
                        tb: Optional[TracebackType]) -> None:
        armed, self._armed = self._armed, None
        try:
            if os.getpid() != self._pid:
                # A forked child: the renewal and the lease are the parent's.
                self._unstart()
                return
            try:
                await self._stop(et)
            finally:
                if et is not None:
                    # The code after the block, which would release, will not run.
                    await self._release()
            self._raise_untold(et)
        finally:
            _signals.disarm(armed)


def keepalive_async(leases: Any, lease: Any) -> AsyncKeepalive:
    """`async with vigil.keepalive_async(leases, lease) as ka:` renews `lease` while the block runs.

    The renewal is stopped and awaited on every way out, so none is in
    flight when the caller releases. A block left by an exception or a
    cancellation releases the lease (the release after the block will not
    run); a block that ends normally leaves it held, for the caller to
    release or keep. Lost is raised on exit if the lease was lost, unless
    the block raised or already saw it (`hb.lost` read True, or
    `hb.wait_lost()` returned)."""
    return AsyncKeepalive(leases, lease)


# The first names, kept (programs and the contract use them): a lease kept
# alive under asyncio, not a heartbeat table's beat.
Heartbeat = AsyncKeepalive
heartbeat = keepalive_async


class LeaseLock:
    """`with store.lock(key, owner, ttl, timeout=...) as lease:`, or `async with`:
    acquire_wait, keep the lease alive while the block runs, release it on
    every way out. `lost` and `fileno()` are the keepalive's, while the
    block runs; Lost is raised on exit if the lease was lost and the block
    neither raised nor read `lost` as True."""

    def __init__(self, store: Any, key: str, owner: str, ttl: float, timeout: Optional[float]) -> None:
        """Made by `Leases.lock` and `Etcd.lock`."""
        self.store = store
        self.key, self.owner, self.ttl, self.timeout = key, owner, ttl, timeout
        self.lease: Optional[Lease] = None
        self._ka: Optional[Keepalive] = None
        self._hb: Optional[AsyncKeepalive] = None
        self._lost = False
        self._told = False
        self._pid = os.getpid()
        self._armed: Any = None  # the block's hold on the signal guard

    @property
    def lost(self) -> bool:
        """Whether the lease was lost; reading True counts as being told."""
        watch: Any = self._ka if self._ka is not None else self._hb
        lost = self._lost or (watch is not None and watch._is_lost())
        if lost:
            self._told = True
        return lost

    def fileno(self) -> int:
        """A descriptor that polls readable once the lease is lost (sync use)."""
        if self._ka is None:
            raise ValueError("the lock is not held through `with`")
        return self._ka.fileno()

    # The way in and the way out are protected sections (vigil._signals):
    # a signal (Ctrl-C) landing in them is raised after the lease is given
    # back (on the way in) or after the block is left (on the way out), so
    # no way out leaves the lease held or its keepalive running. The block
    # holds the guard from __enter__ to __exit__, so __exit__ is covered
    # from its first instruction.

    def __enter__(self) -> Lease:
        if self.lease is not None:
            raise RuntimeError(f"lock {self.key!r} is already held through this object")
        lease, pid = None, os.getpid()
        try:
            # The wait stays interruptible: nothing is held until it returns
            # (it gives back a lease it took, if interrupted on the way).
            lease = self.store.acquire_wait(self.key, self.owner, self.ttl, self.timeout)
            ka, armed = _signals.enter(lambda: Keepalive(self.store, lease).start(), lambda ka: ka.stop())
        except BaseException:
            # Given back, past a second signal landing as that starts too
            # (the loop is in this frame, its first point inside the try).
            while lease is not None:
                try:
                    self.store._release_for_you(lease)
                    lease = None
                except Exception:
                    break
                except BaseException:
                    pass  # a second signal: the first is raised once it is given back
            raise
        # No call from enter()'s return to here: nothing a signal could interrupt.
        self.lease, self._ka, self._lost, self._told, self._pid, self._armed = lease, ka, False, False, pid, armed
        return lease

    @_signals.protected
    def __exit__(self, et: Optional[Type[BaseException]], ev: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        armed, self._armed = self._armed, None
        try:
            held = self._take()
            if held is None:
                return
            ka, lease = held
            self._lost = ka.stop() == VIGIL_ELOST
            if not self._lost:
                try:
                    self.store.release(lease)
                except Lost:
                    self._lost = True  # taken after the last renewal
                except Exception:
                    if et is None:
                        raise
            self._raise_untold(et, lease)
        finally:
            _signals.disarm(armed)

    async def __aenter__(self) -> Lease:
        if self.lease is not None:
            raise RuntimeError(f"lock {self.key!r} is already held through this object")
        lease, pid = None, os.getpid()
        try:
            # Cancelled, the wait gives back what it took (acquire_wait_async).
            lease = await self.store.acquire_wait_async(self.key, self.owner, self.ttl, self.timeout)
            hb = AsyncKeepalive(self.store, lease)
            _, armed = _signals.enter(hb._start, lambda _: hb._unstart())
        except BaseException:
            if lease is not None:
                await finish(asyncio.get_running_loop().run_in_executor(pool(), self.store._release_for_you, lease))
            raise
        # No call from enter()'s return to here: nothing a signal could interrupt.
        self.lease, self._hb, self._lost, self._told, self._pid, self._armed = lease, hb, False, False, pid, armed
        return lease

    @_signals.protected
    async def __aexit__(self, et: Optional[Type[BaseException]], ev: Optional[BaseException],
                        tb: Optional[TracebackType]) -> None:
        armed, self._armed = self._armed, None
        try:
            held = self._take()
            if held is None:
                return
            hb, lease = held
            try:
                await hb._stop(et)
            finally:
                self._lost = hb._lost
                if not self._lost:
                    loop = asyncio.get_running_loop()
                    fut = loop.run_in_executor(pool(), _release_checked, self.store, lease)
                    await finish(fut)
                    try:
                        fut.result()
                    except Lost:
                        self._lost = True
                    except Exception:
                        if et is None:
                            raise
            self._raise_untold(et, lease)
        finally:
            _signals.disarm(armed)

    def _take(self) -> Optional[Tuple[Any, Lease]]:
        """What the block holds (its keepalive or heartbeat, and the lease),
        taken off the lock for the way out; None when it holds nothing, and
        in a forked child, whose copy of the renewal is only let go (the
        lease and its renewer are the parent's)."""
        watch = self._ka if self._ka is not None else self._hb
        lease, self._ka, self._hb, self.lease = self.lease, None, None, None
        if watch is None or lease is None:
            return None
        if os.getpid() != self._pid:
            watch.stop() if isinstance(watch, Keepalive) else watch._unstart()
            return None
        return watch, lease

    def _raise_untold(self, et: Optional[Type[BaseException]], lease: Lease) -> None:
        if self._lost and not self._told and et is None:
            raise Lost(VIGIL_ELOST, f"lease {lease.key!r} was lost")


def _release_checked(store: Any, lease: Lease) -> None:
    store.release(lease)


def _loose_c_lease(lease: Any) -> Any:
    """The C keepalive needs only the TTL of a lease it renews through Python;
    the rest is copied where it fits, for the stats and the debugger."""
    c = ffi.new("vigil_lease *")
    c.ttl_ms = max(1, round(_ttl(lease) * 1000))
    for name, size in (("key", 128), ("owner", 64)):
        raw = str(getattr(lease, name, "")).encode("utf-8", "replace").replace(b"\0", b"")
        setattr(c, name, raw[: size - 1])
    token = getattr(lease, "token", 0)
    c.token = token if isinstance(token, int) and 0 <= token < 1 << 64 else 0
    return c


def _ttl(lease: Any) -> float:
    ttl = getattr(lease, "ttl", None)
    if ttl is None and getattr(lease, "ttl_ms", None):
        ttl = lease.ttl_ms / 1000.0
    if ttl is None or not ttl > 0:
        raise ValueError(f"lease {lease!r} has no positive ttl")
    return float(ttl)


# _leases names LeaseLock for its annotations only; now it exists.
_leases.LeaseLock = LeaseLock  # type: ignore[attr-defined]
_util.resolve_annotations(KeepaliveStats, Keepalive, keepalive, AsyncKeepalive, keepalive_async, LeaseLock,
                          _leases._Store, _leases.Leases, _leases.Etcd)
