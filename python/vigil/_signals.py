# SPDX-License-Identifier: MIT
"""Signals held back while vigil holds something half-made.

A Python signal handler (Ctrl-C's KeyboardInterrupt, a SIGTERM handler
that raises SystemExit) runs in the main thread between two bytecodes,
wherever it is. Between the C call that acquires a lease, registers a slot
or starts a keepalive and the moment the object that gives it back owns
it, an exception would leave it held with nobody to give it back (a lease
for its whole TTL, a slot until a watchdog reclaims it).

So while such a section runs, vigil's guard stands in for the Python
handlers of SIGNALS: a signal that lands while a protected function is on
the main thread's stack is noted, and its own handler is called when the
outermost protected function has settled (the acquisition undone, or
handed to the block whose __exit__ gives it back). A signal that lands
anywhere else goes to its handler at once. The guard is installed when a
protected section starts and stays while a block that holds something is
open (so that its __exit__ is covered from its first instruction), and the
handlers are put back when the last one ends. A handler that the program
installs meanwhile replaces the guard for that signal, and is left alone.

Signal handlers run only in the main thread: elsewhere there is nothing to
hold back, and arm() does nothing.
"""
import signal
import sys
import threading
from typing import Any, Callable, Dict, List, Set, Tuple, TypeVar

# The signals whose Python handler may raise: Ctrl-C and the usual
# termination and user signals. A signal left to the system (SIG_DFL,
# SIG_IGN) raises nothing and is not touched.
SIGNALS = tuple(getattr(signal, name) for name in
                ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM")
                if hasattr(signal, name))

_protected: Set[Any] = set()  # code objects of the protected functions
_saved: Dict[int, Any] = {}  # signal -> the handler the guard stands in for
noted: List[Tuple[int, Any]] = []  # signals noted, with their handlers
_holders = 0  # sections and blocks that keep the guard (main thread only)

F = TypeVar("F", bound=Callable[..., Any])


def protected(fn: F) -> F:
    """Mark `fn` (a function, or an async function) as a protected section:
    a signal landing while it runs waits until the outermost one settles."""
    _protected.add(fn.__code__)
    return fn


def _inside(frame: Any) -> bool:
    while frame is not None:
        if frame.f_code in _protected:
            return True
        frame = frame.f_back
    return False


def _guard(signum: int, frame: Any) -> None:
    """The handler installed for SIGNALS while the guard is up."""
    handler = _saved.get(signum)
    if handler is None:  # put back meanwhile: whatever is there now
        handler = signal.getsignal(signum)
    if _inside(frame):
        noted.append((signum, handler))
    elif callable(handler) and handler is not _guard:
        handler(signum, frame)


def _main() -> bool:
    return threading.current_thread() is threading.main_thread()


def arm() -> bool:
    """Start a protected section (or a block's hold on the guard): install
    the guard if it is not up. True when armed (disarm it later); False
    outside the main thread, where no handler runs."""
    global _holders
    if not _main():
        return False
    if _holders == 0:
        installed = []
        try:
            for signum in SIGNALS:
                handler = signal.getsignal(signum)
                if callable(handler) and handler is not _guard:
                    _saved[signum] = handler
                    signal.signal(signum, _guard)
                    installed.append(signum)
        except BaseException:
            # A signal that landed before the guard was up: nothing is held
            # yet; put back what was swapped and let it be raised.
            for signum in installed:
                signal.signal(signum, _saved.pop(signum))
            raise
    _holders += 1
    return True


def disarm(armed: bool) -> None:
    """End what arm() began (from a protected function, or a helper it
    calls): the handlers are put back when no section or block holds the
    guard, and the signals noted are delivered (their handlers called,
    which may raise) unless the protected function is itself inside
    another, which delivers them when it settles."""
    global _holders
    if not armed:
        return
    _holders -= 1
    if _holders == 0:
        for signum, handler in list(_saved.items()):
            if signal.getsignal(signum) is _guard:
                signal.signal(signum, handler)
            del _saved[signum]
    caller = sys._getframe(1)
    section = caller
    while section is not None and section.f_code not in _protected:
        section = section.f_back
    if not noted or (section is not None and _inside(section.f_back)):
        return
    while noted:
        signum, handler = noted.pop(0)
        if callable(handler) and handler is not _guard:
            handler(signum, caller)


def settle(armed: bool, undo: Callable[[], Any]) -> None:
    """End the section `armed` began by delivering what was noted; if that
    raises, undo() what the section made (the signals held back again
    while it runs) before the exception goes on. For a block's __enter__
    that found `noted` set: the caller arms again if nothing was raised."""
    try:
        disarm(armed)
    except BaseException:
        again = arm()
        try:
            undo()
        finally:
            disarm(again)
        raise
