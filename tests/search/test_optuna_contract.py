"""The Optuna internals accel_dse.search relies on, checked against the installed Optuna.

pyproject.toml pins Optuna to one minor version because the search reaches past its public API
(storage rows and sessions, the trial cache, the heartbeat, the tell without a read-back). The
code falls back to the public API where an internal is missing, so a changed internal would make
sweeps slower or lose a guarantee without any test failing: this file fails instead, naming what
changed. Widen the pin only after it passes on the new version.
"""

from __future__ import annotations

import importlib.metadata
import inspect
import re
from pathlib import Path

import optuna
import pytest
from search_testlib import make_space

from accel_dse.search import open_storage, open_study, parse_storage
from accel_dse.search.study.owner import ask_owned
from accel_dse.search.study.writes import _rdb, rdb_backend

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def _params(func) -> list[str]:
    return list(inspect.signature(func).parameters)


def test_installed_optuna_is_the_pinned_minor_version():
    import tomllib

    deps = tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    pin = next(d for d in deps if re.match(r"optuna\b", d))
    match = re.fullmatch(r"optuna==(\d+)\.(\d+)\.\*", pin)
    assert match, f"optuna must be pinned to one minor version (optuna==X.Y.*), not {pin!r}"
    installed = importlib.metadata.version("optuna").split(".")[:2]
    assert installed == [match[1], match[2]], f"Optuna {optuna.__version__} installed, {pin} pinned"


def test_rdb_internals():
    from optuna.storages import RDBStorage
    from optuna.storages._rdb import models
    from optuna.storages._rdb.storage import _create_scoped_session

    assert _params(_create_scoped_session)[:2] == ["scoped_session", "ignore_integrity_error"]
    assert _params(RDBStorage._set_trial_attr_without_commit)[1:] == ["session", "model_cls", "trial_id", "key",
                                                                      "value"]
    assert _params(RDBStorage._set_trial_param_without_commit)[1:] == [
        "session", "trial_id", "param_name", "param_value_internal", "distribution", "previous_distribution"]
    assert _params(RDBStorage.check_trial_is_updatable)[1:] == ["trial_id", "trial_state"]
    for name, columns in {
        "TrialModel": ("trial_id", "study_id", "number", "state", "datetime_start"),
        "TrialHeartbeatModel": ("trial_id", "heartbeat"),
        "TrialUserAttributeModel": ("trial_id", "key", "value_json"),
        "TrialSystemAttributeModel": ("trial_id", "key", "value_json"),
        "TrialParamModel": ("trial_id", "param_name", "param_value", "distribution_json"),
    }.items():
        model = getattr(models, name)
        missing = [c for c in columns if c not in model.__table__.columns]
        assert not missing, f"{name} lost columns {missing}"
    assert hasattr(models.TrialModel, "find_or_raise_by_id")


def test_study_trial_cache_and_heartbeat_internals(tmp_path):
    from optuna.storages._cached_storage import _CachedStorage
    from optuna.storages._heartbeat import BaseHeartbeat, is_heartbeat_enabled
    from optuna.study._tell import _tell_with_warning

    assert {"skip_if_finished", "suppress_warning"} <= set(_params(_tell_with_warning))
    storage = open_storage(parse_storage(f"sqlite:///{tmp_path}/c.db"), heartbeat_interval=5)
    study = open_study(storage, "c", make_space(), where="test")
    cache = study._storage
    assert isinstance(cache, _CachedStorage) and isinstance(cache, BaseHeartbeat)
    assert is_heartbeat_enabled(cache) and cache._backend.grace_period == 10
    assert rdb_backend(cache) is not None  # else the grouped writes and the COUNT budget fall back
    assert hasattr(cache, "_lock") and hasattr(cache, "_studies")
    assert hasattr(study._thread_local, "cached_all_trials") and isinstance(study._study_id, int)
    trial = ask_owned(study, {"host": "h", "pid": 1})
    assert _rdb(trial) is not None  # the one-transaction parameter and attribute writes
    assert isinstance(trial._trial_id, int) and trial._cached_frozen_trial.user_attrs == {"host": "h", "pid": 1}
    assert cache._studies[study._study_id].param_distribution == {}


@pytest.mark.parametrize("kind", ["sqlite", "journal"])
def test_a_template_trial_is_created_with_its_user_attributes_in_one_write(tmp_path, kind, monkeypatch):
    """ask_owned relies on create_new_trial(template_trial=...) storing the owner in the creating write."""
    url = f"sqlite:///{tmp_path}/t.db" if kind == "sqlite" else f"journal:{tmp_path}/t.journal"
    study = open_study(open_storage(parse_storage(url), heartbeat_interval=None), "t", make_space(), where="test")
    from optuna.storages._cached_storage import _CachedStorage

    backend = study._storage._backend if isinstance(study._storage, _CachedStorage) else study._storage
    writes: list[str] = []
    for name in ("set_trial_user_attr", "set_trial_system_attr", "set_trial_state_values"):
        original = getattr(backend, name)
        monkeypatch.setattr(backend, name, lambda *a, _n=name, _o=original, **k: (writes.append(_n), _o(*a, **k))[1])
    trial = ask_owned(study, {"host": "h", "pid": 7, "pid_start": "9"})
    assert writes == []
    reread = optuna.load_study(study_name="t", storage=open_storage(parse_storage(url), heartbeat_interval=None))
    assert reread.get_trials()[trial.number].user_attrs == {"host": "h", "pid": 7, "pid_start": "9"}


def test_stale_trial_callback_is_a_storage_argument():
    """RetryDead replaces Optuna's retry callback: RDBStorage takes it and calls it as callback(study, trial)."""
    from optuna.storages import RDBStorage

    assert "heartbeat_stale_trial_callback" in _params(RDBStorage.__init__)
    assert _params(optuna.storages.fail_stale_trials) == ["study"]
