"""Output directories of export and report: atomic, marked, replaced only when unchanged; their JSON text.

Atomic output directories: write everything into a sibling temp dir, then rename it into place.

``DIR`` is created only when every file was written: the files go into ``.DIR.tmp-XXXX`` beside
it, which is renamed to ``DIR`` at the end or removed on any error (an interrupted export or
report leaves no half-written ``DIR``). Nothing is written outside ``DIR`` and that temp dir: the
parent directory must already exist.

Every output directory holds a marker file, :data:`MARKER`, that records each file accel-dse
wrote into it with its size and SHA-256, and which kind of output it is (``export`` or
``report``). An existing empty ``DIR`` is replaced; a non-empty one only with ``force``, and only
when every file in it (at any depth) still matches that record. The one exception is an export's
build folder, :data:`BUILD_DIR`: the export's own ``run.py`` builds there and records what it
wrote in :data:`BUILD_MANIFEST`, and those files must match that record the same way. Anything
else (an unlisted or changed file, a symbolic link, a marker that is missing, unreadable or of
another format) refuses, naming the file. ``force`` never deletes a file accel-dse did not write.
The file system root, the home directory, the current directory and its parents, and mount points
are refused whatever ``force`` says. A replaced directory is moved aside to ``.DIR.old-XXXX`` and
checked again there (nothing can be added to it under its old name any more), the new one renamed
in, then the old one deleted; if anything fails the old one is put back.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from accel_dse.exit_cleanup import removed_if_stopped, uncut
from accel_spec.errors import ExportError

__all__ = [
    "check_out_dir", "atomic_dir", "MARKER", "BUILD_DIR", "BUILD_MANIFEST", "MARKER_FORMAT", "file_record", "json_text",
]

#: The marker file of every directory :func:`atomic_dir` creates (JSON: who wrote it, which files).
MARKER = ".accel-dse-output"
#: The marker's format: 2 records each file's size and SHA-256 (format 1 listed names only).
MARKER_FORMAT = 2
#: The folder an export's standalone ``run.py`` builds in (the only folder ``--force`` accepts
#: beside the recorded files, and only in an export).
BUILD_DIR = "sim_build"
#: The record ``run.py`` keeps of the files it wrote under :data:`BUILD_DIR` (same layout as the marker).
BUILD_MANIFEST = ".accel-dse-build"
_KINDS = ("export", "report")
_FORCE_RULE = "--force replaces only an earlier accel-dse output whose files are unchanged, or an empty directory"


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


def file_record(path: Path) -> dict[str, int | str]:
    """What a marker records of one regular file: its size in bytes and its SHA-256 (hex)."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    return {"size": size, "sha256": digest.hexdigest()}


def _read_record(path: Path, written_by: tuple[str, ...]) -> tuple[str, dict[str, dict]] | None:
    """``(kind, {relative path: {size, sha256}})`` from the marker file ``path``; ``None`` if it is
    missing, a link, unreadable or not a valid record of the current format."""
    if path.is_symlink() or not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("written_by") not in written_by or data.get("format") != MARKER_FORMAT:
        return None
    files = data.get("files")
    if not isinstance(files, dict):
        return None
    for name, entry in files.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("size"), int):
            return None
        if not isinstance(entry.get("sha256"), str):
            return None
        if name.startswith("/") or ".." in name.split("/") or not name:
            return None
    kind = data.get("kind", "")
    return (kind if isinstance(kind, str) else ""), files


def _entries(root: Path) -> Iterator[tuple[str, Path]]:
    """Every entry below ``root`` (depth first, sorted) as ``(relative posix path, path)``; links are
    yielded, not followed."""
    for entry in sorted(root.iterdir()):
        rel = entry.relative_to(root).as_posix()
        yield rel, entry
        if entry.is_dir() and not entry.is_symlink():
            for sub, path in _entries(entry):
                yield f"{rel}/{sub}", path


