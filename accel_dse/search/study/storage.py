"""Study storages: parse and check a storage URL, then open it.

Accepted URLs:

* ``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db``: embedded, nothing to
  start; good for one process (a few with ``--jobs``, thanks to a 60 s busy timeout).
* ``postgresql://user:password@host:port/db`` (SQLAlchemy's default driver psycopg 3; ``postgresql+psycopg2://`` too; ``postgres://``
  is read as ``postgresql://``) or any other SQLAlchemy database URL: many machines.
* ``journal:PATH`` (``journal:///abs/path`` too): Optuna's JournalStorage on a file,
  the recommended storage for several processes on one machine.
* ``memory:``: in-process only, nothing kept (benchmarks, tests).

RDB storages get Optuna's heartbeat (``heartbeat_interval``, ``grace_period``) with the
stale-trial retry callback (:class:`~accel_dse.search.study.owner.RetryDead`), so a killed worker's trial is
failed and queued again.
Problems are one-line :class:`~accel_spec.errors.StorageError`s; a storage is never created
in a directory that does not exist, and a storage file must be a regular file (a FIFO, a
device such as ``/dev/full`` or a socket is refused before it is opened).

Every URL shown in a message or a summary goes through :func:`mask_url` (passwords in the
user-info part, also with a raw ``@`` in them, and query parameters such as ``?password=``),
and an error text from a driver has the URL's secrets replaced too.

``create=False`` (``verify``, which records into a study it did not make) opens an existing Optuna
storage and never creates one: an empty file, a file that is not SQLite or a SQLite database
without Optuna's tables (another application's) is refused before anything is written to it,
and no table is created. ``read_only=True`` implies it.

``read_only=True`` (``report``, ``export --trial``) opens a storage without writing to it: SQLite
through a ``mode=ro`` URI (no tables created, no WAL switch; ``immutable=1`` when its directory
is not writable, so a study in a read-only place can still be read), PostgreSQL with read-only
transactions, a journal file through a backend that refuses to append.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import stat
import time
import urllib.parse
import warnings
from pathlib import Path
from typing import Any

import optuna
from optuna.storages import BaseStorage, InMemoryStorage, RDBStorage
from optuna.storages.journal import JournalFileBackend, JournalStorage

from accel_dse.search.study.owner import MAX_RETRY, RetryDead
from accel_spec.errors import StorageError

__all__ = ["StorageSpec", "parse_storage", "check_location", "open_storage", "mask_url", "redact", "MAX_RETRY"]

_EXAMPLES = "sqlite:///runs/x/study.db, postgresql://user:pw@host:5432/db, journal:runs/x/study.journal"


@dataclasses.dataclass(frozen=True)
class StorageSpec:
    """A checked storage URL.

    Attributes:
        kind: ``"sqlite"``, ``"rdb"`` (a database server), ``"journal"`` or ``"memory"``.
        url: The URL to give Optuna / SQLAlchemy (``postgres://`` normalised).
        path: The file of a ``sqlite`` or ``journal`` storage (``None`` otherwise).
        display: The URL with any password masked, for messages and summaries.
    """

    kind: str
    url: str
    path: Path | None
    display: str

    @property
    def has_heartbeat(self) -> bool:
        """Whether Optuna's heartbeat can detect dead workers (RDB storages)."""
        return self.kind in ("sqlite", "rdb")

    @property
    def multi_process(self) -> bool:
        """Whether several processes can share it."""
        return self.kind != "memory" and not (self.kind == "sqlite" and self.path is None)


#: Query parameters whose values are secrets.
_SECRET_KEY = re.compile(r"pass|pwd|secret|token|key", re.IGNORECASE)
_MASK = "***"


def _split_secrets(url: str) -> tuple[str, list[str]]:
    """``url`` with its secrets masked, and the secrets themselves."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.startswith("sqlite"):
        return url, []
    secrets: list[str] = []
    if "@" in rest:  # user info ends at the last '@' (a raw '@' in a password is masked with it)
        userinfo, _, rest = rest.rpartition("@")
        user, colon, password = userinfo.partition(":")
        if colon:
            secrets.append(password)
        rest = f"{user}{':' + _MASK if colon else ''}@{rest}"
    head, qsep, query = rest.partition("?")
    if qsep:
        parts = []
        for item in query.split("&"):
            key, eq, value = item.partition("=")
            if eq and _SECRET_KEY.search(urllib.parse.unquote(key)):
                secrets.append(value)
                value = _MASK
            parts.append(f"{key}{eq}{value}")
        rest = head + qsep + "&".join(parts)
    secrets = [x for x in secrets if x]
    secrets += [urllib.parse.unquote(x) for x in secrets]
    return f"{scheme}://{rest}", sorted(set(secrets), key=len, reverse=True)


def mask_url(url: str) -> str:
    """``url`` as it may be shown: the password and secret query parameters replaced by ``***``.

    ``postgresql://me:pw@host/db`` -> ``postgresql://me:***@host/db``;
    ``postgresql://me@host/db?password=pw`` -> ``postgresql://me@host/db?password=***``.
    Anything up to the last ``@`` counts as user info, so a raw ``@`` in a password hides no part of it.
    """
    return _split_secrets(url)[0]


def redact(text: str, url: str) -> str:
    """``text`` (an error message) with ``url`` and each of its secrets replaced by their masked form."""
    masked, secrets = _split_secrets(url)
    text = text.replace(url, masked)
    for secret in secrets:
        text = text.replace(secret, _MASK)
    return text


def parse_storage(url: str) -> StorageSpec:
    """Check the syntax of a storage URL (no I/O, nothing created)."""
    if not isinstance(url, str) or not url.strip():
        raise StorageError(f"storage URL must not be empty (examples: {_EXAMPLES})")
    url = url.strip()
    if url in ("memory:", "memory", ":memory:"):
        return StorageSpec(kind="memory", url="memory:", path=None, display="memory:")
    if url.startswith("journal:"):
        rest = url[len("journal:"):]
        if rest.startswith("//"):
            rest = rest[2:]
        if not rest or rest.endswith("/"):
            raise StorageError(f"journal storage needs a file path, as in journal:runs/x/study.journal, not {url!r}")
        return StorageSpec(kind="journal", url=url, path=Path(rest), display=url)
    import sqlalchemy.engine
    import sqlalchemy.exc

    if url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://"):]
    display = mask_url(url)
    if url.partition("://")[2].partition("?")[0].count("@") > 1:
        raise StorageError(
            f"storage URL {display!r} has more than one '@': write an '@' in the user name or password as %40"
        )
    try:
        parsed = sqlalchemy.engine.make_url(url)
    except (sqlalchemy.exc.ArgumentError, ValueError) as exc:
        detail = redact(_first_line(exc), url)
        raise StorageError(f"storage URL {display!r} is malformed ({detail}); examples: {_EXAMPLES}") from None
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        database = parsed.database
        if not database or database == ":memory:":
            return StorageSpec(kind="sqlite", url=url, path=None, display=display)
        return StorageSpec(kind="sqlite", url=url, path=Path(database), display=display)
    try:
        parsed.get_dialect()
    except Exception as exc:  # noqa: BLE001 - SQLAlchemy raises several types for unknown dialects
        raise StorageError(
            f"storage URL {display!r} names an unknown database kind {parsed.drivername!r} "
            f"({redact(_first_line(exc), url)}); "
            f"examples: {_EXAMPLES}"
        ) from None
    if not parsed.database:
        raise StorageError(f"storage URL {display!r} names no database (add /DBNAME)")
    return StorageSpec(kind="rdb", url=url, path=None, display=display)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def check_location(spec: StorageSpec) -> None:
    """Refuse a file storage whose directory does not exist or whose path is not a regular file.

    Raises:
        StorageError: the directory is missing; the path is a directory, a FIFO, a device or a
            socket (reading one could block or never end); the path cannot be examined.
    """
    if spec.path is None:
        return
    parent = spec.path.parent
    try:
        if not parent.is_dir():
            raise StorageError(
                f"directory {str(parent)!r} of storage {spec.display!r} does not exist (create it or fix the path)"
            )
        if spec.path.is_dir():
            raise StorageError(f"storage {spec.display!r} names a directory, not a file")
        if spec.path.exists() and not stat.S_ISREG(spec.path.stat().st_mode):
            raise StorageError(
                f"storage {spec.display!r} is not a regular file (a FIFO, device or socket); give a file path"
            )
    except OSError as exc:
        raise StorageError(f"storage {spec.display!r} cannot be used: {exc.strerror or exc}") from None


def open_storage(
    spec: StorageSpec, *, heartbeat_interval: int | None = 10, grace_period: int | None = None,
    read_only: bool = False, create: bool = True,
) -> BaseStorage:
    """Open the storage (creating an empty database or journal file if there is none, if ``create``).

    Args:
        spec: A parsed storage URL.
        heartbeat_interval: RDB heartbeat period, s (``None``: no heartbeat; ignored when ``read_only``).
        grace_period: Seconds without a heartbeat before a running trial counts as dead
            (default: twice the interval, at least 2).
        read_only: Never write: the file must exist, nothing is created or converted, and any
            write the caller attempts fails.
        create: Create the storage (file, tables) when there is none; ``False``: it must be an
            existing Optuna storage (an empty file or another application's database is refused
            untouched).

    Raises:
        StorageError: the directory does not exist, the path is not a regular file, the server
            cannot be reached, the file is not a database or journal, the driver is missing;
            without ``create``: the file is missing, empty or not an Optuna storage.
    """
    if spec.kind == "memory":
        return InMemoryStorage()
    check_location(spec)
    create = create and not read_only
    if not create and spec.path is not None:
        _check_existing(spec)
    if spec.kind == "journal":
        return _open_journal(spec, read_only)
    return _open_rdb(spec, None if read_only else heartbeat_interval, grace_period, read_only, create)


def _check_existing(spec: StorageSpec) -> None:
    """Refuse, without opening it, a storage file that is missing or empty (nothing there to read)."""
    path = spec.path
    if path is None:  # pragma: no cover - callers check
        return
    try:
        if not path.is_file():
            raise StorageError(f"storage file {str(path)!r} of {spec.display!r} is not found")
        if spec.kind == "sqlite" and path.stat().st_size == 0:
            raise StorageError(f"storage {spec.display!r} is an empty file, not an Optuna study database")
    except OSError as exc:
        raise StorageError(f"storage {spec.display!r} cannot be used: {exc.strerror or exc}") from None


class _ReadOnlyJournal(JournalFileBackend):
    """A journal file backend that reads and never writes (no file created, no lock taken)."""

    def __init__(self, file_path: str) -> None:
        self._file_path = file_path
        self._log_number_offset: dict[int, int] = {0: 0}

    def append_logs(self, logs: list[dict[str, Any]]) -> None:
        raise StorageError(f"journal {self._file_path!r} is opened read-only")


def _journal_line(line: bytes) -> bool:
    try:
        record = json.loads(line)
    except ValueError:
        return False
    return isinstance(record, dict) and isinstance(record.get("op_code"), int)


def _check_journal(path: Path, display: str) -> None:
    """Refuse a non-empty file whose first or last line is not an Optuna journal record (read only)."""
    size = path.stat().st_size
    if size == 0:
        return
    with path.open("rb") as handle:
        first = handle.readline(1 << 20)
        handle.seek(max(0, size - (1 << 16)))
        tail = handle.read()
    complete = tail[: tail.rfind(b"\n")]  # a torn last line (a killed writer) is not judged
    last = complete.rsplit(b"\n", 1)[-1] if b"\n" in complete or len(tail) == size else first
    if not (first.endswith(b"\n") and _journal_line(first) and _journal_line(last)):
        raise StorageError(f"storage {display!r} is not an Optuna journal file (a line is not a journal record)")


def _open_journal(spec: StorageSpec, read_only: bool) -> BaseStorage:
    path = spec.path
    if path is None:  # pragma: no cover - parse_storage always sets it
        raise StorageError(f"journal storage {spec.display!r} has no path")
    try:
        if path.exists():
            _check_journal(path, spec.display)
        backend = _ReadOnlyJournal(str(path)) if read_only else JournalFileBackend(str(path))
        return JournalStorage(backend)
    except (KeyError, TypeError, IndexError) as exc:  # a JSON record that is not a journal operation
        raise StorageError(
            f"storage {spec.display!r} is not an Optuna journal file (a record lacks {_first_line(exc)})"
        ) from None
    except (OSError, ValueError) as exc:
        raise StorageError(f"cannot open journal storage {spec.display!r}: {_first_line(exc)}") from None


def _sqlite_url(spec: StorageSpec, read_only: bool) -> str:
    """The URL SQLAlchemy gets; read-only: a ``mode=ro`` URI, or ``immutable=1`` when that would create files.

    A reader of a WAL-mode database creates its ``-wal`` and ``-shm`` files when they are not
    there (and cannot in an unwritable directory). No ``-wal`` file means no connection is open
    and every commit is in the database file, so it is read as immutable: nothing is created.
    """
    if not read_only or spec.path is None:
        return spec.url
    path = spec.path.absolute()
    with path.open("rb") as handle:
        wal_mode = handle.read(20)[18:20] == b"\x02\x02"  # file format versions 2: WAL
    wal = path.with_name(path.name + "-wal")
    idle = wal_mode and not wal.exists()
    query = "immutable=1" if idle or not os.access(path.parent, os.W_OK) else "mode=ro"
    return f"sqlite:///file:{urllib.parse.quote(str(path))}?{query}&uri=true"


#: Tables every Optuna RDB storage has; a SQLite file without them is another application's.
_OPTUNA_TABLES = ("studies", "version_info")


def _not_optuna(spec: StorageSpec) -> StorageError:
    return StorageError(
        f"storage {spec.display!r} is not an Optuna study database (it has no Optuna tables); "
        "it is left as it is"
    )


def _check_sqlite(spec: StorageSpec, read_only: bool, create: bool = True) -> None:
    """Refuse a file that is not a SQLite database, reading it through SQLite itself (when writing).

    Not with Python's ``open()``: closing any descriptor of a database file drops every POSIX
    lock this process holds on it, also those of its open SQLite connections (a sweep that runs
    ``--verify-top`` opens its storage again while the sweep's connections are pooled). Another
    process can then checkpoint and delete the WAL under them: seen as "database disk image is
    malformed" and lost commits in ``bench/kill_stress.py``. SQLite keeps such descriptors open
    until its locks are released. A read-only open reads the header bytes instead: a SQLite
    connection to a WAL database would create its ``-wal`` and ``-shm`` files.

    Without ``create`` the file must also hold Optuna's tables (read as ``immutable`` when there
    is no ``-wal`` file, so that no ``-wal``/``-shm`` file is made beside another application's
    database).
    """
    import sqlite3

    if read_only and spec.path is not None:
        with spec.path.open("rb") as handle:
            if handle.read(16) != b"SQLite format 3\x00":
                raise StorageError(f"storage {spec.display!r} is not a SQLite database")
        return
    uri = f"file:{urllib.parse.quote(str(spec.path.absolute()))}?mode=ro" if spec.path is not None else ""
    if not create and spec.path is not None and not spec.path.with_name(spec.path.name + "-wal").exists():
        uri = uri.replace("?mode=ro", "?immutable=1")  # no -wal: a mode=ro reader of a WAL file would create it
    tables: set[str] | None = None
    try:
        connection = sqlite3.connect(uri, uri=True, timeout=60)
        try:
            connection.execute("PRAGMA schema_version").fetchone()
            if not create:
                rows = connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
                tables = {str(row[0]) for row in rows}
        finally:
            connection.close()
    except sqlite3.DatabaseError as exc:
        if "not a database" in str(exc):
            raise StorageError(f"storage {spec.display!r} is not a SQLite database") from None
        # Anything else (a lock, a WAL file it may not create) is left to the real connection.
    if tables is not None and not all(name in tables for name in _OPTUNA_TABLES):
        raise _not_optuna(spec)


def _open_rdb(
    spec: StorageSpec, heartbeat_interval: int | None, grace_period: int | None, read_only: bool = False,
    create: bool = True,
) -> BaseStorage:
    import sqlalchemy.exc

    engine_kwargs: dict[str, Any] = {}
    url = spec.url
    if spec.kind == "sqlite":
        engine_kwargs["connect_args"] = {"timeout": 60}
        if spec.path is not None and spec.path.exists() and spec.path.stat().st_size > 0:
            _check_sqlite(spec, read_only, create)
        url = _sqlite_url(spec, read_only)
        fresh = spec.path is not None and (not spec.path.exists() or spec.path.stat().st_size == 0)
    elif spec.url.startswith("postgresql"):
        engine_kwargs["connect_args"] = {"connect_timeout": 10}
        if read_only:
            engine_kwargs["connect_args"]["options"] = "-c default_transaction_read_only=on"
        engine_kwargs["pool_pre_ping"] = True
    heartbeat: dict[str, Any] = {}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            if heartbeat_interval is not None:
                grace = grace_period if grace_period is not None else max(2, 2 * heartbeat_interval)
                heartbeat = {
                    "heartbeat_interval": heartbeat_interval,
                    "grace_period": grace,
                    "heartbeat_stale_trial_callback": RetryDead(MAX_RETRY),
                }
            storage = _create_rdb(url, engine_kwargs, heartbeat, not create)
        if spec.kind == "sqlite" and spec.path is not None and not read_only:
            _tune_sqlite(storage, switch=fresh)
        return storage
    except ImportError as exc:
        raise StorageError(
            f"no database driver for storage {spec.display!r} ({redact(_first_line(exc.__cause__ or exc), url)}); "
            "for PostgreSQL: pip install 'accel-dse[postgres]' (the psycopg driver)"
        ) from None
    except (sqlalchemy.exc.SQLAlchemyError, optuna.exceptions.StorageInternalError) as exc:
        cause = exc.__cause__ if isinstance(exc, optuna.exceptions.StorageInternalError) and exc.__cause__ else exc
        detail = redact(_first_line(getattr(cause, "orig", None) or cause), url)
        if not create and re.search(r"no such table|relation .* does not exist|doesn't exist", detail):
            raise _not_optuna(spec) from None
        raise StorageError(f"cannot open storage {spec.display!r}: {detail}") from None
    except (RuntimeError, ValueError) as exc:  # Optuna's schema-version check, a bad port
        raise StorageError(f"cannot use storage {spec.display!r}: {redact(_first_line(exc), url)}") from None


#: Attempts at opening an RDB storage whose tables another process is creating at the same moment.
_SCHEMA_ATTEMPTS = 4


def _create_rdb(url: str, engine_kwargs: dict[str, Any], heartbeat: dict[str, Any], existing: bool = False
                ) -> RDBStorage:
    """``RDBStorage(url, ...)``, retried when workers that start together race to create the tables.

    On a fresh PostgreSQL database two processes creating Optuna's schema at once can collide
    (``duplicate key value violates unique constraint "pg_type_typname_nsp_index"``); the loser
    waits a moment and opens the tables the winner made.
    """
    import sqlalchemy.exc

    attempt = 0
    while True:
        try:
            return RDBStorage(url, engine_kwargs=engine_kwargs, skip_table_creation=existing, **heartbeat)
        except (sqlalchemy.exc.IntegrityError, sqlalchemy.exc.ProgrammingError):
            attempt += 1
            if attempt >= _SCHEMA_ATTEMPTS:
                raise
            time.sleep(0.5 * attempt)


def _sqlite_pragmas(dbapi_connection: Any, connection_record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def _tune_sqlite(storage: RDBStorage, *, switch: bool = True) -> None:
    """WAL journal and ``synchronous=NORMAL``: a commit no longer waits for the disk.

    Each trial writes about ten rows; with SQLite's default rollback journal every one of them
    is an fsync. In WAL mode with ``synchronous=NORMAL`` a killed process loses nothing it
    committed (only a power cut can drop the last transactions), readers never block the
    writer, and a sweep runs several times faster. WAL needs a local file system (not NFS).

    Only a database accel-dse creates (``switch``) is switched to WAL; an existing one (made by
    plain Optuna, say) keeps its journal mode, and gets ``synchronous=NORMAL`` only if it is WAL.
    """
    from sqlalchemy import event

    with storage.engine.connect() as connection:
        if switch:
            connection.exec_driver_sql("PRAGMA journal_mode=WAL")
        mode = connection.exec_driver_sql("PRAGMA journal_mode").scalar()
    if str(mode).lower() == "wal":
        event.listen(storage.engine, "connect", _sqlite_pragmas)
    storage.engine.dispose()
