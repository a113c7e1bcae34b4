# SPDX-License-Identifier: MIT
"""Argument checks that name the parameter and its limit, the file mode's
repr, and annotations resolved to types for help()."""
import inspect
import math
import operator
import os
import threading
import time
import typing
from collections import deque
from typing import Any, Callable, Deque, List, Optional, Tuple, TypeVar, Union

from . import _fork
from ._errors import VIGIL_ERANGE, OutOfRange

PathLike = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]

U32_MAX = (1 << 32) - 1
U64_MAX = (1 << 64) - 1
MAX_CAPACITY = 1 << 20  # heartbeat tables and lease stores alike
TIMEOUT_MAX = (U64_MAX - 1) / 1e9  # seconds: the longest deadline the C calls take (about 584 years)
TTL_MAX = U64_MAX / 1000  # seconds: a TTL in whole milliseconds, 64 bits
KEY_MAX = 127  # bytes of UTF-8; the C field has room for the NUL
OWNER_MAX = 63


class FileMode(int):
    """A file mode that shows as octal (0o600), as modes are written."""

    def __repr__(self) -> str:
        return oct(self)

    __str__ = __repr__


DEFAULT_MODE = FileMode(0o600)


def out_of_range(message: str) -> OutOfRange:
    return OutOfRange(VIGIL_ERANGE, message)


def show(value: Any) -> str:
    """`value` for a message: a number of hundreds of digits shortened."""
    text_ = repr(value)
    if len(text_) > 24:
        text_ = f"{text_[:12]}...({len(text_)} characters)"
    return text_


