# SPDX-License-Identifier: MIT
"""Keeping a lease alive while the work it authorises runs.

`keepalive` is the C keepalive as a context manager: a renewer thread in
the library renews at 0.32 of the TTL, stops for good on a refusal, and is
joined on the way out so that no renewal lands after the caller releases.

`heartbeat` is the same promise for asyncio. For a vigil store the C
keepalive renews, and the event loop watches its descriptor, so a loss is
known at once without a Python thread per lease. For any other object with
a `renew(lease)` method (plain or async) an asyncio task renews on the same
schedule and with the same rules.
"""
from __future__ import annotations

import asyncio
import errno
import inspect
import threading
from dataclasses import dataclass
from typing import Any, Callable, Optional

from . import _ffi
from ._aio import finish, pool
from ._errors import VIGIL_ELOST, Lost, check, exception
from ._ffi import ffi, lib
from ._leases import _Store, c_lease

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


def _python_port(renew: Callable[[Any], Any], lease: Any) -> Any:
    """A C callback that renews through a Python `renew(lease)`: False or Lost
    is a refusal, another exception a transient failure."""

    def cb(_ctx: Any, _clease: Any) -> int:
        try:
            result = renew(lease)
        except Lost:
            return VIGIL_ELOST
        except Exception:
            return -errno.EIO
        if inspect.isawaitable(result):
            close = getattr(result, "close", None)
            if close:
                close()
            return -errno.EINVAL
        return VIGIL_ELOST if result is False else 0

    return ffi.callback("int(void *, const vigil_lease *)", cb, error=-errno.EIO)


class Keepalive:
    """A running C keepalive for one lease. `lost` says whether it was lost;
    `fileno()` becomes readable at that moment (for select, poll, asyncio)."""

    def __init__(self, store: Any, lease: Any) -> None:
        self.store = store
        self.lease = lease
        self._ka: Any = ffi.NULL
        self._keep: tuple = ()
        self._rc: Optional[int] = None
        self._stopping = threading.Lock()

    def start(self) -> "Keepalive":
        if self._ka != ffi.NULL:
            raise RuntimeError("keepalive already running")
        port = ffi.new("vigil_lease_port *")
        keep: tuple = ()
        if isinstance(self.store, _Store):
            port[0] = self.store._port()
        else:
            renew = getattr(self.store, "renew", None)
            if renew is not None:
                if inspect.iscoroutinefunction(renew):
                    raise TypeError("keepalive needs a plain renew(); use `async with vigil.heartbeat(...)`")
                cb = _python_port(renew, self.lease)
                port.renew = cb
                keep = (cb,)
        clease = c_lease(self.lease) if isinstance(self.store, _Store) else _loose_c_lease(self.lease)
        out = ffi.new("vigil_keepalive **")
        check(lib.vigil_keepalive_start(port, clease, out))
        self._ka, self._keep, self._rc = out[0], (port, clease) + keep, None
        deps = getattr(self.store, "_dependents", None)
        if deps is not None:
            deps.add(self)  # closing the store stops this first
        return self

    def _p(self) -> Any:
        if self._ka == ffi.NULL:
            raise ValueError("keepalive is not running")
        return self._ka

    @property
    def running(self) -> bool:
        return self._ka != ffi.NULL

    @property
    def lost(self) -> bool:
        if self._ka == ffi.NULL:
            return self._rc == VIGIL_ELOST
        return bool(lib.vigil_keepalive_lost(self._ka))

    def fileno(self) -> int:
        """A descriptor that polls readable once the lease is lost; valid until stop."""
        if not _ffi.has("vigil_keepalive_fd"):
            raise NotImplementedError("the loaded libvigil has no vigil_keepalive_fd")
        return check(lib.vigil_keepalive_fd(self._p()))

    def stats(self) -> KeepaliveStats:
        buf = ffi.new("vigil_py_keepalive_info *")
        check(lib.vigil_keepalive_stats(self._p(), ffi.addressof(buf, "v")))
        v = buf.v
        return KeepaliveStats(v.period_ns / 1e9, v.renewals, v.failures, v.consecutive_failures,
                              bool(v.lost), v.cpu_ns / 1e9)

    def stop(self) -> int:
        """Stop and join the renewer: 0, or VIGIL_ELOST if the lease was lost.
        Idempotent, and safe from several threads at once."""
        with self._stopping:
            if self._ka != ffi.NULL:
                ka, self._ka = self._ka, ffi.NULL
                self._rc = lib.vigil_keepalive_stop(ka)
                self._keep = ()
            return self._rc if self._rc is not None else 0

    close = stop

    def __enter__(self) -> "Keepalive":
        return self.start()

    def __exit__(self, et: Any, ev: Any, tb: Any) -> None:
        rc = self.stop()
        if rc < 0 and et is None:  # the body's own exception wins
            raise exception(rc, f"lease {self.lease.key}")

    def __del__(self) -> None:
        try:
            self.stop()
        except Exception:
            pass


