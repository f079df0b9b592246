"""The output stage in the model: its energy per output element and its area (internal).

Mirrors ``rtl_gen.core.output_stage`` (which ``perf_model`` may not import; ``tests/rtl_gen``
checks the constants agree): per lane an int32 bias add, a 32 x 32 multiply, a 64-bit
sum and arithmetic shift, a zero-point add and two clamps, in ``OUTPUT_STAGE_LATENCY`` register
stages of :func:`lane_register_bits` bits;
the parameters sit in a qparam SRAM of :data:`QPARAM_CHANNELS` channels of
``param_bits(input_bits)`` bits.

Energy of one requantised output element at 45 nm (Horowitz ISSCC 2014 components of
:class:`perf_model.EnergyTable`, power laws between the published widths): the 32-bit multiply,
adds of ``max(acc_bits, 32)`` (bias), 64 (rounding; the shifter priced as one more 64-bit add)
and three of ``input_bits`` (zero point, two clamps), :func:`lane_register_bits` register bits, and
the read of its ``param_bits`` from the qparam SRAM (its per-byte energy at that bank's size).

Area at 45 nm: ``cols`` lanes of the Yosys-calibrated lane (``bench/output_stage_area.py``,
``perf_model/physical/output_stage_fit.py``) plus the qparam SRAM priced per bit like the buffers.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from perf_model.physical import output_stage_fit as fit
from perf_model.physical.energy import EnergyTable, _power_law

__all__ = ["QPARAM_CHANNELS", "param_bits", "qparam_bits", "lane_register_bits", "output_stage_pj", "lane_um2",
           "qparam_read_pj"]

#: Output channels the qparam buffer holds (``rtl_gen.QPARAM_CHANNELS``).
QPARAM_CHANNELS = 4096


def param_bits(input_bits: Any) -> np.ndarray:
    """Bits of one channel's parameters: bias 32, multiplier 32, shift 5, zero point and bounds."""
    return 69 + 3 * np.asarray(input_bits, dtype=np.float64)


def qparam_bits(input_bits: Any) -> np.ndarray:
    """Bits of the qparam SRAM (``QPARAM_CHANNELS`` channels; padding of the last word ignored)."""
    return QPARAM_CHANNELS * param_bits(input_bits)


def lane_register_bits(input_bits: Any) -> np.ndarray:
    """Flip-flop bits of one lane (``rtl_gen.OutputStage.register_bits``; a test holds them equal).

    Per stage, with ``b = input_bits`` outputs and the ``5 + 3b`` bits of shift, zero point and
    bounds carried along to stage 5: the sum acc + bias (35) and the multiplier (32); the four
    16 x 16 products (4 x 32); bits 30-31 of the low sum, its carry and the high halves of both rows
    (2 + 1 + 2 x 32); the product from bit 30 (34); z (``b + 3``) and the bounds (``2b``); q (``b``).
    """
    b = np.asarray(input_bits, dtype=np.float64)
    carried = 5 + 3 * b
    return (35 + 32 + carried) + (128 + carried) + (67 + carried) + (34 + carried) + (b + 3 + 2 * b) + b


def output_stage_pj(energy: EnergyTable, input_bits: Any, acc_bits: Any) -> np.ndarray:
    """Energy of one output element through the output stage at 45 nm, pJ (module docstring)."""
    ib = np.asarray(input_bits, dtype=np.float64)
    ab = np.asarray(acc_bits, dtype=np.float64)
    adds = _power_law(np.stack([np.maximum(ab, 32.0), np.full_like(ab, 64.0), ib]), energy.add_8b_pj,
                      energy.add_32b_pj)  # bias, rounding (+ shifter), zero point (x 3 with the clamps)
    logic = energy.mult_32b_pj + adds[0] + adds[1] + 3 * adds[2] + lane_register_bits(ib) * energy.reg_bit_pj
    return logic + qparam_read_pj(energy, ib)


def qparam_read_pj(energy: EnergyTable, input_bits: Any) -> np.ndarray:
    """Energy of one channel's parameter read from the qparam SRAM at 45 nm, pJ."""
    ib = np.asarray(input_bits, dtype=np.float64)
    return energy.sram_pj_per_byte(qparam_bits(ib) / 8192.0) * param_bits(ib) / 8.0


def lane_um2(input_bits: Any, acc_bits: Any) -> np.ndarray:
    """Area of one output-stage lane at 45 nm, µm^2 (the Yosys fit)."""
    ib = np.asarray(input_bits, dtype=np.float64)
    ab = np.asarray(acc_bits, dtype=np.float64)
    return fit.BASE_UM2 + fit.PER_INPUT_BIT_UM2 * ib + fit.PER_WIDE_ACC_BIT_UM2 * (np.maximum(ab, 32.0) - 32.0)
