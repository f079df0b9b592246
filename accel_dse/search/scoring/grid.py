"""``grid``: exhaustive search with the vectorised model (no trial loop).

Every point of the space (up to :data:`MAX_GRID_POINTS`) is scored in chunks by
``ModelEvaluator.evaluate_columns``; the best feasible designs (top ``keep`` for one
objective, the whole Pareto set for several, both after the constraints) are written into
the study as COMPLETE trials with the same user attributes as sampled trials, so reports and
summaries read them like any other. The full table (every point's index, objective values,
feasibility and constraint violation) is optionally saved as a ``.npz``. Without a table, a point
whose area breaks a constraint (the area needs no workload: ``perf_model.design_area``) is not
scored, since it cannot be kept: the result is the same, at the cost of the points that can.

With ``workers > 1`` the chunks are scored by that many spawned worker processes (each gets the
space and the evaluator once), at most two chunks a worker in flight, and merged in the chunks'
order: the result and the table are the same as with one process. The workers ignore SIGINT; a
stop in the parent (``on_chunk`` raising, an interrupt) terminates them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import multiprocessing
import os
import signal
import tempfile
from collections import deque
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import numpy as np
import optuna

from accel_dse.exit_cleanup import removed_if_stopped
from accel_dse.search.scoring.evaluator import ModelEvaluator
from accel_dse.search.space.design_space import DesignSpace
from accel_dse.search.space.trial_values import coerce_finite, flat_design, flat_metrics, pareto_mask, relative_excess
from accel_spec.errors import ExportError, SearchError

__all__ = ["GridResult", "grid_search", "add_grid_trials", "MAX_GRID_POINTS"]

#: Largest space the grid sampler enumerates.
MAX_GRID_POINTS = 10_000_000
_CHUNK = 32_768
#: Largest Pareto set written into a study (evenly thinned along the first objective beyond it).
MAX_PARETO_KEPT = 5_000


@dataclasses.dataclass(frozen=True)
class GridResult:
    """What an exhaustive search found.

    Attributes:
        size: Points in the space.
        n_feasible: Points the model can run and that meet every constraint.
        index: Grid indices of the kept designs, best first (single objective) or sorted by
            the first objective (Pareto set).
        values: Objective values of the kept designs, shape ``(kept, objectives)``.
    """

    size: int
    n_feasible: int
    index: np.ndarray
    values: np.ndarray


def grid_search(
    space: DesignSpace,
    evaluator: ModelEvaluator,
    *,
    keep: int = 20,
    table: Path | None = None,
    chunk: int = _CHUNK,
    on_chunk: Callable[[int, int], None] | None = None,
    workers: int = 1,
) -> GridResult:
    """Score every point of ``space`` and keep the best.

    Args:
        space: A space whose every parameter is finite (ranges with steps, pow2, choices).
        evaluator: Vectorised evaluator (``evaluate_columns``).
        keep: Designs kept for a single objective.
        table: Where to save the full table (``.npz``), or ``None``.
        chunk: Designs per model call.
        on_chunk: Called with ``(points done, size)`` after each chunk.
        workers: Processes scoring the chunks (module docstring; 1: this process).

    Raises:
        SearchError: the space has more than :data:`MAX_GRID_POINTS` points.
        ConfigError: a parameter is a continuous range.
    """
    size = space.grid_size()
    if size > MAX_GRID_POINTS:
        raise SearchError(
            f"{space.source} has {size:,} points; the grid sampler enumerates at most {MAX_GRID_POINTS:,} "
            "(use another sampler or narrow the space)"
        )
    k = len(space.objectives)
    signs = np.array([o.sign for o in space.objectives])
    best_index = np.zeros(0, dtype=np.int64)
    best_scores = np.zeros((0, k))
    n_feasible = 0
    tables: dict[str, list[np.ndarray]] = {"feasible": [], "violation": []}
    for o in space.objectives:
        tables[o.name] = []
    # without a table, a design breaking a constraint on its area (known before any workload is scored)
    # is never kept, so it is not scored (``evaluate_columns``' ``skip_broken``)
    skip = () if table is not None else tuple(space.constraints)
    with contextlib.closing(_scored_chunks(space, evaluator, size, chunk, workers, skip)) as scored:
        # (closed, so its workers end, as soon as a stop leaves this loop)
        for start, stop, batch in scored:
            ok = np.asarray(batch.feasible, dtype=bool).copy()  # type: ignore[union-attr]
            metrics = batch.metrics  # type: ignore[union-attr]
            violation = np.zeros(stop - start)
            for c in space.constraints:
                violation += np.maximum(0.0, c.violation(metrics[c.metric]))
            values = np.stack([metrics[o.metric] for o in space.objectives], axis=1)
            ok &= np.all(np.isfinite(values), axis=1) & (violation == 0)
            n_feasible += int(ok.sum())
            if table is not None:
                tables["feasible"].append(np.asarray(batch.feasible, dtype=bool))  # type: ignore[union-attr]
                tables["violation"].append(violation.astype(np.float32))
                for j, o in enumerate(space.objectives):
                    tables[o.name].append(values[:, j])
            idx = np.flatnonzero(ok)
            cand_index = np.concatenate([best_index, start + idx])
            cand_scores = np.concatenate([best_scores, values[idx] * signs])
            if k == 1:
                order = np.argsort(cand_scores[:, 0], kind="stable")[:keep]
            else:
                mask = pareto_mask(cand_scores)
                order = np.flatnonzero(mask)
                order = order[np.lexsort(cand_scores[order].T[::-1])]
            best_index, best_scores = cand_index[order], cand_scores[order]
            if on_chunk is not None:
                on_chunk(stop, size)
    if k > 1 and len(best_index) > MAX_PARETO_KEPT:
        pick = np.unique(np.linspace(0, len(best_index) - 1, MAX_PARETO_KEPT).round().astype(np.int64))
        best_index, best_scores = best_index[pick], best_scores[pick]
    if table is not None:
        _save_table(table, size, tables)
    return GridResult(size=size, n_feasible=n_feasible, index=best_index, values=best_scores * signs)


def _scored_chunks(space: DesignSpace, evaluator: ModelEvaluator, size: int, chunk: int,
                   workers: int, skip: tuple[Any, ...]) -> Generator[tuple[int, int, Any], None, None]:
    """``(start, stop, evaluate_columns(...))`` of every chunk, in order, scored by ``workers`` processes
    (``skip``: ``evaluate_columns``' ``skip_broken``)."""
    bounds = [(start, min(size, start + chunk)) for start in range(0, size, chunk)]
    if workers <= 1 or len(bounds) <= 1:
        for start, stop in bounds:
            yield start, stop, evaluator.evaluate_columns(space.grid_columns(start, stop), skip_broken=skip)
        return
    context = multiprocessing.get_context("spawn")  # a forked JAX runtime can hang: start clean
    pool = context.Pool(min(workers, len(bounds)), initializer=_worker_start, initargs=(space, evaluator, skip))
    try:
        todo = iter(bounds)
        pending = deque((start, stop, pool.apply_async(_worker_chunk, (start, stop)))
                        for start, stop in itertools.islice(todo, 2 * workers))
        while pending:
            start, stop, result = pending.popleft()
            batch = result.get()
            for nxt in itertools.islice(todo, 1):  # keep the workers busy while this chunk is merged
                pending.append((*nxt, pool.apply_async(_worker_chunk, nxt)))
            yield start, stop, batch
        pool.close()
    finally:
        pool.terminate()
        pool.join()


#: A worker's space, evaluator and constraints to skip by (set once by :func:`_worker_start`).
_WORKER: list[Any] = []


def _worker_start(space: DesignSpace, evaluator: ModelEvaluator, skip: tuple[Any, ...]) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when a stop ends the workers
    _WORKER[:] = [space, evaluator, skip]


def _worker_chunk(start: int, stop: int) -> Any:
    space, evaluator, skip = _WORKER
    return evaluator.evaluate_columns(space.grid_columns(start, stop), skip_broken=skip)


def _save_table(path: Path, size: int, tables: dict[str, list[np.ndarray]]) -> None:
    if not path.parent.is_dir():
        raise ExportError(f"directory {str(path.parent)!r} of the grid table does not exist")
    arrays: dict[str, Any] = {"index": np.arange(size, dtype=np.int64)}
    arrays.update({name: np.concatenate(parts) for name, parts in tables.items()})
    # Whole or not at all: a hidden file beside it, renamed onto it; a stop (accel_dse.exit_cleanup) removes it.
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise ExportError(f"cannot write grid table {str(path)!r}: {exc}") from None
    try:
        with removed_if_stopped(tmp), os.fdopen(fd, "wb") as handle:
            np.savez_compressed(handle, **arrays)
            handle.flush()
            os.replace(tmp, path)
    except OSError as exc:
        raise ExportError(f"cannot write grid table {str(path)!r}: {exc}") from None
    finally:
        Path(tmp).unlink(missing_ok=True)


def add_grid_trials(study: optuna.Study, space: DesignSpace, evaluator: ModelEvaluator, result: GridResult) -> int:
    """Write the kept designs into ``study`` (skipping designs already in it); returns how many."""
    seen = {t.user_attrs.get("config_hash") for t in study.get_trials(deepcopy=False)}
    distributions = space.distributions()
    trials = []
    for index in result.index:
        params = space.grid_params(int(index))
        config = space.design(params)
        if config.config_hash in seen:
            continue
        seen.add(config.config_hash)
        ev = evaluator.evaluate(config)
        metrics = {m: coerce_finite(v) for m, v in ev.metrics.items()}
        maybe = [metrics[o.metric] for o in space.objectives]
        values = [v for v in maybe if v is not None]
        if len(values) != len(maybe):
            continue
        user_attrs: dict[str, Any] = {
            "sampler": "grid",
            "config": config.to_dict(),
            "config_hash": config.config_hash,
            "metrics": metrics,
            "workloads": {w: {m: coerce_finite(v) for m, v in d.items()} for w, d in ev.per_workload.items()},
            "status": "ok",
            "source": "grid",
            "grid_index": int(index),
            **flat_design(config.to_dict()),
            **flat_metrics(metrics, space),
        }
        if ev.notes:
            user_attrs["notes"] = ev.notes
        system_attrs: dict[str, Any] = {}
        if space.constraints:
            cv = [c.violation(metrics[c.metric] or 0.0) for c in space.constraints]
            user_attrs["constraint_values"] = cv
            system_attrs["constraints"] = relative_excess(cv, space)
        user_attrs["feasible"] = all(v <= 0 for v in user_attrs.get("constraint_values", ()))
        trials.append(
            optuna.trial.create_trial(
                params={name: params[name] for name in distributions},
                distributions=distributions,
                values=values,
                user_attrs=user_attrs,
                system_attrs=system_attrs,
            )
        )
    study.add_trials(trials)
    return len(trials)

