"""Paths given on the command line: used as given, never silently extended or created with parents.

Each helper checks one option's path up front and returns it as a :class:`~pathlib.Path`
(``None`` when the option was not given); every problem is a one-line
:class:`~accel_spec.errors.ExportError` naming the option, the path and the rule.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path

from accel_dse.exit_cleanup import removed_if_stopped
from accel_spec.errors import ExportError

__all__ = ["given_path", "output_file", "work_dir", "write_whole"]


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


def _same_file(path: Path, other: Path) -> bool:
    """Whether ``path`` and ``other`` name one file (the same path resolved, or one inode by two names)."""
    try:
        if not other.is_file():  # a preset's name, or nothing yet
            return False
        if path.resolve() == other.resolve():
            return True
        return path.exists() and os.path.samefile(path, other)
    except (OSError, RuntimeError):
        return False


def output_file(
    option: str, text: str | None, *, suffix: str | None = None, force: bool = False,
    inputs: Iterable[str | Path | None] = (),
) -> Path | None:
    """A file the command will write: its directory must exist; an existing one must be a regular file.

    An existing file is replaced only with ``force`` (``--force``); a file the command reads
    (``inputs``) is never replaced, ``--force`` or not.

    Args:
        option: The option's name, for messages.
        text: The path as given (``None``: not given).
        suffix: The ending the file must have (the writer would add it otherwise), e.g. ``".npz"``.
        force: Whether an existing file may be replaced.
        inputs: The paths the command reads (a preset name that is no file is ignored).
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
        for given in inputs:
            if given is not None and str(given) and _same_file(path, Path(given).expanduser()):
                raise ExportError(f"{option} {text!r} is the input file {str(given)!r}: write to another file")
        if path.exists() and not force:
            raise ExportError(f"{option} {text!r} exists: give --force to replace it")
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


def write_whole(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` whole or not at all: a hidden file beside it, then renamed onto it.

    A command stopped while writing (SIGTERM, a full disk) leaves the old file, or none, never
    half of the new one.

    Raises:
        OSError: the write or the rename failed (the hidden file is removed).
    """
    temp = path.with_name(f".{path.name}.{os.getpid()}.part")
    try:
        with removed_if_stopped(temp):
            with open(temp, "wb") as handle:
                handle.write(data)
            os.replace(temp, path)
    finally:
        if temp.exists():
            temp.unlink()
