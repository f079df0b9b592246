"""Silicon area in mm^2, with documented coefficients and a calibration hook.

Coefficients at 45 nm (µm^2):

* integer adder 8-bit 36, 32-bit 137; integer multiplier 8-bit 282, 32-bit 3495
  (M. Horowitz, ISSCC 2014, Figure 1.1.9), power law between the two widths as for energy;
* register bit 4.522 (NanGate FreePDK45 Open Cell Library, ``DFF_X1``);
* SRAM bit 0.346 (Intel 45 nm 6T cell, Mistry et al., IEDM 2007) over an assumed array
  efficiency of 0.6 (decoders, sense amplifiers, I/O);
* controller and buffer glue: a fixed 20,000 (assumption, until the RTL's controller is
  synthesised).

A PE (see ``rtl_gen``) is a ``input_bits`` multiplier, an ``acc_bits`` adder and three
registers ``a`` (``input_bits``), ``v`` and ``s`` (``acc_bits`` and ``input_bits`` in either
order): ``2 * input_bits + acc_bits`` bits. Operands are skewed the way ``rtl_gen`` does it:
every buffer is one SRAM bank per lane and a skewed buffer's lanes are addressed through a
tapped delay line of address and enable registers, ``(lanes - 1) * (address bits + 1)`` flops
(plus a valid flop per lane for the operands): the left operand (R lanes: the ifmap buffer,
the weight buffer for IS), OS also the top operand (C lanes of the weight buffer) and a
``C * acc_bits`` result register, WS/IS the ofmap (``C`` taps for its read-modify-write).

Area scales with the square of the feature size: ``A(tech) = A(45) * (tech / 45) ** 2``.

Calibration: :func:`calibrate_pe_area` fits ``pe_scale`` (a factor on the analytic PE area) to
measured PE areas, e.g. from Yosys cell counts of ``rtl_gen``'s PE times a cell area, and
installs the result as the default used by the model.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable

import numpy as np

from accel_dse.errors import ModelError
from perf_model import timing

__all__ = [
    "AreaCoefficients", "DEFAULT_AREA", "area_coefficients", "set_area_coefficients",
    "calibrate_pe_area", "design_area_mm2",
]

_REF_NM = 45.0


def _power_law(bits: np.ndarray, at8: float, at32: float) -> np.ndarray:
    alpha = math.log(at32 / at8) / math.log(4.0)
    return at8 * (np.asarray(bits, dtype=np.float64) / 8.0) ** alpha


@dataclasses.dataclass(frozen=True)
class AreaCoefficients:
    """Area coefficients at 45 nm in µm^2 (sources in the module docstring).

    Attributes:
        mult_8b_um2, mult_32b_um2: integer multiplier, 8 and 32 bits.
        add_8b_um2, add_32b_um2: integer adder, 8 and 32 bits.
        reg_bit_um2: one flip-flop.
        sram_cell_um2: one 6T SRAM cell.
        sram_efficiency: fraction of an SRAM macro that is cells.
        controller_um2: controller and buffer glue, fixed.
        pe_scale: calibration factor on the analytic PE area (1: uncalibrated).
    """

    mult_8b_um2: float = 282.0
    mult_32b_um2: float = 3495.0
    add_8b_um2: float = 36.0
    add_32b_um2: float = 137.0
    reg_bit_um2: float = 4.522
    sram_cell_um2: float = 0.346
    sram_efficiency: float = 0.6
    controller_um2: float = 20000.0
    pe_scale: float = 1.0

    def pe_um2(self, input_bits: np.ndarray, acc_bits: np.ndarray) -> np.ndarray:
        """Area of one PE at 45 nm, µm^2 (times ``pe_scale``)."""
        ib = np.asarray(input_bits, dtype=np.float64)
        ab = np.asarray(acc_bits, dtype=np.float64)
        logic = _power_law(ib, self.mult_8b_um2, self.mult_32b_um2) + _power_law(
            ab, self.add_8b_um2, self.add_32b_um2)
        return self.pe_scale * (logic + (2 * ib + ab) * self.reg_bit_um2)

    def sram_um2_per_bit(self) -> float:
        """Area of one stored bit including periphery, µm^2."""
        return self.sram_cell_um2 / self.sram_efficiency


DEFAULT_AREA = AreaCoefficients()
_current = [DEFAULT_AREA]


def area_coefficients() -> AreaCoefficients:
    """The coefficients the model uses when none are passed explicitly."""
    return _current[0]


def set_area_coefficients(coefficients: AreaCoefficients) -> AreaCoefficients:
    """Make ``coefficients`` the model's default; returns the previous default."""
    if not isinstance(coefficients, AreaCoefficients):
        raise ModelError(f"area coefficients must be an AreaCoefficients, not {coefficients!r}")
    previous = _current[0]
    _current[0] = coefficients
    return previous


