"""The vector unit in the model: its area and the energy of its work (internal).

Area at 45 nm: the Yosys fit of ``bench/vector_unit_area.py`` (``vector_unit_fit``), ``base +
per_lane * lanes + per_lane2 * lanes**2`` (the square: the transpose's ``lanes x lanes`` tile of
int8 registers), scaled to the node like the rest of the design (``perf_model.physical.design_area``).

Energy at 45 nm (Horowitz ISSCC 2014 components of :class:`perf_model.EnergyTable`), per lane and
word of a pass: one 32-bit multiply and two 32-bit adds (the element function's widest terms:
an add's two rescaling products share one multiply's energy with its adds, a norm's square and
its sum, an i-exp's products), plus the word's SRAM bytes at the buffer's per-byte energy; per
scalar step, one 32-bit add per divider or square-root step. These are assumptions of the same
kind as the output stage's (``perf_model.physical.output_stage``), not a gate-level figure.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from accel_spec.config import FORMAT_CODES
from perf_model.physical import vector_unit_fit as fit
from perf_model.physical.energy import EnergyTable

__all__ = ["unit_um2", "door_um2", "lane_word_pj", "scalar_step_pj"]

_REF_NM = 45.0


def unit_um2(lanes: Any) -> np.ndarray:
    """Area of a vector unit of ``lanes`` lanes at 45 nm, µm^2 (the Yosys fit)."""
    lanes = np.asarray(lanes, dtype=np.float64)
    return fit.BASE_UM2 + fit.PER_LANE_UM2 * lanes + fit.PER_LANE2_UM2 * lanes * lanes


def door_um2(act_format: Any, lanes: Any) -> np.ndarray:
    """Area of the unit's door (``accel_spec.vector_door``) at 45 nm, µm^2: none on int8 activations
    (``act_format`` auto or int8), else the Yosys fit of the activation format's converters
    (``vector_unit_fit.DOOR_UM2``) at ``lanes`` lanes. ``act_format``: ``ArrayConfig.act_format`` codes."""
    codes = np.asarray(act_format)
    lanes = np.asarray(lanes, dtype=np.float64)
    out = np.zeros(np.broadcast_shapes(codes.shape, lanes.shape))
    for name, (base, per_lane) in fit.DOOR_UM2.items():
        out = np.where(codes == FORMAT_CODES.index(name), base + per_lane * lanes, out)
    return out


def lane_word_pj(energy: EnergyTable) -> float:
    """Logic energy of one lane's element function in one pass at 45 nm, pJ (module docstring)."""
    return energy.mult_32b_pj + 2 * energy.add_32b_pj


def scalar_step_pj(energy: EnergyTable) -> float:
    """Energy of one divider or square-root step at 45 nm, pJ."""
    return energy.add_32b_pj
