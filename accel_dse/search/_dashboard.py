"""What a study shows in optuna-dashboard (or to ``optuna.load_study``): names, flat values, the feasible best.

* The objectives' names are the study's metric names (``study.metric_names``), so the
  dashboard labels its axes ``edp`` rather than ``Objective 0``.
* Each scored trial carries its decoded design and its main metrics as flat scalar user
  attributes, ``design.<field>`` (``design.rows = 32``, not ``log2_rows = 5``) and
  ``metric.<name>`` (``metric.area_mm2``), plus ``feasible`` (every constraint met), which the
  dashboard's trial table can sort and filter; the nested ``config`` / ``metrics`` attributes stay.
* The study's ``accel_dse.best_feasible`` user attribute holds the numbers of its best trials
  among those that meet every constraint (the best one for one objective, the Pareto set for
  several). optuna-dashboard 0.21 ranks trials by value alone, so its "best trial" can break
  a constraint; Optuna's own ``study.best_trial`` / ``best_trials`` do respect constraints.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from typing import Any

import optuna

from accel_dse.search._space import DesignSpace

__all__ = ["ATTR_BEST_FEASIBLE", "MAIN_METRICS", "flat_design", "flat_metrics", "mark_best", "name_metrics"]

#: Study user attribute: trial numbers of the feasible best (see the module notes).
ATTR_BEST_FEASIBLE = "accel_dse.best_feasible"
#: Metrics copied into ``metric.<name>`` user attributes (with the space's objective and constraint metrics).
MAIN_METRICS = ("latency_s", "energy_pj", "edp", "area_mm2", "power_w", "tops", "tops_per_w", "total_cycles")


def _scalar(value: object) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, (bool, int, str))


def flat_design(config: Mapping[str, Any]) -> dict[str, Any]:
    """``design.<field>`` for each scalar field of an ``ArrayConfig.to_dict()``."""
    return {f"design.{k}": v for k, v in config.items() if _scalar(v)}


def flat_metrics(metrics: Mapping[str, float | None], space: DesignSpace) -> dict[str, float]:
    """``metric.<name>`` for the main metrics and those of the space's objectives and constraints (finite only)."""
    names = dict.fromkeys([*MAIN_METRICS, *(o.metric for o in space.objectives),
                           *(c.metric for c in space.constraints)])
    out = {}
    for name in names:
        value = metrics.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            out[f"metric.{name}"] = float(value)
    return out


def name_metrics(study: optuna.Study, space: DesignSpace) -> None:
    """Set the study's metric names to the objectives' names (once)."""
    names = [o.name for o in space.objectives]
    if study.metric_names != names:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.set_metric_names(names)


def mark_best(study: optuna.Study, space: DesignSpace) -> list[int]:
    """Record the feasible best trials in the study's :data:`ATTR_BEST_FEASIBLE` attribute; returns them."""
    from accel_dse.search._summary import best_trials  # here: _summary -> _grid -> _objective -> this module

    numbers = [t.number for t in best_trials(study, space, top=1)]
    if study.user_attrs.get(ATTR_BEST_FEASIBLE) != numbers:
        study.set_user_attr(ATTR_BEST_FEASIBLE, numbers)
    return numbers
