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
  grid's scoring. The signal also reaches a pipe (:func:`signal.set_wakeup_fd`, written by the
  C-level handler) read by a watcher thread. The watcher records the trial in flight as FAIL
  ``interrupted`` (the region's ``on_stop``; nothing else writes the study meanwhile; a write
  that takes longer than :data:`MARK_WAIT_S` is given up, and the trial left RUNNING is failed
  and queued again by the next run's dead-owner check), removes the half-written outputs
  registered in :mod:`accel_dse.exit_cleanup`, writes the stop message and ends the process
  with ``os._exit(130)``. The main thread, should its step end meanwhile, waits for it and
  writes nothing.

Either way the study stays readable and the same command resumes it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator

from accel_dse.exit_cleanup import clean_up_for_stop

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
    active = False  # a deferred_interrupts region runs
    in_evaluation = False
    stopping = False  # the watcher ends the process
    on_stop: Callable[[], None] | None = None
    message = b""
    read_fd: int | None = None
    write_fd: int | None = None
    thread: threading.Thread | None = None


_STATE = _State()
_LOCK = threading.Lock()
_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


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


def _watch() -> None:
    read_fd = _STATE.read_fd
    if read_fd is None:  # pragma: no cover - set before the thread starts
        return
    while True:
        try:
            data = os.read(read_fd, 64)
        except InterruptedError:
            continue
        except OSError:
            return
        for signum in data:
            if not _STATE.active or signal.getsignal(signum) is not _handler:
                continue
            _STATE.requested = True
            with _LOCK:
                if not _STATE.in_evaluation or _STATE.stopping:
                    continue  # the sweep sees the flag at its next safe point
                _STATE.stopping = True
                on_stop = _STATE.on_stop
            _stop_now(on_stop)


def _stop_now(on_stop: Callable[[], None] | None) -> None:
    """Record the trial in flight (bounded wait), remove half-written outputs, end with 130 (never returns)."""
    try:
        if on_stop is not None:
            marker = threading.Thread(target=_quietly, args=(on_stop,), name="accel-dse-stop-mark", daemon=True)
            marker.start()
            marker.join(MARK_WAIT_S)
        clean_up_for_stop()
        if _STATE.message:
            with contextlib.suppress(OSError):
                os.write(2, _STATE.message)
    finally:
        os._exit(130)


def _quietly(step: Callable[[], None]) -> None:
    with contextlib.suppress(Exception):
        step()


def _start_watcher() -> None:
    if _STATE.thread is not None and _STATE.thread.is_alive():
        return
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    _STATE.read_fd, _STATE.write_fd = read_fd, write_fd
    _STATE.thread = threading.Thread(target=_watch, name="accel-dse-sweep-signals", daemon=True)
    _STATE.thread.start()


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
    _start_watcher()
    _STATE.requested = False
    _STATE.in_evaluation = False
    _STATE.message = (message.rstrip("\n") + "\n").encode("utf-8", "replace") if message else b""
    try:
        old_fd = signal.set_wakeup_fd(_STATE.write_fd if _STATE.write_fd is not None else -1,
                                      warn_on_full_buffer=False)
    except ValueError:  # pragma: no cover - not the main thread of the main interpreter
        old_fd = None
    previous = {sig: signal.signal(sig, _handler) for sig in _SIGNALS}
    _STATE.active = True
    try:
        yield
    finally:
        _STATE.active = False
        for sig, old in previous.items():
            signal.signal(sig, old)
        if old_fd is not None:
            signal.set_wakeup_fd(old_fd)
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
