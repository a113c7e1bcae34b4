# SPDX-License-Identifier: MIT
"""Groups across hosts on etcd (libvigil-etcd's vigil_group_*): membership
with a leader and a term, a watch with a file descriptor, exactly-once work
units and barrier rounds, in sync and asyncio forms.

    etcd = vigil.Etcd("http://10.0.0.1:2379")
    with vigil.Group(etcd, "jobs").join("worker-7", ttl=10.0) as g:
        while (unit := g.take_wait(timeout=5.0)) is not None:
            work(unit.name, fencing_token=unit.token)
            g.done(unit)
        g.barrier_wait(0)
"""
from __future__ import annotations

import asyncio
import os
import threading
import time
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, AsyncIterator, Iterator, List, Optional, Tuple, Type

from . import _ffi, _fork, _signals, _util
from ._aio import finish, pool
from ._errors import VIGIL_EBUSY, VIGIL_ENOPEERS, VIGIL_ETIMEDOUT, VIGIL_EVACANT, check, exception
from ._ffi import ffi

ffi.cdef(
    r"""
    /* group.h, in libvigil-etcd */
    typedef struct vigil_group_member vigil_group_member;
    typedef struct vigil_group_member_info {
        char name[64]; char host[64]; uint32_t pid; uint32_t flags; uint64_t revision; int64_t lease;
    } vigil_group_member_info;
    struct vigil_group_options { const char *dir; const char *host; };
    int  vigil_group_join_opts(vigil_etcd *e, const char *group, const char *name, uint64_t ttl_ms,
                               const struct vigil_group_options *opts, vigil_group_member **out);
    int  vigil_group_leave(vigil_group_member *m);
    int  vigil_group_self(const vigil_group_member *m, vigil_group_member_info *out);
    int  vigil_group_lost_fd(const vigil_group_member *m);
    bool vigil_group_lost(const vigil_group_member *m);
    int  vigil_group_is_leader(vigil_group_member *m);
    int  vigil_group_members(vigil_etcd *e, const char *group, vigil_group_member_info *out, uint32_t max);
    int  vigil_group_leader(vigil_etcd *e, const char *group, vigil_group_member_info *out);
    typedef struct vigil_group_watcher vigil_group_watcher;
    typedef struct vigil_group_event {
        uint32_t type; uint32_t initial; vigil_group_member_info member; uint64_t revision; int64_t time_ns;
    } vigil_group_event;
    int  vigil_group_watch(vigil_etcd *e, const char *group, vigil_group_watcher **out);
    int  vigil_group_watch_flags(vigil_etcd *e, const char *group, unsigned flags, vigil_group_watcher **out);
    int  vigil_group_leader_wait(vigil_etcd *e, const char *group, uint64_t term, uint64_t timeout_ns,
                                 vigil_group_member_info *out);
    int  vigil_group_watch_fd(const vigil_group_watcher *w);
    int  vigil_group_watch_next(vigil_group_watcher *w, vigil_group_event *out);
    void vigil_group_watch_close(vigil_group_watcher *w);
    typedef struct vigil_group_unit { char name[128]; uint64_t token; } vigil_group_unit;
    int  vigil_group_add(vigil_etcd *e, const char *group, const char *unit);
    int  vigil_group_take(vigil_group_member *m, vigil_group_unit *out);
    int  vigil_group_take_wait(vigil_group_member *m, uint64_t timeout_ns, vigil_group_unit *out);
    int  vigil_group_done(vigil_group_member *m, const vigil_group_unit *u);
    int  vigil_group_giveback(vigil_group_member *m, const vigil_group_unit *u);
    typedef struct vigil_group_stats {
        uint32_t members; uint32_t units_free; uint32_t units_owned; uint32_t units_done;
        uint64_t round; uint64_t term; uint64_t revision;
    } vigil_group_stats;
    int  vigil_group_stats_get(vigil_etcd *e, const char *group, vigil_group_stats *out);
    typedef struct vigil_group_peer { char name[64]; uint64_t revision; } vigil_group_peer;
    typedef struct vigil_group_round {
        uint64_t round; uint64_t revision; uint64_t serial; uint32_t counted; uint32_t left_out;
        vigil_group_peer *counted_peers; uint32_t counted_cap;
        vigil_group_peer *left_out_peers; uint32_t left_out_cap;
    } vigil_group_round;
    int  vigil_group_barrier_wait_info(vigil_group_member *m, uint64_t round, uint64_t timeout_ns,
                                       vigil_group_round *info);
    int  vigil_group_round_info(vigil_etcd *e, const char *group, uint64_t round, vigil_group_round *info);

    typedef union { vigil_group_member_info v; uint8_t room[512]; } vigil_py_member_info;
    typedef union { vigil_group_event v; uint8_t room[1024]; } vigil_py_group_event;
    typedef union { vigil_group_stats v; uint8_t room[256]; } vigil_py_group_stats;
    """
)

