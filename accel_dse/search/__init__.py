"""Design search: space files, Optuna studies, samplers (incl. an RL agent), sweeps.

The search sees only ``ArrayConfig`` in and metrics out: it scores designs with
``perf_model`` (through :class:`ModelEvaluator`) and never imports ``rtl_gen``, cocotb or
JAX (the ``rl`` sampler's own JAX code excepted, loaded only when that sampler is used).
A future higher-fidelity check of the best designs (RTL simulation, synthesis) plugs in as
another evaluator with the same ``evaluate(config) -> Evaluation`` method.

Typical use::

    space = load_space("edge-int8")
    evaluator = ModelEvaluator([(w.spec, w.weight, workloads.resolve(w.spec)) for w in space.workloads],
                               fpga=space.fpga)
    result = run_sweep(SweepConfig(space=space, evaluator=evaluator, storage="sqlite:///study.db",
                                   study_name=space.name, n_trials=200))
    best = result.summary()["best"]  # the best designs found
"""

from __future__ import annotations

from accel_dse.search.samplers.registry import SAMPLERS, check_sampler, make_sampler
from accel_dse.search.scoring.evaluator import BatchEvaluation, Evaluation, ModelEvaluator
from accel_dse.search.scoring.grid import MAX_GRID_POINTS, GridResult, grid_search
from accel_dse.search.scoring.objective import SweepObjective, TrialFailed
from accel_dse.search.scoring.pod_evaluator import PodEvaluator
from accel_dse.search.space.design_space import DesignSpace, FpgaTarget, Param, PodTarget, WorkloadSpec
from accel_dse.search.space.metrics import METRIC_NAMES, METRIC_UNITS, OBJECTIVES, Constraint, Objective
from accel_dse.search.space.space_file import load_space, parse_space, space_names
from accel_dse.search.space.trial_values import pareto_mask
from accel_dse.search.study.owner import fail_dead_trials
from accel_dse.search.study.storage import StorageSpec, check_location, mask_url, open_storage, parse_storage, redact
from accel_dse.search.study.study import MAX_STUDY_NAME, budget_used, check_study_name, open_study
from accel_dse.search.study.summary import best_trials, feasible_trials, summary_dict, summary_table
from accel_dse.search.sweep import (
    MAX_HEARTBEAT_S,
    MAX_SEED,
    SweepConfig,
    SweepResult,
    max_jobs,
    run_sweep,
    validate_sweep,
)

__all__ = [
    "DesignSpace",
    "FpgaTarget",
    "Param",
    "WorkloadSpec",
    "load_space",
    "parse_space",
    "space_names",
    "Objective",
    "Constraint",
    "OBJECTIVES",
    "METRIC_NAMES",
    "METRIC_UNITS",
    "Evaluation",
    "BatchEvaluation",
    "ModelEvaluator",
    "PodEvaluator",
    "PodTarget",
    "SweepObjective",
    "TrialFailed",
    "SAMPLERS",
    "check_sampler",
    "make_sampler",
    "StorageSpec",
    "parse_storage",
    "open_storage",
    "check_location",
    "mask_url",
    "redact",
    "open_study",
    "check_study_name",
    "max_jobs",
    "MAX_SEED",
    "MAX_HEARTBEAT_S",
    "MAX_STUDY_NAME",
    "budget_used",
    "fail_dead_trials",
    "GridResult",
    "grid_search",
    "pareto_mask",
    "MAX_GRID_POINTS",
    "SweepConfig",
    "SweepResult",
    "run_sweep",
    "validate_sweep",
    "best_trials",
    "feasible_trials",
    "summary_dict",
    "summary_table",
]
