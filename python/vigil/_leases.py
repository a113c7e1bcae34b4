# SPDX-License-Identifier: MIT
"""Leases: the embedded store of one host (`Leases`) and etcd across hosts (`Etcd`).

Both have the same calls, with times in seconds as floats; the C library
takes milliseconds and nanoseconds, converted here and nowhere else.
"""
import asyncio
import enum
import errno
import os
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Optional, Tuple, Union

from . import _ffi, _signals, _util
from ._aio import finish, pool
from ._errors import VIGIL_EBUSY, VIGIL_ELOST, VIGIL_ETIMEDOUT, VIGIL_EVACANT, Lost, check, exception
from ._ffi import ffi, lib
from ._table import _Handle
from ._util import DEFAULT_MODE, KEY_MAX, OWNER_MAX, PathLike

if TYPE_CHECKING:
    from ._keepalive import LeaseLock


class LeaseState(enum.IntEnum):
    """What a store's entry holds (enum vigil_lease_state)."""

    VACANT = 0
    HELD = 1
    EXPIRED = 2
    RELEASED = 3
    CHANGING = 4


@dataclass(frozen=True)
class Lease:
    """A held lease (vigil_lease): `key`, `owner`, `token` (the fencing
    token: strictly greater each time the key changes hands; hand it to
    whatever the lease protects), `ttl` in seconds, `id` the backend's lease
    id (etcd's; the store's entry + 1)."""

    key: str
    owner: str
    token: int
    ttl: float
    id: int = 0
    ttl_ms: int = field(default=0, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.ttl_ms:
            object.__setattr__(self, "ttl_ms", _util.ttl_ms(self.ttl))


@dataclass(frozen=True)
class LeaseInfo:
    """What a store says about a key (vigil_lease_info); times in seconds,
    `expires_in` from now, `pid` the holder's where the backend knows it."""

    key: str
    owner: str
    token: int
    ttl: float
    expires_in: float
    state: LeaseState
    pid: int


def _str(raw: Any) -> str:
    return ffi.string(raw).decode("utf-8", "replace")


def _lease_from(c: Any) -> Lease:
    return Lease(_str(c.key), _str(c.owner), c.token, c.ttl_ms / 1000.0, c.id, c.ttl_ms)


def _info_from(c: Any) -> LeaseInfo:
    try:
        state = LeaseState(c.state)
    except ValueError:  # a state a newer library knows
        state = c.state
    return LeaseInfo(
        _str(c.key), _str(c.owner), c.token, c.ttl_ms / 1000.0, c.expires_in_ms / 1000.0, state, c.pid
    )


def _key(key: Union[str, bytes]) -> bytes:
    return _util.text(key, "key", KEY_MAX, empty=False)


def _owner(owner: Union[str, bytes]) -> bytes:
    return _util.text(owner, "owner", OWNER_MAX)


def c_lease(lease: Any) -> Any:
    """A vigil_lease for `lease` (a `Lease`, or anything with the same fields)."""
    c = ffi.new("vigil_lease *")
    c.key = _key(lease.key)
    c.owner = _owner(lease.owner)
    c.token = _util.uint(lease.token, "token", _util.U64_MAX)
    ms = getattr(lease, "ttl_ms", 0)
    c.ttl_ms = _util.uint(ms, "ttl_ms", _util.U64_MAX) if ms else _util.ttl_ms(lease.ttl)
    c.id = _util.uint(getattr(lease, "id", 0) or 0, "id", (1 << 63) - 1, -(1 << 63))
    return c


def _identity(lease: Any) -> Tuple[Any, Any, Any]:
    return (lease.key, lease.token, getattr(lease, "id", 0))


class _Store(_Handle):
    """The calls `Leases` and `Etcd` share; a subclass names its C functions."""

    _library: Any = None
    _prefix: str = ""
    _slice: Optional[float] = 0.25
    _least_ttl_ms = 1

    def _init_store(self) -> None:
        self._init_handle()
        # Leases vigil released on the caller's behalf (a heartbeat or lock
        # left by an exception): releasing one again is quiet, not Lost.
        self._released_for_you: "OrderedDict[Tuple[Any, Any, Any], None]" = OrderedDict()
        self._released_lock = threading.Lock()

    def _after_fork(self) -> None:
        super()._after_fork()
        self._released_lock = threading.Lock()

    def _c(self, name: str) -> Any:
        return getattr(self._library, self._prefix + name)

    def _has(self, name: str) -> bool:
        return _ffi.has(self._prefix + name, self._library)

    def _describe(self) -> str:
        raise NotImplementedError

    def _where(self, key: Union[str, bytes]) -> str:
        k = key if isinstance(key, str) else os.fsdecode(key)
        return f"{self._describe()}: {k}"

    def _ttl(self, ttl: float) -> int:
        return _util.ttl_ms(ttl, self._least_ttl_ms)

    def acquire(self, key: str, owner: str, ttl: float) -> Lease:
        """Take `key` for `owner` for `ttl` seconds; Busy while anyone holds it
        unexpired. `key` is at most 127 bytes of UTF-8, `owner` at most 63.
        A signal (Ctrl-C) landing in the call gives the lease back before it
        is raised: the call returns the lease, or leaves nothing held."""
        out = ffi.new("vigil_lease *")  # token 0 until the library writes a lease
        k, o, ms = _key(key), _owner(owner), self._ttl(ttl)
        fn, ptr = self._c("acquire"), self._p()
        return self._handed_over(out, lambda: check(fn(ptr, k, o, ms, out), self._where(key)))

    def _handed_over(self, out: Any, call: Callable[[], Any]) -> Lease:
        """call(), which leaves a lease in `out` (or raises), and that lease;
        if anything is raised before it is returned (an error, a signal
        between the library's answer and the return), the lease is given
        back first, past a second signal landing as that starts too (the
        loop is here, in this frame: its first point where a signal can
        land is inside the try, as in _util.Turns.run)."""
        try:
            call()
            return _lease_from(out)
        except BaseException:
            while out.token:
                try:
                    self._give_back(out)
                except Exception:
                    break
                except BaseException:
                    pass  # a second signal: the first is raised once it is given back
            raise

    def _give_back(self, out: Any) -> None:
        """Release the lease a call wrote in `out` and never handed over, and
        zero its token once done (so a run again after a signal releases
        nothing twice). The library writes `out` only on success, and a
        token is never 0."""
        if out.token:
            self._release_for_you(_lease_from(out))
            out.token = 0

    def acquire_wait(self, key: str, owner: str, ttl: float, timeout: Optional[float] = None) -> Lease:
        """`acquire`, sleeping until `key` is released or its holder's lease
        lapses; Timeout after `timeout` seconds (None: no deadline, 0: one try).
        Ctrl-C ends the wait (within a quarter of a second on a store) and
        leaves nothing held."""
        return self._acquire_wait(key, owner, ttl, timeout, None)

    def _acquire_wait(self, key: str, owner: str, ttl: float, timeout: Optional[float],
                      gone: Optional[threading.Event], slice_max: Optional[float] = None) -> Lease:
        if not self._has("acquire_wait"):
            raise NotImplementedError(f"the loaded library has no {self._prefix}acquire_wait")
        fn = self._c("acquire_wait")
        k, o, ms = _key(key), _owner(owner), self._ttl(ttl)
        ns = _util.timeout_ns(timeout)
        out = ffi.new("vigil_lease *")  # token 0 until the library writes a lease
        slice_s = slice_max or self._slice
        deadline = _util.deadline(timeout)

        def wait() -> None:
            nonlocal slice_s
            if slice_s is None:
                check(fn(self._p(), k, o, ms, ns, out), self._where(key))
                return
            # In slices, so that a signal handler (Ctrl-C) runs while it
            # waits: the store's waiters hold no place in a queue that
            # leaving would lose.
            while True:
                if deadline is not None:
                    slice_s = min(slice_s, max(0.0, deadline - time.monotonic()))
                rc = fn(self._p(), k, o, ms, _util.timeout_ns(slice_s), out)
                if rc != VIGIL_ETIMEDOUT:
                    check(rc, self._where(key))
                    return
                if (deadline is not None and time.monotonic() >= deadline) or (gone is not None and gone.is_set()):
                    raise exception(rc, self._where(key))

        return self._handed_over(out, wait)

    def renew(self, lease: Lease) -> None:
        """Extend `lease` by its TTL; Lost once it expired or changed hands."""
        check(self._c("renew")(self._p(), c_lease(lease)), self._where(lease.key))

    def release(self, lease: Lease) -> None:
        """Give `lease` up; Lost if it was no longer held (quiet for a lease a
        heartbeat or lock already released for you when its block raised)."""
        rc = self._c("release")(self._p(), c_lease(lease))
        if rc == VIGIL_ELOST and self._forget_released(lease):
            return
        check(rc, self._where(lease.key))

    @_signals.protected
    def _release_for_you(self, lease: Any) -> None:
        """Release on the caller's behalf (an exit by exception), quietly,
        the signals held back until it is done."""
        armed = _signals.arm()
        try:
            try:
                self.release(lease)
            except Exception:
                return
            with self._released_lock:
                self._released_for_you[_identity(lease)] = None
                while len(self._released_for_you) > 1024:
                    self._released_for_you.popitem(last=False)
        finally:
            _signals.disarm(armed)

    def _forget_released(self, lease: Any) -> bool:
        with self._released_lock:
            try:
                del self._released_for_you[_identity(lease)]
            except KeyError:
                return False
            return True

    def get(self, key: str) -> Optional[LeaseInfo]:
        """The holder of `key`, or None when nobody holds it."""
        buf = ffi.new("vigil_py_lease_info *")
        rc = self._get(_key(key), ffi.addressof(buf, "v"))
        if rc == VIGIL_EVACANT:
            return None
        check(rc, self._where(key))
        return _info_from(buf.v)

    def _get(self, key: bytes, out: Any) -> int:
        return self._c("get")(self._p(), key, out)

    def _port(self) -> Any:
        """The C port the keepalive renews through (valid while the store is open)."""
        return self._c("port")(self._p())

    def lock(self, key: str, owner: str, ttl: float, timeout: Optional[float] = None) -> "LeaseLock":
        """`with store.lock(key, owner, ttl) as lease:` (or `async with`):
        waits for `key` (Timeout after `timeout` seconds; None waits for
        ever), keeps the lease alive while the block runs, and releases it
        on every way out. Lost is raised on exit if the lease was lost and
        the block neither raised nor saw it through the lock's `lost`."""
        from ._keepalive import LeaseLock

        _key(key), _owner(owner), self._ttl(ttl)  # checked now, not at entry
        if timeout is not None:
            _util.timeout_ns(timeout)  # checked now: OutOfRange naming the limit
        return LeaseLock(self, key, owner, ttl, timeout)

    async def acquire_async(self, key: str, owner: str, ttl: float) -> Lease:
        """`acquire` in a worker thread, leaving the event loop free (an etcd
        request can take a while). Cancelled, it waits for the request in
        flight and releases what it got before the cancellation completes."""
        _key(key), _owner(owner), self._ttl(ttl)
        return await self._in_thread(self.acquire, key, owner, ttl)

    async def acquire_wait_async(self, key: str, owner: str, ttl: float,
                                 timeout: Optional[float] = None) -> Lease:
        """`acquire_wait` without blocking the event loop. Cancelled, the wait
        leaves (a store's within 50 ms; an etcd wait's place in the key's
        queue is given up) and nothing stays held."""
        _key(key), _owner(owner), self._ttl(ttl)
        if timeout is not None:
            _util.timeout_ns(timeout)  # checked now: OutOfRange naming the limit
        gone = threading.Event()
        return await self._in_thread(self._acquire_wait, key, owner, ttl, timeout, gone, 0.05, gone=gone)

    async def _in_thread(self, fn: Callable[..., Lease], *args: Any,
                         gone: Optional[threading.Event] = None) -> Lease:
        """Run fn(*args) in a worker thread; cancelled, tell it through
        `gone`, wait for it, and release what it acquired meanwhile."""
        loop = asyncio.get_running_loop()
        fut = loop.run_in_executor(pool(), fn, *args)
        try:
            return await asyncio.shield(fut)
        except asyncio.CancelledError:
            if gone is not None:
                gone.set()
            try:
                await finish(fut)
            finally:
                if not fut.cancelled() and fut.exception() is None:
                    await finish(loop.run_in_executor(pool(), self._release_for_you, fut.result()))
            raise


class Leases(_Store):
    """The embedded lease store (vigil_leases): leases in a file on this host,
    shared by every process that maps it (and by `vigil lock`). Make one with
    `create`, open it with `open`; a context manager."""

    _closer = lib.vigil_leases_close
    _prefix = "vigil_leases_"
    _library = lib
    _least_ttl_ms = 3

    def __init__(self, ptr: Any, path: bytes) -> None:
        """Not called directly: use `Leases.create` or `Leases.open`."""
        self._init_store()
        self._ptr = ptr
        self.path = os.fsdecode(path)

    @classmethod
    def create(cls, path: PathLike, capacity: int, mode: int = DEFAULT_MODE, *,
               group: Union[int, str, None] = None) -> "Leases":
        """Make a store of `capacity` keys (1..1048576), its file created with
        `mode` and given to `group` (a gid or a name) if given, as
        `HeartbeatTable.create`; FileExistsError if `path` exists."""
        p = _ffi.path_bytes(path)
        cap, md = _util.capacity(capacity), _util.mode(mode)
        out = ffi.new("vigil_leases **")
        _util.created(p, "leases", (cap,), md, group, out)
        return cls(out[0], p)

    @classmethod
    def open(cls, path: PathLike, *, readonly: bool = False, trust_owner: bool = False) -> "Leases":
        """Map an existing store (`readonly`: for `get` and `entry` only). A file
        of another kind is BadFile, saying what the file is; one another
        user could have made or rewritten is Untrusted unless `trust_owner`
        (as `HeartbeatTable.open`)."""
        p = _ffi.path_bytes(path)
        out = ffi.new("vigil_leases **")
        flagged = lib.vigil_leases_open_flags if _ffi.has("vigil_leases_open_flags") else None
        plain = lib.vigil_leases_open_readonly if readonly else lib.vigil_leases_open
        rc = _util.opened(p, plain, flagged, (), _util.open_flags(readonly, trust_owner), out)
        if rc < 0:
            raise _util.open_error(rc, os.fsdecode(p), _util.KIND_LEASES)
        return cls(out[0], p)

    def _describe(self) -> str:
        return self.path

    def __repr__(self) -> str:
        return f"<vigil.Leases {self.path!r}{' closed' if self.closed else ''}>"

    @property
    def capacity(self) -> int:
        """How many keys the store holds at once, fixed at create."""
        return lib.vigil_leases_capacity(self._p())

    def entry(self, index: int) -> Optional[LeaseInfo]:
        """Entry `index` (0..capacity-1) as it stands (held, expired or
        released); None when vacant."""
        cap = self.capacity
        i = _util.uint(index, "index")
        if i >= cap:
            raise _util.out_of_range(f"index {i} is out of range 0..{cap - 1} (the store has {cap} entries)")
        buf = ffi.new("vigil_py_lease_info *")
        rc = lib.vigil_leases_entry(self._p(), i, ffi.addressof(buf, "v"))
        if rc == VIGIL_EVACANT:
            return None
        if rc != VIGIL_EBUSY:
            check(rc, self.path)
        return _info_from(buf.v)

    def _get(self, key: bytes, out: Any) -> int:
        if self._has("get"):
            return lib.vigil_leases_get(self._p(), key, out)
        # A library without vigil_leases_get: the same answer from the entries.
        ptr = self._p()
        for i in range(lib.vigil_leases_capacity(ptr)):
            if lib.vigil_leases_entry(ptr, i, out) == 0 and ffi.string(out.key) == key:
                return 0 if out.state == LeaseState.HELD and out.expires_in_ms > 0 else VIGIL_EVACANT
        return VIGIL_EVACANT


class Etcd(_Store):
    """Leases on etcd v3 (libvigil-etcd), across hosts:
    `Etcd("http://10.0.0.1:2379,http://10.0.0.2:2379")`. A vigil holder and
    `etcdctl lock KEY` exclude each other. `connect_timeout` and `timeout`
    (seconds) bound each request's connection and whole exchange. A context
    manager.

    For a production etcd, the keywords are etcdctl's: `cacert` (a PEM CA
    bundle that verifies the servers, instead of the system's), `cert` and
    `key` (a client certificate and its key), `user` and `password` (etcd
    authentication; the token is renewed when etcd says it expired), and
    `namespace` (prepended to every key, as etcd's grpc-proxy --namespace
    does). A file that cannot be read is an OSError at once; a refusal
    (authentication, permission, a client certificate) a PermissionError,
    a server certificate that fails verification a `vigil.Error`."""

    _prefix = "vigil_etcd_"
    # One call for the whole wait: an etcd waiter holds its place in the
    # key's queue (its revision), which leaving and coming back would lose.
    _slice = None

    def __init__(self, endpoints: str, *, cacert: Optional[str] = None, cert: Optional[str] = None,
                 key: Optional[str] = None, user: Optional[str] = None, password: Optional[str] = None,
                 namespace: Optional[str] = None, connect_timeout: Optional[float] = None,
                 timeout: Optional[float] = None) -> None:
        """Connect to `endpoints` (comma-separated URLs)."""
        self._init_store()
        self._library = _ffi.etcd_lib()
        self.endpoints = endpoints
        self.namespace = namespace
        self._options = {"cacert": cacert, "cert": cert, "key": key, "user": user, "password": password,
                         "namespace": namespace, "connect_timeout": connect_timeout, "timeout": timeout}
        out = ffi.new("vigil_etcd **")

        def ms(s: Optional[float], name: str) -> int:  # whole ms, as C takes them: 32 bits
            return 0 if s is None else max(1, round(_util.seconds(s, name, _util.U32_MAX / 1000) * 1000))

        strings = {name: value for name, value in (("cacert", cacert), ("cert", cert), ("key", key),
                                                   ("user", user), ("password", password),
                                                   ("namespace", namespace)) if value is not None}
        if strings:
            if not _ffi.has("vigil_etcd_connect_opts", self._library):
                raise OSError(errno.ENOSYS, "this libvigil-etcd has no TLS, auth or namespace options", endpoints)
            # The C strings live until connect returns; it copies them.
            keep = {name: ffi.new("char[]", _ffi.path_bytes(v, name) if name in ("cacert", "cert", "key")
                                  else _util.text(v, name))
                    for name, v in strings.items()}
            opts = ffi.new("struct vigil_etcd_options *")
            for name, buf in keep.items():
                setattr(opts, name, buf)
            opts.dial_timeout_ms = ms(connect_timeout, "connect_timeout")
            opts.request_timeout_ms = ms(timeout, "timeout")
            rc = self._library.vigil_etcd_connect_opts(_util.text(endpoints, "endpoints"), opts, out)
            if rc < 0:
                why = ffi.string(self._library.vigil_etcd_errmsg()).decode("utf-8", "replace")
                raise exception(rc, f"{endpoints}: {why}" if why else endpoints)
            self._ptr = out[0]
            return
        check(self._library.vigil_etcd_connect(_util.text(endpoints, "endpoints"), out), endpoints)
        self._ptr = out[0]
        if connect_timeout is not None or timeout is not None:
            rc = self._library.vigil_etcd_set_timeout(self._ptr, ms(connect_timeout, "connect_timeout"),
                                                      ms(timeout, "timeout"))
            if rc < 0:
                self.close()
                check(rc, endpoints)

    def _clone(self) -> "Etcd":
        """Another connection to the same cluster with the same options."""
        return type(self)(self.endpoints, **self._options)

    def close(self) -> None:
        """Close the connection; idempotent. Keepalives on it are stopped first.
        In a forked child the connection is the parent's (a TLS session, a
        lock the fork may have caught held): it is only forgotten."""
        if self._ptr == ffi.NULL:
            return
        for dep in list(self._dependents):
            dep.close()
        ptr, self._ptr = self._ptr, ffi.NULL
        if os.getpid() == self._pid:
            self._library.vigil_etcd_close(ptr)

    def _describe(self) -> str:
        return self.endpoints

    def __repr__(self) -> str:
        return f"<vigil.Etcd {self.endpoints!r}{' closed' if self.closed else ''}>"

    async def acquire_wait_async(self, key: str, owner: str, ttl: float,
                                 timeout: Optional[float] = None) -> Lease:
        """`acquire_wait` without blocking the event loop, on a connection of
        its own in a daemon thread (the wait is one call, which keeps its
        place in the key's queue). Cancelled, the task ends at once; the
        wait goes on until its timeout or its turn, then gives the key up
        (a process that exits meanwhile leaves it to lapse with its TTL)."""
        _key(key), _owner(owner), self._ttl(ttl)
        if timeout is not None:
            _util.timeout_ns(timeout)  # checked now: OutOfRange naming the limit
        self._p()
        loop = asyncio.get_running_loop()
        woken: "asyncio.Future[None]" = loop.create_future()
        # The hand-over: the thread leaves its result here under the lock,
        # or, once the task has gone, gives the key back itself.
        box: dict = {"lease": None, "error": None, "ready": False, "abandoned": False}
        lock = threading.Lock()

        def wake() -> None:
            if not woken.done():
                woken.set_result(None)

        def run() -> None:
            lease, error, conn = None, None, None
            try:
                conn = self._clone()
                lease = conn.acquire_wait(key, owner, ttl, timeout)
            except BaseException as e:  # raised in the task
                error = e
            give_back = None
            with lock:
                if box["abandoned"]:
                    give_back = lease
                else:
                    box.update(lease=lease, error=error, ready=True)
            if give_back is None:
                try:
                    loop.call_soon_threadsafe(wake)
                except RuntimeError:  # the loop is closed: nobody will take it
                    with lock:
                        box["abandoned"] = True
                        give_back, box["lease"] = box["lease"], None
            if give_back is not None and conn is not None:
                conn._release_for_you(give_back)
            if conn is not None:
                conn.close()

        threading.Thread(target=run, name="vigil-etcd-wait", daemon=True).start()
        try:
            await woken
        except asyncio.CancelledError:
            with lock:
                box["abandoned"] = True
                lease, box["lease"] = box["lease"], None
            if lease is not None:
                await finish(loop.run_in_executor(pool(), self._release_for_you, lease))
            raise
        with lock:
            lease, error = box["lease"], box["error"]
            box["lease"] = box["error"] = None
        if error is not None:
            raise error
        assert lease is not None
        return lease


_util.resolve_annotations(Lease, LeaseInfo, _Store, Leases, Etcd)