def keepalive(store: Any, lease: Any) -> Keepalive:
    """`with vigil.keepalive(store, lease) as ka:` renews `lease` while the block runs.

    On exit the renewer is stopped and joined; then Lost is raised if the
    lease was lost and the block raised nothing. `store` is a `Leases` or
    `Etcd`, or any object with a plain `renew(lease)`."""
    return Keepalive(store, lease)


class Heartbeat:
    """`async with vigil.heartbeat(leases, lease) as hb:`; `hb.lost` tells the
    body, `await hb.wait_lost()` sleeps until it is."""

    def __init__(self, leases: Any, lease: Any) -> None:
        self.leases = leases
        self.lease = lease
        self._lost = False
        self._event: Optional[asyncio.Event] = None
        self._task: Optional["asyncio.Task[None]"] = None
        self._ka: Optional[Keepalive] = None
        self._fd: Optional[int] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None

    @property
    def lost(self) -> bool:
        if not self._lost and self._ka is not None and self._ka.lost:
            self._mark_lost()
        return self._lost

    async def wait_lost(self) -> None:
        """Return once the lease is lost (never, if it is kept to the end)."""
        if self.lost:
            return
        assert self._event is not None
        await self._event.wait()

    def _mark_lost(self) -> None:
        self._lost = True
        if self._event is not None:
            self._event.set()

    async def __aenter__(self) -> "Heartbeat":
        self._loop = asyncio.get_running_loop()
        self._event = asyncio.Event()
        if isinstance(self.leases, _Store):
            self._ka = Keepalive(self.leases, self.lease).start()
            try:
                if _ffi.has("vigil_keepalive_fd"):
                    self._fd = self._ka.fileno()
                    self._loop.add_reader(self._fd, self._on_fd)
                else:  # an older library: look at the flag a few times a TTL
                    self._task = asyncio.create_task(self._poll(_ttl(self.lease) / 8))
            except BaseException:
                self._fd = None
                self._ka.stop()
                self._ka = None
                raise
        else:
            renew = getattr(self.leases, "renew", None)
            if renew is not None:  # a port without renew is accepted and not renewed
                self._task = asyncio.create_task(self._beat(renew, _ttl(self.lease)))
        return self

    def _on_fd(self) -> None:
        assert self._loop is not None and self._fd is not None
        self._loop.remove_reader(self._fd)  # stays readable: once is news enough
        self._fd = None
        self._mark_lost()

    async def _poll(self, every: float) -> None:
        while not self.lost:
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

    async def __aexit__(self, et: Any, ev: Any, tb: Any) -> None:
        if self._fd is not None and self._loop is not None:
            self._loop.remove_reader(self._fd)
            self._fd = None
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await finish(task)
        ka, self._ka = self._ka, None
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
        if self._lost and et is None:
            raise Lost(VIGIL_ELOST, f"lease {getattr(self.lease, 'key', self.lease)!r} was lost")


def heartbeat(leases: Any, lease: Any) -> Heartbeat:
    """`async with vigil.heartbeat(leases, lease) as hb:` renews `lease` while the block runs.

    Cancelled and awaited on every way out (success, error, cancellation),
    so no renewal is in flight when the caller releases; then Lost is raised
    if the lease was lost and the block raised nothing."""
    return Heartbeat(leases, lease)


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
