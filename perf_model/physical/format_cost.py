"""What an operand format changes in a design's cost: the Yosys fit of its cells (``format_fit``).

Integer formats (int4 in 8-bit lanes, int8, int16) cost what their lanes cost (the integer
terms of :mod:`perf_model.physical.pe_area`, ``energy``, ``fmax``), except the int4 PE of a
``pack_int4`` W4A4 design (:func:`pe_cell_codes`): its area is the Yosys line of its cell (a 4x4
multiplier), its depth and output lane the integer ones (its measured depth is below the
integer PE's at every width). For a built float format
(fp8_e4m3, bf16), ``bench/format_calibration.py`` synthesised the generated cells and fitted, as
lines in ``acc_bits`` checked out of sample, the plain PE's area and logic depth per cell (WS/IS,
OS) and the output-stage lane's area and depth (bf16, whose accumulator is always a 32-bit
float32: the cells measured at that width, plus ``fold``, the ofmap's float32 fold adder, whose
area joins each output lane's and whose depth joins the output path's). The model takes those in place of the integer
figures (a shadow register's flops still come from the integer model's structure), and MAC
energy is the integer figure times the ratio of the format's PE area to the integer PE's.
"""

from __future__ import annotations

import functools
import itertools
from typing import Any

import numpy as np

from accel_spec.config import FORMAT_CODES
from accel_spec.number_formats import AUTO, int_format, parse_format, pe_cell
from perf_model import timing
from perf_model.physical import format_fit

__all__ = ["FormatCost", "format_cost", "format_energy_ratio", "pe_cell_codes"]

_OS = timing.DATAFLOW_CODES["os"]


class FormatCost:
    """Per-design figures of float operand formats (arrays over designs; valid where ``is_float``).

    Attributes:
        is_float: the design's PE is priced by its format's cells (a built float format, or the
            int4 PE of a ``pack_int4`` W4A4 design: :func:`pe_cell_codes`).
        has_lane: the format has its own output-stage lane and depths (the int4 PE keeps the
            integer lane, and the integer PE's depth: every measured int4 point lies below it).
        pe_um2: one plain PE (no shadow register), µm^2 at 45 nm (where ``is_float``).
        lane_um2: one output-stage lane (and its fold adder, bf16), µm^2 at 45 nm.
        pe_fo4, output_fo4: logic depth of the PE and of the output stage's deepest stage, FO4
            (where ``has_lane``).
    """

    def __init__(self, is_float: np.ndarray, figures: dict[str, np.ndarray], has_lane: np.ndarray) -> None:
        self.is_float = is_float
        self.has_lane = has_lane
        self.pe_um2 = figures["pe_um2"]
        self.lane_um2 = figures["lane_um2"]
        self.pe_fo4 = figures["pe_fo4"]
        self.output_fo4 = figures["output_fo4"]


def _line(c: tuple[float, float], ab: np.ndarray) -> np.ndarray:
    return c[0] + c[1] * ab


def format_cost(weight_format: Any, dataflow: Any, acc_bits: Any) -> FormatCost:
    """The :class:`FormatCost` of designs with these ``weight_format`` codes (a float pair is one
    format for both operands, so the weight's names it), dataflow codes and ``acc_bits``."""
    codes = np.asarray(weight_format, dtype=np.int64)
    is_os = np.asarray(dataflow) == _OS
    ab = np.asarray(acc_bits, dtype=np.float64)
    shape = np.broadcast(codes, is_os, ab).shape
    is_float = np.zeros(shape, dtype=bool)
    has_lane = np.zeros(shape, dtype=bool)
    figures = {name: np.zeros(shape) for name in ("pe_um2", "lane_um2", "pe_fo4", "output_fo4")}
    for name, area in format_fit.AREA_UM2.items():
        here = codes == FORMAT_CODES.index(name)
        is_float = is_float | here
        if "ostage" not in area:  # the PE's area only (int4): lane and depths stay the integer model's
            pe = np.where(is_os, _line(area["os"], ab), _line(area["ws"], ab))
            figures["pe_um2"] = np.where(here, pe, figures["pe_um2"])
            continue
        depth = format_fit.DEPTH_FO4[name]
        has_lane = has_lane | here
        fold_area, fold_depth = area.get("fold", (0.0, 0.0)), depth.get("fold", (0.0, 0.0))
        values = {"pe_um2": np.where(is_os, _line(area["os"], ab), _line(area["ws"], ab)),
                  "lane_um2": _line(area["ostage"], ab) + _line(fold_area, ab),
                  "pe_fo4": np.where(is_os, _line(depth["os"], ab), _line(depth["ws"], ab)),
                  "output_fo4": np.maximum(_line(depth["ostage"], ab), _line(fold_depth, ab))}
        figures = {k: np.where(here, values[k], figures[k]) for k in figures}
    return FormatCost(is_float, figures, has_lane)


def pe_cell_codes(weight_format: Any, act_format: Any, pack_int4: Any) -> np.ndarray:
    """Per design, the format code whose cells price its PE (the ``weight_format`` argument of
    :func:`format_cost`): :func:`accel_spec.number_formats.pe_cell`, the cell the RTL builds, as a
    code (``"int"``, the integer model, is 0), looked up per design in a table of every format pair."""
    w = np.asarray(weight_format, dtype=np.int64)
    a = np.asarray(act_format, dtype=np.int64)
    return _cell_table()[w, a, np.asarray(pack_int4, dtype=bool).astype(np.int64)]


@functools.cache
def _cell_table() -> np.ndarray:
    """``[weight code, act code, pack_int4]`` -> the code of :func:`pe_cell`'s cell (``auto`` is an
    integer format: ``int_format`` of either width gives the same cell)."""
    fmts = [int_format(8) if name == AUTO else parse_format(name) for name in FORMAT_CODES]
    table = np.zeros((len(fmts), len(fmts), 2), dtype=np.int64)
    for (i, w), (j, a), pack in itertools.product(enumerate(fmts), enumerate(fmts), (0, 1)):
        cell = pe_cell(w, a, bool(pack))
        table[i, j, pack] = 0 if cell == "int" else FORMAT_CODES.index(cell)
    return table


def format_energy_ratio(area: Any, d: Any) -> np.ndarray:
    """Per design, MAC energy against the integer figure: the format's plain PE area over the
    integer model's (``area``: ``AreaCoefficients``; ``d``: ``DesignArrays``), 1 for integers."""
    fmt = format_cost(pe_cell_codes(d.weight_format, d.act_format, d.pack_int4), d.dataflow, d.acc_bits)
    int_pe = area.pe_um2(d.input_bits, d.acc_bits, d.dataflow, False)
    return np.where(fmt.is_float, fmt.pe_um2 / int_pe, 1.0)
