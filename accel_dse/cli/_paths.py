"""Paths given on the command line: used as given, never silently extended or created with parents.

Each helper checks one option's path up front and returns it as a :class:`~pathlib.Path`
(``None`` when the option was not given); every problem is a one-line
:class:`~accel_spec.errors.ExportError` naming the option, the path and the rule.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from accel_spec.errors import ExportError

__all__ = ["given_path", "output_file", "work_dir"]


def given_path(option: str, text: str | None) -> Path | None:
    """``text`` as a path (``~`` expanded): refused when empty or holding a NUL byte."""
    if text is None:
        return None
    if not text.strip() or "\0" in text:
        raise ExportError(f"{option} must name a path, not {text!r}")
    try:
        return Path(text).expanduser()
    except RuntimeError as exc:  # '~nosuchuser/x'
        raise ExportError(f"{option} {text!r} cannot be expanded: {exc}") from None


def _parent(option: str, text: str, path: Path) -> None:
    if path.parent.exists() and not path.parent.is_dir():
        raise ExportError(f"{str(path.parent)!r} of {option} {text!r} is a file, not a directory")
    if not path.parent.is_dir():
        raise ExportError(f"directory {str(path.parent)!r} of {option} {text!r} does not exist (create it first)")


def output_file(option: str, text: str | None, *, suffix: str | None = None) -> Path | None:
    """A file the command will write: its directory must exist; an existing one must be a regular file.

    Args:
        option: The option's name, for messages.
        text: The path as given (``None``: not given).
        suffix: The ending the file must have (the writer would add it otherwise), e.g. ``".npz"``.
    """
    path = given_path(option, text)
    if path is None or text is None:
        return None
    if suffix is not None and (not path.name.endswith(suffix) or path.name == suffix):
        raise ExportError(f"{option} must be a file name ending in {suffix} (nothing is added to it), not {text!r}")
    try:
        _parent(option, text, path)
        if path.is_dir():
            raise ExportError(f"{option} {text!r} is a directory, not a file")
        if path.exists() and not stat.S_ISREG(path.stat().st_mode):
            raise ExportError(f"{option} {text!r} is not a regular file (a device, FIFO or socket)")
        if not os.access(path.parent, os.W_OK | os.X_OK):
            raise ExportError(f"{option} {text!r} is not writable: no write permission in {str(path.parent)!r}")
    except OSError as exc:
        raise ExportError(f"{option} {text!r} cannot be used: {exc.strerror or exc}") from None
    return path


def work_dir(option: str, text: str | None) -> Path | None:
    """A directory the command may create: it must be a directory or not exist, with an existing parent."""
    path = given_path(option, text)
    if path is None or text is None:
        return None
    try:
        if path.exists():
            if not path.is_dir():
                raise ExportError(f"{option} {text!r} is a file, not a directory")
        else:
            _parent(option, text, path)
    except OSError as exc:
        raise ExportError(f"{option} {text!r} cannot be used: {exc.strerror or exc}") from None
    return path
