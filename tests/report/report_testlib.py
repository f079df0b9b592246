"""Small sweep studies for the report, export and verify tests (real perf model, tiny spaces).

Studies are made through the sweep API (``run_sweep``), so their trials carry exactly the user
attributes ``accel-dse sweep`` writes; FAIL and RUNNING trials are added with Optuna directly.
"""

from __future__ import annotations

import math
from typing import Any

import optuna

#: Workload of the tiny spaces: one small GEMM (simulates in a second or two).
TINY_WORKLOAD = "gemm:m=8,k=12,n=8"

TINY_PARAMS = {"rows": [2, 4], "cols": [2, 4], "dataflow": ["ws", "os", "is"], "ifmap_sram_kib": 1,
               "weight_sram_kib": 1, "ofmap_sram_kib": 1, "dram_bytes_per_cycle": [2.0, 8.0]}

WIDE_PARAMS = {"rows": {"low": 2, "high": 32, "scale": "pow2"}, "cols": {"low": 2, "high": 32, "scale": "pow2"},
               "dataflow": ["ws", "os", "is"], "ifmap_sram_kib": [1, 4, 16], "weight_sram_kib": [1, 4, 16],
               "ofmap_sram_kib": [2, 8], "dram_bytes_per_cycle": [2.0, 8.0, 32.0]}


def make_space(objectives: list[str], *, params: dict[str, Any] | None = None, workload: str = TINY_WORKLOAD,
               constraints: list[str] | None = None, fpga: dict[str, Any] | None = None):
    from accel_dse.search import parse_space

    doc = {"name": "t", "objectives": objectives, "workloads": [{"spec": workload}],
           "params": params or TINY_PARAMS, "constraints": constraints or []}
    if fpga is not None:
        doc["fpga"] = fpga
    return parse_space(doc, source="test space")


def make_study(storage: str, *, study: str = "s", objectives: list[str] | None = None, trials: int = 16,
               sampler: str = "random", seed: int = 1, **space_args: Any):
    """Run a model-only sweep of ``trials`` trials into ``storage``; returns the ``SweepResult``."""
    import workloads
    from accel_dse.search import ModelEvaluator, SweepConfig, run_sweep

    space = make_space(objectives or ["edp"], **space_args)
    evaluator = ModelEvaluator([(w.spec, w.weight, workloads.resolve(w.spec)) for w in space.workloads],
                               fpga=space.fpga)
    return run_sweep(SweepConfig(space=space, evaluator=evaluator, storage=storage, study_name=study,
                                 sampler=sampler, n_trials=trials, seed=seed, grid_keep=5))


def add_fail_and_running(storage: str, study: str = "s") -> tuple[int, int]:
    """Add one FAIL trial (status/reason as the sweep writes them) and one RUNNING trial."""
    s = optuna.load_study(study_name=study, storage=storage)
    failed = s.ask()
    failed.set_user_attr("status", "infeasible")
    failed.set_user_attr("reason", "ifmap tile does not fit")
    s.tell(failed, state=optuna.trial.TrialState.FAIL)
    running = s.ask()
    return failed.number, running.number


def feasible(trials: list[Any]) -> list[Any]:
    """COMPLETE trials with finite values and every constraint met (computed here, not by accel_dse)."""
    out = []
    for t in trials:
        if t.state != optuna.trial.TrialState.COMPLETE or t.values is None:
            continue
        if not all(math.isfinite(v) for v in t.values):
            continue
        if any(v > 0 for v in t.user_attrs.get("constraint_values") or ()):
            continue
        out.append(t)
    return out


def pareto_numbers(trials: list[Any], signs: list[float]) -> set[int]:
    """Trial numbers no other trial dominates (plain O(n^2) definition)."""
    pts = [(t.number, [s * v for s, v in zip(signs, t.values, strict=True)]) for t in trials]
    out = set()
    for n, p in pts:
        dominated = any(all(a <= b for a, b in zip(q, p, strict=True)) and any(a < b for a, b in zip(q, p, strict=True))
                        for _, q in pts)
        if not dominated:
            out.add(n)
    return out
