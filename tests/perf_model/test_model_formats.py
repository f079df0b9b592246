"""The model's accumulator check per operand format: an fp8 product's bound, not the 8-bit lanes'."""

from __future__ import annotations

import pytest

import perf_model
from accel_spec.config import ArrayConfig
from workloads import Gemm, Workload


def _status(acc_bits: int, k: int, clock_mhz: float = 500, **formats: str) -> tuple[str, str]:
    design = ArrayConfig(rows=4, cols=4, acc_bits=acc_bits, clock_mhz=clock_mhz, **formats)
    wl = Workload(name="one", ops=(Gemm(m=8, k=k, n=8, name="g"),), counts=(1,))
    result = perf_model.evaluate(design, wl)
    return result.status, result.reason


FP8 = {"weight_format": "fp8_e4m3", "act_format": "fp8_e4m3"}


def test_fp8_overflow_bound_is_the_largest_product_times_k():
    each = (448 * 2**9) ** 2  # largest E4M3 magnitude over the smallest subnormal, squared: 52,613,349,376
    for k in (2, 16, 1000):
        need = (k * each).bit_length() + 1
        assert _status(need, k, **FP8)[0] == "ok"
        status, reason = _status(need - 1, k, **FP8)
        assert status == "overflow" and f"needs acc_bits >= {need}" in reason and "fp8_e4m3" in reason


def test_int8_overflow_bound_is_unchanged():
    k = 1000
    need = (k << 14).bit_length() + 1
    assert _status(need, k)[0] == "ok" and _status(need - 1, k)[0] == "overflow"


#: How far a fitted line may sit from a Yosys point of its cell, as a fraction of the point: area is
#: linear in acc_bits (the accumulator's adder and flops) to within 1 % on every point; logic depth
#: in FO4 moves by a few FO4 from one width to the next with ABC's mapping (up to 6.2 % here).
AREA_TOL, FO4_TOL = 0.015, 0.07


def test_fp8_cost_is_the_yosys_fit_of_its_cells():
    """Area and f_max of an fp8 design are those of its cells as Yosys measured them (the stored
    points, ``format_fit.POINTS``), not the int8 terms: the fp8 PE's and output lane's areas,
    recovered from whole designs, and the PE's depth, at the fitted widths (40, 48, 56) and out
    of sample (44, 52, 64)."""
    from perf_model.physical import format_fit
    from perf_model.physical.fmax import design_fmax
    from perf_model.physical.output_stage import lane_um2

    def area_um2(rows: int, acc_bits: int, **formats: str) -> float:
        design = ArrayConfig(rows=rows, cols=4, acc_bits=acc_bits, clock_mhz=100, shadow_stationary=False, **formats)
        wl = Workload(name="one", ops=(Gemm(m=8, k=2, n=8, name="g"),), counts=(1,))
        return perf_model.evaluate(design, wl).total["area_mm2"] * 1e6 * 0.45  # cells: the floor plan's 0.45 off

    def fp8_cells(acc_bits: int) -> tuple[float, float]:
        """One fp8 PE and one fp8 output lane, µm^2: the fp8 design's area over the int8 one's is
        rows x 4 x (fp8 PE - int8 PE) + 4 x (fp8 lane - int8 lane); rows 8 and 4 separate the two."""
        more = {rows: area_um2(rows, acc_bits, **FP8) - area_um2(rows, acc_bits) for rows in (4, 8)}
        pe_more = (more[8] - more[4]) / 16
        lane_more = (more[4] - 16 * pe_more) / 4
        int_pe = float(perf_model.area_coefficients().pe_um2(8, acc_bits, 0))
        return int_pe + pe_more, float(lane_um2(8, acc_bits)) + lane_more

    measured = {(u, ab): (area, fo4) for f, u, ab, area, fo4 in format_fit.POINTS if f == "fp8_e4m3"}
    assert sorted({ab for _, ab in measured}) == [40, 44, 48, 52, 56, 64]
    for acc_bits in (40, 44, 48, 52, 56, 64):
        pe, lane = fp8_cells(acc_bits)
        assert pe == pytest.approx(measured["ws", acc_bits][0], rel=AREA_TOL), acc_bits
        assert lane == pytest.approx(measured["ostage", acc_bits][0], rel=AREA_TOL), acc_bits
        fo4 = design_fmax(ArrayConfig(rows=4, cols=4, acc_bits=acc_bits, **FP8))["stages"]["pe"]["fo4"]
        assert fo4 == pytest.approx(measured["ws", acc_bits][1], rel=FO4_TOL), acc_bits
    # Out of sample, from the Yosys log of the fp8_e4m3 cells at acc_bits 64 (not a fitted width):
    # WS PE 1338.5 µm^2 and 102.6 FO4, output lane 3523.2 µm^2.
    pe, lane = fp8_cells(64)
    assert pe == pytest.approx(1338.5, rel=AREA_TOL) and lane == pytest.approx(3523.2, rel=AREA_TOL)
    assert pe != pytest.approx(float(perf_model.area_coefficients().pe_um2(8, 64, 0)), rel=0.05)  # not int8's


