"""Creating, resuming and checking sweep studies; counting the trial budget.

A sweep study records what it searches in its user attributes (``accel_dse.*``: the space's
objectives, fingerprint and canonical form). Resuming with the same ``--study`` name
continues it; a name that exists with other objectives or another space is refused, never
silently replaced or mixed.

Optuna creates a study and its attributes in separate writes, so a worker on another machine
can find the study before its creator has marked it (24 sweeps started at once on one
PostgreSQL study: one in 24 was refused as "not made by accel-dse sweep"). A study that has
neither the mark nor any trial is therefore given :data:`SETUP_WAIT_S` seconds to get its mark
before it is refused.
"""

from __future__ import annotations

import re
import time

import optuna
from optuna.storages import BaseStorage
from optuna.trial import FrozenTrial, TrialState

from accel_dse.search.space.design_space import DesignSpace
from accel_dse.search.study.dashboard import name_metrics
from accel_dse.search.study.writes import rdb_backend
from accel_spec.errors import SearchError

__all__ = [
    "check_study_name",
    "MAX_STUDY_NAME",
    "open_study",
    "study_exists",
    "check_compatible",
    "budget_used",
]

#: Longest study name, characters (it becomes a directory name: ``runs/<study>``).
MAX_STUDY_NAME = 100
_STUDY_NAME = re.compile(r"[A-Za-z0-9._-]+")

ATTR_OBJECTIVES = "accel_dse.objectives"
ATTR_FINGERPRINT = "accel_dse.space_fingerprint"
ATTR_SPACE = "accel_dse.space"
ATTR_SPACE_NAME = "accel_dse.space_name"
#: Seconds a worker waits for another worker to mark a study it has just created (see the module notes).
SETUP_WAIT_S = 15.0


def check_study_name(name: object, option: str = "--study") -> str:
    """Return ``name`` if it is a valid study name, else raise ``SearchError``.

    The one rule for a name that may become a file or directory name: 1 to
    :data:`MAX_STUDY_NAME` letters, digits, ``.``, ``_`` and ``-``, not ``.`` or ``..``.
    """
    rule = f"{option} must be 1 to {MAX_STUDY_NAME} letters, digits, '.', '_' or '-' (not '.' or '..')"
    if not isinstance(name, str) or not _STUDY_NAME.fullmatch(name) or name in (".", ".."):
        raise SearchError(f"{rule}, not {name!r}")
    if len(name) > MAX_STUDY_NAME:
        raise SearchError(f"{rule}, not a name of {len(name)} characters")
    return name


def study_exists(storage: BaseStorage, name: str) -> bool:
    """Whether ``storage`` holds a study called ``name``."""
    return name in optuna.get_all_study_names(storage)


def check_compatible(study: optuna.Study, space: DesignSpace, *, where: str) -> None:
    """Refuse to continue ``study`` with ``space`` unless it was made by the same search problem."""
    attrs = study.user_attrs
    wanted = [o.name for o in space.objectives]
    if ATTR_OBJECTIVES not in attrs:
        raise SearchError(
            f"study {study.study_name!r} in {where} was not made by accel-dse sweep; use another --study name"
        )
    have = list(attrs[ATTR_OBJECTIVES])
    if have != wanted:
        raise SearchError(
            f"study {study.study_name!r} in {where} has objectives {have}, not {wanted} of {space.source}; "
            "use another --study name"
        )
    if attrs.get(ATTR_FINGERPRINT) != space.fingerprint:
        raise SearchError(
            f"study {study.study_name!r} in {where} was made from another design space "
            f"(fingerprint {attrs.get(ATTR_FINGERPRINT)}, {space.source} is {space.fingerprint}); "
            "use another --study name"
        )
    names = set(space.distributions())
    for trial in study.get_trials(deepcopy=False):
        if not trial.params:
            continue
        other = sorted(set(trial.params) - names)
        if other:
            raise SearchError(
                f"study {study.study_name!r} in {where} was written by an older accel-dse that searched the "
                f"parameters under other names ({other[0]!r} is not a parameter of {space.source} any more); "
                "use another --study name"
            )
        break


def open_study(
    storage: BaseStorage,
    name: str,
    space: DesignSpace,
    *,
    where: str,
    sampler: optuna.samplers.BaseSampler | None = None,
    create: bool = True,
    setup_wait_s: float = SETUP_WAIT_S,
) -> optuna.Study:
    """Load study ``name`` after checking it fits ``space``, or create it (when ``create``).

    An existing study with neither accel-dse's mark nor a trial gets ``setup_wait_s`` seconds
    to be marked by the worker creating it before it is refused (see the module notes).
    """
    if study_exists(storage, name):
        study = optuna.load_study(study_name=name, storage=storage, sampler=sampler)
        deadline = time.monotonic() + setup_wait_s
        while (ATTR_OBJECTIVES not in study.user_attrs and not study.get_trials(deepcopy=False)
               and time.monotonic() < deadline):
            time.sleep(0.1)
        check_compatible(study, space, where=where)
        return study
    if not create:
        raise SearchError(f"no study {name!r} in {where}")
    study = optuna.create_study(
        storage=storage, study_name=name, directions=space.directions, sampler=sampler, load_if_exists=True
    )
    if ATTR_OBJECTIVES not in study.user_attrs:
        study.set_user_attr(ATTR_SPACE_NAME, space.name)
        study.set_user_attr(ATTR_SPACE, space.to_dict())
        study.set_user_attr(ATTR_FINGERPRINT, space.fingerprint)
        study.set_user_attr(ATTR_OBJECTIVES, [o.name for o in space.objectives])
        name_metrics(study, space)
    check_compatible(study, space, where=where)
    return study


def _retried_numbers(trials: list[FrozenTrial]) -> set[int]:
    out: set[int] = set()
    for t in trials:
        out.update(t.system_attrs.get("retry_history", []))
    return out


_COUNTED = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL, TrialState.RUNNING)


def budget_used(study: optuna.Study) -> int:
    """Trials that count against ``--trials``: finished or running, a retried failure once.

    Every trial that retries a failed one carries Optuna's ``failed_trial`` system attribute and
    each failed trial is retried at most once, so the count is the trials in a counted state
    minus the trials that carry it. On an RDB storage that is two ``COUNT`` queries (checked
    after every trial, loading the trials instead cost a fifth of a SQLite sweep's time);
    elsewhere the trials are read.
    """
    counted = _rdb_budget_used(study)
    if counted is not None:
        return counted
    trials = study.get_trials(deepcopy=False)
    retried = _retried_numbers(trials)
    return sum(1 for t in trials if t.state in _COUNTED and t.number not in retried)


def _rdb_budget_used(study: optuna.Study) -> int | None:
    """:func:`budget_used` by ``COUNT`` queries on an RDB storage, ``None`` on other storages."""
    found = rdb_backend(study._storage)
    if found is None:
        return None
    import sqlalchemy
    from optuna.storages._rdb import models

    backend, session_of = found
    trial, attr = models.TrialModel, models.TrialSystemAttributeModel
    study_id = study._study_id
    with session_of(backend.scoped_session) as session:
        counted = session.execute(
            sqlalchemy.select(sqlalchemy.func.count(trial.trial_id))
            .where(trial.study_id == study_id, trial.state.in_(_COUNTED))
        ).scalar_one()
        retries = session.execute(
            sqlalchemy.select(sqlalchemy.func.count(attr.trial_system_attribute_id))
            .join(trial, trial.trial_id == attr.trial_id)
            .where(trial.study_id == study_id, attr.key == "failed_trial")
        ).scalar_one()
    return int(counted) - int(retries)
