"""What a user sees of a finished sweep study through plain Optuna (as optuna-dashboard reads it)."""

from __future__ import annotations

import math

import optuna
import pytest
from optuna.trial import TrialState
from search_testlib import make_space, standin_evaluator

from accel_dse.search import SweepConfig, run_sweep

BOUND_MM2 = 1.7  # about the median area of the stand-in designs: half are infeasible


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('dash')}/study.db"
    space = make_space(constraints=[f"area_mm2 <= {BOUND_MM2}"])
    run_sweep(SweepConfig(space=space, evaluator=standin_evaluator(space), storage=url, study_name="dash",
                          sampler="random", n_trials=40, seed=3))
    return optuna.load_study(study_name="dash", storage=url)  # the URL a user gives optuna-dashboard


def test_objective_names_are_the_study_metric_names(finished):
    assert finished.metric_names == ["edp"]


def test_each_scored_trial_has_the_decoded_design_and_metrics_as_flat_scalars(finished):
    scored = [t for t in finished.get_trials() if t.state == TrialState.COMPLETE]
    assert scored
    for t in scored:
        flat = {k: v for k, v in t.user_attrs.items() if k.startswith(("design.", "metric."))}
        assert all(isinstance(v, (bool, int, float, str)) for v in flat.values())
        # The decoded size, not the encoded parameter: log2_rows = 5 is shown as design.rows = 32.
        assert flat["design.rows"] == 2 ** t.params["log2_rows"]
        assert flat["design.dataflow"] == t.params["dataflow"]
        assert flat["metric.edp"] == pytest.approx(t.value)
        assert t.user_attrs["feasible"] is (flat["metric.area_mm2"] <= BOUND_MM2)


def test_the_feasible_best_is_marked_and_is_what_optuna_calls_best(finished):
    complete = [t for t in finished.get_trials() if t.state == TrialState.COMPLETE]
    feasible = [t for t in complete if t.user_attrs["metric.area_mm2"] <= BOUND_MM2]
    best = min(feasible, key=lambda t: t.value)
    assert finished.user_attrs["accel_dse.best_feasible"] == [best.number]
    assert finished.best_trial.number == best.number  # Optuna's own best respects the constraint
    # What a rank-by-value view (optuna-dashboard 0.21) would put first breaks the area budget here.
    by_value = min(complete, key=lambda t: t.value)
    assert by_value.user_attrs["metric.area_mm2"] > BOUND_MM2 and math.isfinite(by_value.value)
