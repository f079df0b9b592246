"""A worker's trial loop: ask, evaluate, tell, with one heartbeat thread for the whole worker.

``study.optimize`` starts and joins a heartbeat thread for every trial and looks for stale
trials before every trial. A model-only trial takes a few milliseconds, so on SQLite that
cost about a fifth of a sweep's time (42 trials/s instead of 54, measured with
``bench/search_efficiency.py``'s throughput run). This loop keeps what the heartbeat is for:

* a running trial's heartbeat is recorded when it starts and then every heartbeat interval by
  one thread that lives as long as the worker (Optuna's rows, so any worker sees it);
* stale trials (a heartbeat older than the grace period: a killed worker, another machine's
  too) are failed and queued again (the storage's stale-trial callback) when the loop starts
  and then at most once per heartbeat interval: a stale trial waits at most one interval
  longer than under ``study.optimize``, against a grace period of twice the interval.

On storages without a heartbeat (journal, in-memory) there is no thread and no check. Every
trial is created with its owner (:func:`~accel_dse.search.study.owner.ask_owned`), so a trial killed
before its first heartbeat is still recognised as dead.
"""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import optuna
from optuna.storages import BaseStorage
from optuna.trial import TrialState

from accel_dse.search.study.owner import ask_owned, worker_identity

__all__ = ["WorkerHeartbeat", "run_trials"]


def _heartbeat_interval(storage: BaseStorage) -> int | None:
    from optuna.storages._heartbeat import BaseHeartbeat, is_heartbeat_enabled

    if not isinstance(storage, BaseHeartbeat) or not is_heartbeat_enabled(storage):
        return None
    return storage.get_heartbeat_interval()


class WorkerHeartbeat:
    """Records the heartbeat of the worker's running trial: at its start, then every interval.

    Args:
        storage: The study's storage; without a heartbeat (journal, memory) this does nothing.
    """

    def __init__(self, storage: BaseStorage) -> None:
        self._storage: Any = storage
        self.interval = _heartbeat_interval(storage)
        self._trial_id: int | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if self.interval is not None:
            self._thread = threading.Thread(target=self._run, name="accel-dse-heartbeat", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        interval = float(self.interval or 1)
        while not self._stop.wait(interval):
            with self._lock:
                trial_id = self._trial_id
                if trial_id is not None:
                    self._storage.record_heartbeat(trial_id)

    def start(self, trial_id: int) -> None:
        """Trial ``trial_id`` is now the worker's running trial: record its first heartbeat."""
        if self.interval is None:
            return
        with self._lock:
            self._trial_id = trial_id
            self._storage.record_heartbeat(trial_id)

    def finish(self) -> None:
        """The running trial ended: no more heartbeats for it."""
        with self._lock:
            self._trial_id = None

    def close(self) -> None:
        """Stop the thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


def _fail_stale(study: optuna.Study) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)


def _tell(study: optuna.Study, trial: optuna.Trial, values: float | list[float] | None, state: TrialState) -> None:
    """``study.tell`` without reading the finished trial back (the loop does not use it)."""
    try:
        from optuna.study._tell import _tell_with_warning
    except ImportError:  # pragma: no cover - another Optuna layout: the public call
        study.tell(trial, values, state=state, skip_if_finished=True)
        return
    _tell_with_warning(study, trial, values, state, skip_if_finished=True, suppress_warning=True)


def run_trials(
    study: optuna.Study,
    objective: Callable[[optuna.Trial], float | list[float]],
    *,
    catch: tuple[type[Exception], ...],
    stop: Callable[[optuna.Study], bool],
    after_trial: Callable[[optuna.Study], None] | None = None,
    timeout: float | None = None,
    owner: Mapping[str, Any] | None = None,
) -> int:
    """Run trials of ``objective`` until ``stop(study)`` is true after a trial, or ``timeout`` s pass.

    An exception in ``catch`` fails the trial and the loop goes on; any other exception (and
    ``KeyboardInterrupt``) fails the trial and is raised. ``stop`` is also asked before the
    first trial. Each trial is created with its owner (``owner``, default this process's
    :func:`~accel_dse.search.study.owner.worker_identity`) and gets its first heartbeat before the
    sampler draws its design. Returns the trials run.
    """
    owner = dict(owner) if owner is not None else worker_identity()
    start = time.monotonic()
    heartbeat = WorkerHeartbeat(study._storage)
    next_stale_check = start
    ran = 0
    try:
        while not stop(study):
            now = time.monotonic()
            if timeout is not None and now - start >= timeout:
                break
            if heartbeat.interval is not None and now >= next_stale_check:
                _fail_stale(study)
                next_stale_check = now + heartbeat.interval
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # "heartbeat ... used with Study.optimize": see above
                trial = ask_owned(study, owner, on_created=heartbeat.start)
            values: float | list[float] | None = None
            error: BaseException | None = None
            try:
                values = objective(trial)
            except catch:
                pass
            except (Exception, KeyboardInterrupt) as exc:
                error = exc
            finally:
                heartbeat.finish()
            state = TrialState.COMPLETE if values is not None else TrialState.FAIL
            _tell(study, trial, values, state)
            ran += 1
            if error is not None:
                raise error
            if after_trial is not None:
                after_trial(study)
    finally:
        heartbeat.close()
        study._storage.remove_session()
    return ran
