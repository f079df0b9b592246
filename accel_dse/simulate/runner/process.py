"""Run a command in its own process group, with a timeout that kills the whole group.

A simulation is a tree of processes (our launcher, the simulator, anything it spawns); on a
timeout every one of them must go, not just the direct child. The command starts in a new
session (so its process group id is its pid) and, if it outlives ``timeout``, the group gets
SIGTERM, then SIGKILL after a grace period. The group is signalled while the leader is still
unreaped, so its id cannot have been reused by an unrelated process.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

__all__ = ["ProcessOutcome", "run_in_group"]

#: Seconds between SIGTERM and SIGKILL when a timed-out group is stopped.
KILL_GRACE_S = 3.0
#: Seconds between calls of the ``poll`` callback while waiting.
POLL_S = 1.0


@dataclasses.dataclass(frozen=True)
class ProcessOutcome:
    """How a command ended.

    Attributes:
        returncode: Exit status (negative: killed by that signal); ``None`` after a timeout.
        timed_out: Whether the timeout expired and the process group was killed.
        seconds: Wall time from start to end, s.
        pid: Process id of the command, which was also its process group id.
    """

    returncode: int | None
    timed_out: bool
    seconds: float
    pid: int = 0

    @property
    def ok(self) -> bool:
        """True when the command exited with status 0."""
        return self.returncode == 0 and not self.timed_out


def run_in_group(
    cmd: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    log_path: Path,
    timeout: float | None,
    poll: Callable[[], None] | None = None,
) -> ProcessOutcome:
    """Run ``cmd`` with stdout and stderr appended to ``log_path``.

    Args:
        cmd: Program and arguments.
        cwd: Working directory.
        env: Complete environment of the process.
        log_path: File that receives the output (appended to).
        timeout: Seconds before the process group is killed; ``None`` waits for ever.
        poll: Called about once a second while the command runs (progress reports).

    Returns:
        The outcome. An interrupt (Ctrl-C) also kills the group, then propagates.
    """
    start = time.perf_counter()
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            list(cmd), cwd=cwd, env=dict(env), stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )
        try:
            returncode = _wait_unreaped(proc, timeout, poll)
        except BaseException:
            _kill_group(proc)
            raise
        if returncode is None:
            _kill_group(proc)
            return ProcessOutcome(None, True, time.perf_counter() - start, proc.pid)
        proc.wait()
    return ProcessOutcome(returncode, False, time.perf_counter() - start, proc.pid)


def _wait_unreaped(
    proc: subprocess.Popen[bytes], timeout: float | None, poll: Callable[[], None] | None = None
) -> int | None:
    """Wait for ``proc`` to exit without reaping it; its exit status, or ``None`` on timeout."""
    deadline = None if timeout is None else time.monotonic() + timeout
    delay = 0.005
    next_poll = time.monotonic() + POLL_S
    while True:
        if poll is not None and time.monotonic() >= next_poll:
            poll()
            next_poll = time.monotonic() + POLL_S
        info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        if info is not None and info.si_pid == proc.pid:
            if info.si_code == os.CLD_EXITED:
                return info.si_status
            return -info.si_status
        if deadline is not None and time.monotonic() >= deadline:
            return None
        time.sleep(delay)
        delay = min(delay * 2, 0.1)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the group led by ``proc`` (still unreaped), SIGKILL what is left, then reap it.

    The leader stays unreaped until the end, so the group id is still ours when SIGKILL goes
    out, even if the leader already exited on SIGTERM (stragglers in the group die too).
    """
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGTERM)
        _wait_unreaped(proc, KILL_GRACE_S)
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
