"""What must go when a command is stopped by a signal: half-written outputs, and moments not to cut.

A command stopped by SIGINT, SIGTERM or SIGHUP ends at once (:mod:`accel_dse.cli._signals`
calls ``os._exit(130)`` from a watcher thread, so no Python ``finally`` runs after it). Code that
writes an output in a temporary place registers that place here while it writes
(:func:`removed_if_stopped`); the stop removes it. A step that must not be cut in the middle
(renaming an output directory into place, which moves the old one aside first) runs inside
:func:`uncut`: the stop waits for it, at most :data:`UNCUT_WAIT_S`.

Standard library only; nothing here raises into the code that registers.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ["removed_if_stopped", "uncut", "clean_up_for_stop", "UNCUT_WAIT_S"]

#: Longest wait, s, of a stop for an :func:`uncut` step to finish.
UNCUT_WAIT_S = 1.0

_LOCK = threading.Lock()
_PATHS: dict[int, Path] = {}
_NEXT = [0]
_UNCUT = [0]


@contextlib.contextmanager
def removed_if_stopped(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Register ``path`` (a temporary file or directory) to be removed if a signal stops the command meanwhile."""
    with _LOCK:
        key = _NEXT[0]
        _NEXT[0] += 1
        _PATHS[key] = Path(path)
    try:
        yield Path(path)
    finally:
        with _LOCK:
            _PATHS.pop(key, None)


@contextlib.contextmanager
def uncut() -> Iterator[None]:
    """A short step a stop waits for (at most :data:`UNCUT_WAIT_S`) before it removes anything."""
    with _LOCK:
        _UNCUT[0] += 1
    try:
        yield
    finally:
        with _LOCK:
            _UNCUT[0] -= 1


def clean_up_for_stop() -> None:
    """Wait for the :func:`uncut` steps (bounded), then remove every registered path (errors ignored)."""
    deadline = time.monotonic() + UNCUT_WAIT_S
    while _UNCUT[0] > 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    with _LOCK:
        paths = list(_PATHS.values())
        _PATHS.clear()
    for path in paths:
        with contextlib.suppress(OSError):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
