"""The evaluator's aggregation over weighted workloads and the objective's guards."""

from __future__ import annotations

import math

import numpy as np
import optuna
import pytest
import standin_model
from optuna.trial import TrialState
from search_testlib import WORKLOAD_A, WORKLOAD_B, make_space, standin_evaluator

from accel_dse.search import SweepConfig, SweepObjective, TrialFailed, run_sweep
from accel_dse.search.space.trial_values import coerce_finite
from accel_spec.config import FIELD_NAMES, ArrayConfig
from accel_spec.errors import SearchError

CONFIG = ArrayConfig(rows=16, cols=8, dataflow="os", weight_sram_kib=4, dram_bytes_per_cycle=8.0, tech_nm=28)


def _standin_row(config: ArrayConfig, workload) -> dict[str, float]:
    """The stand-in model called directly on one design (no evaluator in between)."""
    d = config.to_dict()
    d["dataflow"] = {"ws": 0, "os": 1, "is": 2}[d["dataflow"]]
    arrays = standin_model.DesignArrays.from_columns(**{f: np.array([d[f]]) for f in FIELD_NAMES})
    table = standin_model.evaluate_designs(arrays, workload)
    return {m: float(getattr(table, m)[0]) for m in ("latency_s", "energy_pj", "area_mm2", "power_w", "edp")}


def test_weighted_aggregate_by_hand():
    ev = standin_evaluator(workloads=[("a", 3.0), ("b", 1.0)])
    got = ev.evaluate(CONFIG)
    a, b = _standin_row(CONFIG, WORKLOAD_A), _standin_row(CONFIG, WORKLOAD_B)
    assert got.feasible and got.reason == ""
    for m in ("latency_s", "energy_pj", "edp"):
        assert math.isclose(got.metrics[m], 0.75 * a[m] + 0.25 * b[m], rel_tol=1e-12)
    for m in ("area_mm2", "power_w"):
        assert math.isclose(got.metrics[m], max(a[m], b[m]), rel_tol=1e-12)
    assert got.per_workload["a"]["latency_s"] == pytest.approx(a["latency_s"], rel=1e-12)
    assert got.per_workload["b"]["edp"] == pytest.approx(b["edp"], rel=1e-12)


def test_cross_field_rule_and_model_infeasibility_are_results():
    ev = standin_evaluator()
    cols = {f: np.array([v, v]) for f, v in CONFIG.to_dict().items()}
    cols["input_bits"] = np.array([16, 8])
    cols["acc_bits"] = np.array([24, 32])  # 24 < 2 * 16 on the first design
    cols["weight_sram_kib"] = np.array([4, 1])
    cols["rows"] = np.array([16, 64])
    cols["cols"] = np.array([8, 64])  # 64 * 64 bytes > 1 KiB on the second
    batch = ev.evaluate_columns(cols)
    assert list(batch.feasible) == [False, False]
    assert batch.reason[0] == "acc_bits must be >= 2 * input_bits"
    assert batch.reason[1] == "a: weight tile does not fit weight buffer"
    assert "edp" in batch.metrics and all(batch.metrics[m][i] == 0 for m in batch.metrics for i in (0, 1))


@pytest.mark.parametrize(
    ("value", "expected"),
    [(1, 1.0), (np.float32(2.5), 2.5), (np.int64(3), 3.0), (float("nan"), None), (float("inf"), None),
     ("1.0", None), (True, None), (None, None)],
)
def test_coerce_finite(value, expected):
    assert coerce_finite(value) == expected


def _sweep(tmp_path, space, monkeypatch, env=None, n=30, sampler="random"):
    for key, value in (env or {}).items():
        monkeypatch.setenv(key, value)
    config = SweepConfig(space=space, evaluator=standin_evaluator(space), storage=f"sqlite:///{tmp_path}/s.db",
                         study_name="g", sampler=sampler, n_trials=n, seed=3)
    return run_sweep(config)


