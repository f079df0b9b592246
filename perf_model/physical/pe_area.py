"""The PE's area at 45 nm and the model's area coefficients: a dataflow-aware PE calibrated to Yosys.

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

The whole design's area by part, at a node, is :mod:`perf_model.physical.design_area`; the
calibration hook is :mod:`perf_model.physical.pe_area_calibration`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from accel_spec.config import Dataflow
from accel_spec.errors import AccelDseError, ModelError
from perf_model import timing
from perf_model.physical import pe_area_fit
from perf_model.physical.node_density import FLOORPLAN_UTILISATION, sram_cell_scale

__all__ = [
    "PeCellArea", "AreaCoefficients", "HOROWITZ_AREA", "CALIBRATED_AREA", "DEFAULT_AREA",
    "area_coefficients", "set_area_coefficients", "pe_structure", "dataflow_codes", "PE_CELLS",
]

#: The PE cells ``rtl_gen`` builds (IS uses the WS cell).
PE_CELLS = ("ws", "os")
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


def dataflow_codes(dataflow: Any) -> np.ndarray:
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
_FITTED_CELLS = {cell: PeCellArea(**pe_area_fit.COEFFICIENTS_BY_CELL[cell]) for cell in PE_CELLS}


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
        return self.os_cell if int(dataflow_codes(dataflow)) == _OS else self.ws_cell

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
        codes = dataflow_codes(dataflow)
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