GROUP_MAX = 100
MEMBER_MAX = 63
UNIT_MAX = 127
FOREIGN = 1  # VIGIL_GROUP_FOREIGN
_KINDS = {1: "join", 2: "leave", 3: "leader"}  # VIGIL_GROUP_JOIN, _LEAVE, _LEADER
_WATCH_LEADER = 1  # VIGIL_GROUP_WATCH_LEADER
_SLICE = 0.25  # take_wait in slices, so that a signal handler runs while it waits


def _str(raw: Any) -> str:
    return ffi.string(raw).decode("utf-8", "replace")


def _name(value: str, what: str, limit: int) -> bytes:
    return _util.text(value, what, limit, empty=False)


@dataclass(frozen=True)
class MemberInfo:
    """A live member (vigil_group_member_info): `revision` is its join revision,
    the leader's term; `vigil` False for an `etcdctl elect` campaigner."""

    name: str
    host: str
    pid: int
    revision: int
    lease: int
    vigil: bool = True


def _member_from(c: Any) -> MemberInfo:
    return MemberInfo(_str(c.name), _str(c.host), c.pid, c.revision, c.lease, not (c.flags & FOREIGN))


@dataclass(frozen=True)
class Unit:
    """A claimed work unit: `token` rises with every claim of it (a fencing token)."""

    name: str
    token: int


@dataclass(frozen=True)
class GroupEvent:
    """A change of membership: `kind` "join" or "leave"; `initial` for the
    members live when the watch began; `time` in seconds since the epoch.
    With `Group.watch(leader=True)`, also `kind` "leader" for each change of
    leader (the leader at the start first, `initial`): `member` the new
    leader, its `revision` the term; a blank member (revision 0) for none."""

    kind: str
    member: MemberInfo
    revision: int
    time: float
    initial: bool = False


@dataclass(frozen=True)
class Peer:
    """A member as a round's record names it: its name and join revision."""

    name: str
    revision: int


@dataclass(frozen=True)
class RoundInfo:
    """A released round: who it counted, who it left out (members of the round
    before or arrivals at this one, gone since), and the serial's join revision."""

    round: int
    revision: int
    serial: int
    counted: List[Peer] = field(default_factory=list)
    left_out: List[Peer] = field(default_factory=list)


@dataclass(frozen=True)
class GroupStats:
    """The group at one etcd revision: members, units by state, the round
    gathering (rounds released so far) and the leader's term (0: none)."""

    members: int
    units_free: int
    units_owned: int
    units_done: int
    round: int
    term: int
    revision: int


