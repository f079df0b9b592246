"""The sweep objective and its guards: one bad design never stops a sweep.

For each trial the objective records the worker (``host``, ``pid``, ``pid_start``) and the
``sampler``, builds the design from the sampled parameters, scores it and returns the
objective values. Every way a design can go wrong ends as a FAIL trial (or a constraint
violation) with ``status`` and ``reason`` user attributes instead of an exception escaping
into the study loop:

=============== ================================================================
``status``      meaning
=============== ================================================================
``ok``          feasible, every constraint met (COMPLETE)
``constraint``  feasible but a constraint is violated: COMPLETE with its true
                values (every sampler of the sweep learns from it)
``infeasible``  the model says the design cannot run a workload (FAIL)
``overflow``    a violated hard constraint: a workload's reduction can overflow the
                accumulators (``acc_bits`` too small for its K; FAIL, never scored)
``invalid``     the sampled fields break an ``ArrayConfig`` rule (FAIL)
``non-finite``  an objective came out NaN, inf or not a number (FAIL)
``error``       the evaluator raised (FAIL; 20 in a row stop the sweep)
``interrupted`` Ctrl-C / SIGTERM during the trial (FAIL, then the run stops)
=============== ================================================================

A pod space's trials also record ``pod_choice`` (their ``system.*`` and ``split.*`` values) and
``pod`` (the split used, searched or chosen, and the chips). Other user attributes: ``config``
(the full ``ArrayConfig``), ``config_hash``, ``metrics``
(aggregate), ``workloads`` (workload -> metrics), ``constraint_values`` (Optuna convention:
``<= 0`` is satisfied, one per constraint, in the metric's unit), and flat scalars for
optuna-dashboard's table (:mod:`accel_dse.search.study.dashboard`): ``design.<field>``,
``metric.<name>``, ``feasible``. The system attribute
``constraints`` holds the same values relative to each bound (what the samplers see).
Storage writes are grouped (see :mod:`accel_dse.search.study.writes`): the worker attributes
before the evaluation, the parameters together, the rest when the trial ends.
"""

from __future__ import annotations

from typing import Any, Protocol

import optuna
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from accel_dse.search.scoring.evaluator import Evaluation
from accel_dse.search.space.design_space import DesignSpace, Param
from accel_dse.search.space.trial_values import coerce_finite, flat_design, flat_metrics, relative_excess
from accel_dse.search.study.interrupt import interrupt_requested, interruptible
from accel_dse.search.study.owner import worker_identity
from accel_dse.search.study.writes import write_attrs, write_params
from accel_spec.config import ArrayConfig
from accel_spec.errors import AccelDseError, ConfigError, SearchError

__all__ = ["Evaluator", "SweepObjective", "TrialFailed", "suggest"]

#: Unexpected evaluator errors in a row that stop a sweep (a broken evaluator, not a bad design).
MAX_CONSECUTIVE_ERRORS = 20
#: Optuna's system attribute for a trial's constraint values (``<= 0``: met).
CONSTRAINTS_KEY = "constraints"
#: What a trial stopped by Ctrl-C or SIGTERM records.
_INTERRUPTED = {"status": "interrupted", "reason": "Ctrl-C or SIGTERM during the trial"}


def _record_interrupted(trial: optuna.Trial, attrs: dict[str, Any], system: dict[str, Any]) -> None:
    """Record ``trial`` as FAIL ``interrupted`` with what it knew (run by the sweep's signal watcher)."""
    from optuna.trial import TrialState

    write_attrs(trial, {**attrs, **_INTERRUPTED}, dict(system))
    trial.storage.set_trial_state_values(trial._trial_id, state=TrialState.FAIL)


class Evaluator(Protocol):
    """What the objective needs from an evaluator (see :class:`ModelEvaluator`)."""

    def evaluate(self, config: ArrayConfig) -> Evaluation:
        """Score one design."""
        ...


