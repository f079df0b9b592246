"""The sweep objective and its guards: one bad design never stops a sweep.

For each trial the objective records the worker (``host``, ``pid``, ``pid_start``), builds
the design from the sampled parameters, scores it and returns the objective values. Every
way a design can go wrong ends as a FAIL trial (or a constraint violation) with ``status``
and ``reason`` user attributes instead of an exception escaping into the study loop:

=============== ================================================================
``status``      meaning
=============== ================================================================
``ok``          feasible, every constraint met (COMPLETE)
``constraint``  feasible but a constraint is violated: COMPLETE for samplers that
                take ``constraints_func`` (tpe, nsga2, rl), FAIL for the others
``infeasible``  the model says the design cannot run a workload (FAIL)
``invalid``     the sampled fields break an ``ArrayConfig`` rule (FAIL)
``non-finite``  an objective came out NaN, inf or not a number (FAIL)
``error``       the evaluator raised (FAIL; 20 in a row stop the sweep)
``interrupted`` Ctrl-C / SIGTERM during the trial (FAIL, then the run stops)
=============== ================================================================

Other user attributes: ``config`` (the full ``ArrayConfig``), ``config_hash``, ``metrics``
(aggregate), ``workloads`` (workload -> metrics), ``constraint_values`` (Optuna convention:
``<= 0`` is satisfied, one per constraint).
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Protocol

import optuna
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from accel_dse.config import ArrayConfig
from accel_dse.errors import AccelDseError, ConfigError, SearchError
from accel_dse.search._evaluator import Evaluation
from accel_dse.search._interrupt import interrupt_requested, interruptible
from accel_dse.search._space import DesignSpace, Param
from accel_dse.search._study import worker_identity

__all__ = ["Evaluator", "SweepObjective", "TrialFailed", "coerce_finite", "suggest"]

#: Unexpected evaluator errors in a row that stop a sweep (a broken evaluator, not a bad design).
MAX_CONSECUTIVE_ERRORS = 20


class Evaluator(Protocol):
    """What the objective needs from an evaluator (see :class:`ModelEvaluator`)."""

    def evaluate(self, config: ArrayConfig) -> Evaluation:
        """Score one design."""
        ...


class TrialFailed(Exception):
    """A design that failed a guard; the trial ends FAIL and the sweep goes on."""


def coerce_finite(value: object) -> float | None:
    """``value`` as a finite Python float, or ``None`` (NaN, inf, strings, bools, None)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    out = float(value)
    return out if math.isfinite(out) else None


def suggest(trial: optuna.Trial, param: Param) -> Any:
    """Ask ``trial`` for the Optuna value of ``param`` through the public suggest API."""
    dist = param.distribution()
    if isinstance(dist, CategoricalDistribution):
        return trial.suggest_categorical(param.name, dist.choices)
    if isinstance(dist, IntDistribution):
        return trial.suggest_int(param.name, dist.low, dist.high, step=dist.step, log=dist.log)
    if isinstance(dist, FloatDistribution):
        return trial.suggest_float(param.name, dist.low, dist.high, step=dist.step, log=dist.log)
    raise SearchError(f"parameter {param.name!r} has an unsupported distribution {dist!r}")


class SweepObjective:
    """Callable objective for ``study.optimize``.

    Args:
        space: The design space (parameters, objectives, constraints).
        evaluator: Scores an ``ArrayConfig``.
        constraints_complete: Whether a constraint violation is a COMPLETE trial with its
            ``constraint_values`` (samplers with ``constraints_func``) or a FAIL.
    """

    def __init__(self, space: DesignSpace, evaluator: Evaluator, *, constraints_complete: bool) -> None:
        self.space = space
        self.evaluator = evaluator
        self.constraints_complete = constraints_complete
        self._errors_in_a_row = 0
        self._identity = worker_identity()

    def _fail(self, trial: optuna.Trial, status: str, reason: str) -> TrialFailed:
        trial.set_user_attr("status", status)
        trial.set_user_attr("reason", reason)
        return TrialFailed(f"{status}: {reason}")

    def __call__(self, trial: optuna.Trial) -> float | list[float]:
        for key, value in self._identity.items():
            trial.set_user_attr(key, value)
        try:
            if interrupt_requested():
                raise KeyboardInterrupt
            return self._run(trial)
        except KeyboardInterrupt:
            trial.set_user_attr("status", "interrupted")
            trial.set_user_attr("reason", "Ctrl-C or SIGTERM during the trial")
            raise

    def _run(self, trial: optuna.Trial) -> float | list[float]:
        space = self.space
        params = {p.name: suggest(trial, p) for p in space.free_params}
        try:
            config = space.design(params)
        except ConfigError as exc:
            raise self._fail(trial, "invalid", str(exc)) from None
        trial.set_user_attr("config", config.to_dict())
        trial.set_user_attr("config_hash", config.config_hash)
        try:
            with interruptible():
                evaluation = self.evaluator.evaluate(config)
        except AccelDseError as exc:
            raise self._fail(trial, "infeasible", str(exc)) from None
        except Exception as exc:  # noqa: BLE001 - the guard: any evaluator bug fails this trial only
            self._errors_in_a_row += 1
            if self._errors_in_a_row >= MAX_CONSECUTIVE_ERRORS:
                trial.set_user_attr("status", "error")
                trial.set_user_attr("reason", repr(exc))
                raise SearchError(
                    f"the evaluator failed on {self._errors_in_a_row} designs in a row, last with {exc!r}; "
                    "stopping the sweep"
                ) from exc
            raise self._fail(trial, "error", repr(exc)) from None
        self._errors_in_a_row = 0
        metrics = {m: coerce_finite(v) for m, v in evaluation.metrics.items()}
        trial.set_user_attr("metrics", metrics)
        trial.set_user_attr(
            "workloads",
            {w: {m: coerce_finite(v) for m, v in d.items()} for w, d in evaluation.per_workload.items()},
        )
        if not evaluation.feasible:
            raise self._fail(trial, "infeasible", evaluation.reason or "the model marks the design infeasible")
        values = []
        for objective in space.objectives:
            value = metrics.get(objective.metric)
            if value is None:
                raw = evaluation.metrics.get(objective.metric)
                raise self._fail(trial, "non-finite", f"{objective.metric} is {raw!r}, not a finite number")
            values.append(value)
        violations = []
        for constraint in space.constraints:
            value = metrics.get(constraint.metric)
            if value is None:
                raw = evaluation.metrics.get(constraint.metric)
                raise self._fail(trial, "non-finite", f"{constraint.metric} is {raw!r}, not a finite number")
            violations.append(constraint.violation(value))
        if space.constraints:
            trial.set_user_attr("constraint_values", violations)
        broken = [
            f"{c} violated ({c.metric} = {metrics[c.metric]:.4g})"
            for c, v in zip(space.constraints, violations, strict=True)
            if v > 0
        ]
        if broken:
            if not self.constraints_complete:
                raise self._fail(trial, "constraint", "; ".join(broken))
            trial.set_user_attr("status", "constraint")
            trial.set_user_attr("reason", "; ".join(broken))
        else:
            trial.set_user_attr("status", "ok")
        return values[0] if len(values) == 1 else values