BF16 = {"weight_format": "bf16", "act_format": "bf16"}


def test_bf16_has_no_accumulator_overflow_whatever_k():
    for k in (16, 1 << 20):
        assert _status(32, k, clock_mhz=100, **BF16)[0] == "ok"  # a float32 sum rounds, it does not wrap


def test_bf16_cost_is_the_yosys_measurement_of_its_cells():
    """Area and f_max of a bf16 design come from its cells measured by Yosys at acc_bits 32 (the
    stored points): PE, output lane plus the ofmap's float32 fold adder, the deeper of the two."""
    from perf_model.physical import format_fit
    from perf_model.physical.fmax import design_fmax
    from perf_model.physical.output_stage import lane_um2

    points = {(f, u, ab): (area, fo4) for f, u, ab, area, fo4 in format_fit.POINTS}

    def area(**formats: str) -> float:
        design = ArrayConfig(rows=4, cols=4, input_bits=16, acc_bits=32, clock_mhz=100, shadow_stationary=False,
                             **formats)
        wl = Workload(name="one", ops=(Gemm(m=8, k=1, n=8, name="g"),), counts=(1,))  # int16 fits 32 bits
        return perf_model.evaluate(design, wl).total["area_mm2"]

    int_pe = float(perf_model.area_coefficients().pe_um2(16, 32, 0))
    lane = points[("bf16", "ostage", 32)][0] + points[("bf16", "fold", 32)][0]
    want = 16 * (points[("bf16", "ws", 32)][0] - int_pe) + 4 * (lane - float(lane_um2(16, 32)))
    assert (area(**BF16) - area()) * 1e6 * 0.45 == pytest.approx(want, rel=1e-9)  # cells: the floor plan's 0.45 out
    assert points[("bf16", "ws", 32)][0] > points[("int16", "ws", 32)][0]  # a float32 multiply-add is bigger
    fmax = design_fmax(ArrayConfig(rows=4, cols=4, input_bits=16, acc_bits=32, clock_mhz=100, **BF16))
    assert fmax["stages"]["pe"]["fo4"] == pytest.approx(points[("bf16", "ws", 32)][1])


W4A4 = {"weight_format": "int4", "act_format": "int4"}