class TrialFailed(Exception):
    """A design that failed a guard; the trial ends FAIL and the sweep goes on."""


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
            ``constraint_values`` (every sampler of the sweep) or a FAIL.
        sampler: Name of the sampler, recorded in each trial's ``sampler`` user attribute.
    """

    def __init__(
        self, space: DesignSpace, evaluator: Evaluator, *, constraints_complete: bool = True, sampler: str = ""
    ) -> None:
        self.space = space
        self.evaluator = evaluator
        self.constraints_complete = constraints_complete
        self.sampler = sampler
        self._errors_in_a_row = 0
        self._identity = worker_identity()

    def _fail(self, attrs: dict[str, Any], status: str, reason: str) -> TrialFailed:
        attrs["status"] = status
        attrs["reason"] = reason
        attrs["feasible"] = False
        return TrialFailed(f"{status}: {reason}")

    def __call__(self, trial: optuna.Trial) -> float | list[float]:
        # The worker and sampler, unless the trial was created with them (the sweep's loop does:
        # accel_dse.search.study.owner), go with the drawn design in one transaction.
        try:  # the whole design, drawn at once by the sweep's samplers (a GP's draw may take seconds: a stop cuts it)
            with interruptible(on_stop=lambda: _record_interrupted(trial, {}, {})):
                drawn = trial.relative_params
        except KeyboardInterrupt:  # a stop was pending: an ordinary raise, the trial ends FAIL
            write_attrs(trial, dict(_INTERRUPTED))
            raise
        have = trial.user_attrs
        owner = {k: v for k, v in {**self._identity, "sampler": self.sampler}.items() if have.get(k) != v}
        write_params(trial, {p.name: drawn[p.name] for p in self.space.free_params if p.name in drawn},
                     self.space.distributions(), user=owner)
        attrs: dict[str, Any] = {}
        system: dict[str, Any] = {}
        try:
            if interrupt_requested():
                raise KeyboardInterrupt
            return self._run(trial, attrs, system)
        except KeyboardInterrupt:
            attrs.update(_INTERRUPTED)
            raise
        finally:
            write_attrs(trial, attrs, system)

    def _run(self, trial: optuna.Trial, attrs: dict[str, Any], system: dict[str, Any]) -> float | list[float]:
        space = self.space
        free = space.free_params
        params = {p.name: suggest(trial, p) for p in free}
        try:
            config = space.design(params)
        except ConfigError as exc:
            raise self._fail(attrs, "invalid", str(exc)) from None
        attrs["config"] = config.to_dict()
        attrs["config_hash"] = config.config_hash
        attrs.update(flat_design(attrs["config"]))
        try:
            with interruptible(on_stop=lambda: _record_interrupted(trial, attrs, system)):
                if space.pod is not None:  # the chip in its system: the trial's system.* and split.* values
                    choice = space.pod_choice(params)
                    attrs["pod_choice"] = choice
                    evaluation = self.evaluator.evaluate(config, choice)  # type: ignore[call-arg]
                else:
                    evaluation = self.evaluator.evaluate(config)
        except AccelDseError as exc:
            raise self._fail(attrs, "infeasible", str(exc)) from None
        except Exception as exc:  # noqa: BLE001 - the guard: any evaluator bug fails this trial only
            self._errors_in_a_row += 1
            if self._errors_in_a_row >= MAX_CONSECUTIVE_ERRORS:
                attrs["status"] = "error"
                attrs["reason"] = repr(exc)
                raise SearchError(
                    f"the evaluator failed on {self._errors_in_a_row} designs in a row, last with {exc!r}; "
                    "stopping the sweep"
                ) from exc
            raise self._fail(attrs, "error", repr(exc)) from None
        self._errors_in_a_row = 0
        metrics = {m: coerce_finite(v) for m, v in evaluation.metrics.items()}
        attrs["metrics"] = metrics
        attrs.update(flat_metrics(metrics, space))
        attrs["workloads"] = {
            w: {m: coerce_finite(v) for m, v in d.items()} for w, d in evaluation.per_workload.items()
        }
        figure_model = getattr(self.evaluator, "figure_model", "")
        if figure_model:  # what the figures are: verify refuses a trial recorded under another model
            attrs["figure_model"] = figure_model
        if evaluation.details:
            attrs["pod"] = evaluation.details
        if getattr(evaluation, "notes", ""):
            attrs["notes"] = evaluation.notes  # what the design leaves to the host (convs as im2col)
        if not evaluation.feasible:
            raise self._fail(attrs, "overflow" if getattr(evaluation, "overflow", False) else "infeasible",
                             evaluation.reason or "the model marks the design infeasible")
        values = []
        for objective in space.objectives:
            value = metrics.get(objective.metric)
            if value is None:
                raw = evaluation.metrics.get(objective.metric)
                raise self._fail(attrs, "non-finite", f"{objective.metric} is {raw!r}, not a finite number")
            values.append(value)
        violations = []
        for constraint in space.constraints:
            value = metrics.get(constraint.metric)
            if value is None:
                raw = evaluation.metrics.get(constraint.metric)
                raise self._fail(attrs, "non-finite", f"{constraint.metric} is {raw!r}, not a finite number")
            violations.append(constraint.violation(value))
        if space.constraints:
            attrs["constraint_values"] = violations
        broken = [
            f"{c} violated ({c.metric} = {metrics[c.metric]:.4g})"
            for c, v in zip(space.constraints, violations, strict=True)
            if v > 0
        ]
        if broken:
            if not self.constraints_complete:
                raise self._fail(attrs, "constraint", "; ".join(broken))
            attrs["status"] = "constraint"
            attrs["reason"] = "; ".join(broken)
        else:
            attrs["status"] = "ok"
        attrs["feasible"] = not broken
        if space.constraints:
            # Optuna's constraint record (read by TPE, NSGA-II and Optuna's best-trial logic),
            # relative to each bound so that excesses in different units add up sensibly.
            system[CONSTRAINTS_KEY] = relative_excess(violations, space)
        return values[0] if len(values) == 1 else values