class GroupWatch:
    """A group's membership as events: `fileno()` is readable while events are
    queued (for select/poll and asyncio's add_reader); `next_event()` returns
    one or None; iterating blocks for the next; `async for` waits in the loop."""

    def __init__(self, group: "Group", leader: bool = False) -> None:
        """Made by `Group.watch()`."""
        self._group = group
        self._lib = _ffi.etcd_lib()
        out = ffi.new("vigil_group_watcher **")
        flags = _WATCH_LEADER if leader else 0
        check(self._lib.vigil_group_watch_flags(group.etcd._p(), group._gname, flags, out), group.name)
        self._ptr = out[0]
        self._pid = os.getpid()
        group.etcd._dependents.add(self)

    def _p(self) -> Any:
        if self._ptr == ffi.NULL:
            raise ValueError("GroupWatch is closed")
        return self._ptr

    def fileno(self) -> int:
        """The descriptor: readable while an event is queued."""
        return self._lib.vigil_group_watch_fd(self._p())

    def next_event(self) -> Optional[GroupEvent]:
        """The next queued event, or None when none is queued now."""
        buf = ffi.new("vigil_py_group_event *")
        rc = check(self._lib.vigil_group_watch_next(self._p(), ffi.addressof(buf, "v")), self._group.name)
        if rc == 0:
            return None
        ev = buf.v
        return GroupEvent(_KINDS.get(ev.type, f"type {ev.type}"), _member_from(ev.member), ev.revision,
                          ev.time_ns / 1e9, bool(ev.initial))

    def wait(self, timeout: Optional[float] = None) -> Optional[GroupEvent]:
        """The next event, waiting up to `timeout` seconds (None: for ever)."""
        import select

        deadline = _util.deadline(timeout)
        while True:
            ev = self.next_event()
            if ev is not None:
                return ev
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return None
            select.select([self], [], [], _SLICE if left is None else min(left, _SLICE))

    def __iter__(self) -> Iterator[GroupEvent]:
        while True:
            ev = self.wait()
            if ev is not None:
                yield ev

    async def __aiter__(self) -> AsyncIterator[GroupEvent]:
        loop = asyncio.get_running_loop()
        while True:
            ev = self.next_event()
            if ev is not None:
                yield ev
                continue
            ready = loop.create_future()
            fd = self.fileno()
            loop.add_reader(fd, lambda: ready.done() or ready.set_result(None))
            try:
                await ready
            finally:
                loop.remove_reader(fd)

    def close(self) -> None:
        """Stop watching; idempotent. In a forked child the watch (its
        connection) is the parent's: only forgotten."""
        if self._ptr != ffi.NULL:
            ptr, self._ptr = self._ptr, ffi.NULL
            if os.getpid() == self._pid:
                self._lib.vigil_group_watch_close(ptr)

    def __enter__(self) -> "GroupWatch":
        """`with group.watch() as w`: closed on the way out."""
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


