"""Energy and area: the published reference figures, scaling, breakdowns, calibration."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import perf_model
from accel_dse.config import ArrayConfig
from accel_dse.errors import ModelError
from workloads.ops import Gemm

E = perf_model.DEFAULT_ENERGY


def test_energy_table_reproduces_horowitz_45nm():
    # Horowitz, ISSCC 2014: 8-bit mult 0.2 pJ + 32-bit add 0.1 pJ; 32-bit mult 3.1 + 32-bit add 0.1.
    assert E.mac_pj(8, 32) == pytest.approx(0.2 + 0.1)
    assert E.mac_pj(32, 32) == pytest.approx(3.1 + 0.1)
    assert E.mac_pj(8, 8) == pytest.approx(0.2 + 0.03)
    # SRAM 64-bit reads: 8 KB 10 pJ, 32 KB 20 pJ, 1 MB 100 pJ -> per byte / 8.
    np.testing.assert_allclose(E.sram_pj_per_byte(np.array([8, 32, 1024])), [10 / 8, 20 / 8, 100 / 8])
    # DRAM 1.3-2.6 nJ per 64 bits: the midpoint.
    assert E.dram_pj_per_byte == pytest.approx(1950 / 8)
    # 16-bit lies between the published widths; bigger SRAM banks cost more per byte.
    assert 0.2 < float(E.mac_pj(16, 32)) - 0.1 < 3.1
    per_byte = E.sram_pj_per_byte(np.array([1, 4, 8, 64, 1024, 4096]))
    assert (np.diff(per_byte) > 0).all()


def test_technology_scaling():
    assert float(perf_model.tech_energy_scale(45)) == pytest.approx(1.0)
    # 90 nm at 1.0 V vs 45 nm at 0.9 V: 2 x (1.0 / 0.9)^2.
    assert float(perf_model.tech_energy_scale(90)) == pytest.approx(2 * (1.0 / 0.9) ** 2)
    scales = perf_model.tech_energy_scale(np.array([5, 7, 16, 28, 45, 65, 130, 180]))
    assert (np.diff(scales) > 0).all()


def test_energy_breakdown_by_hand_for_one_run():
    # One run, 16x16 WS at 45 nm, single-buffered 64 KiB banks: every part from the table.
    config = ArrayConfig(rows=16, cols=16, double_buffered=False, tech_nm=45)
    gemm = Gemm(m=64, k=32, n=48)
    r = perf_model.evaluate_op(config, gemm)
    macs = 64 * 32 * 48
    parts = r.energy_breakdown
    assert parts["mac"] == pytest.approx(macs * (0.2 + 0.1))
    assert parts["register"] == pytest.approx(macs * (8 + 32) * 0.1 / 32)  # a and v registers per MAC
    assert parts["dram"] == pytest.approx((64 * 32 + 32 * 48 + 64 * 48 * 4) * 1950 / 8)
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
    config = ArrayConfig(rows=8, cols=8)
    r = perf_model.evaluate_op(config, Gemm(m=100, k=100, n=100), energy=table)
    area = perf_model.evaluate(config, _workload()).total["area_mm2"]
    assert r.energy_breakdown["leakage"] == pytest.approx(0.05 * area * r.latency_s * 1e12)


def _workload():
    from workloads.ops import Workload

    return Workload(name="w", ops=(Gemm(m=100, k=100, n=100),))


def test_area_by_hand_and_scaling():
    config = ArrayConfig(rows=4, cols=8, ifmap_sram_kib=2, weight_sram_kib=3, ofmap_sram_kib=5, tech_nm=45)
    area = perf_model.evaluate(config, _workload()).total["area_mm2"]
    k = perf_model.AreaCoefficients()
    pe = 282.0 + 137.0 + (2 * 8 + 32) * 4.522  # 8-bit mult, 32-bit add, a/v/s registers
    # WS skew by address delay lines: ifmap 2 KiB of 4-byte words = 512 words (9 address bits),
    # 4 lanes: 3 taps of 10 bits + 4 valid flops; ofmap 5 KiB of 8 x 32-bit words = 160 words
    # (8 address bits): 8 taps of 9 bits.
    skew = (3 * 10 + 4 + 8 * 9) * 4.522
    sram = (2 + 3 + 5) * 8192 * 0.346 / 0.6
    assert area == pytest.approx((32 * pe + skew + k.controller_um2 + sram) * 1e-6)
    at90 = perf_model.evaluate(dataclasses.replace(config, tech_nm=90), _workload()).total["area_mm2"]
    assert at90 == pytest.approx(4 * area)


def test_calibrate_pe_area_fits_and_installs():
    before = perf_model.area_coefficients()
    try:
        base = perf_model.AreaCoefficients()
        model_8_32 = float(base.pe_um2(8, 32))
        model_16_32 = float(base.pe_um2(16, 32))
        # Measurements exactly 1.5x the model (at 28 nm: scaled back to 45 nm by (45/28)^2).
        measured = [(8, 32, 1.5 * model_8_32 * (28 / 45) ** 2), (16, 32, 1.5 * model_16_32 * (28 / 45) ** 2)]
        fitted = perf_model.calibrate_pe_area(measured, tech_nm=28)
        assert fitted.pe_scale == pytest.approx(1.5)
        assert perf_model.area_coefficients() is fitted
        config = ArrayConfig(rows=4, cols=4)
        bigger = perf_model.evaluate(config, _workload()).total["area_mm2"]
        perf_model.set_area_coefficients(base)
        plain = perf_model.evaluate(config, _workload()).total["area_mm2"]
        assert bigger - plain == pytest.approx(16 * 0.5 * float(base.pe_um2(8, 32)) * 1e-6)
    finally:
        perf_model.set_area_coefficients(before)


@pytest.mark.parametrize("measured", [[], [(8, 32, -1.0)], [(8, 32)], [(8, True, 5.0)]])
def test_calibrate_rejects_bad_points(measured):
    with pytest.raises(ModelError):
        perf_model.calibrate_pe_area(measured, install=False)


def test_set_area_coefficients_checks_its_argument():
    with pytest.raises(ModelError, match="AreaCoefficients"):
        perf_model.set_area_coefficients({"pe_scale": 2})
