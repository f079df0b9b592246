"""Bad input and infeasible designs: results with a reason (never NaN/inf), or clear errors."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import perf_model
from accel_spec.config import ArrayConfig
from accel_spec.errors import AccelDseError, ModelError
from workloads.ops import Gemm, Workload

# 256 columns of 32-bit accumulators: one ofmap word is 1 KiB, so a 1 KiB ofmap buffer holds 1
# word, half a word when double buffered: not even one output row of a tile fits.
TIGHT = ArrayConfig(rows=256, cols=256, ofmap_sram_kib=1, double_buffered=True)
GEMM = Gemm(m=64, k=64, n=64, name="proj")


def test_infeasible_op_is_a_result_naming_buffer_and_tile():
    result = perf_model.evaluate_op(TIGHT, GEMM)
    assert result.status == "infeasible"
    assert "ofmap buffer" in result.reason
    assert "'proj'" in result.reason
    assert "m x k x n = " in result.reason
    assert "holds 0 words" in result.reason and "double buffered" in result.reason
    for key in ("folds", "compute_cycles", "stall_cycles", "total_cycles", "utilization", "macs",
                "dram_read_bytes", "dram_write_bytes", "energy_pj", "latency_s"):
        assert getattr(result, key) == 0, key


def test_infeasible_design_in_a_table_has_zero_metrics_and_a_reason():
    ok = ArrayConfig(rows=16, cols=16)
    designs = perf_model.DesignArrays.from_configs([ok, TIGHT, ok])
    t = perf_model.evaluate_designs(designs, [(GEMM, 1), (Gemm(m=8, k=8, n=8, name="small"), 1)])
    assert t.feasible.tolist() == [True, False, True]
    assert t.reason[0] == t.reason[2] == ""
    assert t.reason[1].startswith("op 'proj': the ofmap buffer (1 KiB) holds 0 words")
    row = t.row(1)
    assert row["conv_notes"] == ""  # no convs here; an infeasible design's note stays empty too
    for key, value in row.items():
        if key not in ("feasible", "reason", "conv_notes"):
            assert value == 0, key
    assert t.row(0)["energy_pj"] > 0


def test_workload_result_reports_the_first_infeasible_op():
    workload = Workload(name="w", ops=(Gemm(m=8, k=8, n=8, name="a"), GEMM))
    result = perf_model.evaluate(TIGHT, workload)
    assert result.status == "infeasible"
    assert result.reason.startswith("op 'a':")
    zeros = {k: v for k, v in result.total.items() if k != "energy_breakdown"}
    assert {"latency_s", "macs", "area_mm2"} <= set(zeros) and all(v == 0 for v in zeros.values())
    assert result.to_dict()["status"] == "infeasible"


def test_weight_buffer_too_small_for_one_fold_is_named():
    # WS stationary block: min(K, R) = 64 weight words of 64 int8 each; 1 KiB holds 16.
    config = ArrayConfig(rows=64, cols=64, weight_sram_kib=1, double_buffered=False)
    result = perf_model.evaluate_op(config, Gemm(m=100, k=100, n=100, name="w"))
    assert result.status == "infeasible"
    expected = "weight buffer (1 KiB) holds 16 words but the smallest tile (m x k x n = 64 x 64 x 64) needs 64"
    assert expected in result.reason


def test_plan_of_infeasible_design_has_status_and_refuses_tiles():
    plan = perf_model.plan_tiles(TIGHT, GEMM)
    assert plan.status == "infeasible" and not plan.feasible
    assert "ofmap buffer" in plan.reason
    with pytest.raises(ModelError, match="no tiles"):
        list(plan.tiles())


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: perf_model.evaluate_op("edge", GEMM), "config must be an ArrayConfig"),
        (lambda: perf_model.evaluate_op(ArrayConfig(rows=4, cols=4), "gemm"), "op must be a Gemm or Conv2d"),
        (lambda: perf_model.evaluate_op(ArrayConfig(rows=4, cols=4), GEMM, 0),
         "count of ops\\[0\\] must be a positive"),
        (lambda: perf_model.evaluate(ArrayConfig(rows=4, cols=4), [GEMM]), "workload must be a Workload"),
        (lambda: perf_model.evaluate_designs([ArrayConfig(rows=4, cols=4)], [(GEMM, 1)]),
         "designs must be a DesignArrays"),
        (lambda: perf_model.evaluate_designs(perf_model.DesignArrays.from_columns(rows=4, cols=4), []),
         "at least one op"),
        (lambda: perf_model.evaluate_designs(perf_model.DesignArrays.from_columns(rows=4, cols=4), [GEMM]),
         "must be an \\(op, count\\) pair"),
        (lambda: perf_model.plan_tiles(ArrayConfig(rows=4, cols=4), (1, 2, 3)), "gemm must be a Gemm"),
    ],
)
def test_bad_arguments_raise_model_errors(call, match):
    with pytest.raises(ModelError, match=match) as info:
        call()
    assert isinstance(info.value, AccelDseError)


def test_extreme_designs_stay_finite():
    configs = [
        ArrayConfig(rows=4096, cols=4096, ifmap_sram_kib=1 << 20, weight_sram_kib=1 << 20, ofmap_sram_kib=1 << 20,
                    dram_bytes_per_cycle=1e-6, clock_mhz=1e-3, tech_nm=180, acc_bits=64, input_bits=16),
        ArrayConfig(rows=1, cols=1, ifmap_sram_kib=1, weight_sram_kib=1, ofmap_sram_kib=1,
                    dram_bytes_per_cycle=1e9, clock_mhz=1e5, tech_nm=5),
        dataclasses.replace(TIGHT, dataflow="os"),
    ]
    ops = [(Gemm(m=1, k=1, n=1), 1), (Gemm(m=100000, k=50000, n=3, batch=64), 1000)]
    t = perf_model.evaluate_designs(perf_model.DesignArrays.from_configs(configs), ops)
    for name in ("compute_cycles", "stall_cycles", "total_cycles", "energy_pj", "latency_s", "power_w",
                 "tops_per_w", "edp", "utilization", "area_mm2"):
        assert np.isfinite(getattr(t, name)).all(), name
    assert t.feasible[0]
    # 100 GHz is beyond any logic at 5 nm: infeasible, the reason naming the clock and f_max.
    assert not t.feasible[1] and "clock_mhz = 100000 exceeds f_max" in t.reason[1]
