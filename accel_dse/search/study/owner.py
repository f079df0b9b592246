"""Who runs a trial, and failing (then retrying) the trials whose worker is gone.

A trial whose worker is killed must never stay RUNNING: it would count against ``--trials``
forever. Two things make that hold on every storage (SQLite, PostgreSQL, journal):

* **The owner is recorded with the trial.** :func:`ask_owned` creates a worker's trial with its
  owner (``host``, ``pid``, ``pid_start``, ``sampler`` user attributes) in the transaction
  (RDB) or the journal record that creates it, so there is no moment at which a RUNNING trial
  exists without an owner. ``study.ask()`` wrote them only after the sampler had drawn the
  design, which for TPE or BO is most of a trial's life: a kill then left a trial with no
  owner and no heartbeat that nothing could recognise as dead.
* **A RUNNING trial is judged by its owner or its heartbeat** (:func:`fail_dead_trials`):
  an owner on this host whose process (pid and start time) is gone is dead; on an RDB storage
  with heartbeat, a trial with no heartbeat row at all that started more than the grace period
  ago is dead (every sweep worker records one as soon as it has the trial, see
  :mod:`accel_dse.search.study.loop`; one with a stale heartbeat is Optuna's own stale-trial check);
  a trial with no owner that started more than the grace period ago is dead on any storage.

The one trial that briefly has no owner is a queued retry (WAITING) that a worker takes: the
queue is Optuna's and taking a trial from it is one storage write; the owner follows at once,
before the sampler runs. A worker killed in between leaves an ownerless trial, failed by the
last rule. A retry is queued without the dead worker's attributes (:class:`RetryDead`), so it is
never mistaken for the dead worker's own trial.
"""

from __future__ import annotations

import datetime
import os
import socket
from collections.abc import Callable, Mapping
from typing import Any

import optuna
from optuna.exceptions import UpdateFinishedTrialError
from optuna.trial import FrozenTrial, TrialState

from accel_dse.search.study.writes import rdb_backend

__all__ = [
    "MAX_RETRY",
    "OWNER_KEYS",
    "OWNERLESS_GRACE_S",
    "RetryDead",
    "ask_owned",
    "fail_dead_trials",
    "process_alive",
    "worker_identity",
]

#: How often a trial of a dead worker is queued again before it is left failed.
MAX_RETRY = 3
#: User attributes naming a trial's owner.
OWNER_KEYS = ("host", "pid", "pid_start")
#: Attributes of a dead trial that its retry does not inherit (they describe the dead attempt).
_NOT_INHERITED = (*OWNER_KEYS, "status", "reason")
#: Seconds a RUNNING trial may have no owner (journal) or no heartbeat row (RDB) before it counts as dead.
OWNERLESS_GRACE_S = 20


def _proc_start(pid: int) -> str | None:
    """Start time of process ``pid`` in clock ticks since boot (Linux), ``None`` if unknown."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    if fields and fields[0] in ("Z", "X"):
        return "dead"
    return fields[19] if len(fields) > 19 else None


def worker_identity() -> dict[str, Any]:
    """``host``, ``pid`` and ``pid_start`` of this process (what trials record)."""
    pid = os.getpid()
    return {"host": socket.gethostname(), "pid": pid, "pid_start": _proc_start(pid)}


def process_alive(pid: object, start: object = None) -> bool:
    """Whether process ``pid`` (started at ``start`` ticks, if known) is still running here."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    now = _proc_start(pid)
    if now == "dead":
        return False
    return start is None or now is None or now == start


class RetryDead:
    """Queue a failed trial again (its parameters, Optuna's ``failed_trial`` / ``retry_history``).

    As Optuna's ``RetryFailedTrialCallback``, except that the retry does not inherit the dead
    attempt's owner, ``status`` or ``reason``. Used for Optuna's heartbeat-stale trials and by
    :func:`fail_dead_trials`.

    Args:
        max_retry: Retries of one trial at most (the original trial and its retries together
            make at most ``max_retry + 1`` attempts).
    """

    def __init__(self, max_retry: int = MAX_RETRY) -> None:
        self.max_retry = max_retry

    def __call__(self, study: optuna.Study, trial: FrozenTrial) -> None:
        history = [*trial.system_attrs.get("retry_history", []), trial.number]
        if len(history) > self.max_retry:
            return
        system = {**trial.system_attrs, "failed_trial": history[0], "retry_history": history}
        user = {k: v for k, v in trial.user_attrs.items() if k not in _NOT_INHERITED}
        study.add_trial(optuna.create_trial(state=TrialState.WAITING, params=trial.params,
                                            distributions=trial.distributions, user_attrs=user,
                                            system_attrs=system))


