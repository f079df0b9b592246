"""SIGINT, SIGTERM and SIGHUP end a command within moments, with exit status 130, whatever runs.

The Python handler only sets a flag: it never raises, so it cannot lose the signal by raising
inside a finaliser or a callback (a ``KeyboardInterrupt`` raised in JAX's garbage-collection
callback is printed as "Exception ignored" and the run goes on). The signal also reaches a
pipe (:func:`signal.set_wakeup_fd`, written by the C-level handler), which a watcher thread
reads; it then

1. waits for an :func:`accel_dse.exit_cleanup.uncut` step (at most 1 s) and removes the
   half-written outputs registered in :mod:`accel_dse.exit_cleanup`;
2. stops the child processes (a simulator runs in a session of its own: its whole process group
   gets SIGTERM, then SIGKILL after :data:`CHILD_GRACE_S`);
3. writes ``accel-dse: interrupted`` (or the ``--json`` object) to stderr and ends the process
   with ``os._exit(130)``. A command that ends meanwhile (its child was stopped) waits for it
   at the end of :func:`stop_on_signals`: its exit status is 130 too.

The watcher needs the interpreter lock for a moment; the main thread may hold it inside
numpy, JAX or a compiler, which give it up within milliseconds in practice.

While a sweep runs it routes the three signals to its own handler
(:func:`accel_dse.search.study.deferred_interrupts`, which ends the trial cleanly): the watcher
leaves a signal alone whose handler is not this module's.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from accel_dse.exit_cleanup import clean_up_for_stop

__all__ = ["stop_on_signals", "CHILD_GRACE_S", "SIGNALS"]

#: Seconds the child processes get between SIGTERM and SIGKILL.
CHILD_GRACE_S = 0.5
#: The signals that stop a command.
SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


class _Watch:
    """The state shared by the handler and the watcher thread (one per process)."""

    read_fd: int | None = None
    write_fd: int | None = None
    thread: threading.Thread | None = None
    active = False
    stopping = False
    message = b"accel-dse: interrupted\n"


def _flag(signum: int, frame: object) -> None:
    """The Python-level handler: nothing to do (the watcher acts on the byte the signal wrote)."""


def _children() -> list[tuple[int, int]]:
    """``(pid, process group)`` of this process's direct children (from ``/proc``; ``[]`` elsewhere)."""
    me = os.getpid()
    out: list[tuple[int, int]] = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return out
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            text = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = text[text.rfind(")") + 2:].split()  # after "pid (comm) ": state ppid pgrp ...
        if len(fields) > 2 and fields[1] == str(me):
            out.append((int(entry), int(fields[2])))
    return out


def _stop_children() -> None:
    """SIGTERM each child (its whole group when it leads one of its own), SIGKILL what is left."""
    own_group = os.getpgrp()
    targets = _children()
    if not targets:
        return

    def send(sig: int) -> None:
        for pid, group in targets:
            with contextlib.suppress(OSError):
                if group == pid and group != own_group:
                    os.killpg(group, sig)
                else:
                    os.kill(pid, sig)

    send(signal.SIGTERM)
    deadline = time.monotonic() + CHILD_GRACE_S
    while time.monotonic() < deadline:
        if not any(_running(pid) for pid, _ in targets):
            return
        time.sleep(0.02)
    send(signal.SIGKILL)
    deadline = time.monotonic() + 0.2
    while time.monotonic() < deadline and any(_running(pid) for pid, _ in targets):
        time.sleep(0.01)


def _running(pid: int) -> bool:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return text[text.rfind(")") + 2:][:1] not in ("Z", "X")


def _watch() -> None:
    read_fd = _Watch.read_fd
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
            if not _Watch.active or signal.getsignal(signum) is not _flag:
                continue  # not during a command, or another handler (the sweep's) owns the signal now
            _stop_now()


def _stop_now() -> None:
    """Clean up and end the process with 130 (never returns)."""
    _Watch.stopping = True
    try:
        clean_up_for_stop()
        _stop_children()
        with contextlib.suppress(OSError):
            os.write(2, _Watch.message)
    finally:
        os._exit(130)


def _start_watcher() -> None:
    if _Watch.thread is not None and _Watch.thread.is_alive():
        return
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    _Watch.read_fd, _Watch.write_fd = read_fd, write_fd
    _Watch.thread = threading.Thread(target=_watch, name="accel-dse-signals", daemon=True)
    _Watch.thread.start()


@contextlib.contextmanager
def stop_on_signals(message: str = "accel-dse: interrupted") -> Iterator[None]:
    """For the duration, SIGINT, SIGTERM and SIGHUP end the process with 130 (main thread only).

    Args:
        message: The line written to stderr when a signal stops the command.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _start_watcher()
    previous = {}
    try:
        old_fd = signal.set_wakeup_fd(_Watch.write_fd or -1, warn_on_full_buffer=False)
    except ValueError:  # pragma: no cover - not the main thread of the main interpreter
        yield
        return
    try:
        for sig in SIGNALS:
            previous[sig] = signal.signal(sig, _flag)
        _Watch.message = (message.rstrip("\n") + "\n").encode("utf-8", "replace")
        _Watch.active = True
        yield
    finally:
        while _Watch.stopping:  # the command ended (a child it waited for was stopped): the watcher exits with 130
            time.sleep(0.05)
        _Watch.active = False
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        signal.set_wakeup_fd(old_fd)
