"""Silicon area in mm^2: a dataflow-aware PE model calibrated to Yosys, and its calibration hook.

**PE.** ``rtl_gen`` builds two PE cells (``rtl_gen/core/pe.py``); input stationary is weight
stationary on the transposed problem and uses the WS cell. A PE's area at 45 nm is the sum of
five terms, counted from the RTL (structure) and priced per cell (:class:`PeCellArea`)::

    registers   = flops * reg_bit_um2            WS/IS: a (ib) + psum v (ab) + weight s (ib)
                                                 OS:    a (ib) + operand v (ib) + acc s (ab) + marker f (1)
    selects     = selects * mux_um2              WS/IS: ib (s loads s_in on shift)
                                                 OS:    2 * ab (s: s_in on shift, product on restart)
    shadow      (``shadow_stationary``)          WS/IS: flops + ib (w) + 2 (f, d); selects + 2 * ib
                                                        (w: s_in on shift; s: w on f; the operand: w or s)
                                                 OS:    flops + ab (w) + 1 (d); selects + ab
                                                        (w: s on f, s_in on shift; s: one more restart arm)
    multiplier  = mult_8b * (ib / 8) ** alpha_m  alpha_m from mult_8b and mult_32b
    adder       = add_8b * (ab / 8) ** alpha_a   alpha_a from add_8b and add_32b
    extension   = ext_bit_um2 * (ab - 2 * ib)    accumulator columns above the product's 2*ib bits
    PE          = scale * (sum of the above)

(``ib`` input bits, ``ab`` accumulator bits.) The registers and selects are the dataflow's
own structure; the logic terms differ per cell because synthesis builds the arithmetic
differently: in the WS cell the partial-sum add ``v_in + a * s`` feeds nothing else, so Yosys
merges it with the multiply into one multiply-accumulate array whose sign-extended partial
products run across all ``ab`` columns (a large ``ext_bit_um2``); in the OS cell the product
is also used alone (a fold's first MAC restarts the accumulator at it), so the multiplier
stays ``2 * ib`` wide and a separate ``ab``-bit adder follows (a small one).

**Two coefficient sets**, both selectable (:func:`set_area_coefficients`, or the ``area``
argument of the evaluators):

* :data:`CALIBRATED_AREA`, the default (also what ``AreaCoefficients()`` gives): per-cell
  logic terms fitted to Yosys gate counts of ``rtl_gen``'s PE cells priced with NanGate
  FreePDK45 X1 cell areas (``bench/area_calibration.py``, which writes
  ``perf_model/physical/pe_area_fit.py``; max error of every measured PE in that file's docstring).
  The fit fixes ``alpha_m = 2`` (an array multiplier has ``ib^2`` partial-product bits) and
  ``alpha_a = 1`` (a carry chain per bit) and solves ``mult_8b``, ``add_8b``, ``ext_bit`` by
  non-negative least squares in relative error.
* :data:`HOROWITZ_AREA`, the uncalibrated prior: integer multiplier 8-bit 282, 32-bit 3495 and
  adder 8-bit 36, 32-bit 137 µm^2 (M. Horowitz, ISSCC 2014, Figure 1.1.9), the same for both
  cells, no extension term; only the registers and selects differ by dataflow.

**Shared prices** (both sets, 45 nm, µm^2): register bit 4.522 (NanGate FreePDK45 ``DFF_X1``);
select 1.862 (NanGate ``MUX2_X1``); SRAM bit 0.346 (Intel 45 nm 6T cell, Mistry et al.,
IEDM 2007) over an assumed array efficiency of 0.6 (decoders, sense amplifiers, I/O);
controller and buffer glue a fixed 20,000 (assumption, until the RTL's controller is
synthesised).

**Skew.** Operands are skewed the way ``rtl_gen`` does it: every buffer is one SRAM bank per
lane and its lanes are addressed through a tapped delay line of address and enable registers,
``(lanes - 1) * (address bits + 1)`` flops plus a valid flop per lane for both operands (R
left lanes, C top lanes), ``C * (address bits + 2)`` for the ofmap (its read-modify-write and
add flag), ``C - 1`` column strobes (2 bits with shadows: strobe and phase), an ``R - 1``
first-operand marker line (OS, or shadows), OS a ``C * acc_bits`` result register, and the
controller's o line of ``R`` (OS with shadows ``R + 1``) times ``address bits + 4``.

**Output stage.** ``C`` lanes of the Yosys-calibrated output-stage lane and the qparam SRAM
(4096 channels of ``69 + 3 * input_bits`` bits, priced per bit like the buffers):
:mod:`perf_model.physical.output_stage`.

**Node and floor plan** (:mod:`perf_model.physical.node_density`, figures and sources there).
Logic (PEs, registers, output stage, memory system, checksum, controller) scales from 45 nm by
the published logic density of the node, SRAM by its published high-density bit cell (over
the macro efficiency), and the sum is divided by the floor-plan utilisation (calibrated on
TPU v1's floor plan)::

    A(tech) = (logic(45) * logic_area_scale(tech) + bits * sram_um2_per_bit(tech)) / floorplan_utilisation

Above 45 nm both scales are the square of the feature size.

**Calibration hook.** :func:`calibrate_pe_area` fits measured PE areas per cell, either one
factor per cell (``fit="scale"``) or the cell's logic terms (``fit="terms"``, as the bench
does), and installs the result as the model's default.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from accel_spec.config import Dataflow
from accel_spec.errors import AccelDseError, ModelError
from perf_model import timing
from perf_model.physical import pe_area_fit
from perf_model.physical.checksum import checksum_um2
from perf_model.physical.format_cost import format_cost
from perf_model.physical.node_density import FLOORPLAN_UTILISATION, logic_area_scale, sram_cell_scale
from perf_model.physical.output_stage import lane_um2, qparam_bits

__all__ = [
    "PeCellArea", "AreaCoefficients", "HOROWITZ_AREA", "CALIBRATED_AREA", "DEFAULT_AREA",
    "area_coefficients", "set_area_coefficients", "calibrate_pe_area", "design_area_mm2", "skew_register_bits",
    "memory_system_um2", "memory_system_logic_um2", "dma_word_bits", "area_parts_mm2", "logic_mm2",
]

_REF_NM = 45.0
_CELLS = ("ws", "os")
_FIT_MODES = ("scale", "terms")
_OS = timing.DATAFLOW_CODES["os"]


def _power_law(bits: np.ndarray, at8: float, at32: float) -> np.ndarray:
    bits = np.asarray(bits, dtype=np.float64)
    if at8 == 0:
        return np.zeros_like(bits)
    alpha = math.log(at32 / at8) / math.log(4.0)
    return at8 * (bits / 8.0) ** alpha


def _check_um2(owner: str, name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ModelError(f"{owner}.{name} must be a finite number >= 0, not {value!r}")


@dataclasses.dataclass(frozen=True)
class PeCellArea:
    """Logic coefficients of one PE cell at 45 nm, µm^2 (the terms in the module docstring).

    Attributes:
        mult_8b_um2, mult_32b_um2: ``input_bits`` multiplier at 8 and 32 bits (a power law
            between them; both 0 for no multiplier term).
        add_8b_um2, add_32b_um2: ``acc_bits`` adder at 8 and 32 bits (likewise).
        ext_bit_um2: per accumulator bit above the product's ``2 * input_bits``.
        scale: factor on the whole PE (1: none; set by ``calibrate_pe_area(fit="scale")``).

    Raises:
        ModelError: a coefficient that is negative or not finite, an anchor pair with one
            zero, or a scale that is not positive.
    """

    mult_8b_um2: float
    mult_32b_um2: float
    add_8b_um2: float
    add_32b_um2: float
    ext_bit_um2: float = 0.0
    scale: float = 1.0

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            _check_um2("PeCellArea", field.name, getattr(self, field.name))
        for low, high in (("mult_8b_um2", "mult_32b_um2"), ("add_8b_um2", "add_32b_um2")):
            if (getattr(self, low) == 0) != (getattr(self, high) == 0):
                raise ModelError(f"PeCellArea.{low} and {high} must both be 0 or both be positive, "
                                 f"not {getattr(self, low)!r} and {getattr(self, high)!r}")
        if not self.scale > 0:
            raise ModelError(f"PeCellArea.scale must be positive, not {self.scale!r}")

    def logic_um2(self, input_bits: Any, acc_bits: Any) -> dict[str, np.ndarray]:
        """Multiplier, adder and extension terms (unscaled), µm^2, vectorised."""
        ib = np.asarray(input_bits, dtype=np.float64)
        ab = np.asarray(acc_bits, dtype=np.float64)
        return {
            "multiplier": _power_law(ib, self.mult_8b_um2, self.mult_32b_um2),
            "adder": _power_law(ab, self.add_8b_um2, self.add_32b_um2),
            "extension": self.ext_bit_um2 * np.maximum(ab - 2 * ib, 0.0),
        }


def pe_structure(input_bits: Any, acc_bits: Any, dataflow: Any, shadow: Any = False) -> tuple[np.ndarray, np.ndarray]:
    """Flip-flops and 2:1 selects of one ``rtl_gen`` PE (see the module docstring), vectorised.

    Args:
        input_bits, acc_bits: widths in bits.
        dataflow: dataflow code(s) of :data:`perf_model.timing.DATAFLOW_CODES`.
        shadow: the PE has a shadow stationary register (``ArrayConfig.shadow_stationary``).

    Returns:
        ``(flops, selects)`` as float arrays.
    """
    ib = np.asarray(input_bits, dtype=np.float64)
    ab = np.asarray(acc_bits, dtype=np.float64)
    is_os = np.asarray(dataflow) == _OS
    flops = 2 * ib + ab + np.where(is_os, 1.0, 0.0)
    selects = np.where(is_os, 2 * ab, ib)
    sh = np.asarray(shadow, dtype=bool)
    flops = flops + np.where(sh, np.where(is_os, ab + 1.0, ib + 2.0), 0.0)
    selects = selects + np.where(sh, np.where(is_os, ab, 2 * ib), 0.0)
    return flops, selects


def _codes(dataflow: Any) -> np.ndarray:
    """Dataflow codes from codes, a ``Dataflow`` or its name (scalar or array)."""
    if isinstance(dataflow, (str, Dataflow)):
        try:
            return np.asarray(timing.dataflow_code(Dataflow.parse(dataflow)))
        except AccelDseError as exc:
            raise ModelError(f"PE dataflow must be ws, os or is, not {dataflow!r}") from exc
    codes = np.asarray(dataflow)
    if codes.dtype.kind not in "iu" or not np.isin(codes, list(timing.DATAFLOW_CODES.values())).all():
        raise ModelError(f"PE dataflow codes must be in {timing.DATAFLOW_CODES}, not {dataflow!r}")
    return codes


_HOROWITZ_CELL = PeCellArea(mult_8b_um2=282.0, mult_32b_um2=3495.0, add_8b_um2=36.0, add_32b_um2=137.0)
_FITTED_CELLS = {cell: PeCellArea(**pe_area_fit.COEFFICIENTS_BY_CELL[cell]) for cell in _CELLS}


@dataclasses.dataclass(frozen=True)
class AreaCoefficients:
    """Area coefficients at 45 nm in µm^2 (sources in the module docstring).

    The field defaults are the calibrated set (:data:`CALIBRATED_AREA`).

    Attributes:
        ws_cell: logic terms of the WS cell (weight- and input-stationary designs).
        os_cell: logic terms of the OS cell.
        reg_bit_um2: one flip-flop.
        mux_um2: one 2:1 select.
        sram_cell_um2: one 6T SRAM cell at 45 nm (other nodes: the published cells'
            ratio to it, :func:`perf_model.physical.node_density.sram_cell_scale`).
        sram_efficiency: fraction of an SRAM macro that is cells.
        controller_um2: controller and buffer glue, fixed.
        floorplan_utilisation: fraction of a floor-plan block that is the counted cells and
            macros (:data:`perf_model.physical.node_density.FLOORPLAN_UTILISATION`).
    """

    ws_cell: PeCellArea = _FITTED_CELLS["ws"]
    os_cell: PeCellArea = _FITTED_CELLS["os"]
    reg_bit_um2: float = pe_area_fit.REG_BIT_UM2
    mux_um2: float = pe_area_fit.MUX_UM2
    sram_cell_um2: float = 0.346
    sram_efficiency: float = 0.6
    controller_um2: float = 20000.0
    floorplan_utilisation: float = FLOORPLAN_UTILISATION

    def __post_init__(self) -> None:
        if (isinstance(self.floorplan_utilisation, bool) or not isinstance(self.floorplan_utilisation, (int, float))
                or not 0 < self.floorplan_utilisation <= 1):
            raise ModelError(f"AreaCoefficients.floorplan_utilisation must be in (0, 1], "
                             f"not {self.floorplan_utilisation!r}")

    def cell(self, dataflow: Dataflow | str) -> PeCellArea:
        """The PE cell coefficients of a dataflow (IS: the WS cell)."""
        return self.os_cell if int(_codes(dataflow)) == _OS else self.ws_cell

    def pe_breakdown_um2(self, input_bits: Any, acc_bits: Any, dataflow: Any = 0,
                         shadow: Any = False) -> dict[str, np.ndarray]:
        """The terms of one PE at 45 nm, µm^2, each times its cell's ``scale`` (vectorised).

        Args:
            input_bits, acc_bits: widths in bits (arrays broadcast together).
            dataflow: dataflow code(s) (ws 0, os 1, is 2), or a ``Dataflow`` or its name.
            shadow: shadow stationary register(s) (bool, broadcast).

        Returns:
            ``{"registers", "selects", "multiplier", "adder", "extension"}``.

        Raises:
            ModelError: an unknown dataflow.
        """
        codes = _codes(dataflow)
        is_os = codes == _OS
        flops, selects = pe_structure(input_bits, acc_bits, codes, shadow)
        ws, os_ = self.ws_cell.logic_um2(input_bits, acc_bits), self.os_cell.logic_um2(input_bits, acc_bits)
        scale = np.where(is_os, self.os_cell.scale, self.ws_cell.scale)
        terms = {"registers": flops * self.reg_bit_um2, "selects": selects * self.mux_um2}
        terms.update({name: np.where(is_os, os_[name], ws[name]) for name in ws})
        return {name: scale * value for name, value in terms.items()}

    def pe_um2(self, input_bits: Any, acc_bits: Any, dataflow: Any = 0, shadow: Any = False) -> np.ndarray:
        """Area of one PE at 45 nm, µm^2: the sum of :meth:`pe_breakdown_um2` (vectorised)."""
        # typeshed types sum() as "item | Literal[0]" (the empty case); the breakdown is never empty.
        return sum(self.pe_breakdown_um2(input_bits, acc_bits, dataflow, shadow).values())  # type: ignore[return-value]

    def sram_um2_per_bit(self, tech_nm: Any = None) -> Any:
        """Area of one stored bit including the macro's periphery at ``tech_nm`` (``None``: 45 nm),
        µm^2, before the floor-plan utilisation: the 45 nm cell times the published cells' ratio
        (:func:`perf_model.physical.node_density.sram_cell_scale`) over the macro efficiency."""
        per_bit = self.sram_cell_um2 / self.sram_efficiency
        return per_bit if tech_nm is None else per_bit * sram_cell_scale(tech_nm)


#: The Yosys-calibrated coefficients (the default).
CALIBRATED_AREA = AreaCoefficients()
#: The uncalibrated prior: Horowitz's multiplier and adder for both cells, no extension term.
HOROWITZ_AREA = AreaCoefficients(ws_cell=_HOROWITZ_CELL, os_cell=_HOROWITZ_CELL, reg_bit_um2=4.522, mux_um2=1.862)
DEFAULT_AREA = CALIBRATED_AREA
_current = [DEFAULT_AREA]


def area_coefficients() -> AreaCoefficients:
    """The coefficients the model uses when none are passed explicitly."""
    return _current[0]


def set_area_coefficients(coefficients: AreaCoefficients) -> AreaCoefficients:
    """Make ``coefficients`` the model's default; returns the previous default.

    E.g. ``set_area_coefficients(HOROWITZ_AREA)`` selects the uncalibrated prior.
    """
    if not isinstance(coefficients, AreaCoefficients):
        raise ModelError(f"area coefficients must be an AreaCoefficients, not {coefficients!r}")
    previous = _current[0]
    _current[0] = coefficients
    return previous


def _parse_point(point: object) -> tuple[str | None, float, float, float]:
    """``(cell or None, input_bits, acc_bits, area)`` of one measured point."""
    if not isinstance(point, (tuple, list)) or len(point) not in (3, 4):
        raise ModelError(f"PE area point must be (cell, input_bits, acc_bits, area_um2) or "
                         f"(input_bits, acc_bits, area_um2), not {point!r}")
    cell: str | None = None
    if len(point) == 4:
        code = _codes(point[0]) if isinstance(point[0], (str, Dataflow)) else None
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
    cells = {name: dataclasses.replace(start.cell(name), scale=1.0) for name in _CELLS}
    start = dataclasses.replace(start, ws_cell=cells["ws"], os_cell=cells["os"])
    to45 = 1.0 / float(logic_area_scale(float(tech_nm)))
    for name in _CELLS:
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


def skew_register_bits(
    rows: Any, cols: Any, dataflow: Any, input_bits: Any, acc_bits: Any,
    kib: tuple[Any, Any, Any], shadow: Any = False, double_buffered: Any = False,
    operand_bits: tuple[Any, Any] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``(outside, o_line)`` flip-flops of a design besides its PEs (vectorised, float).

    ``outside`` counts what ``rtl_gen.Accelerator.register_stages`` lists (a test holds the two
    equal): the lane-skewed bank controls and valid flags of both operands, the ofmap controls
    (address, enable, add), the column strobes (and phases), the first-operand marker line (OS
    or shadow), the OS result register, the run's three base addresses and (double buffered,
    the ofmap in two halves) the half of the host's ofmap read. ``o_line`` is the controller's ofmap-read line: its
    depth (``R``, ``R + 1`` for OS with shadows) of address, enable, add, strobe and phase.
    ``operand_bits``: bits of an ifmap and a weight element (default ``input_bits``; 4 for packed
    int4, ``ArrayConfig.buffer_bits``), which set those buffers' depths and address widths.
    """
    df = np.asarray(dataflow)
    sh = np.asarray(shadow, dtype=bool)
    R = np.asarray(rows, dtype=np.float64)
    C = np.asarray(cols, dtype=np.float64)
    ab = np.asarray(acc_bits, dtype=np.float64)
    elems = timing.word_elems(df, rows, cols)
    bits = (*((input_bits, input_bits) if operand_bits is None else operand_bits), acc_bits)
    address = [np.ceil(np.log2(np.maximum(timing.buffer_depth_words(kib[b], elems[b], bits[b]), 2)))
               for b in range(3)]
    is_os, is_is = df == _OS, df == timing.DATAFLOW_CODES["is"]
    left_addr, top_addr = np.where(is_is, address[1], address[0]), np.where(is_is, address[0], address[1])
    left = (R - 1) * (left_addr + 1) + R
    top = (C - 1) * (top_addr + 1) + C
    ofmap = C * (address[2] + 2)
    strobes = (C - 1) * np.where(sh, 2.0, 1.0)
    marker = np.where(is_os | sh, R - 1, 0.0)
    bases = address[0] + address[1] + address[2]
    halves = (np.asarray(double_buffered, dtype=bool)
              & (timing.buffer_depth_words(kib[2], elems[2], acc_bits) >= 2)).astype(np.float64)
    outside = left + top + ofmap + strobes + marker + np.where(is_os, C * ab, 0.0) + bases + halves
    return outside, (R + (is_os & sh)) * (address[2] + 4)


