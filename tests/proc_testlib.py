"""Live processes as Linux's /proc shows them (tests that check nothing is left running)."""

from __future__ import annotations

import os
from pathlib import Path


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name: state, ppid, pgrp, session, ...; None if gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def _live(field: int, value: int) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := _stat(int(entry))) is not None and stat[0] != "Z" \
                and int(stat[field]) == value:
            pids.append(int(entry))
    return pids


def children(pid: int) -> list[int]:
    """Live (not zombie) children of ``pid``."""
    return _live(1, pid)


def session_members(sid: int) -> list[int]:
    """Pids of live processes in session ``sid``."""
    return _live(3, sid)


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    stat = _stat(pid)
    return stat is not None and stat[0] != "Z"
