"""Area: the dataflow-aware PE against Yosys measurements, by-hand totals, selection, calibration hook.

``perf_model.physical.pe_area_fit.POINTS`` are Yosys gate counts of ``rtl_gen``'s PE cells priced with
NanGate45 cell areas (bench/area_calibration.py): an independent measurement of what the PE
model is meant to predict, so the calibrated model is checked against them, not against itself.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from model_testlib import SLOW_MHZ

import perf_model
from accel_spec.config import ArrayConfig, Dataflow
from accel_spec.errors import ModelError
from perf_model.physical import output_stage_fit as fit
from perf_model.physical.pe_area_fit import POINTS
from workloads.ops import Gemm, Workload

DFF, MUX = 4.522, 1.862  # NanGate FreePDK45 DFF_X1, MUX2_X1 (µm^2)
WORKLOAD = Workload(name="w", ops=(Gemm(m=100, k=100, n=100),))


def _area(config: ArrayConfig, area: perf_model.AreaCoefficients | None = None) -> float:
    """Die area of ``config`` (evaluated at a clock it reaches: area does not depend on the clock)."""
    slow = dataclasses.replace(config, clock_mhz=SLOW_MHZ)
    return perf_model.evaluate(slow, WORKLOAD, area=area).total["area_mm2"]


def _pairs() -> dict[tuple[int, int], dict[str, float]]:
    """Yosys area per (input_bits, acc_bits) and cell, for width pairs measured for both cells."""
    by: dict[tuple[int, int], dict[str, float]] = {}
    for cell, ib, ab, um2, *_ in POINTS:
        by.setdefault((ib, ab), {})[cell] = um2
    return {key: cells for key, cells in by.items() if set(cells) == {"ws", "os"}}


def test_default_is_the_calibrated_set():
    assert perf_model.area_coefficients() == perf_model.CALIBRATED_AREA
    assert perf_model.AreaCoefficients() == perf_model.CALIBRATED_AREA
    assert perf_model.HOROWITZ_AREA != perf_model.CALIBRATED_AREA


@pytest.mark.parametrize(("cell", "ib", "ab", "yosys_um2"), [p[:4] for p in POINTS])
def test_calibrated_pe_within_10_percent_of_yosys(cell, ib, ab, yosys_um2):
    model = float(perf_model.area_coefficients().pe_um2(ib, ab, cell))
    assert abs(model / yosys_um2 - 1) <= 0.10


def test_points_cover_both_cells_and_widths():
    # The 10% check above is only meaningful if the measurements span the space.
    assert {p[0] for p in POINTS} == {"ws", "os"}
    assert {p[1] for p in POINTS} == {8, 16}
    assert len({p[2] for p in POINTS}) >= 4
    assert len(_pairs()) >= 6


def test_ws_and_os_pe_differ_the_way_yosys_says():
    k = perf_model.area_coefficients()
    ratios = []
    for (ib, ab), yosys in _pairs().items():
        ws, os_ = float(k.pe_um2(ib, ab, "ws")), float(k.pe_um2(ib, ab, "os"))
        assert np.sign(ws - os_) == np.sign(yosys["ws"] - yosys["os"]), (ib, ab)
        assert ws / os_ == pytest.approx(yosys["ws"] / yosys["os"], rel=0.10)
        ratios.append(yosys["ws"] / yosys["os"])
    assert max(ratios) > 1.3  # Yosys: the WS cell is much bigger at wide accumulators


def test_input_stationary_uses_the_ws_cell():
    k = perf_model.area_coefficients()
    ib, ab = np.array([8, 8, 16]), np.array([16, 32, 64])
    np.testing.assert_array_equal(k.pe_um2(ib, ab, Dataflow.IS), k.pe_um2(ib, ab, "ws"))
    assert k.cell("is") is k.ws_cell and k.cell(Dataflow.OS) is k.os_cell


def test_pe_registers_are_the_flops_yosys_counts():
    k = perf_model.area_coefficients()
    for cell, ib, ab, _, _, flops in POINTS:
        parts = k.pe_breakdown_um2(ib, ab, cell)
        assert float(parts["registers"]) == pytest.approx(flops * k.reg_bit_um2)
        # Selects from rtl_gen's PE: WS loads s on shift (ib), OS picks s_in/product/sum (2 * ab).
        assert float(parts["selects"]) == pytest.approx((ib if cell == "ws" else 2 * ab) * k.mux_um2)


def test_horowitz_prior_pe_by_hand():
    k = perf_model.HOROWITZ_AREA
    # Horowitz ISSCC 2014: 8-bit mult 282, 32-bit add 137 µm^2; DFF_X1 and MUX2_X1 per flop/select.
    assert float(k.pe_um2(8, 32, "ws")) == pytest.approx(282 + 137 + (8 + 32 + 8) * DFF + 8 * MUX)
    assert float(k.pe_um2(8, 32, "os")) == pytest.approx(282 + 137 + (8 + 8 + 32 + 1) * DFF + 64 * MUX)
    mult16 = 282 * 2 ** (math.log(3495 / 282) / math.log(4))  # power law between 8 and 32 bits
    add48 = 36 * 6 ** (math.log(137 / 36) / math.log(4))
    assert float(k.pe_um2(16, 48, "is")) == pytest.approx(mult16 + add48 + (32 + 48) * DFF + 16 * MUX)


def test_calibrated_pe_terms_by_hand():
    k = perf_model.CALIBRATED_AREA
    for cell, c in (("ws", k.ws_cell), ("os", k.os_cell)):
        # Calibrated form: multiplier ~ ib^2, adder ~ ab, extension per bit above 2 * ib.
        assert c.mult_32b_um2 == pytest.approx(16 * c.mult_8b_um2)
        assert c.add_32b_um2 == pytest.approx(4 * c.add_8b_um2)
        flops, selects = (80, 16) if cell == "ws" else (81, 96)
        logic = 4 * c.mult_8b_um2 + 6 * c.add_8b_um2 + (48 - 32) * c.ext_bit_um2
        assert float(k.pe_um2(16, 48, cell)) == pytest.approx(flops * k.reg_bit_um2 + selects * k.mux_um2 + logic)
    assert k.ws_cell.ext_bit_um2 > k.os_cell.ext_bit_um2  # the WS cell's merged multiply-accumulate


def test_area_by_hand_and_scaling():
    # every term is cell area at 45 nm; the floor plan is the cells over 0.45 (TPU v1's calibration)
    floor = 1 / 0.45
    config = ArrayConfig(rows=4, cols=8, ifmap_sram_kib=2, weight_sram_kib=3, ofmap_sram_kib=5, tech_nm=45,
                         shadow_stationary=False)
    prior = perf_model.HOROWITZ_AREA
    sram = (2 + 3 + 5) * 8192 * 0.346 / 0.6
    # WS: 8-bit mult, 32-bit add, a/v/s registers, s's load select. Skew by address delay lines:
    # ifmap 2 KiB of 4-byte words = 512 words (9 address bits), 4 lanes: 3 taps of 10 bits + 4
    # valid flops; weight 3 KiB of 8-byte words = 384 words (9 bits), 8 lanes: 7 taps of 10 + 8
    # valid; ofmap 5 KiB of 8 x 32-bit words = 160 words (8 address bits): 8 taps of 8 + 2 (enable,
    # add); 7 column strobes; the controller's o line: R = 4 deep, 8 + 4 bits.
    pe_ws = 282.0 + 137.0 + (2 * 8 + 32) * DFF + 8 * MUX
    skew_ws = (3 * 10 + 4 + 7 * 10 + 8 + 8 * 10 + 7 + 4 * 12) * DFF
    # Output stage: 8 lanes of the Yosys-fitted lane (int8, 32-bit acc: no wide-acc term) and the
    # qparam SRAM, 4096 channels of 32 + 32 + 5 + 3 * 8 = 93 bits, priced like the buffers.
    lane = fit.BASE_UM2 + 8 * fit.PER_INPUT_BIT_UM2
    out_stage = 8 * lane + 4096 * 93 * 0.346 / 0.6
    # The run's base addresses (9 + 9 + 8 bits) and, double buffered, the host's ofmap half (1).
    skew_bases = (9 + 9 + 8 + 1) * DFF
    # Memory system: the DMA's widest DRAM word is a qparam word, 8 lanes of 16 bytes = 1024 bits;
    # logic fixed + per bit (perf_model.physical.design_area's fitted constants), and the 512 x 32-byte command queue.
    out_stage += 47401.3 + 85.040 * 1024 + 512 * 32 * 8 * 0.346 / 0.6
    skew_ws += skew_bases
    assert _area(config, prior) == pytest.approx((32 * pe_ws + skew_ws + 20000 + sram + out_stage) * 1e-6 * floor)
    # OS: also the f marker, two selects per accumulator bit; its 3-flop row line; 8 x 32 result flops.
    pe_os = 282.0 + 137.0 + (2 * 8 + 32 + 1) * DFF + 2 * 32 * MUX
    skew_os = skew_ws + (3 + 8 * 32) * DFF
    os_config = dataclasses.replace(config, dataflow=Dataflow.OS)
    assert _area(os_config, prior) == pytest.approx((32 * pe_os + skew_os + 20000 + sram + out_stage) * 1e-6 * floor)
    # Shadow registers: WS a second weight register (8), marker and phase delay flops (2), selects
    # for w's load, s's swap and the operand (2 x 8); strobes carry a phase (7 more), a 3-flop marker line.
    shadow_ws = pe_ws + (8 + 2) * DFF + 2 * 8 * MUX
    extra = (7 + 3) * DFF
    shadowed = dataclasses.replace(config, shadow_stationary=True)
    want = (32 * shadow_ws + skew_ws + extra + 20000 + sram + out_stage) * 1e-6 * floor
    assert _area(shadowed, prior) == pytest.approx(want)
    # OS: a shadow accumulator (32) and the phase delay (1), 32 more selects; the o line one deeper.
    shadow_os = pe_os + (32 + 1) * DFF + 32 * MUX
    os_shadowed = dataclasses.replace(os_config, shadow_stationary=True)
    want = (32 * shadow_os + skew_os + (7 + 12) * DFF + 20000 + sram + out_stage) * 1e-6 * floor
    assert _area(os_shadowed, prior) == pytest.approx(want)
    at90 = _area(dataclasses.replace(config, tech_nm=90))
    assert at90 == pytest.approx(4 * _area(config))


def test_vectorised_path_picks_the_cell_per_design():
    configs = [ArrayConfig(rows=4, cols=8, dataflow=df, input_bits=ib, acc_bits=ab, clock_mhz=SLOW_MHZ)
               for df in ("ws", "os", "is") for ib, ab in ((8, 32), (16, 48))]
    designs = perf_model.DesignArrays.from_configs(configs)
    base = perf_model.CALIBRATED_AREA
    # Change one cell at a time: only the designs built from that cell move, by R*C times the PE change.
    bigger_os = dataclasses.replace(base, os_cell=dataclasses.replace(base.os_cell, scale=2.0))
    bigger_ws = dataclasses.replace(base, ws_cell=dataclasses.replace(base.ws_cell, ext_bit_um2=100.0))
    plain = perf_model.evaluate_designs(designs, WORKLOAD, area=base).area_mm2
    for changed, cells in ((bigger_os, ("os",)), (bigger_ws, ("ws", "is"))):
        moved = perf_model.evaluate_designs(designs, WORKLOAD, area=changed).area_mm2
        for i, c in enumerate(configs):
            if c.dataflow.value not in cells:
                assert moved[i] == plain[i]
                continue
            assert moved[i] > plain[i]
            sh = c.shadow_stationary
            pe_delta = changed.pe_um2(c.input_bits, c.acc_bits, c.dataflow, sh) - base.pe_um2(
                c.input_bits, c.acc_bits, c.dataflow, sh)
            assert moved[i] - plain[i] == pytest.approx(32 * float(pe_delta) * 1e-6 / 0.45)  # floor plan
    # And the vectorised areas equal the scalar API's, design by design.
    np.testing.assert_allclose(plain, [_area(c, base) for c in configs], rtol=1e-12)


def test_calibrate_scale_per_cell_and_install():
    before = perf_model.area_coefficients()
    try:
        base = perf_model.HOROWITZ_AREA
        ws, os_ = float(base.pe_um2(8, 32, "ws")), float(base.pe_um2(16, 48, "os"))
        os_shadow = float(base.pe_um2(16, 48, "os", True))  # the config below has shadow registers
        shrink = (28 / 45) ** 2  # measured at 28 nm: scaled back to 45 nm by (45/28)^2
        measured = [("ws", 8, 32, 1.5 * ws * shrink), (Dataflow.IS, 8, 32, 1.5 * ws * shrink),
                    ("os", 16, 48, 0.8 * os_ * shrink)]
        fitted = perf_model.calibrate_pe_area(measured, tech_nm=28, base=base)
        assert fitted.ws_cell.scale == pytest.approx(1.5)
        assert fitted.os_cell.scale == pytest.approx(0.8)
        assert perf_model.area_coefficients() is fitted
        # 48-bit accumulators: 32 bits overflow on two 16-bit products (a design with status overflow has no area)
        config = ArrayConfig(rows=4, cols=4, dataflow="os", input_bits=16, acc_bits=48)
        assert _area(config) - _area(config, base) == pytest.approx(16 * (0.8 - 1) * os_shadow * 1e-6 / 0.45)
    finally:
        perf_model.set_area_coefficients(before)
    assert perf_model.area_coefficients() is before


def test_calibrate_points_without_cell_apply_to_every_cell():
    base = perf_model.HOROWITZ_AREA
    ws, os_ = float(base.pe_um2(8, 32, "ws")), float(base.pe_um2(8, 32, "os"))
    fitted = perf_model.calibrate_pe_area([(8, 32, 2 * ws)], install=False, base=base)
    assert fitted.ws_cell.scale == pytest.approx(2.0)
    assert fitted.os_cell.scale == pytest.approx(2 * ws / os_)
    # A cell without points keeps the base's terms (scale reset to 1).
    only_ws = perf_model.calibrate_pe_area([("ws", 8, 32, 2 * ws)], install=False, base=base)
    assert only_ws.os_cell == base.os_cell and only_ws.ws_cell.scale == pytest.approx(2.0)


def test_calibrate_terms_recovers_known_cells():
    # Synthetic measurements from known logic terms, the structure written out by hand.
    truth = {"ws": (500.0, 40.0, 20.0), "os": (450.0, 30.0, 5.0)}
    measured = []
    for cell, (m8, a8, ext) in truth.items():
        for ib, ab in ((8, 16), (8, 32), (8, 64), (16, 32), (16, 64)):
            flops = 2 * ib + ab + (cell == "os")
            selects = ib if cell == "ws" else 2 * ab
            um2 = flops * DFF + selects * MUX + m8 * (ib / 8) ** 2 + a8 * ab / 8 + ext * (ab - 2 * ib)
            measured.append((cell, ib, ab, um2))
    fitted = perf_model.calibrate_pe_area(measured, install=False, base=perf_model.HOROWITZ_AREA, fit="terms")
    for cell, (m8, a8, ext) in truth.items():
        c = fitted.cell(cell)
        assert (c.mult_8b_um2, c.add_8b_um2, c.ext_bit_um2) == pytest.approx((m8, a8, ext), rel=1e-9)
        assert (c.mult_32b_um2, c.add_32b_um2, c.scale) == pytest.approx((16 * m8, 4 * a8, 1.0))


def test_calibrate_terms_on_yosys_points_meets_the_target():
    measured = [p[:4] for p in POINTS]
    fitted = perf_model.calibrate_pe_area(measured, install=False, base=perf_model.HOROWITZ_AREA, fit="terms")
    errors = [float(fitted.pe_um2(ib, ab, cell)) / um2 - 1 for cell, ib, ab, um2 in measured]
    assert max(abs(e) for e in errors) <= 0.10


def test_calibrate_terms_needs_two_input_widths():
    with pytest.raises(ModelError, match="two or more input widths"):
        perf_model.calibrate_pe_area([("ws", 8, 16, 800.0), ("ws", 8, 32, 1300.0), ("ws", 8, 64, 2400.0)],
                                     install=False, fit="terms")


@pytest.mark.parametrize("measured", [
    [], [(8, 32, -1.0)], [(8, 32)], [(8, True, 5.0)], [("xs", 8, 32, 5.0)], [(0, 8, 32, 5.0)],
    [("ws", 8, 32, 5.0, 1)], [(8, 32, float("nan"))],
])
def test_calibrate_rejects_bad_points(measured):
    with pytest.raises(ModelError):
        perf_model.calibrate_pe_area(measured, install=False)


def test_calibrate_rejects_bad_options():
    with pytest.raises(ModelError, match="fit must be one of scale, terms, not 'all'"):
        perf_model.calibrate_pe_area([("ws", 8, 32, 5.0)], install=False, fit="all")
    with pytest.raises(ModelError, match="tech_nm"):
        perf_model.calibrate_pe_area([("ws", 8, 32, 5.0)], install=False, tech_nm=0)


def test_bad_coefficients_and_dataflows_are_model_errors():
    with pytest.raises(ModelError, match="mult_8b_um2 must be a finite number >= 0, not -1"):
        perf_model.PeCellArea(mult_8b_um2=-1, mult_32b_um2=10, add_8b_um2=1, add_32b_um2=4)
    with pytest.raises(ModelError, match="both be 0 or both be positive"):
        perf_model.PeCellArea(mult_8b_um2=0, mult_32b_um2=10, add_8b_um2=1, add_32b_um2=4)
    with pytest.raises(ModelError, match="dataflow"):
        perf_model.CALIBRATED_AREA.pe_um2(8, 32, "xs")
    with pytest.raises(ModelError, match="dataflow codes"):
        perf_model.CALIBRATED_AREA.pe_um2(8, 32, np.array([0, 3]))
    with pytest.raises(ModelError, match="AreaCoefficients"):
        perf_model.set_area_coefficients({"pe_scale": 2})
