"""Atomic output directories: write everything into a sibling temp dir, then rename it into place.

``DIR`` is created only when every file was written: the files go into ``.DIR.tmp-XXXX`` beside
it, which is renamed to ``DIR`` at the end or removed on any error (an interrupted export or
report leaves no half-written ``DIR``). Nothing is written outside ``DIR`` and that temp dir: the
parent directory must already exist. An existing empty ``DIR`` is replaced; a non-empty one only
with ``force`` (it is moved aside to ``.DIR.old-XXXX``, the new one renamed in, then the old one
deleted; if the rename fails the old one is put back).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from accel_dse.errors import ExportError

__all__ = ["check_out_dir", "atomic_dir"]


def check_out_dir(out: str | Path, *, force: bool, option: str = "--out") -> Path:
    """Check that ``out`` can become an output directory; return it as an absolute path.

    Raises:
        ExportError: ``out`` is a file, its parent does not exist or is not a writable
            directory, or it is a non-empty directory and ``force`` is false.
    """
    text = str(out)
    if not text.strip():
        raise ExportError(f"{option} must name a directory, not {text!r}")
    path = Path(text).expanduser().absolute()
    if path.name in ("", ".", ".."):
        path = path.resolve()
    if path.is_symlink():
        raise ExportError(f"{option} {text!r} is a symbolic link; give the directory it points to")
    if path.exists():
        if not path.is_dir():
            raise ExportError(f"{option} {text!r} is a file, not a directory (choose another path)")
        if any(path.iterdir()) and not force:
            raise ExportError(f"{option} {text!r} exists and is not empty (use --force to replace it)")
    parent = path.parent
    if not parent.is_dir():
        raise ExportError(f"parent directory {str(parent)!r} of {option} {text!r} does not exist (create it first)")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ExportError(f"{option} {text!r} is not writable: no write permission in {str(parent)!r}")
    return path


@contextlib.contextmanager
def atomic_dir(out: str | Path, *, force: bool = False, option: str = "--out") -> Iterator[Path]:
    """Yield a fresh temp dir beside ``out``; on success it becomes ``out``, on error it is removed.

    Args:
        out: The directory to create (its parent must exist).
        force: Replace an existing non-empty ``out``.
        option: Name of the command-line option, for messages.

    Raises:
        ExportError: see :func:`check_out_dir`; or the temp dir cannot be made or renamed.
    """
    final = check_out_dir(out, force=force, option=option)
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-", dir=final.parent))
    except OSError as exc:
        raise ExportError(f"{option} {str(out)!r} is not writable: {exc.strerror or exc}") from None
    try:
        yield tmp
        _replace(tmp, final, force=force, option=option)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _replace(tmp: Path, final: Path, *, force: bool, option: str) -> None:
    """Rename ``tmp`` to ``final``, moving an existing ``final`` out of the way first."""
    os.chmod(tmp, 0o755)
    old: Path | None = None
    if final.is_dir() and not final.is_symlink():
        if any(final.iterdir()):
            if not force:  # created meanwhile by someone else
                raise ExportError(f"{option} {str(final)!r} appeared and is not empty (use --force to replace it)")
            old = Path(tempfile.mkdtemp(prefix=f".{final.name}.old-", dir=final.parent))
            old.rmdir()
            final.rename(old)
        else:
            final.rmdir()
    try:
        tmp.rename(final)
    except OSError as exc:
        if old is not None:
            old.rename(final)
        raise ExportError(f"cannot create {option} {str(final)!r}: {exc.strerror or exc}") from None
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)

