"""Energy: the published reference figures, scaling, breakdowns, leakage (area: test_model_area.py)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from model_testlib import at_nominal_supply

import perf_model
from accel_spec.config import ArrayConfig
from workloads.ops import Gemm

E = perf_model.DEFAULT_ENERGY


def test_energy_table_reproduces_horowitz_45nm():
    # Horowitz, ISSCC 2014: 8-bit mult 0.2 pJ + 32-bit add 0.1 pJ; 32-bit mult 3.1 + 32-bit add 0.1.
    assert E.mac_pj(8, 32) == pytest.approx(0.2 + 0.1)
    assert E.mac_pj(32, 32) == pytest.approx(3.1 + 0.1)
    assert E.mac_pj(8, 8) == pytest.approx(0.2 + 0.03)
    # SRAM 64-bit reads: 8 KB 10 pJ, 32 KB 20 pJ, 1 MB 100 pJ -> per byte / 8.
    np.testing.assert_allclose(E.sram_pj_per_byte(np.array([8, 32, 1024])), [10 / 8, 20 / 8, 100 / 8])
    # 16-bit lies between the published widths; bigger SRAM banks cost more per byte.
    assert 0.2 < float(E.mac_pj(16, 32)) - 0.1 < 3.1
    per_byte = E.sram_pj_per_byte(np.array([1, 4, 8, 64, 1024, 4096]))
    assert (np.diff(per_byte) > 0).all()


def test_technology_scaling():
    assert float(perf_model.tech_energy_scale(45)) == pytest.approx(1.0)
    # 90 nm at 1.0 V vs 45 nm at 0.9 V: 2 x (1.0 / 0.9)^2.
    assert float(perf_model.tech_energy_scale(90)) == pytest.approx(2 * (1.0 / 0.9) ** 2)
    scales = perf_model.tech_energy_scale(np.array([3, 5, 7, 16, 28, 45, 65, 130, 180]))
    assert (np.diff(scales) > 0).all()
    # planar nodes keep the rule: 28 nm at 0.9 V is 28 / 45
    assert float(perf_model.tech_energy_scale(28)) == pytest.approx(28 / 45)
    # 7 nm is the published int8 MAC (TPUv4i, ISCA 2021, Table 2): 0.07 + 0.03 pJ over Horowitz's 0.2 + 0.1
    assert float(perf_model.tech_energy_scale(7)) == pytest.approx(0.10 / 0.30)
    # between them log-log; past 7 nm along the same line
    t = np.log(16 / 28) / np.log(7 / 28)
    assert float(perf_model.tech_energy_scale(16)) == pytest.approx((28 / 45) * ((1 / 3) / (28 / 45)) ** t)
    t5 = np.log(5 / 28) / np.log(7 / 28)
    assert float(perf_model.tech_energy_scale(5)) == pytest.approx((28 / 45) * ((1 / 3) / (28 / 45)) ** t5)
    # the FinFET shrink is far less than the old rule's (7 nm: 1/3 of 45 nm, not 0.094)
    assert float(perf_model.tech_energy_scale(7)) > 3 * (7 / 45) * (0.7 / 0.9) ** 2


def test_energy_breakdown_by_hand_for_one_run():
    # One run, 16x16 WS at 45 nm, single-buffered 64 KiB banks: every part from the table (at
    # f_max, so at the nominal supply, with leakage off).
    config = at_nominal_supply(ArrayConfig(rows=16, cols=16, double_buffered=False, tech_nm=45))
    gemm = Gemm(m=64, k=32, n=48)
    no_leak = dataclasses.replace(E, leakage_w_per_mm2=0.0)
    r = perf_model.evaluate_op(config, gemm, energy=no_leak)
    macs = 64 * 32 * 48
    parts = r.energy_breakdown
    assert parts["mac"] == pytest.approx(macs * (0.2 + 0.1))
    # a and v registers per MAC, plus the weight chain: 2 x 3 folds, each PE's shadow written
    # (16 + 1) / 2 times on average (row r's load window is 16 - r steps) and the swap once.
    chain = 6 * 256 * ((16 + 1) / 2 + 1) * 8
    assert parts["register"] == pytest.approx((macs * (8 + 32) + chain) * 0.1 / 32)
    plain = perf_model.evaluate_op(at_nominal_supply(dataclasses.replace(config, shadow_stationary=False)), gemm)
    assert plain.energy_breakdown["register"] == pytest.approx((macs * (8 + 32) + 6 * 256 * 16 * 8) * 0.1 / 32)
    # the bytes at lpddr5-x32's 5 pJ/bit (the default part)
    assert parts["dram"] == pytest.approx((64 * 32 + 32 * 48 + 64 * 48 * 4) * 8 * 5.0)
    sram_64k = float(E.sram_pj_per_byte(64))
    # WS array side: weights once, A once per column fold (3), C written once per row fold (2)
    # and read back for the second; plus what DRAM brings in and takes out.
    ifmap = 64 * 32 * 3 + 64 * 32
    weight = 32 * 48 + 32 * 48
    ofmap = (64 * 48 * 2 + 64 * 48) * 4 + 64 * 48 * 4
    assert parts["sram_ifmap"] == pytest.approx(ifmap * sram_64k)
    assert parts["sram_weight"] == pytest.approx(weight * sram_64k)
    assert parts["sram_ofmap"] == pytest.approx(ofmap * sram_64k)
    assert r.sram_read_bytes + r.sram_write_bytes == pytest.approx(ifmap + weight + ofmap)
    assert parts["leakage"] == 0
    assert r.energy_pj == pytest.approx(sum(parts.values()))


def test_leakage_is_area_times_time():
    table = dataclasses.replace(E, leakage_w_per_mm2=0.05)
    config = at_nominal_supply(ArrayConfig(rows=8, cols=8))
    r = perf_model.evaluate_op(config, Gemm(m=100, k=100, n=100), energy=table)
    area = perf_model.evaluate(config, _workload()).total["area_mm2"]
    assert r.energy_breakdown["leakage"] == pytest.approx(0.05 * area * r.latency_s * 1e12)
    # Below f_max the supply drops and leakage power with it, as (V / V_nom)^3.
    slow = dataclasses.replace(config, clock_mhz=config.clock_mhz / 2)
    s = perf_model.evaluate_op(slow, Gemm(m=100, k=100, n=100), energy=table)
    vdd = perf_model.evaluate(slow, _workload(), energy=table).total["vdd"]
    assert vdd < 0.9
    assert s.energy_breakdown["leakage"] == pytest.approx(0.05 * (vdd / 0.9) ** 3 * area * s.latency_s * 1e12)


def test_leakage_is_on_by_default_with_the_node_figure():
    config = at_nominal_supply(ArrayConfig(rows=8, cols=8, tech_nm=28))
    r = perf_model.evaluate(config, _workload())
    # 20 mW/mm^2 at 28 nm and nominal supply (perf_model.physical.technology's table).
    total = r.total
    assert total["energy_breakdown"]["leakage"] == pytest.approx(0.02 * total["area_mm2"] * total["latency_s"] * 1e12)
    off = perf_model.evaluate(config, _workload(), energy=dataclasses.replace(E, leakage_w_per_mm2=0.0))
    assert off.total["energy_breakdown"]["leakage"] == 0


def _workload():
    from workloads.ops import Workload

    return Workload(name="w", ops=(Gemm(m=100, k=100, n=100),))
