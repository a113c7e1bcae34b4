# SPDX-License-Identifier: MIT
"""What a forked child starts afresh.

A child of os.fork has one thread, the one that forked: every other thread
of the parent is gone, with whatever it held. A lock a parent's thread held
at that moment stays held in the child for ever; a count of calls in
progress (a turn on a handle, the wait pool's idle threads) counts calls
that will never end. So, in the child, each object registered here gets a
fresh lock and forgets the calls of threads that are not there
(`_after_fork()`), and each module hook runs (the wait pool, the signal
guard). What the parent holds (its slots, leases, keepalives) stays the
parent's: the objects know which process made them.
"""
import os
import threading
import weakref
from typing import Any, Callable, List

_objects: "weakref.WeakSet[Any]" = weakref.WeakSet()  # each with an _after_fork() method
_hooks: List[Callable[[], None]] = []
# This process's main thread (where Python runs signal handlers): a fact of
# the process, read by whichever threads fork at once, never a note left by
# one fork for its child (two threads forking at once overwrote each
# other's: a child of the main thread's fork was told it was forked by
# another thread, or the other way round).
_main_ident = threading.main_thread().ident
_from_main = True  # in a child: whether the thread that forked it was the parent's main thread


def renew_in_child(obj: Any) -> None:
    """Call obj._after_fork() in every child forked while obj is alive."""
    _objects.add(obj)


def at_fork_child(fn: Callable[[], None]) -> Callable[[], None]:
    """Run fn() in every forked child (a decorator)."""
    _hooks.append(fn)
    return fn


def forked_from_main() -> bool:
    """In a child: whether the thread that forked was the parent's main thread
    (then the child goes on inside the same blocks; else their frames are
    the parent's, and not in the child)."""
    return _from_main


def _child() -> None:
    global _from_main, _main_ident
    # The child's one thread is the one that forked (the same ident), and
    # its main thread from now on.
    me = threading.get_ident()
    _from_main, _main_ident = me == _main_ident, me
    for fn in list(_hooks):
        fn()
    for obj in list(_objects):
        obj._after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_child)
