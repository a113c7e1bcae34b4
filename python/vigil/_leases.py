# SPDX-License-Identifier: MIT
"""Leases: the embedded store of one host (`Leases`) and etcd across hosts (`Etcd`).

Both have the same calls, with times in seconds as floats; the C library
takes milliseconds and nanoseconds, converted here and nowhere else.
"""
from __future__ import annotations

import enum
import math
import os
import time
from dataclasses import dataclass, field
from typing import Any, Optional

from . import _ffi
from ._errors import (
    VIGIL_EBUSY,
    VIGIL_ERANGE,
    VIGIL_ETIMEDOUT,
    VIGIL_EVACANT,
    OutOfRange,
    check,
    exception,
)
from ._ffi import ffi, lib
from ._table import PathLike, _Handle


class LeaseState(enum.IntEnum):
    """enum vigil_lease_state."""

    VACANT = 0
    HELD = 1
    EXPIRED = 2
    RELEASED = 3
    CHANGING = 4


@dataclass(frozen=True)
class Lease:
    """A held lease (vigil_lease). `token` is the fencing token, `ttl` in seconds,
    `id` the backend's lease id (etcd's; the store's entry + 1)."""

    key: str
    owner: str
    token: int
    ttl: float
    id: int = 0
    ttl_ms: int = field(default=0, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.ttl_ms:
            object.__setattr__(self, "ttl_ms", _ttl_ms(self.ttl))


@dataclass(frozen=True)
class LeaseInfo:
    """What a store says about a key (vigil_lease_info); times in seconds."""

    key: str
    owner: str
    token: int
    ttl: float
    expires_in: float
    state: LeaseState
    pid: int


def _ttl_ms(ttl: float) -> int:
    if not ttl > 0 or math.isinf(ttl):
        raise OutOfRange(VIGIL_ERANGE, f"ttl {ttl!r} is not a positive number of seconds")
    return max(1, round(ttl * 1000))


def _str(raw: Any) -> str:
    return ffi.string(raw).decode("utf-8", "replace")


def _lease_from(c: Any) -> Lease:
    return Lease(_str(c.key), _str(c.owner), c.token, c.ttl_ms / 1000.0, c.id, c.ttl_ms)


def _info_from(c: Any) -> LeaseInfo:
    try:
        state = LeaseState(c.state)
    except ValueError:  # a state a newer library knows
        state = c.state  # type: ignore[assignment]
    return LeaseInfo(
        _str(c.key), _str(c.owner), c.token, c.ttl_ms / 1000.0, c.expires_in_ms / 1000.0, state, c.pid
    )


def c_lease(lease: Any) -> Any:
    """A vigil_lease for `lease` (a `Lease`, or anything with the same fields)."""
    c = ffi.new("vigil_lease *")
    key = _ffi.text(lease.key, "key")
    owner = _ffi.text(lease.owner, "owner")
    if len(key) >= 128 or len(owner) >= 64:
        raise OutOfRange(VIGIL_ERANGE, "key or owner longer than its field")
    c.key = key
    c.owner = owner
    c.token = lease.token
    ttl_ms = getattr(lease, "ttl_ms", 0) or _ttl_ms(lease.ttl)
    c.ttl_ms = ttl_ms
    c.id = getattr(lease, "id", 0) or 0
    return c


class _Store(_Handle):
    """The calls `Leases` and `Etcd` share; a subclass names its C functions."""

    _library: Any = None
    _prefix: str = ""
    _slice: Optional[float] = 0.25

    def _c(self, name: str) -> Any:
        return getattr(self._library, self._prefix + name)

    def _has(self, name: str) -> bool:
        return _ffi.has(self._prefix + name, self._library)

    def _describe(self) -> str:
        raise NotImplementedError

    def _where(self, key: str) -> str:
        return f"{self._describe()}: {key}"

    def acquire(self, key: str, owner: str, ttl: float) -> Lease:
        """Take `key` for `owner` for `ttl` seconds; Busy while anyone holds it unexpired."""
        out = ffi.new("vigil_lease *")
        k, o = _ffi.text(key, "key"), _ffi.text(owner, "owner")
        check(self._c("acquire")(self._p(), k, o, _ttl_ms(ttl), out), self._where(key))
        return _lease_from(out)

    def acquire_wait(self, key: str, owner: str, ttl: float, timeout: Optional[float] = None) -> Lease:
        """`acquire`, sleeping until `key` is released or its holder's lease lapses;
        Timeout after `timeout` seconds (None: no deadline)."""
        if not self._has("acquire_wait"):
            raise NotImplementedError(f"the loaded library has no {self._prefix}acquire_wait")
        fn = self._c("acquire_wait")
        k, o, ms = _ffi.text(key, "key"), _ffi.text(owner, "owner"), _ttl_ms(ttl)
        out = ffi.new("vigil_lease *")
        if self._slice is None:
            check(fn(self._p(), k, o, ms, _ffi.timeout_ns(timeout), out), self._where(key))
            return _lease_from(out)
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        # In slices, so that a signal handler (Ctrl-C) runs while it waits:
        # the store's waiters hold no place in a queue that leaving would lose.
        while True:
            slice_s = self._slice
            if deadline is not None:
                slice_s = min(slice_s, max(0.0, deadline - time.monotonic()))
            rc = fn(self._p(), k, o, ms, _ffi.timeout_ns(slice_s), out)
            if rc != VIGIL_ETIMEDOUT:
                check(rc, self._where(key))
                return _lease_from(out)
            if deadline is not None and time.monotonic() >= deadline:
                raise exception(rc, self._where(key))

    def renew(self, lease: Lease) -> None:
        """Extend `lease` by its TTL; Lost once it expired or changed hands."""
        check(self._c("renew")(self._p(), c_lease(lease)), self._where(lease.key))

    def release(self, lease: Lease) -> None:
        """Give `lease` up; Lost if it was no longer held."""
        check(self._c("release")(self._p(), c_lease(lease)), self._where(lease.key))

    def get(self, key: str) -> Optional[LeaseInfo]:
        """The holder of `key`, or None when nobody holds it."""
        buf = ffi.new("vigil_py_lease_info *")
        rc = self._get(_ffi.text(key, "key"), ffi.addressof(buf, "v"))
        if rc == VIGIL_EVACANT:
            return None
        check(rc, self._where(key))
        return _info_from(buf.v)

    def _get(self, key: bytes, out: Any) -> int:
        return self._c("get")(self._p(), key, out)

    def _port(self) -> Any:
        """The C port the keepalive renews through (valid while the store is open)."""
        return self._c("port")(self._p())


class Leases(_Store):
    """The embedded lease store: a vigil file on this host (vigil_leases)."""

    _closer = lib.vigil_leases_close
    _prefix = "vigil_leases_"
    _library = lib

    def __init__(self, ptr: Any, path: bytes) -> None:
        self._init_handle()
        self._ptr = ptr
        self.path = os.fsdecode(path)

    @classmethod
    def create(cls, path: PathLike, capacity: int, mode: int = 0o600) -> "Leases":
        """Make a store of `capacity` keys; FileExistsError if `path` exists."""
        p = _ffi.path_bytes(path)
        out = ffi.new("vigil_leases **")
        check(lib.vigil_leases_create_mode(p, capacity, mode, out), os.fsdecode(p))
        return cls(out[0], p)

    @classmethod
    def open(cls, path: PathLike, *, readonly: bool = False) -> "Leases":
        p = _ffi.path_bytes(path)
        out = ffi.new("vigil_leases **")
        fn = lib.vigil_leases_open_readonly if readonly else lib.vigil_leases_open
        check(fn(p, out), os.fsdecode(p))
        return cls(out[0], p)

    def _describe(self) -> str:
        return self.path

    def __repr__(self) -> str:
        return f"<vigil.Leases {self.path!r}{' closed' if self.closed else ''}>"

    @property
    def capacity(self) -> int:
        return lib.vigil_leases_capacity(self._p())

    def entry(self, index: int) -> Optional[LeaseInfo]:
        """Entry `index` as it stands (held, expired or released); None when vacant."""
        buf = ffi.new("vigil_py_lease_info *")
        rc = lib.vigil_leases_entry(self._p(), index, ffi.addressof(buf, "v"))
        if rc == VIGIL_EVACANT:
            return None
        if rc != VIGIL_EBUSY:
            check(rc)
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
    """Leases on etcd v3 (libvigil-etcd), across hosts: `Etcd("http://127.0.0.1:2379")`."""

    _prefix = "vigil_etcd_"
    # One call for the whole wait: an etcd waiter holds its place in the
    # key's queue (its revision), which leaving and coming back would lose.
    _slice = None

    def __init__(self, endpoints: str, *, connect_timeout: Optional[float] = None,
                 timeout: Optional[float] = None) -> None:
        self._init_handle()
        self._library = _ffi.etcd_lib()
        self.endpoints = endpoints
        out = ffi.new("vigil_etcd **")
        check(self._library.vigil_etcd_connect(endpoints.encode(), out), endpoints)
        self._ptr = out[0]
        if connect_timeout is not None or timeout is not None:
            ms = lambda s: 0 if s is None else max(1, round(s * 1000))  # noqa: E731
            check(self._library.vigil_etcd_set_timeout(self._ptr, ms(connect_timeout), ms(timeout)))

    def close(self) -> None:
        if self._ptr == ffi.NULL:
            return
        for dep in list(self._dependents):
            dep.close()
        ptr, self._ptr = self._ptr, ffi.NULL
        self._library.vigil_etcd_close(ptr)

    def _describe(self) -> str:
        return self.endpoints

    def __repr__(self) -> str:
        return f"<vigil.Etcd {self.endpoints!r}{' closed' if self.closed else ''}>"
