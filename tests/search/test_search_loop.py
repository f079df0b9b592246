"""The worker's trial loop: outcomes of trials, stopping, and its one heartbeat thread."""

from __future__ import annotations

import time

import optuna
import pytest
from optuna.distributions import IntDistribution
from optuna.storages._rdb import models
from optuna.storages._rdb.storage import _create_scoped_session
from optuna.trial import TrialState

from accel_dse.search.scoring.objective import TrialFailed
from accel_dse.search.study.loop import WorkerHeartbeat, run_trials
from accel_dse.search.study.storage import open_storage, parse_storage

DIST = {"x": IntDistribution(0, 100)}


def _objective(trial: optuna.Trial) -> float:
    x = trial.suggest_int("x", 0, 100)
    if x % 3 == 0:
        raise TrialFailed("a multiple of 3")
    return float(x)


def _heartbeat_of(storage, trial_id: int):
    backend = getattr(storage, "_backend", storage)
    with _create_scoped_session(backend.scoped_session) as session:
        row = session.query(models.TrialHeartbeatModel).filter_by(trial_id=trial_id).one_or_none()
        return None if row is None else row.heartbeat


def test_trials_complete_fail_and_stop(tmp_path):
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=3))
    ran = run_trials(study, _objective, catch=(TrialFailed,), stop=lambda s: len(s.trials) >= 12)
    trials = study.get_trials()
    assert ran == 12 and len(trials) == 12
    for t in trials:
        expected = TrialState.FAIL if t.params["x"] % 3 == 0 else TrialState.COMPLETE
        assert t.state == expected, t
        if expected == TrialState.COMPLETE:
            assert t.value == float(t.params["x"])


def test_stop_is_asked_before_the_first_trial():
    study = optuna.create_study()
    assert run_trials(study, _objective, catch=(TrialFailed,), stop=lambda s: True) == 0
    assert study.trials == []


@pytest.mark.parametrize("error", [RuntimeError("evaluator bug"), KeyboardInterrupt()])
def test_an_uncaught_error_fails_the_trial_and_is_raised(error):
    study = optuna.create_study()
    calls = []

    def objective(trial):
        calls.append(trial.number)
        if len(calls) == 3:
            raise error
        return 1.0

    with pytest.raises(type(error)):
        run_trials(study, objective, catch=(TrialFailed,), stop=lambda s: False)
    assert [t.state for t in study.get_trials()] == [TrialState.COMPLETE] * 2 + [TrialState.FAIL]


def test_timeout_ends_the_run():
    study = optuna.create_study()

    def slow(trial):
        time.sleep(0.05)
        return 0.0

    ran = run_trials(study, slow, catch=(), stop=lambda s: False, timeout=0.3)
    assert 1 <= ran < 100 and len(study.trials) == ran


def test_heartbeat_at_start_then_every_interval_then_none(tmp_path):
    storage = open_storage(parse_storage(f"sqlite:///{tmp_path}/s.db"), heartbeat_interval=1, grace_period=2)
    study = optuna.create_study(storage=storage)
    trial = study.ask(DIST)
    heartbeat = WorkerHeartbeat(storage)
    try:
        assert heartbeat.interval == 1
        assert _heartbeat_of(storage, trial._trial_id) is None
        heartbeat.start(trial._trial_id)
        first = _heartbeat_of(storage, trial._trial_id)
        assert first is not None
        time.sleep(2.5)  # the thread beats at 1 s and 2 s
        later = _heartbeat_of(storage, trial._trial_id)
        assert later > first
        heartbeat.finish()
        time.sleep(3.2)
        assert _heartbeat_of(storage, trial._trial_id) == later  # no beat after the trial ended
        # Silent for longer than the grace period: Optuna's stale check sees it.
        assert storage._get_stale_trial_ids(study._study_id) == [trial._trial_id]
    finally:
        heartbeat.close()


def test_no_heartbeat_thread_without_a_heartbeat_storage(tmp_path):
    storage = open_storage(parse_storage(f"journal:{tmp_path}/j.log"))
    heartbeat = WorkerHeartbeat(storage)
    assert heartbeat.interval is None and heartbeat._thread is None
    heartbeat.start(0)  # nothing to record, no error
    heartbeat.close()


def test_a_stale_trial_is_failed_and_retried_by_the_loop(tmp_path):
    storage = open_storage(parse_storage(f"sqlite:///{tmp_path}/s.db"), heartbeat_interval=1, grace_period=2)
    study = optuna.create_study(storage=storage, sampler=optuna.samplers.RandomSampler(seed=1))
    dead = study.ask(DIST)  # a worker that beat once and was killed
    storage.record_heartbeat(dead._trial_id)
    time.sleep(3.0)
    run_trials(study, _objective, catch=(TrialFailed,), stop=lambda s: len(s.trials) >= 4)
    trials = study.get_trials()
    assert trials[dead.number].state == TrialState.FAIL
    retries = [t for t in trials if t.system_attrs.get("failed_trial") == dead.number]
    assert len(retries) == 1 and retries[0].params == trials[dead.number].params
    assert retries[0].state in (TrialState.COMPLETE, TrialState.FAIL)  # it ran in this loop