#: Memory system logic (DMA engines, move engine, sequencer, control registers) at 45 nm, µm^2: a fixed part
#: and a part per bit of the DMA's widest DRAM word (its assembly register, store FIFO and lane
#: wiring), fitted by ``bench/memory_system_area.py --fit`` on Yosys of our own RTL (NanGate45
#: prices): 2x2 to 16x16 arrays, 256 to 2048 word bits, within 1 % of the fit.
MEMORY_SYSTEM_FIXED_UM2 = 47401.3
MEMORY_SYSTEM_PER_WORD_BIT_UM2 = 85.040
#: Bits of the on-chip command queue (``accel_spec.isa``: 512 commands of 32 bytes), priced as SRAM.
QUEUE_BITS = 512 * 32 * 8


def _dma_word_bits(rows: Any, cols: Any, dataflow: Any, input_bits: Any, acc_bits: Any) -> np.ndarray:
    """Vectorised :func:`dma_word_bits` over design columns (``accel_spec.isa.dram_word_bytes``)."""
    is_is = np.asarray(dataflow) == timing.DATAFLOW_CODES["is"]
    R, C = np.asarray(rows, dtype=np.float64), np.asarray(cols, dtype=np.float64)
    ib = np.asarray(input_bits, dtype=np.float64)
    raw = np.where(np.asarray(acc_bits) <= 32, 32.0, 64.0)
    command = np.full_like(R, 8.0 * 32)  # a command word (32 bytes)
    return np.maximum.reduce([R * ib, C * ib, C * raw, np.where(is_is, 128.0, 128.0 * C), command])


