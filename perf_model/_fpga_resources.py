"""FPGA resources of a design on Lattice ECP5, without synthesis: LUTs, FFs, DSPs, block RAMs.

A model-speed stand-in for ``accel-dse rtl fpga`` (Yosys ``synth_ecp5`` + nextpnr), built from
the RTL's structure and calibrated against nextpnr (``bench/fpga_resources.py`` prints model vs
tool and the fit; the error table is in ``docs/fpga.md``)::

    dsps   = PEs * ceil(ib / 18) ** 2                one MULT18X18D per PE multiplier
    brams  = sum over the per-lane banks of ebrs(depth, bits)
             ebrs = 0 for a bank of <= 1 Kbit (LUT RAM), else the fewest DP16KD over its
             modes 16384x1 8192x2 4096x4 2048x9 1024x18 512x36
    ffs    = sum of the PE registers (+ C ab: the OS result register) + ff_fixed + ff_per_lane * lanes
    luts   = sum of the PE logic cells + lut_fixed + lut_per_lane * lanes

``lanes`` is the number of buffer banks (ifmap, weight and ofmap lanes: R + C + C). ``luts``
counts logic cells as nextpnr does (``TRELLIS_COMB``: a LUT4, or half a CCU2C carry cell).
The PE terms are exact counts of the synthesised PE cells (Yosys ``synth_ecp5``)::

    WS/IS PE        flops 2 ib + ab (+ ib + 2 shadow)   cells 2 ceil(ab / 2) carry (+ ib + 1 shadow)
    WS/IS first row flops 4 ib (+ ib + 2 shadow)        cells (ib + 1 shadow): the add of 0 is gone
    OS PE           flops 2 ib + ab + 1 (+ ab + 1)      cells 2 ceil(ab / 2) carry + 2 ab + 1

``*_fixed`` (the controller, CSRs and host-port muxes) and ``*_per_lane`` (a bank's control
delay line, read-valid flag, operand gate or ofmap update, and Yosys's read/write collision
logic around each block RAM) are the fitted part.
"""

from __future__ import annotations

import dataclasses
import math

from accel_dse.config import ArrayConfig, Dataflow
from perf_model._output_stage import QPARAM_CHANNELS, param_bits

__all__ = ["FpgaFit", "ECP5_FIT", "output_stage_resources", "ECP5_DEVICES", "bank_ebrs", "fpga_resources",
           "pe_resources"]

#: DP16KD aspect ratios (depth, data bits).
_EBR_MODES = ((16384, 1), (8192, 2), (4096, 4), (2048, 9), (1024, 18), (512, 36))
#: A bank of at most this many bits goes to LUT RAM (measured: 64 x 8 does, 64 x 32 does not).
_LUTRAM_MAX_BITS = 1024


@dataclasses.dataclass(frozen=True)
class FpgaFit:
    """The fitted terms of the model (per design and per buffer lane)."""

    ff_fixed: float
    ff_per_lane: float
    lut_fixed: float
    lut_per_lane: float


#: Fitted by ``bench/fpga_resources.py`` (nextpnr 0.11.1, Yosys 0.70; 4 designs with shadow registers
#: and the output stage, see docs/fpga.md).
ECP5_FIT = FpgaFit(ff_fixed=651.5, ff_per_lane=63.2, lut_fixed=1231.7, lut_per_lane=71.7)

#: Capacity of ECP5 parts: logic cells (TRELLIS_COMB), FFs, MULT18X18D, DP16KD.
ECP5_DEVICES: dict[str, dict[str, int]] = {
    "12k": {"luts": 24288, "ffs": 24288, "dsps": 28, "brams": 56},
    "25k": {"luts": 24288, "ffs": 24288, "dsps": 28, "brams": 56},
    "45k": {"luts": 43848, "ffs": 43848, "dsps": 72, "brams": 108},
    "85k": {"luts": 83640, "ffs": 83640, "dsps": 156, "brams": 208},
}


