"""Area, supply and power held to published silicon: FinFET SRAM cells, node logic density, TPU v1."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import perf_model
import workloads
from accel_dse.design_files import load_design
from accel_spec.config import ArrayConfig
from perf_model.arrays.designs import DesignArrays
from perf_model.physical.design_area import area_parts_mm2
from perf_model.physical.node_density import logic_area_scale, sram_cell_scale
from perf_model.physical.technology import supply_voltage

MIB_BITS = 8 * 1024 * 1024


def _area(config: ArrayConfig) -> float:
    return float(perf_model.evaluate(config, workloads.resolve("gemm:m=64,k=64,n=64")).total["area_mm2"])


@pytest.mark.parametrize("tech, cell_um2", [(7, 0.027), (5, 0.021)])  # TSMC N7 (IEDM 2016), N5 (IEDM 2019)
def test_finfet_sram_per_bit_is_at_least_the_published_cell(tech, cell_um2):
    # Two designs that differ only in 3 x 7.75 MiB of SRAM: the difference per stored bit.
    small = ArrayConfig(rows=32, cols=32, ifmap_sram_kib=256, weight_sram_kib=256, ofmap_sram_kib=256, tech_nm=tech,
                        clock_mhz=500.0)
    big = dataclasses.replace(small, ifmap_sram_kib=8192, weight_sram_kib=8192, ofmap_sram_kib=8192)
    per_bit_um2 = (_area(big) - _area(small)) * 1e6 / (3 * 7.75 * MIB_BITS)
    assert per_bit_um2 >= cell_um2
    # by hand: the cell over the macro efficiency 0.6 over the floor-plan utilisation 0.45 (and a few
    # more address bits in the skew registers of the deeper buffers)
    assert per_bit_um2 == pytest.approx(cell_um2 / 0.6 / 0.45, rel=1e-4)


def test_per_node_scales_by_hand():
    # SRAM: the published cells over Intel's 45 nm 0.346 um^2; 12 nm log-log between 14 nm (0.0588) and N10 (0.042)
    assert float(sram_cell_scale(28)) == pytest.approx(0.127 / 0.346)
    assert float(sram_cell_scale(16)) == pytest.approx(0.070 / 0.346)
    t = np.log(12 / 14) / np.log(10 / 14)
    assert float(sram_cell_scale(12)) * 0.346 == pytest.approx(0.0588 * (0.042 / 0.0588) ** t)
    # logic: Bohr's 45 nm 3.33 MTr/mm^2 over TSMC N7 91.2 and N5 171.3; the square law above 45 nm
    assert float(logic_area_scale(7)) == pytest.approx(3.33 / 91.2)
    assert float(logic_area_scale(5)) == pytest.approx(3.33 / 171.3)
    assert float(logic_area_scale(90)) == pytest.approx(4.0)
    assert float(sram_cell_scale(90)) == pytest.approx(4.0)
    # FinFET logic shrinks less than the square law said (7 nm: 1/27 of 45 nm, not 1/41)
    assert float(logic_area_scale(7)) > (7 / 45) ** 2 * 1.4


def _tpu_parts() -> dict[str, float]:
    config = load_design("tpu-v1")
    d = DesignArrays.from_configs([config])
    parts = area_parts_mm2(d.rows, d.cols, d.dataflow, d.input_bits, d.acc_bits,
                           (d.ifmap_sram_kib, d.weight_sram_kib, d.ofmap_sram_kib), d.tech_nm,
                           shadow=d.shadow_stationary, double_buffered=d.double_buffered)
    return {k: float(v[0]) for k, v in parts.items()}


def test_tpu_v1_area_by_unit_against_the_floor_plan():
    # Jouppi et al., ISCA 2017, Figure 2: of a die of at most 331 mm^2, the unified buffer 29 %, the
    # matrix unit 24 % (both calibrate the floor-plan utilisation: 15 %), the accumulators 6 % (checked: 25 %),
    # and the four parts with control (2 %) within 35 % (the tolerance).
    parts = _tpu_parts()
    assert parts["buffers"] == pytest.approx(0.29 * 331, rel=0.15)
    assert parts["array"] == pytest.approx(0.24 * 331, rel=0.15)
    assert parts["accumulators"] == pytest.approx(0.06 * 331, rel=0.25)
    datapath = parts["buffers"] + parts["array"] + parts["accumulators"] + parts["control"]
    assert datapath == pytest.approx(0.61 * 331, rel=0.35)
    assert parts["logic"] + parts["sram"] <= 331  # the whole modelled design fits the die


def test_tpu_v1_supply_and_busy_power():
    config = load_design("tpu-v1")
    result = perf_model.evaluate(config, workloads.resolve("gemm:m=4096,k=4096,n=4096,requant=1"))
    t = result.total
    # 700 MHz at 28 nm sits in the node's DVFS range: at least 0.9 x the 0.9 V nominal, not 0.54 V
    assert t["vdd"] >= 0.81 - 1e-9
    # Table 2: 40 W busy per die; the model within 40 % (the tolerance)
    assert t["power_w"] == pytest.approx(40.0, rel=0.40)


def test_supply_at_f_max_is_nominal_and_never_below_the_dvfs_floor():
    for tech, vnom, floor in ((7, 0.70, 0.56), (28, 0.90, 0.81), (45, 0.90, 0.81)):
        clocks = np.array([1.0, 300.0, 999.0, 1000.0])
        v = supply_voltage(clocks, 1000.0, tech)
        assert v.min() >= floor - 1e-9 and v[-1] == pytest.approx(vnom)


_DENSE = ArrayConfig(rows=128, cols=128, tech_nm=7, clock_mhz=1500.0, ifmap_sram_kib=256, weight_sram_kib=256,
                     ofmap_sram_kib=256, dram_bytes_per_cycle=512.0, dram="hbm2e")
_GEMM = "gemm:m=1024,k=1024,n=1024"


def test_power_splits_into_on_die_and_dram_and_density_is_on_die_over_area():
    t = perf_model.evaluate(_DENSE, workloads.resolve(_GEMM)).total
    br = t["energy_breakdown"]
    # by hand from the breakdown: DRAM power is the DRAM parts' energy over the latency
    assert t["dram_power_w"] == pytest.approx((br["dram"] + br["vector_dram"]) * 1e-12 / t["latency_s"])
    assert t["on_die_power_w"] + t["dram_power_w"] == pytest.approx(t["power_w"])
    assert t["power_density_w_mm2"] == pytest.approx(t["on_die_power_w"] / t["area_mm2"])
    assert 0 < t["power_density_w_mm2"] <= 1.0  # under the default limit: feasible


def test_a_design_past_the_power_density_limit_is_infeasible_with_its_reason():
    density = perf_model.evaluate(_DENSE, workloads.resolve(_GEMM)).total["power_density_w_mm2"]
    tight = dataclasses.replace(_DENSE, max_power_density_w_mm2=density / 2)  # the same design, a limit it exceeds
    result = perf_model.evaluate(tight, workloads.resolve(_GEMM))
    assert result.status == "infeasible" and "power density" in result.reason and "W/mm^2" in result.reason
    assert f"max_power_density_w_mm2 = {density / 2:g}" in result.reason
    # the sweep's path: the vectorised table says the same, and a cool design stays feasible beside it
    cool = dataclasses.replace(tight, clock_mhz=100.0)
    swept = perf_model.evaluate_designs(DesignArrays.from_configs([tight, cool]), workloads.resolve(_GEMM))
    assert swept.feasible.tolist() == [False, True]
    assert "power density" in swept.reason[0] and swept.reason[1] == ""


def test_eyeriss_held_out_within_the_stated_tolerance():
    # Eyeriss (Chen et al., ISSCC 2016 / JSSC 2017): 65 nm, 12.25 mm^2 core, 278 mW and 34.7 frames/s on
    # AlexNet's CONV layers at batch 4 and 200 MHz. Nothing is fitted to it (bench/anchor_chips.py says
    # which figures set which constant); the model within 30 % of each (docs/physical.md).
    import sys
    from pathlib import Path

    bench = str(Path(__file__).resolve().parents[2] / "bench")
    if bench not in sys.path:
        sys.path.insert(0, bench)
    from anchor_chips import EYERISS, eyeriss_figures

    assert (EYERISS.rows * EYERISS.cols, EYERISS.tech_nm, EYERISS.clock_mhz) == (168, 65, 200.0)
    assert EYERISS.ifmap_sram_kib + EYERISS.weight_sram_kib + EYERISS.ofmap_sram_kib == 182  # 181.5 KB of SRAM
    e = eyeriss_figures()
    assert e["gmacs"] == pytest.approx(4 * 0.666, rel=0.02)  # the workload is AlexNet's CONV layers
    assert e["area_mm2"] == pytest.approx(3.5 * 3.5, rel=0.30)
    assert e["on_die_power_w"] == pytest.approx(0.278, rel=0.30)
    assert e["fps"] == pytest.approx(34.7, rel=0.30)
