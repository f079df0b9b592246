"""Running a sweep: check everything, open the study, run the workers, clean up.

Order matters for the bad-input rule (one clear error, the study untouched): the sampler,
the trial budget and the storage URL are checked before anything is opened; the study is
loaded and compared with the space before a trial is added; a storage in a directory that
does not exist is refused before a file is created.

``--jobs J`` starts J worker processes (spawned, so the RL agent's JAX runtime is never
forked) against the same storage; the parent draws the progress from the storage and fails
the trials of a worker that died. Ctrl-C / SIGTERM (see :mod:`accel_dse.search.study.interrupt`): the
running trials end FAIL (``status = "interrupted"``), the parent forwards SIGTERM to its workers,
and :class:`KeyboardInterrupt` reaches the caller (the CLI exits 130).
"""

from __future__ import annotations

import contextlib
import dataclasses
import multiprocessing
import os
import queue as queue_module
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import optuna
from optuna.storages import BaseStorage
from optuna.trial import TrialState

from accel_dse.search.samplers.registry import check_sampler, make_sampler, takes_constraints
from accel_dse.search.scoring.grid import GridResult, add_grid_trials, grid_search
from accel_dse.search.scoring.objective import Evaluator, SweepObjective, TrialFailed
from accel_dse.search.space.design_space import DesignSpace
from accel_dse.search.study.dashboard import mark_best, name_metrics
from accel_dse.search.study.interrupt import deferred_interrupts, interrupt_requested, interruptible, resume_message
from accel_dse.search.study.loop import run_trials
from accel_dse.search.study.owner import fail_dead_trials, worker_identity
from accel_dse.search.study.progress import Progress
from accel_dse.search.study.storage import StorageSpec, check_location, open_storage, parse_storage
from accel_dse.search.study.study import budget_used, check_study_name, open_study
from accel_dse.search.study.summary import summary_dict
from accel_spec.errors import AccelDseError, SearchError

__all__ = ["SweepConfig", "SweepResult", "run_sweep", "validate_sweep", "max_jobs", "MAX_SEED", "MAX_HEARTBEAT_S"]

#: Largest ``--seed``: worker ``i`` seeds its sampler with ``seed + i``, which numpy needs below 2**32.
MAX_SEED = 2**32 - 1
#: Largest ``--heartbeat`` period, s.
MAX_HEARTBEAT_S = 3600
#: ``--jobs`` may be at most this many times the CPU cores.
JOBS_PER_CORE = 4


def max_jobs() -> int:
    """Largest ``--jobs``: :data:`JOBS_PER_CORE` x the CPU cores (more only thrash memory and CPU)."""
    return JOBS_PER_CORE * (os.cpu_count() or 1)


@dataclasses.dataclass(frozen=True)
class SweepConfig:
    """Everything one sweep run needs.

    Attributes:
        space: The design space.
        evaluator: Scores designs (``ModelEvaluator``; picklable when ``jobs > 1``).
        storage: Storage URL (see :mod:`accel_dse.search.study.storage`).
        study_name: Study to create or continue.
        sampler: One of ``SAMPLERS``.
        n_trials: Trials the whole study should hold (finished or running; a retried trial once).
        timeout: Wall-clock limit of this run, s (``None``: none).
        jobs: Worker processes (the grid sampler: processes scoring its chunks, merged by this one).
        seed: Sampler seed (worker ``i`` gets ``seed + i``); ``None`` for fresh randomness.
        heartbeat_interval: RDB heartbeat period, s.
        grace_period: Seconds without heartbeat before a trial counts as dead (``None``: 2 x interval).
        grid_keep: Designs the grid sampler writes into the study for a single objective.
        grid_table: Where the grid sampler saves its full table (``.npz``), or ``None``.
    """

    space: DesignSpace
    evaluator: Any
    storage: str
    study_name: str
    sampler: str = "bo"
    n_trials: int = 200
    timeout: float | None = None
    jobs: int = 1
    seed: int | None = None
    heartbeat_interval: int = 10
    grace_period: int | None = None
    grid_keep: int = 20
    grid_table: Path | None = None


