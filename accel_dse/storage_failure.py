"""One line for a failure of a study storage's database layer (Optuna, SQLAlchemy, sqlite3, psycopg).

A storage that opened can still fail later: an immutable or read-only SQLite file refuses the
first write, a full disk the next commit, another process's lock outlasts the timeout. Optuna
wraps these in ``StorageInternalError`` ("An exception is raised during the commit..."),
SQLAlchemy in ``OperationalError``; the cause users need is at the bottom of the chain
(``attempt to write a readonly database``, ``database or disk is full``, ``database is locked``).
"""

from __future__ import annotations

__all__ = ["storage_cause", "storage_failure_text"]

#: Top-level packages whose exceptions are failures of the storage itself.
_STORAGE_PACKAGES = frozenset({"sqlalchemy", "sqlite3", "psycopg", "psycopg2"})


def _is_storage_error(exc: BaseException) -> bool:
    for cls in type(exc).__mro__:
        package = cls.__module__.partition(".")[0]
        if package in _STORAGE_PACKAGES or (package == "optuna" and cls.__name__ == "StorageInternalError"):
            return True
    return False


def _root_cause(exc: BaseException) -> BaseException:
    seen: set[int] = set()
    while id(exc) not in seen:
        seen.add(id(exc))
        inner = getattr(exc, "orig", None)  # SQLAlchemy's DBAPIError holds the driver's error
        if not isinstance(inner, BaseException):
            inner = exc.__cause__ or exc.__context__
        if inner is None:
            break
        exc = inner
    return exc


def storage_cause(exc: BaseException) -> str | None:
    """The first line of the root cause if ``exc`` comes from the storage layer (or is an ``OSError``
    on its file), else ``None``."""
    cause = _root_cause(exc)
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror[:1].lower() + exc.strerror[1:]
    if not (_is_storage_error(exc) or _is_storage_error(cause)):
        return None
    lines = [line.strip() for line in str(cause).splitlines() if line.strip()]
    return lines[0] if lines else type(cause).__name__


def storage_failure_text(exc: BaseException, url: str | None) -> str | None:
    """``storage URL failed: CAUSE`` (secrets masked) if ``exc`` comes from the storage layer, else ``None``."""
    detail = storage_cause(exc)
    if detail is None:
        return None
    if url is None:
        return f"the study storage failed: {detail}"
    from accel_dse.search import mask_url, redact

    return f"storage {mask_url(url)!r} failed: {redact(detail, url)}"