def dma_word_bits(config: Any) -> int:
    """Bits of the DMA's widest DRAM word for ``config`` (``rtl_gen``'s ``max_beats * data_bytes * 8``)."""
    return int(_dma_word_bits(config.rows, config.cols, timing.dataflow_code(config.dataflow.value),
                              config.input_bits, config.acc_bits))


def memory_system_logic_um2(word_bits: Any) -> np.ndarray:
    """Logic of the memory system at 45 nm, µm^2, from the DMA's widest word (vectorised)."""
    return MEMORY_SYSTEM_FIXED_UM2 + MEMORY_SYSTEM_PER_WORD_BIT_UM2 * np.asarray(word_bits, dtype=np.float64)


def memory_system_um2(config: Any, coefficients: AreaCoefficients | None = None) -> float:
    """Area of ``config``'s memory system at 45 nm, µm^2: logic plus the command queue's SRAM."""
    k = coefficients or area_coefficients()
    return float(memory_system_logic_um2(dma_word_bits(config)) + QUEUE_BITS * k.sram_um2_per_bit())


def design_area_mm2(
    rows: np.ndarray, cols: np.ndarray, dataflow: np.ndarray, input_bits: np.ndarray, acc_bits: np.ndarray,
    kib: tuple[np.ndarray, np.ndarray, np.ndarray], tech_nm: np.ndarray, coefficients: AreaCoefficients | None = None,
    shadow: np.ndarray | bool = False, double_buffered: np.ndarray | bool = False, checksum: np.ndarray | int = 0,
    weight_format: np.ndarray | int = 0, operand_bits: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """Area of whole designs in mm^2 (vectorised; see the module docstring).

    Args:
        rows, cols, dataflow, input_bits, acc_bits, tech_nm: design columns (dataflow codes).
        kib: the ifmap, weight and ofmap buffer sizes (KiB).
        coefficients: default :func:`area_coefficients`.
        shadow: ``shadow_stationary`` per design.
        double_buffered: ``double_buffered`` per design.
        checksum: ``checksum`` codes per design (``perf_model.physical.checksum``: its unit's area).
        weight_format: PE cell codes per design (``format_cost.pe_cell_codes``): a float format's
            PE and output lane, or the int4 PE, are their Yosys fits
            (``perf_model.physical.format_cost``), plus the integer model's shadow flops.
        operand_bits: bits of an ifmap and a weight element in the buffers (default
            ``input_bits``; packed int4: 4), for the buffers' address widths.
    """
    parts = area_parts_mm2(rows, cols, dataflow, input_bits, acc_bits, kib, tech_nm, coefficients, shadow,
                           double_buffered, checksum, weight_format, operand_bits)
    return parts["logic"] + parts["sram"]


def logic_mm2(um2_at_45: Any, tech_nm: Any, coefficients: AreaCoefficients | None = None) -> np.ndarray:
    """Floor-plan area at ``tech_nm`` of logic whose cells take ``um2_at_45`` µm^2 at 45 nm, mm^2
    (the node's logic density and the floor-plan utilisation; vectorised)."""
    k = coefficients or area_coefficients()
    return (np.asarray(um2_at_45, dtype=np.float64) * logic_area_scale(tech_nm) * 1e-6
            / k.floorplan_utilisation)


def area_parts_mm2(
    rows: Any, cols: Any, dataflow: Any, input_bits: Any, acc_bits: Any,
    kib: tuple[Any, Any, Any], tech_nm: Any, coefficients: AreaCoefficients | None = None,
    shadow: Any = False, double_buffered: Any = False, checksum: Any = 0,
    weight_format: Any = 0, operand_bits: tuple[Any, Any] | None = None,
) -> dict[str, np.ndarray]:
    """Floor-plan area of whole designs by part, mm^2 (vectorised; arguments of :func:`design_area_mm2`).

    Returns:
        ``{"array", "buffers", "accumulators", "weights", "output_stage", "control", "logic", "sram"}``:
        the PE array with its skew and o-line registers; the ifmap (TPU v1's unified buffer),
        ofmap (its accumulators) and weight buffers' SRAM; the output stage (lanes and qparam
        SRAM); control (controller, memory system with its command queue, checksum unit);
        and the totals of logic and SRAM. ``logic + sram`` is the design's area.
    """
    k = coefficients or area_coefficients()
    df = np.asarray(dataflow)
    sh = np.asarray(shadow, dtype=bool)
    R = np.asarray(rows, dtype=np.float64)
    C = np.asarray(cols, dtype=np.float64)
    skew_bits, line_bits = skew_register_bits(rows, cols, df, input_bits, acc_bits, kib, sh, double_buffered,
                                              operand_bits)
    fmt = format_cost(weight_format, df, acc_bits)
    lane = np.where(fmt.has_lane, fmt.lane_um2, lane_um2(input_bits, acc_bits))
    int_pe = k.pe_um2(input_bits, acc_bits, df, sh)
    pe_um2 = np.where(fmt.is_float, fmt.pe_um2 + int_pe - k.pe_um2(input_bits, acc_bits, df, False), int_pe)
    bit_mm2 = k.sram_um2_per_bit(np.asarray(tech_nm, dtype=np.float64)) * 1e-6 / k.floorplan_utilisation
    logic = {
        "array": logic_mm2(R * C * pe_um2 + (skew_bits + line_bits) * k.reg_bit_um2, tech_nm, k),
        "output_stage": logic_mm2(C * lane, tech_nm, k),
        "control": logic_mm2(k.controller_um2 + checksum_um2(rows, cols, input_bits, acc_bits, checksum)
                             + memory_system_logic_um2(_dma_word_bits(rows, cols, df, input_bits, acc_bits)),
                             tech_nm, k),
    }
    sram = {
        "buffers": np.asarray(kib[0], dtype=np.float64) * 8192 * bit_mm2,
        "weights": np.asarray(kib[1], dtype=np.float64) * 8192 * bit_mm2,
        "accumulators": np.asarray(kib[2], dtype=np.float64) * 8192 * bit_mm2,
    }
    qparam, queue = qparam_bits(input_bits) * bit_mm2, QUEUE_BITS * bit_mm2
    parts = {name: np.asarray(v, dtype=np.float64) for name, v in {**logic, **sram}.items()}
    parts["output_stage"] = parts["output_stage"] + qparam
    parts["control"] = parts["control"] + queue
    parts["logic"] = logic["array"] + logic["output_stage"] + logic["control"]
    parts["sram"] = sram["buffers"] + sram["weights"] + sram["accumulators"] + qparam + queue
    return parts