def _take_waiting(study: optuna.Study) -> int | None:
    """Move the first WAITING trial to RUNNING (one storage write); its id, or ``None`` if none is left."""
    storage = study._storage
    for trial in storage.get_all_trials(study._study_id, deepcopy=False, states=(TrialState.WAITING,)):
        try:
            if storage.set_trial_state_values(trial._trial_id, state=TrialState.RUNNING):
                return trial._trial_id
        except UpdateFinishedTrialError:
            continue
    return None


def ask_owned(
    study: optuna.Study, owner: Mapping[str, Any], on_created: Callable[[int], None] | None = None
) -> optuna.Trial:
    """``study.ask()`` with the trial's owner ``owner`` (user attributes) stored as the trial is created.

    A queued trial is taken first (as ``study.ask()`` does) and gets ``owner`` right after;
    otherwise the new trial is created from a template that holds ``owner``, in one transaction
    (RDB) or one journal record. ``on_created(trial_id)`` runs before the sampler draws the
    design (the worker's first heartbeat).
    """
    storage = study._storage
    study._thread_local.cached_all_trials = None
    trial_id = _take_waiting(study)
    if trial_id is not None:
        for key, value in owner.items():
            storage.set_trial_user_attr(trial_id, key, value)
    else:
        template = optuna.trial.FrozenTrial(
            number=-1, state=TrialState.RUNNING, value=None, values=None,
            datetime_start=datetime.datetime.now(), datetime_complete=None, params={}, distributions={},
            user_attrs=dict(owner), system_attrs={}, intermediate_values={}, trial_id=-1,
        )
        trial_id = storage.create_new_trial(study._study_id, template_trial=template)
    if on_created is not None:
        on_created(trial_id)
    return optuna.Trial(study, trial_id)


def _heartbeats(study: optuna.Study) -> tuple[set[int], float] | None:
    """Ids of the study's trials that have a heartbeat row, and the grace period (s); ``None`` without heartbeat."""
    from optuna.storages._heartbeat import BaseHeartbeat, is_heartbeat_enabled

    storage = study._storage
    if not isinstance(storage, BaseHeartbeat) or not is_heartbeat_enabled(storage):
        return None
    found = rdb_backend(storage)
    if found is None:
        return None
    import sqlalchemy
    from optuna.storages._rdb import models

    backend, session_of = found
    grace = backend.grace_period or 2 * (backend.heartbeat_interval or 1)
    beat, trial = models.TrialHeartbeatModel, models.TrialModel
    with session_of(backend.scoped_session) as session:
        ids = session.execute(
            sqlalchemy.select(beat.trial_id).join(trial, trial.trial_id == beat.trial_id)
            .where(trial.study_id == study._study_id, trial.state == TrialState.RUNNING)
        ).scalars().all()
    return set(ids), float(grace)


def _age_s(trial: FrozenTrial) -> float:
    """Seconds since ``trial`` started (its start time is naive local time on RDB, UTC on journal)."""
    start = trial.datetime_start
    if start is None:
        return float("inf")
    now = datetime.datetime.now(start.tzinfo) if start.tzinfo else datetime.datetime.now()
    return (now - start).total_seconds()


def _death(trial: FrozenTrial, host: str, beats: tuple[set[int], float] | None) -> str | None:
    """Why ``trial`` (RUNNING) has no live worker, or ``None`` if it may have one."""
    attrs = trial.user_attrs
    pid = attrs.get("pid")
    if attrs.get("host") == host:
        if process_alive(pid, attrs.get("pid_start")):
            return None
        return f"worker pid {pid} on {host} died"
    if beats is not None:
        ids, grace = beats
        if trial._trial_id in ids or _age_s(trial) <= grace:
            return None  # a heartbeat row: Optuna's stale-trial check judges it
        owner = f"pid {pid} on {attrs['host']}" if "host" in attrs else "no recorded owner"
        return f"worker ({owner}) never recorded a heartbeat in {grace:g} s"
    if "host" not in attrs and _age_s(trial) > OWNERLESS_GRACE_S:
        return f"no worker claimed the trial in {OWNERLESS_GRACE_S} s"
    return None


def fail_dead_trials(study: optuna.Study) -> list[int]:
    """Fail RUNNING trials that have neither a live owner nor a heartbeat (see the module notes).

    Each one gets ``status = "worker died"`` and a ``reason``, and is queued again
    (:class:`RetryDead`, up to :data:`MAX_RETRY` times).

    Returns:
        Numbers of the trials failed.
    """
    host = socket.gethostname()
    storage = study._storage
    retry = RetryDead()
    beats = _heartbeats(study)
    failed = []
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        reason = _death(trial, host, beats)
        if reason is None:
            continue
        try:
            storage.set_trial_user_attr(trial._trial_id, "status", "worker died")
            storage.set_trial_user_attr(trial._trial_id, "reason", reason)
            changed = storage.set_trial_state_values(trial._trial_id, state=TrialState.FAIL)
        except UpdateFinishedTrialError:
            continue
        if changed:
            failed.append(trial.number)
            retry(study, storage.get_trial(trial._trial_id))
    return failed