def test_the_int4_pe_cost_is_the_yosys_fit_of_its_cells_with_pack_int4_only():
    """A pack_int4 W4A4 design's PEs are the int4 PE's Yosys line (a 4x4 multiplier), checked out of
    sample; its output lanes stay the integer requantiser; W4A4 without pack_int4 and W4A8 packed
    keep the 8-bit PE's cost (their PE is the 8-bit one). Packed buffers hold twice the words, so
    their lane controls carry one more address bit."""
    from perf_model.physical import format_fit
    from perf_model.physical.fmax import design_fmax

    def area(**fields: object) -> float:
        design = ArrayConfig(rows=4, cols=4, acc_bits=32, clock_mhz=500, shadow_stationary=False, **fields)
        wl = Workload(name="one", ops=(Gemm(m=8, k=64, n=8, name="g"),), counts=(1,))
        return perf_model.evaluate(design, wl).total["area_mm2"]

    from perf_model.physical import design_area as area_model
    from perf_model.physical.node_density import REF_NM

    base = ArrayConfig(rows=4, cols=4, acc_bits=32, shadow_stationary=False)
    kib = (base.ifmap_sram_kib, base.weight_sram_kib, base.ofmap_sram_kib)
    assert base.tech_nm == REF_NM  # no scaling of the µm² below

    def control_um2(a_bits: int, b_bits: int) -> float:
        """Flops of the lane controls, whose address widths follow the buffers' lane bits (packed: 4)."""
        outside, _ = area_model.skew_register_bits(4, 4, 0, 8, 32, kib, False, base.double_buffered, (a_bits, b_bits))
        return float(outside) * perf_model.area_coefficients().reg_bit_um2

    plain = area()
    assert area(**W4A4) == plain  # without pack_int4: byte lanes, the 8-bit PE
    # W4A8 packed: the 8-bit PE; its weight buffer holds twice the words (one more address bit)
    w4a8 = (area(weight_format="int4", act_format="int8", pack_int4=True) - plain) * 1e6 * 0.45  # cells (floor plan)
    assert w4a8 == pytest.approx(control_um2(8, 4) - control_um2(8, 8), rel=1e-9) and w4a8 > 0
    points = {(f, u, ab): (a, fo4) for f, u, ab, a, fo4 in format_fit.POINTS}
    c0, c1 = format_fit.AREA_UM2["int4"]["ws"]
    assert c0 + c1 * 32 == pytest.approx(points[("int4", "ws", 32)][0], rel=0.10)  # 32: a checked point
    int_pe = float(perf_model.area_coefficients().pe_um2(8, 32, 0))
    want = 16 * (c0 + c1 * 32 - int_pe) + control_um2(4, 4) - control_um2(8, 8)  # 16 PEs; the lanes unchanged
    assert (area(**W4A4, pack_int4=True) - plain) * 1e6 * 0.45 == pytest.approx(want, rel=1e-9)
    assert points[("int4", "ws", 32)][0] < points[("int8", "ws", 32)][0]  # a 4x4 multiplier is smaller
    assert max(format_fit.CHECK_ERROR["int4"].values()) <= 0.10
    # depth: the integer PE's, a bound on every measured int4 point (Yosys' depth is noisy in acc_bits)
    fmax = design_fmax(ArrayConfig(rows=4, cols=4, acc_bits=32, pack_int4=True, **W4A4))
    assert fmax["stages"]["pe"]["fo4"] == design_fmax(ArrayConfig(rows=4, cols=4, acc_bits=32))["stages"]["pe"]["fo4"]
    for (f, unit, ab), (_, fo4) in points.items():
        if f == "int4" and (("int", unit, ab) in points or ab == 32):
            assert fo4 < points[("int", unit, ab) if ab != 32 else ("int8", unit, 32)][1], (unit, ab)


def test_the_pe_cell_priced_is_the_cell_built():
    """``pe_cell_codes`` (the model) and ``pe_cell_format`` (the RTL) name the same cell: the int4 PE
    only for packed W4A4, the integer model (code 0) for other integer pairs, else the float format."""
    from accel_spec.config import FORMAT_CODES
    from perf_model.physical.format_cost import pe_cell_codes
    from rtl_gen.core.pe import pe_cell_format

    cases = [("int8", "int8", False, "int", 0), ("int4", "int4", True, "int4", 1), ("int4", "int4", False, "int", 0),
             ("int4", "int8", True, "int", 0), ("fp8_e4m3", "fp8_e4m3", False, "fp8_e4m3", 4),
             ("fp8_e5m2", "fp8_e5m2", False, "fp8_e5m2", 5), ("bf16", "bf16", False, "bf16", 6)]
    for w, a, pack, cell, code in cases:
        config = ArrayConfig(rows=4, cols=4, weight_format=w, act_format=a, pack_int4=pack,
                             acc_bits=48 if w.startswith("fp8_e4") else 32)
        assert pe_cell_format(config) == cell
        assert pe_cell_codes([FORMAT_CODES.index(w)], [FORMAT_CODES.index(a)], [pack]).tolist() == [code]