@dataclasses.dataclass
class SweepResult:
    """What a run did.

    Attributes:
        study: The study (loaded from the storage).
        storage: The checked storage URL.
        space: The space searched.
        ran: Trials this run added (grid: designs written into the study).
        recovered: Trials of dead workers failed (and queued again) when the run started.
        grid: The exhaustive search's result (``grid`` sampler only).
    """

    study: optuna.Study
    storage: StorageSpec
    space: DesignSpace
    ran: int
    recovered: list[int]
    grid: GridResult | None = None

    def summary(self, *, top: int = 5) -> dict[str, Any]:
        """The ``--json`` summary of the study (see :func:`summary_dict`)."""
        return summary_dict(self.study, self.space, storage=self.storage.display, top=top)


def _positive_int(name: str, value: object, high: int | None = None, why: str = "") -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SearchError(f"{name} must be a positive integer, not {value!r}")
    if high is not None and value > high:
        raise SearchError(f"{name} must be at most {high}{why}, not {value}")


def validate_sweep(config: SweepConfig) -> StorageSpec:
    """Check a sweep's settings without touching any storage; returns the parsed storage URL."""
    check_study_name(config.study_name)
    check_sampler(config.sampler, config.space)
    _positive_int("--trials", config.n_trials)
    _positive_int("--jobs", config.jobs, max_jobs(), f" ({JOBS_PER_CORE} x the {os.cpu_count() or 1} CPU cores)")
    _positive_int("--heartbeat", config.heartbeat_interval, MAX_HEARTBEAT_S, " seconds")
    seed = config.seed
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not
                             0 <= seed <= MAX_SEED - (config.jobs - 1)):
        raise SearchError(f"--seed must be an integer in [0, {MAX_SEED - (config.jobs - 1)}] (worker i uses seed + i, "
                          f"numpy seeds are below 2**32), not {seed!r}")
    _positive_int("--grid-keep", config.grid_keep)
    if config.timeout is not None and (
        isinstance(config.timeout, bool) or not isinstance(config.timeout, (int, float)) or not config.timeout > 0
    ):
        raise SearchError(f"--timeout must be a positive number of seconds, not {config.timeout!r}")
    spec = parse_storage(config.storage)
    if config.jobs > 1 and not spec.multi_process and config.sampler != "grid":  # the grid's parent writes alone
        raise SearchError(f"--jobs {config.jobs} needs a storage several processes can share, not {spec.display!r}")
    return spec


@contextlib.contextmanager
def _quiet_optuna() -> Iterator[None]:
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            warnings.simplefilter("ignore", FutureWarning)
            yield
    finally:
        optuna.logging.set_verbosity(verbosity)


class _Budget:
    """Stop condition of a worker: the study holds ``n_trials`` counted trials, or Ctrl-C / SIGTERM."""

    def __init__(self, n_trials: int) -> None:
        self.n_trials = n_trials

    def __call__(self, study: optuna.Study) -> bool:
        return interrupt_requested() or budget_used(study) >= self.n_trials


@dataclasses.dataclass(frozen=True)
class _WorkerJob:
    space: DesignSpace
    evaluator: Any
    storage: str
    study_name: str
    sampler: str
    seed: int | None
    n_trials: int
    timeout: float | None
    heartbeat_interval: int
    grace_period: int | None


