# SPDX-License-Identifier: MIT
"""Errors: vigil's codes as exceptions built on Python's own."""
from __future__ import annotations

import errno
import os
import pickle

import pytest

import vigil
from vigil import _errors


@pytest.mark.parametrize(
    "code, cls, also",
    [
        (vigil.VIGIL_EFULL, vigil.Full, None),
        (vigil.VIGIL_EBADFILE, vigil.BadFile, None),
        (vigil.VIGIL_ECAPACITY, vigil.CapacityMismatch, None),
        (vigil.VIGIL_ERANGE, vigil.OutOfRange, ValueError),
        (vigil.VIGIL_EVACANT, vigil.Vacant, None),
        (vigil.VIGIL_ETIMEDOUT, vigil.Timeout, TimeoutError),
        (vigil.VIGIL_ENOPEERS, vigil.NoPeers, None),
        (vigil.VIGIL_ELOST, vigil.Lost, None),
        (vigil.VIGIL_EBUSY, vigil.Busy, None),
    ],
)
def test_each_code_has_its_class(code, cls, also):
    e = _errors.exception(code, "where")
    assert type(e) is cls and isinstance(e, vigil.Error)
    if also is not None:
        assert isinstance(e, also)
    assert e.code == code and e.name.startswith("VIGIL_E")
    assert str(e).startswith("where: ") and vigil.strerror(code) in str(e)
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is cls and back.code == code


def test_errno_is_the_matching_oserror():
    e = _errors.exception(-errno.EEXIST, "/some/path")
    assert type(e) is FileExistsError and e.errno == errno.EEXIST and e.filename == "/some/path"
    assert type(_errors.exception(-errno.ENOENT)) is FileNotFoundError
    assert type(_errors.exception(-errno.EACCES)) is PermissionError
    assert type(_errors.exception(-errno.EINVAL)) is OSError


def test_unknown_code_is_still_an_error_and_strerror_never_fails():
    e = _errors.exception(-1999)
    assert type(e) is vigil.Error and e.code == -1999
    assert vigil.strerror(-1999)
    assert vigil.strerror(-errno.EEXIST) == os.strerror(errno.EEXIST)


def test_timeout_and_lost_need_no_arguments():
    assert vigil.Timeout().code == vigil.VIGIL_ETIMEDOUT
    assert vigil.Lost().code == vigil.VIGIL_ELOST
    with pytest.raises(TimeoutError):
        raise vigil.Timeout()