def calibrate_pe_area(
    measured: Iterable[tuple[int, int, float]], *, tech_nm: float = 45.0, install: bool = True,
    base: AreaCoefficients | None = None,
) -> AreaCoefficients:
    """Fit ``pe_scale`` so the analytic PE area matches measured PE areas (least squares).

    Args:
        measured: ``(input_bits, acc_bits, pe_area_um2)`` triples measured at ``tech_nm``
            (e.g. Yosys cell counts of ``rtl_gen``'s PE times a cell area).
        tech_nm: node of the measurements; they are scaled to 45 nm by ``(45 / tech_nm)^2``.
        install: make the result the model's default (:func:`set_area_coefficients`).
        base: coefficients to calibrate (default: the current default with ``pe_scale = 1``).

    Returns:
        The calibrated coefficients.

    Raises:
        ModelError: no measurements, or a width/area that is not positive.
    """
    points = list(measured)
    if not points:
        raise ModelError("calibrate_pe_area needs at least one (input_bits, acc_bits, area_um2) point")
    if isinstance(tech_nm, bool) or not isinstance(tech_nm, (int, float)) or not tech_nm > 0:
        raise ModelError(f"tech_nm must be a positive number, not {tech_nm!r}")
    for point in points:
        if len(point) != 3 or any(isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0
                                  or not math.isfinite(v) for v in point):
            raise ModelError(f"PE area point must be (input_bits, acc_bits, area_um2) > 0, not {point!r}")
    start = dataclasses.replace(base or area_coefficients(), pe_scale=1.0)
    model = np.array([float(start.pe_um2(ib, ab)) for ib, ab, _ in points])
    area45 = np.array([a for _, _, a in points]) * (_REF_NM / float(tech_nm)) ** 2
    scale = float((model * area45).sum() / (model * model).sum())
    result = dataclasses.replace(start, pe_scale=scale)
    if install:
        set_area_coefficients(result)
    return result


def design_area_mm2(
    rows: np.ndarray, cols: np.ndarray, dataflow: np.ndarray, input_bits: np.ndarray, acc_bits: np.ndarray,
    kib: tuple[np.ndarray, np.ndarray, np.ndarray], tech_nm: np.ndarray, coefficients: AreaCoefficients | None = None,
) -> np.ndarray:
    """Area of whole designs in mm^2 (vectorised; see the module docstring).

    Args:
        rows, cols, dataflow, input_bits, acc_bits, tech_nm: design columns.
        kib: the ifmap, weight and ofmap buffer sizes (KiB).
        coefficients: default :func:`area_coefficients`.
    """
    k = coefficients or area_coefficients()
    df = np.asarray(dataflow)
    R = np.asarray(rows, dtype=np.float64)
    C = np.asarray(cols, dtype=np.float64)
    ib = np.asarray(input_bits, dtype=np.float64)
    ab = np.asarray(acc_bits, dtype=np.float64)
    elems = timing.word_elems(df, rows, cols)
    bits = (input_bits, input_bits, acc_bits)
    address = [np.ceil(np.log2(np.maximum(timing.buffer_depth_words(kib[b], elems[b], bits[b]), 2)))
               for b in range(3)]
    is_os, is_is = df == 1, df == 2
    left = (R - 1) * (np.where(is_is, address[1], address[0]) + 1) + R
    top_os = (C - 1) * (address[1] + 1) + C + C * ab
    ofmap_ws_is = C * (address[2] + 1)
    skew_bits = left + np.where(is_os, top_os, ofmap_ws_is)
    sram_kib = sum(np.asarray(x, dtype=np.float64) for x in kib)
    um2 = (R * C * k.pe_um2(ib, ab) + skew_bits * k.reg_bit_um2 + k.controller_um2
           + sram_kib * 8192 * k.sram_um2_per_bit())
    return um2 * 1e-6 * (np.asarray(tech_nm, dtype=np.float64) / _REF_NM) ** 2
