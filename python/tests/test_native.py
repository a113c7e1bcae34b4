# SPDX-License-Identifier: MIT
"""What a Python user expects of the package: help() that documents and
types every public call, errors naming the argument and its limit, files
of the wrong kind named for what they are, the library's location in the
import error, roles as an enum, and modes shown as modes."""
import dataclasses
import inspect
import os
import subprocess
import sys

import pytest

import vigil
from conftest import PKG


def _public():
    """(qualified name, object) of every public callable and property."""
    for name in vigil.__all__:
        obj = getattr(vigil, name)
        if isinstance(obj, int) and not inspect.isclass(obj):
            continue  # the VIGIL_E* codes and role aliases
        yield name, obj
        if not inspect.isclass(obj) or issubclass(obj, BaseException):
            continue
        for attr, member in vars(obj).items():
            if attr.startswith("_") and (attr != "__init__" or dataclasses.is_dataclass(obj)):
                continue  # private, or a dataclass's generated __init__ (the class's doc tells it)
            if isinstance(member, (classmethod, staticmethod)):
                member = member.__func__
            if isinstance(member, property) or inspect.isfunction(member):
                yield f"{name}.{attr}", member


def test_every_public_callable_and_property_has_a_docstring():
    missing = [n for n, obj in _public() if not (getattr(obj, "__doc__", None) or "").strip()]
    assert missing == []


def test_annotations_are_types_not_strings():
    strings = []
    for name, obj in _public():
        fns = [obj.fget] if isinstance(obj, property) else [obj] if inspect.isfunction(obj) else []
        for fn in fns:
            strings += [f"{name}: {k}={v!r}" for k, v in fn.__annotations__.items() if isinstance(v, str)]
    assert strings == []
    sig = inspect.signature(vigil.HeartbeatTable.create)
    assert sig.return_annotation is vigil.HeartbeatTable


def test_help_shows_the_mode_in_octal_and_the_public_module():
    text = inspect.getdoc(vigil.Leases.create)
    sig = str(inspect.signature(vigil.Leases.create))
    assert "mode: int = 0o600" in sig and text
    assert repr(vigil.HeartbeatTable) == "<class 'vigil.HeartbeatTable'>"


def test_roles_are_an_int_enum(tmp):
    assert issubclass(vigil.Role, int) and vigil.ROLE_COORDINATOR is vigil.Role.COORDINATOR
    with vigil.HeartbeatTable.create(os.path.join(tmp, "t.hb"), 4) as t:
        slot = t.register()
        assert t.snapshot(slot).role is vigil.Role.WORKER
        t.tick()
        t.beat(slot)
        t.leader_elect(grace=5)
        assert t.snapshot(slot).role is vigil.Role.COORDINATOR and t.snapshot(slot).role == 1
        with pytest.raises(vigil.OutOfRange, match="role 7 is out of range 0..1"):
            t.set_role(slot, 7)


@pytest.mark.parametrize(
    "call, words",
    [
        (lambda t, b, s: t.live_count(-1), "grace -1 is out of range 0..18446744073709551615"),
        (lambda t, b, s: t.mark(0, 64), "bit 64 is out of range 0..63"),
        (lambda t, b, s: t.snapshot(4), "slot 4 is out of range 0..3 (the table has 4 slots)"),
        (lambda t, b, s: t.failover_scan(5, max=0), "max 0 is out of range 1..1048576"),
        (lambda t, b, s: t.failover_scan(5, max=1 << 31), "max 2147483648 is out of range 1..1048576"),
        (lambda t, b, s: t.failover_wait(5, timeout=0, max=1 << 31), "max 2147483648 is out of range 1..1048576"),
        (lambda t, b, s: t.failover_wait(5, timeout=10**400), "timeout 100000000000...(401 characters) is out of range 0..18446744073.7096 seconds"),
        (lambda t, b, s: b.wait(-1), "epoch -1 is out of range 0..4294967295"),
        (lambda t, b, s: b.wait(1 << 33), "epoch 8589934592 is out of range 0..4294967295"),
        (lambda t, b, s: b.round_info(1 << 32), "epoch 4294967296 is out of range 0..4294967295"),
        (lambda t, b, s: b.wait(0, timeout=10**400), "timeout 100000000000...(401 characters) is out of range 0..18446744073.7096 seconds"),
        (lambda t, b, s: b.wait(0, timeout=1e300), "timeout 1e+300 is out of range 0..18446744073.7096 seconds"),
        (lambda t, b, s: s.acquire_wait("k", "me", 1.0, timeout=10**400), "timeout 100000000000...(401 characters) is out"),
        (lambda t, b, s: s.lock("k", "me", 1.0, timeout=1e300), "timeout 1e+300 is out of range 0..18446744073.7096 seconds"),
        (lambda t, b, s: s.acquire("k", "me", 10**400), "ttl 100000000000...(401 characters) is out of range 0.003..1.84467440737096e+16"),
        (lambda t, b, s: b.wait(0, quorum=9), "quorum 9 is out of range 1..4 (the table has 4 slots)"),
        (lambda t, b, s: b.wait(0, quorum=0), "quorum 0 is out of range 1..4"),
        (lambda t, b, s: b.wait(0, timeout=-1), "timeout -1 is out of range 0..18446744073.7096 seconds"),
        (lambda t, b, s: s.acquire("k" * 500, "me", 1.0), "key is 500 bytes long (UTF-8); at most 127"),
        (lambda t, b, s: s.acquire("k", "o" * 64, 1.0), "owner is 64 bytes long (UTF-8); at most 63"),
        (lambda t, b, s: s.acquire("", "me", 1.0), "key is empty"),
        (lambda t, b, s: s.acquire("k", "me", 0.001), "ttl 0.001 is out of range 0.003..1.84467440737096e+16 seconds"),
        (lambda t, b, s: s.acquire("k", "me", float("nan")), "ttl nan is out of range 0.003..1.84467440737096e+16 seconds"),
        (lambda t, b, s: vigil.HeartbeatTable.create("/nonexistent/x", 0), "capacity 0 is out of range 1..1048576"),
        (lambda t, b, s: vigil.Leases.create("/nonexistent/x", 1, mode=0o17777), "mode 8191 is out of range"),
    ],
)
def test_errors_name_the_argument_and_its_limit(tmp, call, words):
    with vigil.HeartbeatTable.create(os.path.join(tmp, "t.hb"), 4) as t, \
         vigil.Barrier.create(os.path.join(tmp, "b.bar"), t, 5) as b, \
         vigil.Leases.create(os.path.join(tmp, "l.ls"), 2) as s:
        t.register()
        with pytest.raises(vigil.OutOfRange) as ei:
            call(t, b, s)
        assert words in str(ei.value) and isinstance(ei.value, ValueError)