def test_nan_and_exceptions_fail_the_trial_not_the_sweep(tmp_path, monkeypatch):
    space = make_space()
    result = _sweep(tmp_path, space, monkeypatch, {"STANDIN_NAN_CLOCK": "400.0", "STANDIN_RAISE_CLOCK": "600.0"})
    trials = result.study.get_trials()
    assert len(trials) == 30
    by_status: dict[str, list] = {}
    for t in trials:
        by_status.setdefault(t.user_attrs.get("status"), []).append(t)
    for t in by_status.get("non-finite", []):
        assert t.state == TrialState.FAIL and t.params["clock_mhz"] == 400.0
        assert t.user_attrs["reason"] == "edp is nan, not a finite number"
    for t in by_status.get("error", []):
        assert t.state == TrialState.FAIL and t.params["clock_mhz"] == 600.0
        assert "stand-in evaluator blew up" in t.user_attrs["reason"]
    assert by_status.get("non-finite") and by_status.get("error")
    for t in trials:
        if t.state == TrialState.COMPLETE:
            assert math.isfinite(t.value) and t.params["clock_mhz"] not in (400.0, 600.0)
        assert t.state in (TrialState.COMPLETE, TrialState.FAIL)


def test_infeasible_and_invalid_designs_fail_with_reason(tmp_path, monkeypatch):
    params = {"rows": [64], "cols": [32, 64], "weight_sram_kib": [1, 8], "input_bits": [8, 16], "acc_bits": [24, 32]}
    space = make_space(params=params)
    result = _sweep(tmp_path, space, monkeypatch, n=24)
    for t in result.study.get_trials():
        config = space.field_values(t.params)
        if config["input_bits"] == 16 and config["acc_bits"] == 24:
            assert t.state == TrialState.FAIL and t.user_attrs["status"] == "invalid"
            assert "acc_bits must be an integer in [2 * input_bits = 32, 64], not 24" in t.user_attrs["reason"]
        elif 64 * config["cols"] * config["input_bits"] // 8 > config["weight_sram_kib"] * 1024:
            assert t.state == TrialState.FAIL and t.user_attrs["status"] == "infeasible"
            assert t.user_attrs["reason"] == "a: weight tile does not fit weight buffer"
        else:
            assert t.state == TrialState.COMPLETE and t.user_attrs["status"] == "ok"


def test_a_broken_evaluator_stops_after_20_errors(tmp_path, monkeypatch):
    params = {"rows": [4, 8], "cols": [4, 8], "clock_mhz": [600.0]}
    space = make_space(params=params)
    with pytest.raises(SearchError, match="the evaluator failed on 20 designs in a row"):
        _sweep(tmp_path, space, monkeypatch, {"STANDIN_RAISE_CLOCK": "600.0"}, n=100)


def test_constraint_violation_complete_or_fail_by_sampler():
    space = make_space(constraints=["area_mm2 <= 0.5"])
    study = optuna.create_study()
    for complete, expected in ((True, TrialState.COMPLETE), (False, TrialState.FAIL)):
        objective = SweepObjective(space, standin_evaluator(space), constraints_complete=complete)
        study.enqueue_trial({"log2_rows": 6, "log2_cols": 6, "dataflow": "ws", "log2_weight_sram_kib": 3,
                             "idx_dram_bytes_per_cycle": 0, "clock_mhz": 200.0, "double_buffered": True})
        study.optimize(objective, n_trials=1, catch=(TrialFailed,))
        t = study.trials[-1]
        area = t.user_attrs["metrics"]["area_mm2"]
        assert t.state == expected and area > 0.5
        assert t.user_attrs["constraint_values"] == [pytest.approx(area - 0.5)]
        assert t.user_attrs["status"] == "constraint" and "area_mm2 <= 0.5 violated" in t.user_attrs["reason"]
        assert t.user_attrs["config"]["dram_bytes_per_cycle"] == 4.0
        if complete:  # Optuna's constraint record, relative to the bound (what the samplers see)
            assert t.constraints == {"0": pytest.approx(area / 0.5 - 1)}