def _work(job: _WorkerJob, storage: BaseStorage | None = None, progress: Progress | None = None) -> int:
    """Run trials until the study's budget or the timeout is reached; returns trials run here."""
    spec = parse_storage(job.storage)
    if storage is None:
        storage = open_storage(spec, heartbeat_interval=job.heartbeat_interval, grace_period=job.grace_period)
    with interruptible():  # nothing written meanwhile (a GP sampler imports for seconds): a stop ends it at once
        sampler = make_sampler(job.sampler, job.space, seed=job.seed)
    study = open_study(storage, job.study_name, job.space, where=spec.display, sampler=sampler, create=False)
    if budget_used(study) >= job.n_trials:
        return 0
    objective = SweepObjective(job.space, job.evaluator, constraints_complete=takes_constraints(job.sampler),
                               sampler=job.sampler)

    def drawn(study: optuna.Study) -> None:
        if progress is not None:
            progress.update(study)

    ran = run_trials(study, objective, catch=(TrialFailed,), stop=_Budget(job.n_trials), after_trial=drawn,
                     timeout=job.timeout, owner={**worker_identity(), "sampler": job.sampler})
    if interrupt_requested():
        raise KeyboardInterrupt
    return ran


def _worker_entry(job: _WorkerJob, results: Any) -> None:
    """Body of a ``--jobs`` worker process: report ``(pid, outcome, message)`` on ``results``."""
    try:
        with _quiet_optuna(), deferred_interrupts(message=""):  # the parent reports the stop
            ran = _work(job)
        results.put((os.getpid(), "ok", str(ran)))
    except KeyboardInterrupt:
        results.put((os.getpid(), "interrupted", ""))
    except AccelDseError as exc:
        results.put((os.getpid(), "error", str(exc)))


def _fail_own_running(study: optuna.Study, pids: set[int]) -> None:
    """Fail RUNNING trials left by these (interrupted) processes, without queueing them again."""
    storage = study._storage
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if trial.user_attrs.get("pid") in pids:
            with contextlib.suppress(optuna.exceptions.UpdateFinishedTrialError):
                storage.set_trial_user_attr(trial._trial_id, "status", "interrupted")
                storage.set_trial_state_values(trial._trial_id, state=TrialState.FAIL)


#: Seconds the workers get, all together, to finish their storage write after SIGTERM before SIGKILL.
STOP_GRACE_S = 5.0


def _stop_workers(procs: list[Any]) -> None:
    """SIGTERM every worker, wait :data:`STOP_GRACE_S` in all (not per worker), then SIGKILL the rest."""
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
    deadline = time.monotonic() + STOP_GRACE_S
    for proc in procs:
        proc.join(timeout=max(0.0, deadline - time.monotonic()))
    for proc in procs:
        if proc.is_alive():
            proc.kill()
    for proc in procs:
        proc.join()


def _run_workers(config: SweepConfig, job: _WorkerJob, study: optuna.Study, progress: Progress) -> None:
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    procs = []
    for i in range(config.jobs):
        seed = None if config.seed is None else config.seed + i
        procs.append(context.Process(target=_worker_entry, args=(dataclasses.replace(job, seed=seed), results)))
    handled: set[int] = set()
    started: list[Any] = []
    try:
        for proc in procs:
            if interrupt_requested():  # SIGTERM while the workers start: start no more
                raise KeyboardInterrupt
            proc.start()
            started.append(proc)
        next_draw = 0.0
        while any(proc.is_alive() for proc in procs):
            time.sleep(0.05)
            if interrupt_requested():
                raise KeyboardInterrupt
            if time.monotonic() < next_draw:
                continue
            next_draw = time.monotonic() + 0.5
            progress.update(study)
            for proc in procs:
                if proc.exitcode is not None and proc.exitcode != 0 and proc.pid not in handled:
                    handled.add(proc.pid or 0)
                    fail_dead_trials(study)
    except KeyboardInterrupt:
        _stop_workers(started)
        _fail_own_running(study, {proc.pid for proc in started if proc.pid} | {os.getpid()})
        raise
    for proc in procs:
        proc.join()
    outcomes = []
    with contextlib.suppress(queue_module.Empty):
        while True:
            outcomes.append(results.get(timeout=0.1))
    fail_dead_trials(study)
    errors = [message for _, outcome, message in outcomes if outcome == "error"]
    if errors:
        raise SearchError(f"a worker stopped: {errors[0]}")
    if any(outcome == "interrupted" for _, outcome, _ in outcomes):
        raise KeyboardInterrupt


