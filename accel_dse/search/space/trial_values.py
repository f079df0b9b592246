"""What a trial carries and how trials compare: the flat values, the constraints' penalty and the Pareto set.

The pieces that the samplers, the objective, the grid, the study's dashboard attributes and its summary
all use, kept below them so that none of those needs another:

* :func:`flat_design` and :func:`flat_metrics`: a design's and its metrics' flat scalar user attributes
  (``design.<field>``, ``metric.<name>``, see :mod:`accel_dse.search.study.dashboard`);
* :func:`coerce_finite`: a metric as a finite float or ``None``;
* :func:`relative_excess`: constraint values relative to their bounds, the penalty the samplers share;
* :func:`pareto_mask`: the rows no other row dominates.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from accel_dse.search.space.design_space import DesignSpace

__all__ = ["MAIN_METRICS", "coerce_finite", "flat_design", "flat_metrics", "pareto_mask", "relative_excess"]

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


def coerce_finite(value: object) -> float | None:
    """``value`` as a finite Python float, or ``None`` (NaN, inf, strings, bools, None)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    out = float(value)
    return out if math.isfinite(out) else None


def relative_excess(values: Sequence[float], space: DesignSpace) -> list[float]:
    """Constraint values (``<= 0`` met, the excess otherwise) divided by each bound's magnitude."""
    return [float(v) / abs(c.bound) if c.bound != 0 else float(v)
            for v, c in zip(values, space.constraints, strict=False)]


def pareto_mask(points: np.ndarray) -> np.ndarray:
    """Which rows of ``points`` no other row dominates (all objectives minimised; ties kept)."""
    n = len(points)
    if n == 0:
        return np.zeros(0, dtype=bool)
    order = np.lexsort(points.T[::-1])
    front: list[int] = []
    front_pts = np.empty((0, points.shape[1]))
    for i in order:
        p = points[i]
        if front:
            dominated = np.any(np.all(front_pts <= p, axis=1) & np.any(front_pts < p, axis=1))
            if dominated:
                continue
        front.append(int(i))
        front_pts = np.vstack([front_pts, p])
    mask = np.zeros(n, dtype=bool)
    mask[front] = True
    return mask
