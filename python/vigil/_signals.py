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
handlers are put back when the last one ends.

Each guard is a closure over the one handler it stands in for, and is
that handler everywhere but inside a section: a program that saved it
(`old = signal.signal(SIGINT, h)` inside a block) and puts it back after
the block, or calls it from a handler of its own, gets its handler's
behaviour, never a recursion or a signal ignored. A handler the program
installs meanwhile replaces the guard for that signal and is left alone;
the next section to start guards it in turn. When no section or block is
left, every guard still installed is replaced by its handler.

Signal handlers run only in the main thread of the main interpreter:
elsewhere (another thread, a subinterpreter, where signal.signal raises
ValueError) there is nothing to hold back, and arm() does nothing. The
ways out that give back what a section made never depend on arm()
succeeding.
"""
import signal
import sys
import threading
from typing import Any, Callable, Dict, List, Optional, Set, Tuple, TypeVar

from . import _fork

T = TypeVar("T")

# The signals whose Python handler may raise: Ctrl-C and the usual
# termination and user signals. A signal left to the system (SIG_DFL,
# SIG_IGN) raises nothing and is not touched.
SIGNALS = tuple(getattr(signal, name) for name in
                ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM")
                if hasattr(signal, name))

_protected: Set[Any] = set()  # code objects of the functions protected whenever they run
_armed: Dict[Any, int] = {}  # frames that armed the guard (their sections), with counts
noted: List[Tuple[int, Any]] = []  # signals noted, with their handlers
_holders = 0  # sections and blocks that keep the guard (main thread only)
_no_handlers = False  # signal.signal raised ValueError: no Python handler runs in this interpreter

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


def _guard_for(handler: Callable[[int, Any], Any]) -> Callable[[int, Any], None]:
    """The guard that stands in for `handler`: the signal noted (with
    `handler`, to be called when the section settles) inside a section,
    handed to `handler` at once anywhere else, whenever it runs (after the
    block too, if the program kept it and put it back)."""

    def guard(signum: int, frame: Any) -> None:
        if _inside(frame):
            noted.append((signum, handler))
        else:
            handler(signum, frame)

    guard.vigil_stands_in_for = handler  # type: ignore[attr-defined]
    return guard


def _stands_in_for(handler: Any) -> Any:
    """The handler a guard stands in for; None for anything else."""
    return getattr(handler, "vigil_stands_in_for", None)


def _main() -> bool:
    return not _no_handlers and threading.current_thread() is threading.main_thread()


def _install() -> List[Tuple[int, Any]]:
    """A guard for each of SIGNALS whose handler is the program's (callable
    and not a guard already); returns (signal, handler) put aside."""
    installed: List[Tuple[int, Any]] = []
    try:
        for signum in SIGNALS:
            handler = signal.getsignal(signum)
            if callable(handler) and _stands_in_for(handler) is None:
                signal.signal(signum, _guard_for(handler))
                installed.append((signum, handler))
    except BaseException:
        # Put back what was swapped (a signal that landed meanwhile went to
        # the guard or the handler: either way to the handler).
        for signum, handler in installed:
            signal.signal(signum, handler)
        raise
    return installed


def _put_back() -> None:
    """Every guard still installed replaced by the handler it stands in for."""
    for signum in SIGNALS:
        handler = _stands_in_for(signal.getsignal(signum))
        if handler is not None:
            signal.signal(signum, handler)


def arm() -> Any:
    """Start a protected section in the caller's frame (and a hold on the
    guard, which a block keeps until its exit): guard each handler the
    program has installed and not already guarded. Returns what to give
    disarm() (true), or None where no handler runs (another thread, a
    subinterpreter)."""
    global _holders, _no_handlers
    if not _main():
        return None
    frame = sys._getframe(1)
    count = _armed.get(frame, 0)
    # The section and the hold count change together, with no call between
    # them (a signal handler runs only at a call, a function's start or a
    # jump back): from here a signal landing in `frame` is noted.
    _armed[frame] = count + 1
    _holders += 1
    try:
        _install()
    except BaseException as e:
        # A signal that landed before the guard was up, or an interpreter
        # where no handler runs: nothing is held yet; undo the count (no
        # call) and let it be raised, or go on unguarded.
        _holders -= 1
        if count:
            _armed[frame] = count
        else:
            del _armed[frame]
        if isinstance(e, ValueError):  # "signal only works in main thread of the main interpreter"
            _no_handlers = True
            return None
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
        _put_back()
    caller = sys._getframe(1)
    section = caller
    while section is not None and not _section(section):
        section = section.f_back
    if not noted or (section is not None and _inside(section.f_back)):
        return
    # Each signal noted once, as Python runs a handler once for a signal
    # that arrived twice before it could run; every handler is called, and
    # an exception raised by one goes on after the others have run (the
    # last raised, chained to the one before, as when handlers run at
    # successive points of an unwinding).
    pending, done, err = noted[:], set(), None
    del noted[:]
    for signum, handler in pending:
        if signum in done:
            continue
        done.add(signum)
        try:
            handler(signum, caller)
        except BaseException as e:
            if err is not None and e.__context__ is None:
                e.__context__ = err
            err = e
    if err is not None:
        raise err


@_fork.at_fork_child
def _fresh_guard() -> None:
    """In a child forked by a thread other than the main one, the sections
    and blocks that held the guard ran on the parent's main thread, whose
    frames the child does not have: nothing holds it, nothing is noted,
    and the program's handlers are put back. (Forked by the main thread,
    the child goes on inside the same blocks, which give it back as they
    end.)"""
    global _holders
    if _fork.forked_from_main():
        return
    _armed.clear()
    del noted[:]
    _holders = 0
    try:
        _put_back()
    except ValueError:  # no handlers here
        pass


def through(give_back: Callable[[], Any]) -> None:
    """give_back() run to its end whatever signal lands meanwhile: a
    KeyboardInterrupt (any BaseException that is not an Exception) raised
    inside it, at its first instruction included, runs it again, and is
    raised once it has run through; an Exception is its own error, raised
    at once. For what gives back a lease or a slot nobody else holds (a
    second Ctrl-C landing as the first one's clean-up starts must not leak
    it), and so give_back() must be safe to run again."""
    late: Optional[BaseException] = None
    while True:
        try:
            give_back()
            break
        except Exception:
            raise
        except BaseException as e:
            late = e
    if late is not None:
        raise late


def settle(armed: Any, undo: Callable[[], Any]) -> None:
    """End the section `armed` began by delivering what was noted; if that
    raises, undo() what the section made (the signals held back again
    while it runs, and run through whatever lands, even if holding them
    back fails) before the exception goes on. For a block's __enter__
    that found `noted` set: the caller arms again if nothing was raised."""
    try:
        disarm(armed)
    except BaseException:
        again = None
        try:
            again = arm()
        finally:
            try:
                through(undo)
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