def _first_unrecorded(path: Path) -> tuple[str, str] | None:
    """The first entry of the directory ``path`` that ``--force`` may not delete, with why; ``None``
    when everything in it is what accel-dse recorded writing."""
    record = _read_record(path / MARKER, ("accel-dse",))
    if record is None:
        return MARKER, "a marker that records no size and SHA-256 of its files (hand-written, damaged or older)"
    kind, files = record
    build: dict[str, dict] | None = None
    if kind == "export" and (path / BUILD_DIR).is_dir() and not (path / BUILD_DIR).is_symlink():
        found = _read_record(path / BUILD_DIR / BUILD_MANIFEST, ("accel-dse run.py",))
        build = found[1] if found is not None else {}
    dirs = {"/".join(name.split("/")[:i]) for name in files for i in range(1, name.count("/") + 1)}
    for rel, entry in _entries(path):
        if rel == MARKER:
            continue
        mode = entry.lstat().st_mode
        in_build = build is not None and (rel == BUILD_DIR or rel.startswith(BUILD_DIR + "/"))
        if stat.S_ISLNK(mode):
            return rel, "a symbolic link accel-dse did not write"
        if stat.S_ISDIR(mode):
            if in_build or rel in dirs:
                continue
            return rel, "a folder accel-dse did not write"
        if not stat.S_ISREG(mode):
            return rel, "not a regular file accel-dse wrote"
        if in_build:
            sub = rel[len(BUILD_DIR) + 1:]
            if sub == BUILD_MANIFEST:
                continue
            expected = build.get(sub)  # type: ignore[union-attr]
        else:
            expected = files.get(rel)
        if expected is None:
            return rel, "a file accel-dse did not write"
        if file_record(entry) != {"size": expected["size"], "sha256": expected["sha256"]}:
            return rel, "changed since accel-dse wrote it"
    return None


def _check_replaceable(path: Path, text: str, option: str) -> None:
    """Refuse to replace the non-empty directory ``path`` unless accel-dse wrote everything in it."""
    marker = path / MARKER
    if not marker.exists() and not marker.is_symlink():
        raise ExportError(
            f"{option} {text!r} exists, is not empty and is not an accel-dse output (no {MARKER} file); "
            f"{_FORCE_RULE}: choose another path"
        )
    try:
        found = _first_unrecorded(path)
    except OSError as exc:
        raise ExportError(f"{option} {text!r} cannot be checked: {exc.strerror or exc}; {_FORCE_RULE}") from None
    if found is not None:
        rel, why = found
        raise ExportError(
            f"{option} {text!r} holds {rel!r}, {why}; {_FORCE_RULE}: move it or choose another path"
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
def atomic_dir(out: str | Path, *, kind: str, force: bool = False, option: str = "--out") -> Iterator[Path]:
    """Yield a fresh temp dir beside ``out``; on success it becomes ``out``, on error it is removed.

    The marker file :data:`MARKER`, recording every file written (size and SHA-256), is added
    before the rename.

    Args:
        out: The directory to create (its parent must exist).
        kind: What the directory holds, ``"export"`` or ``"report"`` (only an export may later hold
            its runner's :data:`BUILD_DIR`).
        force: Replace an existing non-empty ``out`` whose files all match its marker's record.
        option: Name of the command-line option, for messages.

    Raises:
        ExportError: see :func:`check_out_dir`; or the temp dir cannot be made, written or renamed.
    """
    if kind not in _KINDS:
        raise ValueError(f"kind must be one of {_KINDS}, not {kind!r}")
    final = check_out_dir(out, force=force, option=option)
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-", dir=final.parent))
    except OSError as exc:
        raise ExportError(f"{option} {str(out)!r} is not writable: {exc.strerror or exc}") from None
    try:
        with removed_if_stopped(tmp):  # a signal that stops the command removes it (accel_dse.exit_cleanup)
            yield tmp
            _write_marker(tmp, kind, option)
            with uncut():
                _replace(tmp, final, text=str(out), force=force, option=option)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _write_marker(folder: Path, kind: str, option: str) -> None:
    from accel_dse import __version__

    try:
        files = {rel: file_record(path) for rel, path in _entries(folder) if path.is_file() and not path.is_symlink()}
        document = {"written_by": "accel-dse", "format": MARKER_FORMAT, "version": __version__, "kind": kind,
                    "files": files}
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
            try:  # once more where nothing can reach it by its old name: what is deleted is what was checked
                _check_replaceable(old, text, option)
            except ExportError:
                old.rename(final)
                raise
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


def _finite(value: Any) -> Any:
    """``value`` with non-finite floats replaced by ``None`` (JSON has no NaN/inf)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def json_text(document: Any) -> str:
    """Indented JSON of ``document`` (non-finite numbers as ``null``), newline-terminated."""
    return json.dumps(_finite(document), indent=2, allow_nan=False) + "\n"
