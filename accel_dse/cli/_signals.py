"""SIGINT, SIGTERM and SIGHUP end a command within moments, with exit status 130, whatever runs.

The signals are routed to :mod:`accel_dse.signal_watch` (the one watcher a sweep's handler
shares): the Python handler does nothing and never raises, so it cannot lose the signal by
raising inside a finaliser or a callback (a ``KeyboardInterrupt`` raised in JAX's
garbage-collection callback is printed as "Exception ignored" and the run goes on). The
watcher thread, woken by the signal's byte on its pipe, then

1. waits for an :func:`accel_dse.exit_cleanup.uncut` step (at most 1 s) and removes the
   half-written outputs registered in :mod:`accel_dse.exit_cleanup`;
2. stops the child processes (a simulator runs in a session of its own: its whole process group
   gets SIGTERM, then SIGKILL after :data:`CHILD_GRACE_S`);
3. writes ``accel-dse: interrupted`` (or the ``--json`` object) to stderr and ends the process
   with ``os._exit(130)``. A command that ends meanwhile (its child was stopped) waits for it
   at the end of :func:`stop_on_signals`: its exit status is 130 too.

While a sweep runs it routes the three signals to its own handler
(:func:`accel_dse.search.study.deferred_interrupts`, which ends the trial cleanly): the innermost
route owns them.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

from accel_dse.signal_watch import CHILD_GRACE_S, SIGNALS, encode_message, end_process, routed

__all__ = ["stop_on_signals", "CHILD_GRACE_S", "SIGNALS"]


class _Stop:
    """What the watcher and the command share (one per process)."""

    stopping = False
    message = b"accel-dse: interrupted\n"


def _stop_now(signum: int) -> None:
    """Clean up, stop the children and end the process with 130 (never returns)."""
    _Stop.stopping = True
    end_process(_Stop.message, stop_children=True)


@contextlib.contextmanager
def stop_on_signals(message: str = "accel-dse: interrupted") -> Iterator[None]:
    """For the duration, SIGINT, SIGTERM and SIGHUP end the process with 130 (main thread only).

    Args:
        message: The line written to stderr when a signal stops the command.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _Stop.message = encode_message(message)
    with routed(_stop_now):
        try:
            yield
        finally:
            while _Stop.stopping:  # the command ended (a child it waited for was stopped): the watcher exits 130
                time.sleep(0.05)