def run_sweep(config: SweepConfig, *, progress: TextIO | None = None) -> SweepResult:
    """Run (or continue) a sweep.

    Args:
        config: What to search and where to store it.
        progress: Stream for the progress line (``None``: silent).

    Returns:
        The study and what this run did.

    Raises:
        AccelDseError: bad settings, unreachable storage, incompatible existing study.
        KeyboardInterrupt: Ctrl-C or SIGTERM (running trials are marked FAIL first).
    """
    spec = validate_sweep(config)
    with _quiet_optuna(), deferred_interrupts(resume_message(spec.display)):
        check_location(spec)
        with interruptible():  # its modules import for seconds on a loaded machine, writing nothing
            _import_storage_modules(spec.kind)
        storage = open_storage(spec, heartbeat_interval=config.heartbeat_interval, grace_period=config.grace_period)
        space = config.space
        study = open_study(storage, config.study_name, space, where=spec.display)
        recovered = fail_dead_trials(study)
        before = len(study.get_trials(deepcopy=False))
        if config.sampler == "grid":
            grid = _run_grid(config, study, progress)
            _mark(study, space)
            return SweepResult(study, spec, space, len(study.get_trials(deepcopy=False)) - before, recovered, grid)
        job = _WorkerJob(
            space=space, evaluator=config.evaluator, storage=config.storage, study_name=config.study_name,
            sampler=config.sampler, seed=config.seed, n_trials=config.n_trials, timeout=config.timeout,
            heartbeat_interval=config.heartbeat_interval, grace_period=config.grace_period,
        )
        bar = Progress(progress, space, config.n_trials)
        try:
            if config.jobs == 1:
                _work(job, storage=storage, progress=bar)
            else:
                _run_workers(config, job, study, bar)
        except KeyboardInterrupt:
            _fail_own_running(study, {os.getpid()})
            bar.close()
            raise
        _mark(study, space)
        bar.close(study)
        ran = len(study.get_trials(deepcopy=False)) - before
        return SweepResult(study, spec, space, ran, recovered)


def _import_storage_modules(kind: str) -> None:
    """Import what an SQL storage needs before it is opened (a stop may cut an import, not a write)."""
    if kind in ("sqlite", "rdb"):
        import alembic.command  # noqa: F401
        import alembic.config  # noqa: F401
        import alembic.migration  # noqa: F401
        import alembic.script  # noqa: F401
        import optuna.storages._rdb.models  # noqa: F401
        import sqlalchemy.orm  # noqa: F401


def _mark(study: optuna.Study, space: DesignSpace) -> None:
    """What optuna-dashboard shows: the objectives' names, the feasible best (see :mod:`._dashboard`)."""
    name_metrics(study, space)
    mark_best(study, space)


def _run_grid(config: SweepConfig, study: optuna.Study, progress: TextIO | None) -> GridResult:
    space = config.space
    evaluator: Evaluator = config.evaluator
    last = [0.0]

    def on_chunk(done: int, size: int) -> None:
        if interrupt_requested():
            raise KeyboardInterrupt
        if progress is None:
            return
        now = time.monotonic()
        if done == size or now - last[0] > 1.0:
            last[0] = now
            end = "\n" if done == size else ""
            progress.write(f"\rgrid: {done:,}/{size:,} designs scored{end}")
            progress.flush()

    with interruptible():  # nothing is written to the study while the grid is scored: a stop ends it at once
        result = grid_search(space, config.evaluator, keep=config.grid_keep, table=config.grid_table,
                             on_chunk=on_chunk, workers=config.jobs)
    add_grid_trials(study, space, evaluator, result)  # type: ignore[arg-type]
    return result

