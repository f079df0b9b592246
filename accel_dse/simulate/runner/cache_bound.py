"""A size bound on the simulation work directory's caches, least recently used out first.

The work directory (``--work-dir``, default ``~/.cache/accel-dse/sim``) keeps one simulator
build per design (``builds/``: about 140 MB for ``tiny`` under Verilator, more for big arrays)
and the generated Verilog of each (``verilog/``: a few MB for a 64x32 design). Nothing else ever
removed them, so a study verified night after night filled the disk. Now, each time a new build
is placed, the builds and Verilog entries that were used least recently are removed until both
caches together are within ``$ACCEL_DSE_SIM_CACHE_MB`` MiB (default :data:`DEFAULT_MB`).

An entry's last use is the modification time of its ``build.json`` (a build) or of its file (a
Verilog entry); a reuse touches it. The new build is never removed, nor an entry used in the last
:data:`MIN_IDLE_S` seconds (a simulation may be starting from it), nor a build whose lock another
process holds (it is being checked or built). A build is renamed away before it is deleted, so
no process ever finds half of one: without its ``build.json`` it is no build.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import time
from pathlib import Path
from typing import IO

from accel_spec.errors import SimulationError

__all__ = ["ENV", "DEFAULT_MB", "MIN_IDLE_S", "budget_bytes", "mark_used", "tree_bytes", "try_lock", "prune"]

#: The environment variable holding the bound, MiB.
ENV = "ACCEL_DSE_SIM_CACHE_MB"
#: The bound when the variable is not set, MiB.
DEFAULT_MB = 8192
#: Entries used this recently are never removed, seconds.
MIN_IDLE_S = 600.0


def budget_bytes() -> int:
    """The bound from ``$ACCEL_DSE_SIM_CACHE_MB``, bytes.

    Raises:
        SimulationError: the variable is set to something other than a positive number.
    """
    text = os.environ.get(ENV, "").strip()
    if not text:
        return DEFAULT_MB << 20
    try:
        mb = float(text)
    except ValueError:
        mb = float("nan")
    if not mb > 0 or mb == float("inf"):
        raise SimulationError(f"{ENV} must be a positive number of MiB, not {text!r}")
    return int(mb * (1 << 20))


def mark_used(path: Path) -> None:
    """Record that the entry ``path`` (a build's ``build.json``, a Verilog entry) was used now."""
    with contextlib.suppress(OSError):
        os.utime(path)


def tree_bytes(path: Path) -> int:
    """Bytes of the files under ``path`` (what a build occupies)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def try_lock(path: Path) -> IO[str] | None:
    """An open, exclusively locked handle on ``path``, or None if another process holds it."""
    try:
        handle = open(path, "a")  # noqa: SIM115 (held by the caller)
    except OSError:
        return None
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        return None
    return handle


def _entries(work: Path) -> list[tuple[float, int, Path, Path | None]]:
    """``(last use, bytes, path, lock)`` of every finished build and Verilog entry in ``work``."""
    out: list[tuple[float, int, Path, Path | None]] = []
    builds = work / "builds"
    if builds.is_dir():
        for entry in builds.iterdir():
            meta = entry / "build.json"
            try:
                used = meta.stat().st_mtime
            except OSError:
                continue  # a temporary, failed or vanished entry: not a build
            try:
                size = int(json.loads(meta.read_text("utf-8"))["bytes"])
            except (OSError, ValueError, KeyError, TypeError):
                size = tree_bytes(entry)  # a build from before the bound
            out.append((used, size, entry, builds / f"{entry.name}.lock"))
    verilog = work / "verilog"
    if verilog.is_dir():
        for entry in verilog.glob("*.v"):
            with contextlib.suppress(OSError):
                st = entry.stat()
                out.append((st.st_mtime, st.st_size, entry, None))
    return out


def _remove(path: Path, lock: Path | None) -> bool:
    """Remove one entry unless another process holds its lock; whether it was removed."""
    handle = None
    if lock is not None:
        handle = try_lock(lock)
        if handle is None:
            return False
    try:
        if path.is_dir():
            gone = path.with_name(f"{path.name}.evict-{os.getpid()}")
            os.rename(path, gone)
            shutil.rmtree(gone, ignore_errors=True)
        else:
            path.unlink()
        return True
    except OSError:
        return False
    finally:
        if handle is not None:
            handle.close()


def prune(work: Path, keep: Path | None = None, *, budget: int | None = None, now: float | None = None) -> list[Path]:
    """Remove the least recently used entries of ``work``'s caches until they fit ``budget`` bytes
    (default :func:`budget_bytes`); never ``keep``, an entry used in the last :data:`MIN_IDLE_S`, or
    a locked build. Returns the removed entries, oldest first."""
    limit = budget_bytes() if budget is None else budget
    clock = time.time() if now is None else now
    entries = sorted(_entries(work), key=lambda e: e[0])
    total = sum(e[1] for e in entries)
    removed: list[Path] = []
    for used, size, path, lock in entries:
        if total <= limit:
            break
        if path == keep or clock - used < MIN_IDLE_S:
            continue
        if _remove(path, lock):
            total -= size
            removed.append(path)
    return removed