def _integer(value: Any) -> Optional[int]:
    """`value` as an int if it is one: an int, or anything with __index__
    (numpy's integers) but a bool, which is a flag, not a number; else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return int(value)
    try:
        return operator.index(value)
    except TypeError:
        return None


def uint(value: Any, name: str, high: int = U32_MAX, low: int = 0) -> int:
    """`value` as an int in low..high, else OutOfRange (TypeError for a non-int:
    an int or an __index__ integer such as numpy's, never a bool) naming the
    parameter and its limits."""
    number = _integer(value)
    if number is None:
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    value = number
    if not low <= value <= high:
        raise out_of_range(f"{name} {show(value)} is out of range {low}..{high}")
    return value


def slot(value: Any, capacity: int) -> int:
    """A slot number below the table's capacity."""
    value = uint(value, "slot")
    if value >= capacity:
        raise out_of_range(f"slot {value} is out of range 0..{capacity - 1} (the table has {capacity} slots)")
    return value


def capacity(value: Any) -> int:
    return uint(value, "capacity", MAX_CAPACITY, 1)


def mode(value: Any) -> int:
    return uint(value, "mode", 0o7777)


def text(value: Union[str, bytes], name: str, limit: Optional[int] = None, empty: bool = True) -> bytes:
    """A key or owner as the C string it becomes: no NUL inside, at most
    `limit` bytes, and not empty unless `empty`."""
    if isinstance(value, str):
        raw = value.encode("utf-8")
    elif isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
    else:
        raise TypeError(f"{name} must be str or bytes, not {type(value).__name__}")
    if b"\0" in raw:
        raise ValueError(f"{name}: embedded null byte")  # as open() says it
    if limit is not None and len(raw) > limit:
        raise out_of_range(f"{name} is {len(raw)} bytes long (UTF-8); at most {limit}")
    if not raw and not empty:
        raise out_of_range(f"{name} is empty")
    return raw


def _seconds_number(value: Any, name: str) -> Any:
    """`value` as a number of seconds: a float (numpy's included), or an
    integer as uint() takes them (an __index__ one included, a bool not)."""
    if isinstance(value, float):
        return value
    number = _integer(value)
    if number is None:
        raise TypeError(f"{name} must be a number of seconds, not {type(value).__name__}")
    return number


def seconds(value: Any, name: str, high: float = TIMEOUT_MAX) -> float:
    """A number of seconds in 0..high (ints of any size compared exactly,
    never converted first), else OutOfRange naming `name` and the range."""
    value = _seconds_number(value, name)
    if not 0 <= value <= high:  # NaN fails both
        raise out_of_range(f"{name} {show(value)} is out of range 0..{high:.15g} seconds")
    return float(value)


def timeout_ns(timeout: Optional[float], name: str = "timeout") -> int:
    """Seconds (None or +inf: no deadline) as the C calls' timeout_ns."""
    if timeout is None:
        return U64_MAX
    if isinstance(timeout, float) and math.isinf(timeout) and timeout > 0:
        return U64_MAX
    return min(int(seconds(timeout, name) * 1e9), U64_MAX - 1)


def deadline(timeout: Optional[float], name: str = "timeout") -> Optional[float]:
    """time.monotonic() at which `timeout` seconds from now end (None: never)."""
    if timeout is None or (isinstance(timeout, float) and math.isinf(timeout) and timeout > 0):
        return None
    return time.monotonic() + seconds(timeout, name)


def ttl_ms(ttl: Any, least_ms: int = 1) -> int:
    """A lease's TTL in seconds as the C calls' milliseconds, at least `least_ms`."""
    ttl = _seconds_number(ttl, "ttl")
    least = least_ms / 1000
    if not 0 < ttl <= TTL_MAX:  # NaN fails both
        raise out_of_range(f"ttl {show(ttl)} is out of range {least:g}..{TTL_MAX:.15g} seconds")
    ms = min(max(1, round(ttl * 1000)), U64_MAX)
    if ms < least_ms:
        raise out_of_range(f"ttl {show(ttl)} is out of range {least:g}..{TTL_MAX:.15g} seconds")
    return ms


T = TypeVar("T")


class _Ticket:
    """One call's place in a Turns: `taken` while it holds a turn; `gate`,
    while it queues, the lock the hand-over releases. Compared by identity
    (no __eq__): a queue finds a caller's own ticket, never an equal one."""

    __slots__ = ("taken", "gate")

    def __init__(self) -> None:
        self.taken = False
        self.gate: Any = None


class Turns:
    """Calls on one handle counted, and taken in turn when `exclusive`: a
    bound barrier's waits, a table's failover_wait (the handle keeps state
    for the call). `busy` is how many calls are in progress.

    Exclusive calls queue in the order they came (a ticket each): the one
    that gives the turn back hands it to the first in the queue, so a
    thread that calls again at once never passes one that waits (polling
    let one thread take every turn, 102 to 0). Each waiter sleeps on a gate
    of its own (a lock the hand-over releases) within its timeout, and
    leaves the queue when that passes or when `gone` is set.

    Every way out of run() goes through _leave (its finally, run again
    until it has run through): the caller's ticket out of the queue and its
    turn, if it holds one, handed on. So a signal's exception landing
    anywhere (as the ticket is queued, in the wait, as the turn is handed
    over, at _leave's own start) leaves no ticket of a caller that is gone:
    one left would be handed the turn, counted busy for nobody, and every
    later call would wait for ever (issue 27's review: a Ctrl-C at the
    queue's append did that to a table's failover_wait).

    Only plain locks are held, through `with` or a C acquire: no point where
    a signal handler could run between taking one and the block that gives
    it back (threading.Condition's __enter__ is Python and has one)."""

    POLL = 0.005  # when_idle's look, and a gone wait's slice at most 10 of these

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.busy = 0
        self._queue: Deque[_Ticket] = deque()  # the waiters, first come first
        _fork.renew_in_child(self)

    def _after_fork(self) -> None:
        # The calls in progress and the waiters were other threads' (the
        # forking thread is in os.fork, not in a call): none is left.
        self.lock = threading.Lock()
        self.busy = 0
        self._queue = deque()

    def _take(self, exclusive: bool, until: Optional[float], gone: Optional[threading.Event],
              ticket: _Ticket) -> bool:
        """Whether `ticket` got a turn before `until` (or `gone`); an
        exception leaves it queued, or holding a turn, for _leave."""
        with self.lock:
            if not exclusive or not (self.busy or self._queue):
                # The count and the flag change together, with no call
                # between them (where a signal handler could run): the
                # caller gives back exactly what was taken.
                self.busy += 1
                ticket.taken = True
                return True
            gate = threading.Lock()
            gate.acquire()
            ticket.gate = gate
            self._queue.append(ticket)
        while True:
            left = -1.0 if until is None else until - time.monotonic()
            if gone is not None:
                left = 10 * self.POLL if left < 0 else min(left, 10 * self.POLL)
            if (until is None or left > 0) and gate.acquire(timeout=left):
                return True  # handed over: ticket.taken was set by the giver
            with self.lock:
                if ticket.taken:
                    return True  # handed over as the wait ended
                if (until is not None and time.monotonic() >= until) or (gone is not None and gone.is_set()):
                    self._queue.remove(ticket)
                    return False

    def _leave(self, ticket: _Ticket) -> None:
        """`ticket` out of the queue, and its turn given back: to the first
        waiter, straight (the turn is never free for a caller that came
        after it). Safe to run again after an exception at any of its
        points: each step is seen done, or is done again."""
        with self.lock:
            if ticket in self._queue:  # a caller gone (or handed its turn as a signal landed)
                self._queue.remove(ticket)
            if not ticket.taken:
                return
            if self.busy == 1 and self._queue:
                # The turn passes from one ticket to the other, busy as it
                # was: the flags change with no call between them. The
                # waiter is woken, then dequeued; an exception between the
                # two leaves it queued, holding its turn, and its own
                # _leave takes it out.
                waiter = self._queue[0]
                ticket.taken, waiter.taken = False, True
                waiter.gate.release()
                self._queue.popleft()
            else:
                ticket.taken = False
                self.busy -= 1

    def when_idle(self, fn: Callable[[], T]) -> T:
        """fn() with no call in progress or waiting, and none starting meanwhile."""
        while True:
            with self.lock:
                if not self.busy and not self._queue:
                    return fn()
            time.sleep(self.POLL)

    def run(self, exclusive: bool, timeout: Optional[float], gone: Optional[threading.Event],
            body: Callable[[Optional[float]], T], missed: Callable[[], T]) -> T:
        """body(the time left of `timeout`) in its turn; missed() when the
        turn does not come before the deadline (or `gone` is set)."""
        until, ticket, late, left = deadline(timeout), _Ticket(), None, False
        try:
            if not self._take(exclusive, until, gone, ticket):
                return missed()
            return body(None if until is None else max(0.0, until - time.monotonic()))
        finally:
            # Run through whatever signal lands meanwhile (at _leave's first
            # instruction too): raised once the ticket is gone.
            while not left:
                try:
                    self._leave(ticket)
                    left = True
                except BaseException as e:
                    late = e
            if late is not None:
                raise late


def resolve_annotations(*objects: Any) -> None:
    """Replace string annotations (forward references) by the types they
    name, on every function and property of `objects`, so that help() and
    inspect.signature show types, not strings."""
    for obj in objects:
        members = vars(obj).values() if inspect.isclass(obj) else [obj]
        for member in members:
            fns = []
            if isinstance(member, property):
                fns = [member.fget]
            elif isinstance(member, (classmethod, staticmethod)):
                fns = [member.__func__]
            elif inspect.isfunction(member):
                fns = [member]
            for fn in fns:
                if fn is None or not any(isinstance(a, str) for a in fn.__annotations__.values()):
                    continue
                module = inspect.getmodule(fn)
                ns = dict(vars(module)) if module else {}
                if inspect.isclass(obj):
                    ns.setdefault(obj.__name__, obj)
                try:
                    fn.__annotations__ = typing.get_type_hints(fn, ns)
                except Exception:  # a name only a type checker knows: leave it as written
                    pass


OPEN_READONLY, OPEN_TRUST_OWNER = 0x1, 0x2  # VIGIL_OPEN_*


def open_flags(readonly: bool, trust_owner: bool) -> int:
    """The VIGIL_OPEN_* flags of an open's keywords."""
    return (OPEN_READONLY if readonly else 0) | (OPEN_TRUST_OWNER if trust_owner else 0)


def created(path: bytes, kind: str, args: tuple, mode_: int, group_: Any, out: Any) -> None:
    """A *_create call of `kind` (hb, leases, barrier): vigil_KIND_create_mode
    (path, *args, mode, out), or, given a group, vigil_KIND_create_group
    (path, *args, mode, gid, out); raises what a failure means."""
    from ._errors import check
    from ._ffi import lib

    if group_ is None:
        rc = getattr(lib, f"vigil_{kind}_create_mode")(path, *args, mode_, out)
    else:
        gid = group(group_)
        rc = getattr(lib, f"vigil_{kind}_create_group")(path, *args, mode_, gid, out)
    check(rc, os.fsdecode(path))


def opened(path: bytes, plain: Any, flagged: Any, args: tuple, flags: int, out: Any) -> int:
    """An open: flagged(path, *args, flags, out) where the library has it,
    else plain(path, *args, out) (an older library checks no owner)."""
    if flagged is not None:
        return flagged(path, *args, flags, out)
    return plain(path, *args, out)


def group(value: Any) -> int:
    """A group for a file a *_create call makes: a gid, or a group's name."""
    if isinstance(value, (str, bytes)):
        import grp

        name = value if isinstance(value, str) else os.fsdecode(value)
        try:
            return grp.getgrnam(name).gr_gid
        except KeyError:
            raise ValueError(f"group {name!r}: no such group") from None
    return uint(value, "group", U32_MAX - 1)  # (gid_t)-1 is "keep the creator's": group=None


KIND_HEARTBEAT, KIND_BARRIER, KIND_LEASES = 1, 2, 3
_KINDS = {KIND_HEARTBEAT: "a heartbeat table", KIND_BARRIER: "a barrier file", KIND_LEASES: "a lease store"}
_MAGIC = b"\x7fVIGIL\r\n"


def untrusted(err: BaseException, path: str) -> BaseException:
    """The Untrusted error for `path`, naming its owner and mode as the tool
    does (read again by name: for the message only)."""
    try:
        st = os.stat(path)
    except OSError:
        return err
    try:
        import pwd

        owner = f"{pwd.getpwuid(st.st_uid).pw_name} (uid {st.st_uid})"
    except (ImportError, KeyError):
        owner = f"uid {st.st_uid}"
    why = "writable by everyone" if st.st_mode & 0o002 else "owned by another user"
    return type(err)(getattr(err, "code", -1011),
                     f"{path}: owned by {owner}, mode {oct(st.st_mode & 0o7777)}: {why}, so another user could "
                     f"have made or rewritten it; open it with trust_owner=True if its owner is trusted")


def open_error(rc: int, path: str, want: int, asked: int = 0) -> BaseException:
    """The exception for a failed open of `path` as a file of kind `want`:
    for a file of another kind, another version or another capacity, what
    was found there (as `vigil inspect` says it), not only that it is wrong."""
    from ._errors import VIGIL_EBADFILE, VIGIL_ECAPACITY, VIGIL_EUNTRUSTED, exception
    from ._ffi import ffi, has, lib, path_bytes

    err = exception(rc, path)
    if rc == VIGIL_EUNTRUSTED:
        return untrusted(err, path)
    if rc not in (VIGIL_EBADFILE, VIGIL_ECAPACITY) or not has("vigil_file_probe"):
        return err
    info = ffi.new("vigil_file_info *")
    if lib.vigil_file_probe(path_bytes(path), info) < 0:
        try:
            with open(path, "rb") as f:
                if f.read(8) != _MAGIC:
                    return type(err)(rc, f"{path}: not a vigil file (no vigil magic at offset 0)")
        except OSError:
            pass
        return err
    found = _KINDS.get(info.kind)
    if found is None:
        why = f"unknown kind {info.kind} (1 heartbeat, 2 barrier, 3 leases)"
    elif info.kind != want:
        why = f"{found}, not {_KINDS[want]}"
    elif rc == VIGIL_ECAPACITY:
        why = f"{found} of capacity {info.capacity}, not the {asked} asked for"
    else:
        why = (f"{found} of layout version {info.version}, capacity {info.capacity}, {info.size} bytes, "
               f"that this libvigil cannot read ({err.args[0].split(': ', 1)[-1]})")
    return type(err)(rc, f"{path}: {why}")
