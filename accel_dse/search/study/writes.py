"""Fewer storage transactions per trial: one for the parameters, one per group of attributes.

Through Optuna's public trial API every parameter and every attribute is its own storage
call, and on an RDB storage (SQLite, PostgreSQL) each call is a transaction: a model-only
sweep trial made about 19 of them (7 parameters, about 10 user attributes, the state, the
constraints) and SQLite ran at about 20 trials/s. On an RDB storage these helpers write the
same rows in one transaction per group (all the parameters a sampler drew at once with the
attributes known at the start of a trial; those known at its end), through the storage's own
row-writing methods, so what is stored is exactly what the per-call API would store. On
other storages (journal, in-memory), or if the Optuna internals they rely on are not there,
they fall back to the per-call API.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

import optuna
from optuna.distributions import BaseDistribution

__all__ = ["rdb_backend", "write_attrs", "write_params"]


def rdb_backend(storage: Any) -> tuple[Any, Any] | None:
    """``(RDBStorage, session factory)`` behind ``storage`` (itself or Optuna's cache over it), else ``None``.

    ``None`` too when the Optuna internals these helpers use are not there (another layout).
    """
    try:
        from optuna.storages import RDBStorage
        from optuna.storages._rdb.storage import _create_scoped_session
    except ImportError:  # pragma: no cover - another Optuna layout: use the public API
        return None
    backend = getattr(storage, "_backend", storage)
    if not isinstance(backend, RDBStorage) or not hasattr(backend, "scoped_session"):
        return None
    return backend, _create_scoped_session


def _rdb(trial: optuna.Trial) -> tuple[Any, Any, Any] | None:
    """``(cache, backend, session factory)`` when ``trial`` lives in a cached RDB storage, else ``None``."""
    try:
        from optuna.storages._cached_storage import _CachedStorage
    except ImportError:  # pragma: no cover - another Optuna layout: use the public API
        return None
    cache = trial.storage
    found = rdb_backend(cache) if isinstance(cache, _CachedStorage) else None
    if found is None:
        return None
    backend, session_of = found
    needed = ("_set_trial_attr_without_commit", "_set_trial_param_without_commit")
    if not all(hasattr(backend, name) for name in needed) or not hasattr(trial, "_cached_frozen_trial"):
        return None
    return cache, backend, session_of


def _upsert_attrs(session: Any, backend: Any, model_cls: Any, trial_id: int, attrs: Mapping[str, Any]) -> None:
    """All of ``attrs`` in one multi-row upsert (SQLite, PostgreSQL), else one row at a time."""
    if not attrs:
        return
    name = backend.engine.name
    if name not in ("sqlite", "postgresql"):
        for key, value in attrs.items():
            backend._set_trial_attr_without_commit(session, model_cls, trial_id, key, value)
        return
    rows = [{"trial_id": trial_id, "key": key, "value_json": json.dumps(value)} for key, value in attrs.items()]
    session.execute(_upsert_statement(name, model_cls), rows)


@functools.cache
def _upsert_statement(dialect: str, model_cls: Any) -> Any:
    """``INSERT ... ON CONFLICT (trial_id, key) DO UPDATE`` for ``model_cls``, executed with many rows.

    One statement object per table, so SQLAlchemy compiles it once (a ``VALUES`` list built per
    call is compiled again for every row count: that was most of the cost of these writes).
    """
    from sqlalchemy.dialects import postgresql, sqlite

    insert: Any = sqlite.insert if dialect == "sqlite" else postgresql.insert
    statement = insert(model_cls)
    return statement.on_conflict_do_update(
        index_elements=[model_cls.trial_id, model_cls.key], set_={"value_json": statement.excluded.value_json}
    )


def write_attrs(trial: optuna.Trial, user: Mapping[str, Any], system: Mapping[str, Any] | None = None) -> None:
    """Set user attributes ``user`` (and system attributes ``system``) of a running ``trial``.

    On an RDB storage: one transaction (one multi-row statement per kind on SQLite and
    PostgreSQL); the trial must still be running (as for ``Trial.set_user_attr``).
    """
    system = system or {}
    if not user and not system:
        return
    rdb = _rdb(trial)
    if rdb is None or len(user) + len(system) == 1:
        for key, value in user.items():
            trial.set_user_attr(key, value)
        for key, value in system.items():
            trial.storage.set_trial_system_attr(trial._trial_id, key, value)
        return
    from optuna.storages._rdb import models

    _, backend, session_of = rdb
    trial_id = trial._trial_id
    with session_of(backend.scoped_session, True) as session:
        row = models.TrialModel.find_or_raise_by_id(trial_id, session)
        backend.check_trial_is_updatable(trial_id, row.state)
        _upsert_attrs(session, backend, models.TrialUserAttributeModel, trial_id, user)
        _upsert_attrs(session, backend, models.TrialSystemAttributeModel, trial_id, system)
    trial._cached_frozen_trial.user_attrs.update(user)


def write_params(
    trial: optuna.Trial,
    params: Mapping[str, Any],
    distributions: Mapping[str, BaseDistribution],
    user: Mapping[str, Any] | None = None,
) -> None:
    """Record ``params`` (Optuna values, each within its distribution) and user attributes ``user``.

    On RDB storages both go in one transaction. Afterwards ``trial.suggest_*`` returns the
    recorded values without another write. Values outside their distribution, and every value
    on other storages, are left to ``suggest_*``; ``user`` is then written by :func:`write_attrs`.
    Each distribution is checked against the one the study already uses for that name, as
    Optuna does.
    """
    user = user or {}
    rdb = _rdb(trial)
    if rdb is None:
        write_attrs(trial, user)
        return
    cache, backend, session_of = rdb
    frozen = trial._cached_frozen_trial
    todo = {}
    for name, value in params.items():
        dist = distributions[name]
        if name in frozen.distributions:
            continue
        try:
            internal = dist.to_internal_repr(value)
        except (TypeError, ValueError):
            continue
        if dist._contains(internal):
            todo[name] = (value, internal, dist)
    if len(todo) < 2:
        write_attrs(trial, user)
        return
    from optuna.distributions import check_distribution_compatibility, distribution_to_json
    from optuna.storages._rdb import models

    study_id = trial.study._study_id
    trial_id = trial._trial_id
    with cache._lock:
        info = cache._studies.get(study_id)
        known = dict(info.param_distribution) if info is not None else {}
    with session_of(backend.scoped_session, True) as session:
        row = models.TrialModel.find_or_raise_by_id(trial_id, session)
        backend.check_trial_is_updatable(trial_id, row.state)
        for name, (_, internal, dist) in todo.items():
            previous = known.get(name)
            if previous is None:  # first use of this name in this process: Optuna's own check
                backend._set_trial_param_without_commit(session, trial_id, name, internal, dist, None)
                continue
            check_distribution_compatibility(previous, dist)
            session.add(models.TrialParamModel(trial_id=trial_id, param_name=name, param_value=internal,
                                               distribution_json=distribution_to_json(dist)))
        _upsert_attrs(session, backend, models.TrialUserAttributeModel, trial_id, user)
    frozen.user_attrs.update(user)
    with cache._lock:
        if info is not None:
            for name, (_, _, dist) in todo.items():
                info.param_distribution.setdefault(name, dist)
    for name, (value, _, dist) in todo.items():
        frozen.distributions[name] = dist
        frozen.params[name] = value
