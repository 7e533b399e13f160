"""SIGINT, SIGTERM and SIGHUP stop every command the same way: the signal becomes an
exception in the main thread (a KeyboardInterrupt, so every `finally` and cleanup path that
Ctrl-C takes runs for SIGTERM too), and the CLI exits 128 + the signal's number."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Signalled(KeyboardInterrupt):
    """The command was stopped by a signal; what it created is being removed."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name


# The last signal received: pytest (the check suite) turns a KeyboardInterrupt into an exit
# code, so the runner reads the signal from here to raise it again.
received: int | None = None

# While the main thread is inside `deferred()`, a signal is held here and raised on the way
# out instead of in the middle of the call.
_deferring = 0
_pending: int | None = None


def _raise(signum: int, frame) -> None:
    global received, _pending
    received = signum
    # Ignore repeats while cleanup runs: a second Ctrl-C must not cut the cleanup short.
    for other in HANDLED:
        signal.signal(other, signal.SIG_IGN)
    if _deferring:
        _pending = signum
        return
    raise Signalled(signum)


@contextmanager
def deferred() -> Iterator[None]:
    """Hold a signal until the block ends. For engine calls that create something: cut short
    mid-request, the engine still creates the object but the caller never learns its ID, and
    cleanup that lists by label can run before the engine has committed it."""
    global _deferring, _pending
    if threading.current_thread() is not threading.main_thread():
        yield  # handlers run in the main thread only; nothing to hold here
        return
    _deferring += 1
    try:
        yield
    finally:
        _deferring -= 1
        if not _deferring and _pending is not None:
            signum, _pending = _pending, None
            raise Signalled(signum)


def install() -> dict[int, object]:
    """Handle the signals; returns the previous handlers, for `restore`."""
    previous = {signum: signal.getsignal(signum) for signum in HANDLED}
    for signum, old in previous.items():
        if old is not signal.SIG_IGN:  # nohup'd: leave SIGHUP ignored
            signal.signal(signum, _raise)
    return previous


def restore(previous: dict[int, object]) -> None:
    for signum, old in previous.items():
        signal.signal(signum, old)


def interruption(exc: KeyboardInterrupt) -> Signalled:
    """Any KeyboardInterrupt as a Signalled (a plain one is SIGINT)."""
    if isinstance(exc, Signalled):
        return exc
    if isinstance(exc.__cause__, Signalled):
        return exc.__cause__
    return Signalled(received or signal.SIGINT)
