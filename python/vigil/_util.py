# SPDX-License-Identifier: MIT
"""Argument checks that name the parameter and its limit, the file mode's
repr, and annotations resolved to types for help()."""
import inspect
import math
import os
import threading
import time
import typing
from typing import Any, Callable, List, Optional, TypeVar, Union

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


def uint(value: Any, name: str, high: int = U32_MAX, low: int = 0) -> int:
    """`value` as an int in low..high, else OutOfRange (TypeError for a non-int)
    naming the parameter and its limits."""
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            value = value.__index__()
        except (AttributeError, TypeError):
            raise TypeError(f"{name} must be an int, not {type(value).__name__}") from None
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


def seconds(value: Any, name: str, high: float = TIMEOUT_MAX) -> float:
    """A number of seconds in 0..high (ints of any size compared exactly,
    never converted first), else OutOfRange naming `name` and the range."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds, not {type(value).__name__}")
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
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)):
        raise TypeError(f"ttl must be a number of seconds, not {type(ttl).__name__}")
    least = least_ms / 1000
    if not 0 < ttl <= TTL_MAX:  # NaN fails both
        raise out_of_range(f"ttl {show(ttl)} is out of range {least:g}..{TTL_MAX:.15g} seconds")
    ms = min(max(1, round(ttl * 1000)), U64_MAX)
    if ms < least_ms:
        raise out_of_range(f"ttl {show(ttl)} is out of range {least:g}..{TTL_MAX:.15g} seconds")
    return ms


T = TypeVar("T")


class Turns:
    """Calls on one handle counted, and taken in turn when `exclusive`: a
    bound barrier's waits, a table's failover_wait (the handle keeps state
    for the call). `busy` is how many calls are in progress.

    Only a plain lock is held, through `with` (its acquire is C: no point
    where a signal handler could run between taking it and the block that
    gives it back; threading.Condition's __enter__ is Python and has one).
    A call that must wait for its turn looks again every few milliseconds:
    two waits on one bound handle or one table are the rare case."""

    POLL = 0.005

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.busy = 0

    def _take(self, exclusive: bool, until: Optional[float], gone: Optional[threading.Event],
              taken: List[bool]) -> bool:
        while True:
            with self.lock:
                if not (exclusive and self.busy):
                    # The count and the flag change together, with no call
                    # between them (where a signal handler could run): the
                    # caller gives back exactly what was taken.
                    self.busy += 1
                    taken[0] = True
                    return True
            left = self.POLL if until is None else min(self.POLL, until - time.monotonic())
            if left <= 0 or (gone is not None and gone.is_set()):
                return False
            time.sleep(left)

    def _give(self, taken: List[bool]) -> None:
        with self.lock:
            if taken[0]:
                self.busy -= 1
                taken[0] = False

    def when_idle(self, fn: Callable[[], T]) -> T:
        """fn() with no call in progress and none starting meanwhile."""
        while True:
            with self.lock:
                if not self.busy:
                    return fn()
            time.sleep(self.POLL)

    def run(self, exclusive: bool, timeout: Optional[float], gone: Optional[threading.Event],
            body: Callable[[Optional[float]], T], missed: Callable[[], T]) -> T:
        """body(the time left of `timeout`) in its turn; missed() when the
        turn does not come before the deadline (or `gone` is set)."""
        until, taken, late = deadline(timeout), [False], None
        try:
            if not self._take(exclusive, until, gone, taken):
                return missed()
            return body(None if until is None else max(0.0, until - time.monotonic()))
        finally:
            # A signal landing as the turn is given back (at _give's first
            # instruction) is raised once it is given back.
            while taken[0]:
                try:
                    self._give(taken)
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


KIND_HEARTBEAT, KIND_BARRIER, KIND_LEASES = 1, 2, 3
_KINDS = {KIND_HEARTBEAT: "a heartbeat table", KIND_BARRIER: "a barrier file", KIND_LEASES: "a lease store"}
_MAGIC = b"\x7fVIGIL\r\n"


def open_error(rc: int, path: str, want: int, asked: int = 0) -> BaseException:
    """The exception for a failed open of `path` as a file of kind `want`:
    for a file of another kind, another version or another capacity, what
    was found there (as `vigil inspect` says it), not only that it is wrong."""
    from ._errors import VIGIL_EBADFILE, VIGIL_ECAPACITY, exception
    from ._ffi import ffi, has, lib, path_bytes

    err = exception(rc, path)
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