def test_a_wrong_type_is_a_type_error(tmp):
    with vigil.HeartbeatTable.create(os.path.join(tmp, "t.hb"), 4) as t:
        with pytest.raises(TypeError, match="grace must be an int, not str"):
            t.live_count("5")
        with pytest.raises(TypeError, match="ttl must be a number of seconds"):
            with vigil.Leases.create(os.path.join(tmp, "l.ls"), 2) as s:
                s.acquire("k", "me", "10s")


def test_a_file_of_another_kind_is_named_for_what_it_is(tmp):
    hb, ls, junk = (os.path.join(tmp, n) for n in ("t.hb", "l.ls", "junk"))
    vigil.Leases.create(ls, 2).close()
    with open(junk, "wb") as f:
        f.write(b"#!/bin/sh\n" + b"\0" * 200)
    with pytest.raises(vigil.BadFile, match=r"l\.ls: a lease store, not a heartbeat table"):
        vigil.HeartbeatTable.open(ls)
    with pytest.raises(vigil.BadFile, match="junk: not a vigil file"):
        vigil.HeartbeatTable.open(junk)
    with vigil.HeartbeatTable.create(hb, 2) as t:
        with pytest.raises(vigil.BadFile, match="a heartbeat table, not a lease store"):
            vigil.Leases.open(hb)
        with pytest.raises(vigil.BadFile, match="a heartbeat table, not a barrier file"):
            vigil.Barrier.open(hb, t)
    with pytest.raises(vigil.CapacityMismatch, match="a heartbeat table of capacity 2, not the 4 asked for"):
        vigil.HeartbeatTable.open(hb, 4)


def test_a_file_of_an_older_layout_is_refused_saying_so(tmp):
    # Layout 3 named processes by pid; layout 4 names registrations by
    # generation (issue 17). An old file is refused, never reinterpreted.
    hb = os.path.join(tmp, "t.hb")
    vigil.HeartbeatTable.create(hb, 2).close()
    with open(hb, "r+b") as f:
        f.seek(8)
        current = int.from_bytes(f.read(4), sys.byteorder)
        f.seek(8)
        f.write((current - 1).to_bytes(4, sys.byteorder))
    with pytest.raises(vigil.BadFile, match=rf"a heartbeat table of layout version {current - 1}, .*re-created"):
        vigil.HeartbeatTable.open(hb)


def _import_vigil(env):
    return subprocess.run([sys.executable, "-c", "import vigil"], capture_output=True, text=True,
                          env=env, cwd=PKG, timeout=60)


def test_a_missing_library_says_how_to_point_at_it():
    env = {k: v for k, v in os.environ.items() if k not in ("VIGIL_LIBRARY", "LD_LIBRARY_PATH")}
    env["PYTHONPATH"] = PKG
    r = _import_vigil(dict(env, VIGIL_LIBRARY="/nonexistent/libvigil.so.0"))
    assert r.returncode != 0 and "VIGIL_LIBRARY=/nonexistent/libvigil.so.0: cannot load it" in r.stderr
    r = _import_vigil(env)
    if r.returncode == 0:
        pytest.skip("libvigil.so.0 is installed where the loader finds it")
    assert "libvigil.so.0 not found" in r.stderr
    assert "VIGIL_LIBRARY=" in r.stderr and "LD_LIBRARY_PATH=" in r.stderr


class Index:
    """An integer that is not an int, as numpy's are: it has __index__."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __index__(self) -> int:
        return self.value


def test_index_integers_count_everywhere_and_bools_nowhere(tmp):
    """Every number takes an __index__ integer (numpy.int64): times and
    TTLs as counts did (seconds() and ttl_ms() refused one); a bool is a
    TypeError everywhere (a flag passed where a number goes)."""
    with vigil.HeartbeatTable.create(os.path.join(tmp, "t.hb"), 4) as t, \
            vigil.Leases.create(os.path.join(tmp, "l.ls"), 2) as s:
        slot = t.register()
        assert t.live_count(Index(5)) == 1
        assert t.failover_wait(Index(5), timeout=Index(0)) == []
        lease = s.acquire("k", "me", Index(5))
        assert lease.ttl == 5.0
        s.release(lease)
        s.release(s.acquire_wait("k", "me", ttl=Index(2), timeout=Index(1)))
        with pytest.raises(vigil.OutOfRange, match="ttl 0 is out of range"):
            s.acquire("k", "me", Index(0))
        for call in (lambda: s.acquire("k", "me", True), lambda: t.live_count(True), lambda: t.mark(slot, False),
                     lambda: t.failover_wait(5, timeout=True)):
            with pytest.raises(TypeError, match="not bool"):
                call()
        t.unregister(slot)
