# SPDX-License-Identifier: MIT
"""Whose file is trusted (issue 26's opens, bound here): opening for writing
refuses a file another user could have made or rewritten, with
vigil.Untrusted naming its owner and mode, unless trust_owner=True; a
look (readonly) needs no trust; create(group=...) gives a file to a group
as it is made. As root, the files are given to the user vigil-test
(tests/test_user.sh makes it) to be another user's."""
from __future__ import annotations

import grp
import os
import pwd

import pytest

import vigil


def other_user():
    """vigil-test's uid, when this runs as root and the user exists."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam("vigil-test").pw_uid
    except KeyError:
        return None


def made(tmp, kind):
    """A fresh file of `kind` and an opener taking trust_owner."""
    t = vigil.HeartbeatTable.create(os.path.join(tmp, "t.hb"), 4)
    if kind == "table":
        t.close()
        return os.path.join(tmp, "t.hb"), lambda **kw: vigil.HeartbeatTable.open(os.path.join(tmp, "t.hb"), **kw)
    if kind == "leases":
        t.close()
        path = os.path.join(tmp, "l.ls")
        vigil.Leases.create(path, 4).close()
        return path, lambda **kw: vigil.Leases.open(path, **kw)
    path = os.path.join(tmp, "b.bar")
    vigil.Barrier.create(path, t, 5).close()
    return path, lambda **kw: vigil.Barrier.open(path, t, **kw)


@pytest.mark.parametrize("kind", ["table", "leases", "barrier"])
def test_a_file_anyone_may_write_is_untrusted(tmp, kind):
    path, open_ = made(tmp, kind)
    uid = other_user()
    if uid is not None:
        os.chown(path, uid, -1)  # vigil-test's, as a test_user.sh user would have made it
    os.chmod(path, 0o666)
    with pytest.raises(vigil.Untrusted) as ei:
        open_()
    e = ei.value
    assert e.code == vigil.VIGIL_EUNTRUSTED == -1011 and isinstance(e, vigil.Error) and isinstance(e, PermissionError)
    assert "mode 0o666" in str(e) and "trust_owner=True" in str(e)
    if uid is not None:
        assert "vigil-test" in str(e)
    open_(trust_owner=True).close()
    if kind != "barrier":
        open_(readonly=True).close()  # a look changes nothing: no trust needed


@pytest.mark.parametrize("kind", ["table", "leases", "barrier"])
def test_another_users_file_is_untrusted(tmp, kind):
    uid = other_user()
    if uid is None:
        pytest.skip("needs root and the user vigil-test (tests/test_user.sh)")
    path, open_ = made(tmp, kind)
    os.chown(path, uid, -1)
    os.chmod(path, 0o644)  # only its owner, another user, may write it
    with pytest.raises(vigil.Untrusted, match="owned by vigil-test"):
        open_()
    open_(trust_owner=True).close()
    os.chown(path, 0, -1)  # root's: trusted
    open_().close()


def test_create_gives_the_file_to_a_group(tmp):
    gid = os.getegid()
    name = grp.getgrgid(gid).gr_name
    t = vigil.HeartbeatTable.create(os.path.join(tmp, "t.hb"), 4, 0o660, group=gid)
    s = vigil.Leases.create(os.path.join(tmp, "l.ls"), 4, 0o660, group=name)
    b = vigil.Barrier.create(os.path.join(tmp, "b.bar"), t, 5, 0o660, group=name.encode())
    for n in ("t.hb", "l.ls", "b.bar"):
        st = os.stat(os.path.join(tmp, n))
        assert (st.st_gid, st.st_mode & 0o7777) == (gid, 0o660), n
    for h in (b, s, t):
        h.close()
    with pytest.raises(ValueError, match="no such group"):
        vigil.HeartbeatTable.create(os.path.join(tmp, "x.hb"), 4, group="no-such-group-here")
    with pytest.raises(vigil.OutOfRange):
        vigil.HeartbeatTable.create(os.path.join(tmp, "x.hb"), 4, group=-1)
    assert not os.path.exists(os.path.join(tmp, "x.hb"))
    uid = other_user()
    if uid is not None:
        other_gid = pwd.getpwnam("vigil-test").pw_gid
        vigil.HeartbeatTable.create(os.path.join(tmp, "v.hb"), 4, 0o660, group="vigil-test").close()
        assert os.stat(os.path.join(tmp, "v.hb")).st_gid == other_gid
