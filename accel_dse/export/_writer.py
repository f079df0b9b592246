"""Atomic output directories: write everything into a sibling temp dir, then rename it into place.

``DIR`` is created only when every file was written: the files go into ``.DIR.tmp-XXXX`` beside
it, which is renamed to ``DIR`` at the end or removed on any error (an interrupted export or
report leaves no half-written ``DIR``). Nothing is written outside ``DIR`` and that temp dir: the
parent directory must already exist.

Every output directory holds a marker file, :data:`MARKER`, listing the files accel-dse wrote
into it. An existing empty ``DIR`` is replaced; a non-empty one only with ``force`` and only when
it is an earlier accel-dse output: its marker is there and it holds nothing but the files the
marker lists (and what an export's own ``run.py`` makes: :data:`RUNNER_FILES`). ``force`` never
deletes a file accel-dse did not write. The file system root, the home directory, the current
directory and its parents, and mount points are refused whatever ``force`` says. A replaced
directory is moved aside to ``.DIR.old-XXXX``, the new one renamed in, then the old one deleted
(if the rename fails the old one is put back).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from accel_dse.errors import ExportError

__all__ = ["check_out_dir", "atomic_dir", "MARKER", "RUNNER_FILES"]

#: The marker file of every directory :func:`atomic_dir` creates (JSON: who wrote it, which files).
MARKER = ".accel-dse-output"
#: What an export's standalone ``run.py`` creates inside the export (may be replaced with it).
RUNNER_FILES = ("sim_build", "__pycache__")
_FORCE_RULE = "--force replaces only an earlier accel-dse output or an empty directory"


def _absolute(text: str, option: str) -> Path:
    try:
        path = Path(text).expanduser().absolute()
    except RuntimeError as exc:  # '~nosuchuser/x'
        raise ExportError(f"{option} {text!r} cannot be expanded: {exc}") from None
    if path.name in ("", ".", ".."):
        path = path.resolve()
    return path


def _protected(path: Path) -> str | None:
    """Why ``path`` (an existing directory) may never be an output directory, ``None`` if it may."""
    real = path.resolve()
    if real == Path(real.anchor):
        return "the file system root"
    with contextlib.suppress(RuntimeError, OSError):
        if real == Path.home().resolve():
            return "your home directory"
    with contextlib.suppress(OSError):
        cwd = Path.cwd().resolve()
        if real == cwd:
            return "the current directory"
        if real in cwd.parents:
            return "a parent of the current directory"
    if os.path.ismount(real):
        return "a mount point"
    return None


def _marker_files(path: Path) -> set[str] | None:
    """The files the marker of ``path`` lists, ``None`` without a (readable, valid) marker."""
    marker = path / MARKER
    if marker.is_symlink() or not marker.is_file():
        return None
    try:
        data = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    files = data.get("files") if isinstance(data, dict) and data.get("written_by") == "accel-dse" else None
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        return None
    return set(files)


def _check_replaceable(path: Path, text: str, option: str) -> None:
    """Refuse to replace the non-empty directory ``path`` unless accel-dse wrote everything in it."""
    listed = _marker_files(path)
    if listed is None:
        raise ExportError(
            f"{option} {text!r} exists, is not empty and is not an accel-dse output (no {MARKER} file); "
            f"{_FORCE_RULE}: choose another path"
        )
    foreign = sorted(p.name for p in path.iterdir() if p.name not in listed | {MARKER, *RUNNER_FILES})
    if foreign:
        more = f" and {len(foreign) - 1} more" if len(foreign) > 1 else ""
        raise ExportError(
            f"{option} {text!r} holds {foreign[0]!r}{more}, which accel-dse did not write; "
            f"{_FORCE_RULE}: move it or choose another path"
        )


def check_out_dir(out: str | Path, *, force: bool, option: str = "--out") -> Path:
    """Check that ``out`` can become an output directory; return it as an absolute path.

    Raises:
        ExportError: ``out`` is empty, a file, a symbolic link, a protected directory (root,
            home, the current directory or a parent of it, a mount point), its parent does not
            exist or is not writable, or it is a non-empty directory and ``force`` is false or
            it holds files accel-dse did not write.
    """
    text = str(out)
    if not text.strip():
        raise ExportError(f"{option} must name a directory, not {text!r}")
    try:
        return _check_out_dir(text, force=force, option=option)
    except OSError as exc:  # a name too long, a permission denied on the way, ...
        raise ExportError(f"{option} {text!r} cannot be used: {exc.strerror or exc}") from None


def _check_out_dir(text: str, *, force: bool, option: str) -> Path:
    path = _absolute(text, option)
    if path.is_symlink():
        raise ExportError(f"{option} {text!r} is a symbolic link; give the directory it points to")
    if path.exists():
        if not path.is_dir():
            raise ExportError(f"{option} {text!r} is a file, not a directory (choose another path)")
        why = _protected(path)
        if why is not None:
            raise ExportError(f"{option} {text!r} is {why}; give a new directory to create")
        if any(path.iterdir()):
            if not force:
                raise ExportError(f"{option} {text!r} exists and is not empty (use --force to replace it)")
            _check_replaceable(path, text, option)
    parent = path.parent
    if not parent.is_dir():
        raise ExportError(f"parent directory {str(parent)!r} of {option} {text!r} does not exist (create it first)")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ExportError(f"{option} {text!r} is not writable: no write permission in {str(parent)!r}")
    return path


@contextlib.contextmanager
def atomic_dir(out: str | Path, *, force: bool = False, option: str = "--out") -> Iterator[Path]:
    """Yield a fresh temp dir beside ``out``; on success it becomes ``out``, on error it is removed.

    The marker file :data:`MARKER` listing the files written is added before the rename.

    Args:
        out: The directory to create (its parent must exist).
        force: Replace an existing non-empty ``out`` that is an earlier accel-dse output.
        option: Name of the command-line option, for messages.

    Raises:
        ExportError: see :func:`check_out_dir`; or the temp dir cannot be made, written or renamed.
    """
    final = check_out_dir(out, force=force, option=option)
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-", dir=final.parent))
    except OSError as exc:
        raise ExportError(f"{option} {str(out)!r} is not writable: {exc.strerror or exc}") from None
    try:
        yield tmp
        _write_marker(tmp, option)
        _replace(tmp, final, text=str(out), force=force, option=option)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _write_marker(folder: Path, option: str) -> None:
    from accel_dse import __version__

    files = sorted(p.name for p in folder.iterdir())
    document = {"written_by": "accel-dse", "version": __version__, "files": files}
    try:
        (folder / MARKER).write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        raise ExportError(f"cannot write {MARKER} for {option} {str(folder.parent)!r}: {exc.strerror or exc}") from None


def _replace(tmp: Path, final: Path, *, text: str, force: bool, option: str) -> None:
    """Rename ``tmp`` to ``final``, moving an existing ``final`` out of the way first."""
    os.chmod(tmp, 0o755)
    old: Path | None = None
    if final.is_dir() and not final.is_symlink():
        why = _protected(final)
        if why is not None:
            raise ExportError(f"{option} {text!r} is {why}; give a new directory to create")
        if any(final.iterdir()):
            if not force:  # created meanwhile by someone else
                raise ExportError(f"{option} {text!r} appeared and is not empty (use --force to replace it)")
            _check_replaceable(final, text, option)  # again: it may have changed since the first check
            try:
                old = Path(tempfile.mkdtemp(prefix=f".{final.name}.old-", dir=final.parent))
                old.rmdir()
                final.rename(old)
            except OSError as exc:
                raise ExportError(f"cannot move {option} {text!r} aside: {exc.strerror or exc}") from None
        else:
            try:
                final.rmdir()
            except OSError as exc:
                raise ExportError(f"cannot replace {option} {text!r}: {exc.strerror or exc}") from None
    try:
        tmp.rename(final)
    except OSError as exc:
        if old is not None:
            old.rename(final)
        raise ExportError(f"cannot create {option} {text!r}: {exc.strerror or exc}") from None
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
