"""Ctrl-C and SIGTERM that never leave a trial half-written.

While a sweep runs, SIGINT, SIGTERM and SIGHUP only set a flag, except inside a design's evaluation
(:func:`interruptible`), where they raise :class:`KeyboardInterrupt` at once so a long
evaluation stops immediately. Storage writes are never cut in the middle: a signal that
arrives during one is seen by the objective or the stop callback right after, the current
trial ends FAIL (``status = "interrupted"``) or the loop stops before the next trial, and the
run raises :class:`KeyboardInterrupt` at the end.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

__all__ = ["deferred_interrupts", "interruptible", "interrupt_requested", "request_interrupt"]


class _State:
    requested = False
    in_evaluation = False


_STATE = _State()


def _handler(signum: int, frame: object) -> None:
    _STATE.requested = True
    if _STATE.in_evaluation:
        _STATE.in_evaluation = False
        raise KeyboardInterrupt


def interrupt_requested() -> bool:
    """Whether Ctrl-C or SIGTERM arrived since :func:`deferred_interrupts` began."""
    return _STATE.requested


def request_interrupt() -> None:
    """Ask the running sweep to stop as if a signal had arrived."""
    _STATE.requested = True


@contextlib.contextmanager
def deferred_interrupts() -> Iterator[None]:
    """Route SIGINT, SIGTERM and SIGHUP (a closed terminal) to the flag for the duration (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _STATE.requested = False
    _STATE.in_evaluation = False
    signals = [signal.SIGINT, signal.SIGTERM, *([signal.SIGHUP] if hasattr(signal, "SIGHUP") else [])]
    previous = {sig: signal.signal(sig, _handler) for sig in signals}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
        _STATE.in_evaluation = False


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """A region a signal interrupts at once; raises ``KeyboardInterrupt`` if one is pending."""
    if _STATE.requested:
        raise KeyboardInterrupt
    _STATE.in_evaluation = True
    try:
        yield
    finally:
        _STATE.in_evaluation = False
