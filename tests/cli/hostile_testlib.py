"""Helpers of the hostile-input tests: directory snapshots and the one-line error contract."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from tests.cli_testlib import ERROR_PREFIX, one_line_error

__all__ = ["snapshot", "one_line", "ERROR_PREFIX"]


def snapshot(*roots: Path) -> dict[str, tuple[str, int, str]]:
    """Every entry under ``roots`` (without following links): ``path -> (kind, mode, content digest)``.

    Two snapshots are equal when nothing under the roots was created, deleted, renamed, changed
    in content or in permissions.
    """
    out: dict[str, tuple[str, int, str]] = {}
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            for name in [*dirnames, *filenames]:
                path = Path(dirpath) / name
                info = path.lstat()
                if stat.S_ISREG(info.st_mode):
                    digest = hashlib.sha256(path.read_bytes()).hexdigest()
                    kind = "file"
                elif stat.S_ISLNK(info.st_mode):
                    digest, kind = os.readlink(path), "link"
                else:
                    digest, kind = "", "dir" if stat.S_ISDIR(info.st_mode) else "other"
                out[str(path)] = (kind, stat.S_IMODE(info.st_mode), digest)
    return out


def one_line(code: int, out: str, err: str, *, status: int = 2) -> str:
    """Check the bad-input contract (:func:`tests.cli_testlib.one_line_error`); return the line without its prefix."""
    return one_line_error(code, out, err, status=status)[len(ERROR_PREFIX):]