def bank_ebrs(depth: int, bits: int) -> int:
    """DP16KD block RAMs one ``depth`` x ``bits`` bank maps to (0: LUT RAM)."""
    if depth * bits <= _LUTRAM_MAX_BITS:
        return 0
    return min(math.ceil(bits / w) * math.ceil(depth / d) for d, w in _EBR_MODES)


def pe_resources(config: ArrayConfig) -> dict[str, int]:
    """Flip-flops and logic cells of all PEs of ``config`` (the module docstring's table)."""
    ib, ab, sh = config.input_bits, config.acc_bits, int(config.shadow_stationary)
    r, c = config.rows, config.cols
    carry = 2 * math.ceil(ab / 2)
    if config.dataflow is Dataflow.OS:
        ff = r * c * (2 * ib + ab + 1 + sh * (ab + 1))
        lut = r * c * (carry + 2 * ab + 1)
    else:
        inner, top = (r - 1) * c, c
        ff = inner * (2 * ib + ab) + top * 4 * ib + r * c * sh * (ib + 2)
        lut = inner * carry + r * c * sh * (ib + 1)
    return {"ffs": ff, "luts": lut}


def output_stage_resources(config: ArrayConfig) -> tuple[float, float]:
    """Logic cells and FFs of the ``C`` output-stage lanes.

    ``synth_ecp5`` of one ``rtl_gen.OutputStage`` lane with 8-bit outputs (Yosys 0.70): 561 LUT4
    + 159 CCU2C (2 cells each) = 879 cells and 101 FFs at 32-bit accumulators, 600 + 176 = 952
    cells at 48 (the same FFs); linear in ``acc_bits`` between and above. 16-bit outputs are
    not measured (taken as 8-bit).
    """
    ab = max(config.acc_bits, 32)
    return config.cols * (879.0 + (952.0 - 879.0) / 16.0 * (ab - 32)), config.cols * 101.0


def _banks(config: ArrayConfig) -> list[tuple[int, int]]:
    """``(depth, bits)`` of every per-lane bank (as ``rtl_gen.buffer_layout``; at least 2 words)."""
    r, c = config.rows, config.cols
    is_is = config.dataflow is Dataflow.IS
    spec = (
        (config.ifmap_sram_kib, c if is_is else r, config.input_bits),
        (config.weight_sram_kib, r if is_is else c, config.input_bits),
        (config.ofmap_sram_kib, c, config.acc_bits),
    )
    return [(max(2, kib * 8192 // (lanes * bits)), bits) for kib, lanes, bits in spec for _ in range(lanes)]


def fpga_resources(config: ArrayConfig, fit: FpgaFit = ECP5_FIT) -> dict[str, int]:
    """ECP5 ``luts`` (logic cells), ``ffs``, ``dsps`` and ``brams`` of the accelerator top.

    Args:
        config: the design.
        fit: the fitted terms (default :data:`ECP5_FIT`).

    Returns:
        Resource counts (integers).
    """
    banks = _banks(config)
    pe = pe_resources(config)
    # The output stage: one 32 x 32 Q31 multiply per lane (4 MULT18X18D) and the qparam memory,
    # one word of every lane's parameters per column fold (IS: one lane per channel).
    q_lanes = 1 if config.dataflow is Dataflow.IS else config.cols
    q_depth = max(2, -(-QPARAM_CHANNELS // q_lanes))
    q_bank = (q_depth, q_lanes * int(param_bits(config.input_bits)))
    if config.dataflow is Dataflow.OS:
        pe["ffs"] += config.cols * config.acc_bits  # the result register, one per column
    lanes = len(banks)
    out_luts, out_ffs = output_stage_resources(config)
    return {
        "luts": round(pe["luts"] + out_luts + fit.lut_fixed + fit.lut_per_lane * lanes),
        "ffs": round(pe["ffs"] + out_ffs + fit.ff_fixed + fit.ff_per_lane * lanes),
        "dsps": config.pes * math.ceil(config.input_bits / 18) ** 2 + config.cols * math.ceil(32 / 18) ** 2,
        "brams": sum(bank_ebrs(depth, bits) for depth, bits in banks) + bank_ebrs(*q_bank),
    }
