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
stale-trial retry callback, so a killed worker's trial is failed and queued again.
Problems are one-line :class:`~accel_dse.errors.StorageError`s; a storage is never created
in a directory that does not exist.
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from pathlib import Path
from typing import Any

import optuna
from optuna.storages import BaseStorage, InMemoryStorage, RDBStorage, RetryHeartbeatStaleTrialCallback
from optuna.storages.journal import JournalFileBackend, JournalStorage

from accel_dse.errors import StorageError

__all__ = ["StorageSpec", "parse_storage", "check_location", "open_storage", "MAX_RETRY"]

#: How often a trial of a dead worker is queued again before it is left failed.
MAX_RETRY = 3
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
    try:
        parsed = sqlalchemy.engine.make_url(url)
    except (sqlalchemy.exc.ArgumentError, ValueError) as exc:
        raise StorageError(f"storage URL {url!r} is malformed ({_first_line(exc)}); examples: {_EXAMPLES}") from None
    display = parsed.render_as_string(hide_password=True)
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
            f"storage URL {display!r} names an unknown database kind {parsed.drivername!r} ({_first_line(exc)}); "
            f"examples: {_EXAMPLES}"
        ) from None
    if not parsed.database:
        raise StorageError(f"storage URL {display!r} names no database (add /DBNAME)")
    return StorageSpec(kind="rdb", url=url, path=None, display=display)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def check_location(spec: StorageSpec) -> None:
    """Refuse a file storage whose directory does not exist or whose path is a directory."""
    if spec.path is None:
        return
    parent = spec.path.parent
    if not parent.is_dir():
        raise StorageError(
            f"directory {str(parent)!r} of storage {spec.display!r} does not exist (create it or fix the path)"
        )
    if spec.path.is_dir():
        raise StorageError(f"storage {spec.display!r} names a directory, not a file")


def open_storage(
    spec: StorageSpec, *, heartbeat_interval: int | None = 10, grace_period: int | None = None
) -> BaseStorage:
    """Open the storage (creating an empty database or journal file if there is none).

    Args:
        spec: A parsed storage URL.
        heartbeat_interval: RDB heartbeat period, s (``None``: no heartbeat).
        grace_period: Seconds without a heartbeat before a running trial counts as dead
            (default: twice the interval, at least 2).

    Raises:
        StorageError: the directory does not exist, the server cannot be reached, the file is
            not a database, the driver is missing.
    """
    if spec.kind == "memory":
        return InMemoryStorage()
    check_location(spec)
    if spec.kind == "journal":
        return _open_journal(spec)
    return _open_rdb(spec, heartbeat_interval, grace_period)


def _open_journal(spec: StorageSpec) -> BaseStorage:
    path = spec.path
    if path is None:  # pragma: no cover - parse_storage always sets it
        raise StorageError(f"journal storage {spec.display!r} has no path")
    if path.exists() and path.stat().st_size > 0:
        with path.open("rb") as handle:
            head = handle.read(1)
        if head != b"{":
            raise StorageError(f"storage {spec.display!r} is not an Optuna journal file")
    try:
        return JournalStorage(JournalFileBackend(str(path)))
    except (OSError, ValueError) as exc:
        raise StorageError(f"cannot open journal storage {spec.display!r}: {_first_line(exc)}") from None


def _open_rdb(spec: StorageSpec, heartbeat_interval: int | None, grace_period: int | None) -> BaseStorage:
    import sqlalchemy.exc

    engine_kwargs: dict[str, Any] = {}
    if spec.kind == "sqlite":
        engine_kwargs["connect_args"] = {"timeout": 60}
        if spec.path is not None and spec.path.exists() and spec.path.stat().st_size > 0:
            with spec.path.open("rb") as handle:
                if handle.read(16) != b"SQLite format 3\x00":
                    raise StorageError(f"storage {spec.display!r} is not a SQLite database")
    elif spec.url.startswith("postgresql"):
        engine_kwargs["connect_args"] = {"connect_timeout": 10}
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
                    "heartbeat_stale_trial_callback": RetryHeartbeatStaleTrialCallback(max_retry=MAX_RETRY),
                }
            storage = _create_rdb(spec.url, engine_kwargs, heartbeat)
        if spec.kind == "sqlite" and spec.path is not None:
            _tune_sqlite(storage)
        return storage
    except ImportError as exc:
        raise StorageError(
            f"no database driver for storage {spec.display!r} ({_first_line(exc.__cause__ or exc)}); "
            "for PostgreSQL install psycopg[binary]"
        ) from None
    except sqlalchemy.exc.SQLAlchemyError as exc:
        detail = _first_line(getattr(exc, "orig", None) or exc)
        raise StorageError(f"cannot open storage {spec.display!r}: {detail}") from None
    except RuntimeError as exc:  # Optuna's schema-version check
        raise StorageError(f"cannot use storage {spec.display!r}: {_first_line(exc)}") from None


#: Attempts at opening an RDB storage whose tables another process is creating at the same moment.
_SCHEMA_ATTEMPTS = 4


def _create_rdb(url: str, engine_kwargs: dict[str, Any], heartbeat: dict[str, Any]) -> RDBStorage:
    """``RDBStorage(url, ...)``, retried when workers that start together race to create the tables.

    On a fresh PostgreSQL database two processes creating Optuna's schema at once can collide
    (``duplicate key value violates unique constraint "pg_type_typname_nsp_index"``); the loser
    waits a moment and opens the tables the winner made.
    """
    import sqlalchemy.exc

    attempt = 0
    while True:
        try:
            return RDBStorage(url, engine_kwargs=engine_kwargs, **heartbeat)
        except (sqlalchemy.exc.IntegrityError, sqlalchemy.exc.ProgrammingError):
            attempt += 1
            if attempt >= _SCHEMA_ATTEMPTS:
                raise
            time.sleep(0.5 * attempt)


def _sqlite_pragmas(dbapi_connection: Any, connection_record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def _tune_sqlite(storage: RDBStorage) -> None:
    """WAL journal and ``synchronous=NORMAL``: a commit no longer waits for the disk.

    Each trial writes about ten rows; with SQLite's default rollback journal every one of them
    is an fsync. In WAL mode with ``synchronous=NORMAL`` a killed process loses nothing it
    committed (only a power cut can drop the last transactions), readers never block the
    writer, and a sweep runs several times faster. WAL needs a local file system (not NFS).
    """
    from sqlalchemy import event

    with storage.engine.connect() as connection:
        connection.exec_driver_sql("PRAGMA journal_mode=WAL")
    event.listen(storage.engine, "connect", _sqlite_pragmas)
    storage.engine.dispose()
