"""Scoring a pod space's trials: the chip in its system on the LLM job (``perf_model.pod``).

:class:`PodEvaluator` takes the trial's chip (an ``ArrayConfig``) and its ``system.*`` and
``split.*`` values, builds the :class:`~accel_spec.pod_config.SystemConfig` and the
:class:`~accel_spec.pod_config.Split` (or searches the split when the space has no
``[split]``) and returns the system's metrics (:data:`SYSTEM_METRIC_UNITS`) plus the chip's
``area_mm2`` (cores times one array's). A system or split that cannot be built, a split that does
not fit the topology or HBM: infeasible with the reason. The single-chip op times of a chip are
kept for the next trials with the same chip (:class:`perf_model.pod.OpCosts`, the last
:data:`CACHED_CHIPS` chips).
"""

from __future__ import annotations

import importlib
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from accel_dse.search.scoring.evaluator import Evaluation
from accel_dse.search.space.design_space import PodTarget
from accel_dse.search.space.metrics import SYSTEM_METRIC_UNITS
from accel_dse.search.space.pod_space import build_split, build_system
from accel_spec.config import ArrayConfig
from accel_spec.errors import ConfigError

__all__ = ["PodEvaluator", "CACHED_CHIPS"]

#: Chips whose op times a worker keeps.
CACHED_CHIPS = 16


class PodEvaluator:
    """Scores chips in a system on an LLM job (picklable: the model is imported by name)."""

    def __init__(self, target: PodTarget, *, model: str = "perf_model.pod") -> None:
        from accel_dse.pod_files import llm_job_from_table

        self.target = target
        self.job = llm_job_from_table(dict(target.llm))
        self.model = model
        self._module: Any = None
        self._costs: OrderedDict[tuple[str, str], Any] = OrderedDict()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_module"] = None
        state["_costs"] = OrderedDict()
        return state

    def _pod(self) -> Any:
        if self._module is None:
            self._module = importlib.import_module(self.model)
        return self._module

    def _op_costs(self, system: Any) -> Any:
        port, l2 = self._pod().l2_chips(system)  # the cores' design, and the shared cache's (or None)
        key: tuple[str, str] = (port.config_hash, l2.config_hash if l2 is not None else "")
        if key in self._costs:
            self._costs.move_to_end(key)
        else:
            self._costs[key] = self._pod().OpCosts.for_system(system)
            while len(self._costs) > CACHED_CHIPS:
                self._costs.popitem(last=False)
        return self._costs[key]

    def _infeasible(self, reason: str) -> Evaluation:
        metrics = dict.fromkeys((*SYSTEM_METRIC_UNITS, "area_mm2"), 0.0)
        return Evaluation(feasible=False, reason=reason, metrics=metrics, per_workload={})

    def evaluate(self, config: ArrayConfig, choice: Mapping[str, Any] | None = None) -> Evaluation:
        """Score the chip ``config`` with the trial's ``system.*`` / ``split.*`` values ``choice``."""
        pod = self._pod()
        choice = choice or {}
        try:
            system = build_system(config, self.target, choice)
        except ConfigError as exc:
            return self._infeasible(f"system: {exc}")
        split = build_split(system, self.target, choice)
        if isinstance(split, str):
            return self._infeasible(f"split: {split}")
        costs = self._op_costs(system)
        if split is None:
            ranked = pod.rank_splits(system, self.job, costs=costs)
            result = ranked[0] if ranked else None
            if result is None:
                return self._infeasible(f"no split of {system.chips} chips fits {self.job.shape.name}")
        else:
            why = pod.split_problem(system, self.job, split)
            if why:
                return self._infeasible(f"split {split.label()}: {why}")
            result = pod.evaluate_split(system, self.job, split, costs)
        metrics = result.flat_metrics()
        metrics["area_mm2"] = costs.area_mm2 * system.cores if result.ok else 0.0
        details = {"split": result.split.to_dict(), "chips": system.chips, "job": self.job.name}
        return Evaluation(feasible=result.ok, reason="" if result.ok else result.reason, metrics=metrics,
                          per_workload={self.job.name: dict(metrics)}, details=details)
