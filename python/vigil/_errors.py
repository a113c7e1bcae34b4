# SPDX-License-Identifier: MIT
"""vigil's error codes as exceptions built on Python's own.

A C call's VIGIL_E* result becomes the matching `Error` subclass, carrying
`.code` and `.name`; a `-errno` becomes the OSError Python itself would
raise for that errno (FileExistsError for -EEXIST, and so on).
"""
import os
from typing import Dict, NoReturn, Optional, Tuple, Type

VIGIL_EFULL = -1001
VIGIL_EBADFILE = -1002
VIGIL_ECAPACITY = -1003
VIGIL_ERANGE = -1004
VIGIL_EVACANT = -1005
VIGIL_ETIMEDOUT = -1006
VIGIL_ENOPEERS = -1007
VIGIL_ELOST = -1008
VIGIL_EBUSY = -1009
VIGIL_ETLS = -1010
VIGIL_EUNTRUSTED = -1011

_NAMES = {
    VIGIL_EFULL: "VIGIL_EFULL",
    VIGIL_EBADFILE: "VIGIL_EBADFILE",
    VIGIL_ECAPACITY: "VIGIL_ECAPACITY",
    VIGIL_ERANGE: "VIGIL_ERANGE",
    VIGIL_EVACANT: "VIGIL_EVACANT",
    VIGIL_ETIMEDOUT: "VIGIL_ETIMEDOUT",
    VIGIL_ENOPEERS: "VIGIL_ENOPEERS",
    VIGIL_ELOST: "VIGIL_ELOST",
    VIGIL_EBUSY: "VIGIL_EBUSY",
    VIGIL_ETLS: "VIGIL_ETLS",
    VIGIL_EUNTRUSTED: "VIGIL_EUNTRUSTED",
}


def strerror(code: int) -> str:
    """The C library's own message for a result code (also -errno)."""
    from ._ffi import ffi, lib

    return ffi.string(lib.vigil_strerror(code)).decode("utf-8", "replace")


class Error(Exception):
    """A failure vigil itself reports: `.code` is the VIGIL_E* value, `.name` its name."""

    code: int
    name: str

    def __init__(self, code: int, message: Optional[str] = None) -> None:
        self.code = code
        self.name = _NAMES.get(code, f"vigil error {code}")
        if message is None:
            message = strerror(code)
        super().__init__(message)

    def __str__(self) -> str:
        return f"{self.args[0]} ({self.name})" if self.args else self.name

    def __reduce__(self) -> Tuple[type, Tuple[int, Optional[str]]]:
        """Picklable, so an error crosses multiprocessing intact."""
        return (type(self), (self.code, self.args[0] if self.args else None))


class Full(Error):
    """No vacant slot (VIGIL_EFULL)."""


class BadFile(Error):
    """Not a vigil file of this kind, a wrong version, or a size that disagrees (VIGIL_EBADFILE)."""


class CapacityMismatch(Error):
    """The file's capacity differs from the one asked for (VIGIL_ECAPACITY)."""


class OutOfRange(Error, ValueError):
    """A slot, bit, quorum or argument out of range (VIGIL_ERANGE)."""


class Vacant(Error):
    """The slot is vacant (VIGIL_EVACANT)."""


class Timeout(Error, TimeoutError):
    """The deadline passed (VIGIL_ETIMEDOUT)."""

    def __init__(self, code: int = VIGIL_ETIMEDOUT, message: Optional[str] = None) -> None:
        Error.__init__(self, code, message)


class NoPeers(Error):
    """Nothing live to wait for (VIGIL_ENOPEERS)."""


class Lost(Error):
    """What this caller held is someone else's now (VIGIL_ELOST): a lease
    refused or expired, a group membership gone, or a heartbeat slot whose
    registration a failover took (the slot may hold a successor already;
    the call changed nothing of its)."""

    def __init__(self, code: int = VIGIL_ELOST, message: Optional[str] = None) -> None:
        Error.__init__(self, code, message)


class Busy(Error):
    """Held by another owner, or in the middle of a change (VIGIL_EBUSY)."""


class Untrusted(Error, PermissionError):
    """A file opened for writing that another user could have made or
    rewritten (VIGIL_EUNTRUSTED): writable by everyone, or owned by another
    user who is not root outside a group arrangement. Such a user could
    rewrite what this process relies on, or truncate the file under every
    process that maps it. Open it with trust_owner=True if its owner is
    trusted. Also a PermissionError."""


_CLASSES: Dict[int, Type[Error]] = {
    VIGIL_EFULL: Full,
    VIGIL_EBADFILE: BadFile,
    VIGIL_ECAPACITY: CapacityMismatch,
    VIGIL_ERANGE: OutOfRange,
    VIGIL_EVACANT: Vacant,
    VIGIL_ETIMEDOUT: Timeout,
    VIGIL_ENOPEERS: NoPeers,
    VIGIL_ELOST: Lost,
    VIGIL_EBUSY: Busy,
    VIGIL_EUNTRUSTED: Untrusted,
}


def exception(code: int, what: Optional[str] = None) -> BaseException:
    """The exception for a negative result `code`; `what` (a path, a key) leads the message."""
    cls = _CLASSES.get(code)
    if cls is None and -1000 < code < 0:  # vigil's own codes sit below -1000
        err = -code
        if what is None:
            return OSError(err, os.strerror(err))
        return OSError(err, os.strerror(err), what)
    if cls is None:
        cls = Error
    message = strerror(code)
    if what is not None:
        message = f"{what}: {message}"
    return cls(code, message)


def check(code: int, what: Optional[str] = None) -> int:
    """`code` if it is a success (>= 0), else raise what it means."""
    if code < 0:
        raise exception(code, what)
    return code


def fail(code: int, what: Optional[str] = None) -> NoReturn:
    """Raise what the negative result `code` means."""
    raise exception(code, what)