class Group:
    """A group of processes across hosts, on etcd: `Group(etcd, "jobs")` for its
    members, watch, work set and rounds; `join` makes this process a member
    (take, done, barrier_wait, then leave, or a `with` block)."""

    def __init__(self, etcd: Any, name: str) -> None:
        """The group `name` (1 to 100 bytes) on `etcd` (a `vigil.Etcd`)."""
        self.etcd = etcd
        self.name = name
        self._gname = _name(name, "group", GROUP_MAX)
        self._lib = _ffi.etcd_lib()
        self._m = ffi.NULL
        self._lock = threading.Lock()
        self.member: Optional[str] = None
        self._pid = os.getpid()  # the process that joined
        _fork.renew_in_child(self)

    def _after_fork(self) -> None:
        self._lock = threading.Lock()  # a parent's thread may have held it

    def __repr__(self) -> str:
        who = f" as {self.member!r}" if self._m != ffi.NULL else ""
        return f"<vigil.Group {self.name!r}{who}>"

    # ---- membership -------------------------------------------------------

    def join(self, member: str, ttl: float = 10.0, *, dir: Optional[str] = None,
             host: Optional[str] = None) -> "Group":
        """Join as `member` (1 to 63 bytes) under a lease of `ttl` seconds
        (whole seconds, etcd's minimum applying), kept alive until `leave`.
        `dir`: record the lease for `vigil agent --dir` (default $VIGIL_DIR;
        "" none); `host`: the host named (default $VIGIL_HOST, else the host
        name). Busy if a live member has the name. Returns self. A signal
        (Ctrl-C) arriving during the call is raised after this member left."""
        with self._lock:
            if self._m != ffi.NULL:
                raise ValueError(f"{self!r} has joined already")
            opts = ffi.new("struct vigil_group_options *")
            keep = []
            for attr, value in (("dir", dir), ("host", host)):
                if value is not None:
                    b = ffi.new("char[]", _ffi.path_bytes(value, attr) if attr == "dir" else _util.text(value, attr, 63))
                    keep.append(b)
                    setattr(opts, attr, b)
            out = ffi.new("vigil_group_member **")
            args = (self.etcd._p(), self._gname, _name(member, "member", MEMBER_MAX), _util.ttl_ms(ttl, 1), opts, out)
            armed = _signals.arm()
            try:
                check(self._lib.vigil_group_join_opts(*args), self.name)
            except BaseException:
                _signals.disarm(armed)
                raise
            self._m, self._pid = out[0], os.getpid()
            self.member = member
            self.etcd._dependents.add(self)
        try:
            _signals.disarm(armed)  # the signals held back are raised here
            return self
        except BaseException:
            try:
                self.leave()
            except Exception:
                pass
            raise

    async def join_async(self, member: str, ttl: float = 10.0, **kw: Any) -> "Group":
        """`join` in a worker thread."""
        return await asyncio.get_running_loop().run_in_executor(pool(), lambda: self.join(member, ttl, **kw))

    def _mp(self) -> Any:
        if self._m == ffi.NULL:
            raise ValueError(f"{self!r} is not a member: join first")
        return self._m

    def leave(self) -> None:
        """Leave: the lease revoked, and with it this member's units and
        arrivals. Lost if the membership had been lost. Idempotent. In a
        child forked while a member, leaving (by hand, by a block, by
        garbage collection) revokes nothing: the membership is the parent's."""
        with self._lock:
            m, self._m = self._m, ffi.NULL
        if m != ffi.NULL and os.getpid() == self._pid:
            check(self._lib.vigil_group_leave(m), self.name)

    close = leave

    def __enter__(self) -> "Group":
        """`with group.join(...)`: leaves on the way out."""
        return self

    def __exit__(self, et: Optional[Type[BaseException]], ev: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        try:
            self.leave()
        except Exception:
            if et is None:
                raise

    async def __aenter__(self) -> "Group":
        """`async with group.join(...)`: leaves on the way out."""
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.__exit__(*exc)

    def __del__(self) -> None:
        try:
            self.leave()
        except Exception:
            pass

    @property
    def lost(self) -> bool:
        """True once the membership is lost (refused, or not renewed for a TTL)."""
        return self._m != ffi.NULL and bool(self._lib.vigil_group_lost(self._m))

    def fileno(self) -> int:
        """The loss descriptor: readable once the membership is lost."""
        return self._lib.vigil_group_lost_fd(self._mp())

    @property
    def self_info(self) -> MemberInfo:
        """This member as etcd holds it (its revision is its term if it leads)."""
        buf = ffi.new("vigil_py_member_info *")
        check(self._lib.vigil_group_self(self._mp(), ffi.addressof(buf, "v")), self.name)
        return _member_from(buf.v)

    @property
    def term(self) -> int:
        """This member's join revision: the term while it leads."""
        return self.self_info.revision

    def is_leader(self) -> bool:
        """Whether this member leads (the lowest join revision among the live)."""
        return bool(check(self._lib.vigil_group_is_leader(self._mp()), self.name))

    def members(self) -> List[MemberInfo]:
        """The live members, lowest join revision first: [0] is the leader."""
        cap = 64
        while True:
            buf = ffi.new("vigil_group_member_info[]", cap)
            n = check(self._lib.vigil_group_members(self.etcd._p(), self._gname, buf, cap), self.name)
            if n <= cap:
                return [_member_from(buf[i]) for i in range(n)]
            cap = n + 16

    def leader(self) -> Optional[MemberInfo]:
        """The leader, or None without members."""
        members = self.members()
        return members[0] if members else None

    def watch(self, leader: bool = False) -> GroupWatch:
        """A watch of the membership (a join for each live member first);
        `leader`: also an event per change of leader, each term once."""
        return GroupWatch(self, leader)

    def leader_wait(self, term: int = 0, timeout: Optional[float] = None) -> Optional[MemberInfo]:
        """Wait until the leader is not the one of `term` (its join revision;
        0: no leader): the leader now (at once if it is another already), or
        None when no member leads now. Timeout (a TimeoutError) after
        `timeout` seconds (None: no deadline), naming the failure it met last
        if etcd did not answer. Waits in slices (0.25 s), so that a signal
        handler runs meanwhile."""
        return self._leader_wait(term, timeout, None)

    def _leader_wait(self, term: int, timeout: Optional[float],
                     gone: Optional[threading.Event]) -> Optional[MemberInfo]:
        t = _util.uint(term, "term", _util.U64_MAX)
        deadline = _util.deadline(timeout)
        buf = ffi.new("vigil_py_member_info *")
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            s = _SLICE if left is None else min(left, _SLICE)
            rc = self._lib.vigil_group_leader_wait(self.etcd._p(), self._gname, t, _util.timeout_ns(s),
                                                   ffi.addressof(buf, "v"))
            if rc == VIGIL_ENOPEERS:
                return None
            if rc != VIGIL_ETIMEDOUT:
                check(rc, self.name)
                return _member_from(buf.v)
            if (left is not None and left <= s) or (gone is not None and gone.is_set()):
                why = ffi.string(self._lib.vigil_etcd_errmsg()).decode("utf-8", "replace")
                raise exception(rc, f"{self.name}: {why}" if why else self.name)  # Timeout, and what etcd said

    async def leader_wait_async(self, term: int = 0, timeout: Optional[float] = None) -> Optional[MemberInfo]:
        """`leader_wait` in a worker thread; cancelled, it ends within a slice (0.25 s)."""
        if timeout is not None:
            _util.timeout_ns(timeout)  # checked now: OutOfRange naming the limit
        gone = threading.Event()
        fut = asyncio.get_running_loop().run_in_executor(pool(), self._leader_wait, term, timeout, gone)
        try:
            return await asyncio.shield(fut)
        except asyncio.CancelledError:
            gone.set()
            await finish(fut)
            raise

    def stats(self) -> GroupStats:
        """The group's members, units and round at one revision."""
        buf = ffi.new("vigil_py_group_stats *")
        check(self._lib.vigil_group_stats_get(self.etcd._p(), self._gname, ffi.addressof(buf, "v")), self.name)
        s = buf.v
        return GroupStats(s.members, s.units_free, s.units_owned, s.units_done, s.round, s.term, s.revision)

    # ---- work units --------------------------------------------------------

    def add(self, unit: str) -> bool:
        """Add `unit` to the work set: True, or False when it is there or done."""
        rc = self._lib.vigil_group_add(self.etcd._p(), self._gname, _name(unit, "unit", UNIT_MAX))
        if rc == -17:  # EEXIST
            return False
        check(rc, self.name)
        return True

    def _unit(self, rc: int, out: Any) -> Optional[Unit]:
        if rc in (VIGIL_EBUSY, VIGIL_EVACANT, VIGIL_ETIMEDOUT):
            return None
        check(rc, self.name)
        return Unit(_str(out.name), out.token)

    def take(self) -> Optional[Unit]:
        """Claim an unowned unit, or None when every unit left is owned or none is left."""
        out = ffi.new("vigil_group_unit *")
        return self._unit(self._lib.vigil_group_take(self._mp(), out), out)

    def take_wait(self, timeout: Optional[float] = None) -> Optional[Unit]:
        """Claim a unit, waiting (on a watch) while every unit left is owned:
        None when none is left, or after `timeout` seconds (None: no deadline)."""
        return self._take_wait(timeout, None)

    def _take_wait(self, timeout: Optional[float], gone: Optional[threading.Event]) -> Optional[Unit]:
        m = self._mp()
        deadline = _util.deadline(timeout)
        out = ffi.new("vigil_group_unit *")
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            s = _SLICE if left is None else min(left, _SLICE)
            rc = self._lib.vigil_group_take_wait(m, _util.timeout_ns(s), out)
            if rc != VIGIL_ETIMEDOUT or (left is not None and left <= s) or (gone is not None and gone.is_set()):
                return self._unit(rc, out)

    def done(self, unit: Unit) -> None:
        """Finish `unit`; Lost if this member no longer owns that claim.
        Sent again while etcd does not answer; an error other than Lost means
        not known: call again (it returns once this member's done of the
        claim is the record, an earlier call's too)."""
        check(self._lib.vigil_group_done(self._mp(), self._cunit(unit)), f"{self.name}: {unit.name}")

    def giveback(self, unit: Unit) -> None:
        """Give `unit` back unfinished (also fine when it was given back
        already while this member is one); Lost if this member is out."""
        check(self._lib.vigil_group_giveback(self._mp(), self._cunit(unit)), f"{self.name}: {unit.name}")

    @staticmethod
    def _cunit(unit: Unit) -> Any:
        c = ffi.new("vigil_group_unit *")
        c.name = _name(unit.name, "unit", UNIT_MAX)
        c.token = _util.uint(unit.token, "token", _util.U64_MAX)
        return c

    # ---- rounds -------------------------------------------------------------

    def barrier_wait(self, round: int, timeout: Optional[float] = None) -> bool:
        """Arrive at `round` and wait until every live member has: True for the
        one caller of the round given VIGIL_SERIAL, False for the others and for
        a round released already. Timeout after `timeout` seconds (the arrival
        withdrawn: never counted). One call: a signal handler runs when it returns."""
        return self.barrier_wait_info(round, timeout)[0]

    def barrier_wait_info(self, round: int, timeout: Optional[float] = None,
                          peers: int = 1024) -> Tuple[bool, RoundInfo]:
        """`barrier_wait`, and who the round counted and left out (up to `peers`
        of each, 1..1048576)."""
        r = _util.uint(round, "round", (1 << 63) - 1)
        peers = _util.uint(peers, "peers", _util.MAX_CAPACITY, 1)
        ns = _util.timeout_ns(timeout)
        info = ffi.new("vigil_group_round *")
        counted = ffi.new("vigil_group_peer[]", peers)
        left = ffi.new("vigil_group_peer[]", peers)
        info.counted_peers, info.counted_cap = counted, peers
        info.left_out_peers, info.left_out_cap = left, peers
        rc = self._lib.vigil_group_barrier_wait_info(self._mp(), r, ns, info)
        check(rc, f"{self.name}: round {r}")
        return rc == 1, _round_from(info, counted, left)

    def round_info(self, round: int, peers: int = 1024) -> Optional[RoundInfo]:
        """A released round's record (the last 64 are kept), or None; up to
        `peers` (1..1048576) of each kind."""
        peers = _util.uint(peers, "peers", _util.MAX_CAPACITY, 1)
        info = ffi.new("vigil_group_round *")
        counted = ffi.new("vigil_group_peer[]", peers)
        left = ffi.new("vigil_group_peer[]", peers)
        info.counted_peers, info.counted_cap = counted, peers
        info.left_out_peers, info.left_out_cap = left, peers
        rc = self._lib.vigil_group_round_info(self.etcd._p(), self._gname, _util.uint(round, "round", (1 << 63) - 1),
                                              info)
        if rc == VIGIL_EVACANT:
            return None
        check(rc, self.name)
        return _round_from(info, counted, left)

    # ---- asyncio ------------------------------------------------------------

    async def _call(self, fn: Any, *args: Any) -> Any:
        fut = asyncio.get_running_loop().run_in_executor(pool(), fn, *args)
        try:
            return await asyncio.shield(fut)
        except asyncio.CancelledError:
            await finish(fut)
            raise

    async def take_async(self) -> Optional[Unit]:
        """`take` in a worker thread."""
        return await self._call(self.take)

    async def take_wait_async(self, timeout: Optional[float] = None) -> Optional[Unit]:
        """`take_wait` in a worker thread; cancelled, it ends within a slice (0.25 s)
        and gives back a unit it got meanwhile."""
        if timeout is not None:
            _util.timeout_ns(timeout)  # checked now: OutOfRange naming the limit
        gone = threading.Event()
        fut = asyncio.get_running_loop().run_in_executor(pool(), self._take_wait, timeout, gone)
        try:
            return await asyncio.shield(fut)
        except asyncio.CancelledError:
            gone.set()
            await finish(fut)
            if not fut.cancelled() and fut.exception() is None and fut.result() is not None:
                try:
                    self.giveback(fut.result())
                except Exception:
                    pass
            raise

    async def done_async(self, unit: Unit) -> None:
        """`done` in a worker thread."""
        await self._call(self.done, unit)

    async def barrier_wait_async(self, round: int, timeout: Optional[float] = None) -> bool:
        """`barrier_wait` in a worker thread. Cancelled, the task ends when the
        wait does (the arrival stands until the round releases or `timeout`)."""
        return await self._call(self.barrier_wait, round, timeout)


def _round_from(info: Any, counted: Any, left: Any) -> RoundInfo:
    nc = min(info.counted, info.counted_cap)
    nl = min(info.left_out, info.left_out_cap)
    return RoundInfo(info.round, info.revision, info.serial,
                     [Peer(_str(counted[i].name), counted[i].revision) for i in range(nc)],
                     [Peer(_str(left[i].name), left[i].revision) for i in range(nl)])


# help() shows types, not the strings `from __future__ import annotations` leaves.
_util.resolve_annotations(MemberInfo, Unit, GroupEvent, Peer, RoundInfo, GroupStats, GroupWatch, Group)
