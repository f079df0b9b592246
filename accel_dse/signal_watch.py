"""The one watcher of SIGINT, SIGTERM and SIGHUP: a flag-only handler, a wakeup pipe and a thread.

A command (:mod:`accel_dse.cli._signals`) and a sweep inside it
(:mod:`accel_dse.search.study.interrupt`) each route the three signals here for their duration
(:func:`routed`), nested: the innermost route owns them. The Python-level handler of a route
never raises (so it cannot lose the signal by raising inside a finaliser or a JAX callback,
issue 48's "Exception ignored"); it may set its own flag. The signal also reaches a pipe
(:func:`signal.set_wakeup_fd`, written by the C-level handler), which one daemon thread reads;
it calls the innermost route's ``on_signal``, which may end the process with
:func:`end_process`: record what must be recorded (bounded wait), remove the half-written
outputs (:mod:`accel_dse.exit_cleanup`), stop the child processes, write one line and
``os._exit(130)``. A byte whose signal is not owned by the innermost route's handler (another
handler was installed meanwhile) is ignored.

The watcher needs the interpreter lock for a moment; the main thread may hold it inside numpy,
JAX or a compiler, which give it up within milliseconds in practice.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from accel_dse.exit_cleanup import clean_up_for_stop

__all__ = ["SIGNALS", "CHILD_GRACE_S", "routed", "end_process", "encode_message"]

#: The signals that stop a command.
SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))
#: Seconds the child processes get between SIGTERM and SIGKILL.
CHILD_GRACE_S = 0.5


@dataclasses.dataclass(eq=False)
class _Route:
    handler: Callable[[int, object], None]
    on_signal: Callable[[int], None]


class _Watch:
    """The pipe, the thread and the routes, innermost last (one per process)."""

    read_fd: int | None = None
    write_fd: int | None = None
    thread: threading.Thread | None = None
    routes: list[_Route] = []


def encode_message(message: str) -> bytes:
    """The stop line as written to stderr (``""``: nothing)."""
    return (message.rstrip("\n") + "\n").encode("utf-8", "replace") if message else b""


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
            route = _Watch.routes[-1] if _Watch.routes else None
            if route is None or signal.getsignal(signum) is not route.handler:
                continue  # no route, or a handler of someone else's owns the signal now
            route.on_signal(signum)


def _start_watcher() -> None:
    if _Watch.thread is not None and _Watch.thread.is_alive():
        return
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    _Watch.read_fd, _Watch.write_fd = read_fd, write_fd
    _Watch.thread = threading.Thread(target=_watch, name="accel-dse-signals", daemon=True)
    _Watch.thread.start()


@contextlib.contextmanager
def routed(on_signal: Callable[[int], None],
           handler: Callable[[int, object], None] | None = None) -> Iterator[bool]:
    """For the duration, SIGINT, SIGTERM and SIGHUP run ``handler`` (in the main thread; default: nothing)
    and then ``on_signal(signum)`` in the watcher thread. Main thread only: elsewhere nothing is
    routed. Yields whether the signals are routed.

    Args:
        on_signal: Called by the watcher thread with the signal number; may end the process.
        handler: The Python-level handler (it must not raise); a fresh no-op by default.
    """
    if threading.current_thread() is not threading.main_thread():
        yield False
        return
    _start_watcher()
    try:
        old_fd = signal.set_wakeup_fd(_Watch.write_fd if _Watch.write_fd is not None else -1,
                                      warn_on_full_buffer=False)
    except ValueError:  # pragma: no cover - not the main thread of the main interpreter
        yield False
        return

    def nothing(signum: int, frame: object) -> None:
        """The Python-level handler: nothing to do (the watcher acts on the byte the signal wrote)."""

    route = _Route(handler or nothing, on_signal)
    previous = {}
    try:
        for sig in SIGNALS:
            previous[sig] = signal.signal(sig, route.handler)
        _Watch.routes.append(route)
        yield True
    finally:
        if route in _Watch.routes:
            _Watch.routes.remove(route)
        for sig, old in previous.items():
            signal.signal(sig, old)
        signal.set_wakeup_fd(old_fd)


def end_process(message: bytes, *, on_stop: Callable[[], None] | None = None, wait_s: float = 1.0,
                stop_children: bool = False) -> None:
    """End the process with 130 (never returns).

    Args:
        message: Written to stderr last (``b""``: nothing).
        on_stop: Run first in a thread of its own, waited for at most ``wait_s`` seconds (records
            the work in flight; must not need the main thread).
        wait_s: The bound on that wait, s.
        stop_children: SIGTERM the child processes (their whole group when they lead one), then
            SIGKILL after :data:`CHILD_GRACE_S`.
    """
    try:
        if on_stop is not None:
            marker = threading.Thread(target=_quietly, args=(on_stop,), name="accel-dse-stop-mark", daemon=True)
            marker.start()
            marker.join(wait_s)
        clean_up_for_stop()
        if stop_children:
            _stop_children()
        if message:
            with contextlib.suppress(OSError):
                os.write(2, message)
    finally:
        os._exit(130)


def _quietly(step: Callable[[], None]) -> None:
    with contextlib.suppress(Exception):
        step()


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
