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

T = TypeVar("T")

# The signals whose Python handler may raise: Ctrl-C and the usual
# termination and user signals. A signal left to the system (SIG_DFL,
# SIG_IGN) raises nothing and is not touched.
SIGNALS = tuple(getattr(signal, name) for name in
                ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM")
                if hasattr(signal, name))

_protected: Set[Any] = set()  # code objects of the functions protected whenever they run
_armed: Dict[Any, int] = {}  # frames that armed the guard (their sections), with counts
_saved: Dict[int, Any] = {}  # signal -> the handler the guard stands in for
noted: List[Tuple[int, Any]] = []  # signals noted, with their handlers
_holders = 0  # sections and blocks that keep the guard (main thread only)

F = TypeVar("F", bound=Callable[..., Any])


def protected(fn: F) -> F:
    """Mark `fn` (a function, or an async function) as protected whenever it
    runs: a block's way out, which must be covered from its first
    instruction. Other sections are the frames that call arm(), from then
    until disarm() (a wait before it stays interruptible)."""
    _protected.add(fn.__code__)
    return fn


def _section(frame: Any) -> bool:
    return frame.f_code in _protected or frame in _armed


def _inside(frame: Any) -> bool:
    while frame is not None:
        if _section(frame):
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


def arm() -> Any:
    """Start a protected section in the caller's frame (and a hold on the
    guard, which a block keeps until its exit): install the guard if it is
    not up. Returns what to give disarm() (true), or None outside the main
    thread, where no handler runs."""
    global _holders
    if not _main():
        return None
    frame = sys._getframe(1)
    count = _armed.get(frame, 0)
    # The section and the hold count change together, with no call between
    # them (a signal handler runs only at a call, a function's start or a
    # jump back): from here a signal landing in `frame` is noted.
    _armed[frame] = count + 1
    _holders += 1
    if _holders == 1:
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
            # yet; undo the count (no call), put back what was swapped, and
            # let it be raised.
            _holders -= 1
            if count:
                _armed[frame] = count
            else:
                del _armed[frame]
            for signum in installed:
                signal.signal(signum, _saved[signum])
                del _saved[signum]  # after: the guard never stands without the handler it stands in for
            raise
    return frame


def disarm(armed: Any) -> None:
    """End what arm() began (from a protected function, or a helper it
    calls): the handlers are put back when no section or block holds the
    guard, and the signals noted are delivered (their handlers called,
    which may raise) unless the protected function is itself inside
    another, which delivers them when it settles."""
    global _holders
    if not armed:
        return
    if _armed.get(armed, 0) > 1:
        _armed[armed] -= 1
    else:
        _armed.pop(armed, None)
    _holders -= 1
    if _holders == 0:
        for signum, handler in list(_saved.items()):
            if signal.getsignal(signum) is _guard:
                signal.signal(signum, handler)
            del _saved[signum]
    caller = sys._getframe(1)
    section = caller
    while section is not None and not _section(section):
        section = section.f_back
    if not noted or (section is not None and _inside(section.f_back)):
        return
    while noted:
        signum, handler = noted.pop(0)
        if callable(handler) and handler is not _guard:
            handler(signum, caller)


def settle(armed: Any, undo: Callable[[], Any]) -> None:
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


def enter(make: Callable[[], T], undo: Callable[[T], Any]) -> Tuple[T, Any]:
    """A block's way in: make() what the block holds, the signals held back
    from the start. A signal noted meanwhile is delivered once undo(made)
    has given it back; else returns (made, the hold), which the block keeps
    until its way out disarms it (so that its __exit__ is covered from its
    first instruction)."""
    armed = arm()
    try:
        made = make()
    except BaseException:
        disarm(armed)
        raise
    if armed and noted:
        settle(armed, lambda: undo(made))
        armed = arm()  # the handler raised nothing: the block goes on
    return made, armed
