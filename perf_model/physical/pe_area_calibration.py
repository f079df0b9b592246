"""The PE area calibration hook: fit the PE cells' areas to measured PE areas.

**Calibration hook.** :func:`calibrate_pe_area` fits measured PE areas per cell, either one
factor per cell (``fit="scale"``) or the cell's logic terms (``fit="terms"``, as the bench
does), and installs the result as the model's default.
The cells, their terms and the coefficient sets are :mod:`perf_model.physical.pe_area`.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from accel_spec.config import Dataflow
from accel_spec.errors import ModelError
from perf_model import timing
from perf_model.physical.node_density import logic_area_scale
from perf_model.physical.pe_area import (
    PE_CELLS,
    AreaCoefficients,
    PeCellArea,
    area_coefficients,
    dataflow_codes,
    pe_structure,
    set_area_coefficients,
)

__all__ = ["calibrate_pe_area"]

_FIT_MODES = ("scale", "terms")
_OS = timing.DATAFLOW_CODES["os"]


def _parse_point(point: object) -> tuple[str | None, float, float, float]:
    """``(cell or None, input_bits, acc_bits, area)`` of one measured point."""
    if not isinstance(point, (tuple, list)) or len(point) not in (3, 4):
        raise ModelError(f"PE area point must be (cell, input_bits, acc_bits, area_um2) or "
                         f"(input_bits, acc_bits, area_um2), not {point!r}")
    cell: str | None = None
    if len(point) == 4:
        code = dataflow_codes(point[0]) if isinstance(point[0], (str, Dataflow)) else None
        if code is None:
            raise ModelError(f"PE area point cell must be ws, os or is, not {point[0]!r} (in {point!r})")
        cell = "os" if int(code) == _OS else "ws"
    numbers = point[-3:]
    if any(isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not v > 0
           for v in numbers):
        raise ModelError(f"PE area point widths and area must be positive numbers, not {point!r}")
    return cell, float(numbers[0]), float(numbers[1]), float(numbers[2])


def _fit_terms(cell: str, base: AreaCoefficients, ib: np.ndarray, ab: np.ndarray, area: np.ndarray) -> PeCellArea:
    """Refit one cell's logic terms (alpha_m 2, alpha_a 1) by non-negative relative least squares."""
    code = _OS if cell == "os" else 0
    flops, selects = pe_structure(ib, ab, np.full(ib.shape, code))
    rest = area - flops * base.reg_bit_um2 - selects * base.mux_um2
    terms = np.column_stack([(ib / 8) ** 2, ab / 8, np.maximum(ab - 2 * ib, 0.0)])
    if np.linalg.matrix_rank(terms) < 3:
        raise ModelError(f"fit='terms' of the {cell} cell needs points at two or more input widths and "
                         f"accumulator widths beyond 2 * input_bits, not {len(area)} point(s) "
                         f"{sorted(set(zip(ib.astype(int).tolist(), ab.astype(int).tolist(), strict=True)))}")
    best: tuple[float, np.ndarray] | None = None
    for mask in itertools.product((False, True), repeat=3):  # non-negative: best over active sets
        use = np.flatnonzero(mask)
        if use.size == 0:
            continue
        coef, *_ = np.linalg.lstsq(terms[:, use] / area[:, None], rest / area, rcond=None)
        if (coef < 0).any():
            continue
        full = np.zeros(3)
        full[use] = coef
        residual = float((((terms @ full) - rest) / area) @ (((terms @ full) - rest) / area))
        if best is None or residual < best[0]:
            best = (residual, full)
    if best is None:
        raise ModelError(f"fit='terms' of the {cell} cell found no non-negative logic terms: the measured "
                         "areas are smaller than the cell's registers and selects")
    m8, a8, ext = (float(v) for v in best[1])
    return PeCellArea(mult_8b_um2=m8, mult_32b_um2=16 * m8, add_8b_um2=a8, add_32b_um2=4 * a8, ext_bit_um2=ext)


def calibrate_pe_area(
    measured: Iterable[tuple[Any, ...]], *, tech_nm: float = 45.0, install: bool = True,
    base: AreaCoefficients | None = None, fit: str = "scale",
) -> AreaCoefficients:
    """Fit the PE cells' areas to measured PE areas, per cell.

    Each cell (WS, also used by IS; OS) is fitted to its own points plus the points without a
    cell; a cell without points keeps ``base``'s coefficients. Errors are relative, so small
    and large PEs weigh alike.

    Args:
        measured: ``(cell, input_bits, acc_bits, pe_area_um2)`` with cell a ``Dataflow`` or
            ``"ws"``/``"os"``/``"is"``, or ``(input_bits, acc_bits, pe_area_um2)`` for every
            cell; areas at ``tech_nm`` (e.g. Yosys gate counts of ``rtl_gen``'s PE priced
            with a cell library).
        tech_nm: node of the measurements (cell areas, not floor plan); they are scaled to 45 nm
            by the node's logic density (:func:`perf_model.physical.node_density.logic_area_scale`).
        install: make the result the model's default (:func:`set_area_coefficients`).
        base: coefficients to calibrate (default: the current default); its register and
            select prices are kept, its cells' ``scale`` is reset to 1.
        fit: ``"scale"``, one least-squares factor per cell on ``base``'s terms; or
            ``"terms"``, the cell's multiplier, adder and extension terms refitted (needs two
            input widths and three points or more per fitted cell).

    Returns:
        The calibrated coefficients.

    Raises:
        ModelError: no points, a malformed point, an unknown ``fit``, a non-positive
            ``tech_nm``, or too few distinct points for ``fit="terms"``.
    """
    if fit not in _FIT_MODES:
        raise ModelError(f"fit must be one of {', '.join(_FIT_MODES)}, not {fit!r}")
    if isinstance(tech_nm, bool) or not isinstance(tech_nm, (int, float)) or not tech_nm > 0:
        raise ModelError(f"tech_nm must be a positive number, not {tech_nm!r}")
    points = [_parse_point(p) for p in measured]
    if not points:
        raise ModelError("calibrate_pe_area needs at least one (cell, input_bits, acc_bits, area_um2) point")
    start = base or area_coefficients()
    if not isinstance(start, AreaCoefficients):
        raise ModelError(f"base must be an AreaCoefficients, not {start!r}")
    cells = {name: dataclasses.replace(start.cell(name), scale=1.0) for name in PE_CELLS}
    start = dataclasses.replace(start, ws_cell=cells["ws"], os_cell=cells["os"])
    to45 = 1.0 / float(logic_area_scale(float(tech_nm)))
    for name in PE_CELLS:
        mine = [p for p in points if p[0] in (None, name)]
        if not mine:
            continue
        ib, ab, area = (np.array([p[i] for p in mine]) for i in (1, 2, 3))
        area = area * to45
        if fit == "terms":
            cells[name] = _fit_terms(name, start, ib, ab, area)
        else:
            model = start.pe_um2(ib, ab, name) / area
            cells[name] = dataclasses.replace(cells[name], scale=float(model.sum() / (model * model).sum()))
    result = dataclasses.replace(start, ws_cell=cells["ws"], os_cell=cells["os"])
    if install:
        set_area_coefficients(result)
    return result
