"""Ctrl-C and SIGTERM that end a sweep within moments and never leave a trial half-written.

While a sweep runs (:func:`deferred_interrupts`), SIGINT, SIGTERM and SIGHUP only set a flag:
the Python-level handler never raises, so it cannot lose the signal by raising inside a
finaliser or a JAX callback (the "Exception ignored" of issue 48). What happens next depends
on where the sweep is:

* **While the sweep writes its storage** (creating the study or a trial, writing a trial's
  records, the stop check between trials): the flag is seen at the next safe point, right after
  the write in progress. The trial in flight ends FAIL with ``status = "interrupted"``, the loop
  starts no other trial and :func:`~accel_dse.search.sweep.run_sweep` raises
  :class:`KeyboardInterrupt`. These steps take milliseconds, but creating a new SQLite study's
  tables took seconds on a loaded machine.
* **Inside a step that writes nothing** (:func:`interruptible`): a design's evaluation, which
  may run for minutes in numpy, JAX or a compiler, a sampler's draw, building the sampler, the
  grid's scoring. The signal also reaches the watcher thread of :mod:`accel_dse.signal_watch`
  (the one the command's own stop shares; the sweep's route is the innermost while it runs).
  The watcher records the trial in flight as FAIL ``interrupted`` (the region's ``on_stop``;
  nothing else writes the study meanwhile; a write
  that takes longer than :data:`MARK_WAIT_S` is given up, and the trial left RUNNING is failed
  and queued again by the next run's dead-owner check), removes the half-written outputs
  registered in :mod:`accel_dse.exit_cleanup`, writes the stop message and ends the process
  with ``os._exit(130)``. The main thread, should its step end meanwhile, waits for it and
  writes nothing.

Either way the study stays readable and the same command resumes it.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator

from accel_dse.signal_watch import encode_message, end_process, routed

__all__ = [
    "deferred_interrupts",
    "interruptible",
    "interrupt_requested",
    "request_interrupt",
    "resume_message",
    "MARK_WAIT_S",
]

#: Longest wait, s, of a stop for the record of the interrupted trial before the process ends.
MARK_WAIT_S = 1.0


class _State:
    """What the handler, the watcher thread and the sweep share (one per process)."""

    requested = False
    in_evaluation = False
    stopping = False  # the watcher ends the process
    on_stop: Callable[[], None] | None = None
    message = b""


_STATE = _State()
_LOCK = threading.Lock()


def _handler(signum: int, frame: object) -> None:
    """The Python-level handler: set the flag, never raise."""
    _STATE.requested = True


def interrupt_requested() -> bool:
    """Whether Ctrl-C or SIGTERM arrived since :func:`deferred_interrupts` began."""
    return _STATE.requested


def request_interrupt() -> None:
    """Ask the running sweep to stop at its next safe point, as if a signal had arrived."""
    _STATE.requested = True


def resume_message(where: str) -> str:
    """The line a stopped sweep ends with: where its finished trials are and how to resume.

    Args:
        where: The storage as shown to the user.
    """
    return f"accel-dse: interrupted; finished trials are kept in {where}, run the same command to resume"


def _on_signal(signum: int) -> None:
    """The watcher's part: set the flag; inside an :func:`interruptible` step, end the process."""
    _STATE.requested = True
    with _LOCK:
        if not _STATE.in_evaluation or _STATE.stopping:
            return  # the sweep sees the flag at its next safe point
        _STATE.stopping = True
        on_stop = _STATE.on_stop
    end_process(_STATE.message, on_stop=on_stop, wait_s=MARK_WAIT_S)


@contextlib.contextmanager
def deferred_interrupts(message: str = "accel-dse: interrupted") -> Iterator[None]:
    """Route SIGINT, SIGTERM and SIGHUP (a closed terminal) to the flag for the duration (main thread only).

    Args:
        message: The line written to stderr when a signal ends the process during an evaluation
            (``""``: none, for a ``--jobs`` worker whose parent reports).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _STATE.requested = False
    _STATE.in_evaluation = False
    _STATE.message = encode_message(message)
    try:
        with routed(_on_signal, _handler):
            yield
    finally:
        _STATE.in_evaluation = False


@contextlib.contextmanager
def interruptible(on_stop: Callable[[], None] | None = None) -> Iterator[None]:
    """A region a signal ends at once: the process ends with 130 after ``on_stop`` records the trial.

    Raises ``KeyboardInterrupt`` on entry if a stop is already pending (an ordinary raise, at a
    safe point).

    Args:
        on_stop: Records the trial in flight as interrupted; run by the watcher thread, at most
            :data:`MARK_WAIT_S` waited for. It must not need the main thread.
    """
    if _STATE.requested:
        raise KeyboardInterrupt
    with _LOCK:
        _STATE.on_stop = on_stop
        _STATE.in_evaluation = True
    try:
        yield
    finally:
        with _LOCK:
            stopping = _STATE.stopping
            if not stopping:
                _STATE.in_evaluation = False
                _STATE.on_stop = None
        while stopping:  # the watcher records the trial and ends the process: write nothing meanwhile
            time.sleep(0.05)
