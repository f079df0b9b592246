"""The best designs of a study: top designs (one objective) or the Pareto set (several).

Only COMPLETE trials whose values are finite and whose recorded ``constraint_values`` are all
``<= 0`` are candidates, whatever sampler made them; one design found twice counts once.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import optuna
from optuna.trial import FrozenTrial, TrialState

from accel_dse.search.space.design_space import DesignSpace
from accel_dse.search.space.metrics import unit_of
from accel_dse.search.space.trial_values import pareto_mask
from accel_spec.config import memory_label

__all__ = ["feasible_trials", "best_trials", "free_values", "summary_dict", "summary_table"]


def _is_feasible(trial: FrozenTrial) -> bool:
    if trial.state != TrialState.COMPLETE or trial.values is None:
        return False
    if not all(isinstance(v, float) and math.isfinite(v) for v in trial.values):
        return False
    limits = trial.user_attrs.get("constraint_values") or ()
    if not isinstance(limits, (list, tuple)):  # another tool's attribute: not a constraint record
        return False
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) and v <= 0 for v in limits)


def feasible_trials(study: optuna.Study) -> list[FrozenTrial]:
    """COMPLETE trials that meet every constraint, one per design (the earliest)."""
    out, seen = [], set()
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        key = str(t.user_attrs.get("config_hash", f"trial{t.number}"))
        if _is_feasible(t) and key not in seen:
            seen.add(key)
            out.append(t)
    return out


def best_trials(study: optuna.Study, space: DesignSpace, *, top: int = 5) -> list[FrozenTrial]:
    """The ``top`` best feasible trials (one objective) or the whole Pareto set (several)."""
    trials = feasible_trials(study)
    if not trials:
        return []
    signs = np.array([o.sign for o in space.objectives])
    scores = np.array([t.values for t in trials], dtype=float) * signs
    if len(space.objectives) == 1:
        order = np.argsort(scores[:, 0], kind="stable")[:top]
        return [trials[i] for i in order]
    front = np.flatnonzero(pareto_mask(scores))
    front = front[np.lexsort(scores[front].T[::-1])]
    return [trials[i] for i in front]


def free_values(space: DesignSpace, trial: FrozenTrial) -> dict[str, Any]:
    """The decoded values of ``space``'s free fields in ``trial``, by field name."""
    config = trial.user_attrs.get("config")
    if config is not None:
        config = {**config, **trial.user_attrs.get("pod_choice", {})}  # a pod space's system.* and split.*
        if all(p.field in config for p in space.free_params):
            return {p.field: config[p.field] for p in space.free_params}
    return {p.field: p.decode(trial.params[p.name]) for p in space.free_params if p.name in trial.params}


def summary_dict(study: optuna.Study, space: DesignSpace, *, storage: str, top: int = 5) -> dict[str, Any]:
    """The ``--json`` summary.

    Returns:
        ``{"study", "storage", "n_complete", "n_fail", "best": [{"trial", "params", "values",
        "config_hash", "metrics", "design", "notes"}, ...]}`` where ``params`` are the free fields'
        values, ``values`` maps objective name -> value, ``design`` is the full ``ArrayConfig`` and
        ``notes`` what the design leaves to the host (``""``, or its convs run as the host's im2col
        GEMM per workload: how many and why).
    """
    states = [t.state for t in study.get_trials(deepcopy=False)]
    best = []
    for t in best_trials(study, space, top=top):
        best.append({
            "trial": t.number,
            "params": free_values(space, t),
            "values": {o.name: float(v) for o, v in zip(space.objectives, t.values, strict=True)},
            "config_hash": t.user_attrs.get("config_hash"),
            "metrics": {k: v for k, v in (t.user_attrs.get("metrics") or {}).items() if v is not None},
            "design": t.user_attrs.get("config"),
            "notes": t.user_attrs.get("notes", ""),
        })
    return {
        "study": study.study_name,
        "storage": storage,
        "n_complete": states.count(TrialState.COMPLETE),
        "n_fail": states.count(TrialState.FAIL),
        "best": best,
    }


def summary_table(summary: dict[str, Any], space: DesignSpace, *, limit: int = 20) -> tuple[list[str], list[list[Any]]]:
    """Headers and rows of the human summary table (at most ``limit`` rows)."""
    free = [p.field for p in space.free_params]
    extra = [c.metric for c in space.constraints if c.metric not in {o.metric for o in space.objectives}]
    extra = list(dict.fromkeys(extra))
    dram = "dram" not in free  # the memory part is a column even when the space fixes it
    headers = ["trial", *free, *(["dram"] if dram else [])]
    headers += [f"{o.name} [{unit_of(o.metric)}]" for o in space.objectives]
    headers += [f"{m} [{unit_of(m)}]" for m in extra]
    headers.append("config_hash")
    rows = []
    for entry in summary["best"][:limit]:
        row: list[Any] = [entry["trial"]]
        row += [entry["params"].get(f, "") for f in free]
        if dram:
            design = entry.get("design") or {}
            row.append(memory_label(str(design["dram"])) if "dram" in design else "")
        row += [entry["values"][o.name] for o in space.objectives]
        row += [entry["metrics"].get(m, "") for m in extra]
        row.append(entry["config_hash"] or "")
        rows.append(row)
    return headers, rows
