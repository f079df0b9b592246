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

Everything is vectorised over a :class:`~perf_model.DesignArrays` batch
(:func:`fpga_resource_arrays`, microseconds per thousand designs: the sweep's FPGA target);
:func:`fpga_resources`, :func:`pe_resources` and :func:`bank_ebrs` are the one-design views of
the same code.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from accel_spec.config import ArrayConfig
from perf_model.arrays.designs import DesignArrays
from perf_model.physical.output_stage import QPARAM_CHANNELS, param_bits

__all__ = ["FpgaFit", "ECP5_FIT", "ECP5_DEVICES", "FPGA_DEVICES", "output_stage_resources", "bank_ebrs",
           "fpga_resources", "fpga_resource_arrays", "pe_resources"]

#: DP16KD aspect ratios (depth, data bits).
_EBR_MODES = ((16384, 1), (8192, 2), (4096, 4), (2048, 9), (1024, 18), (512, 36))
#: A bank of at most this many bits goes to LUT RAM (measured: 64 x 8 does, 64 x 32 does not).
_LUTRAM_MAX_BITS = 1024
#: Dataflow codes of ``perf_model.timing`` (ws 0, os 1, is 2).
_OS, _IS = 1, 2


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

#: Capacity of ECP5 parts as nextpnr reports them: logic cells (TRELLIS_COMB), FFs, MULT18X18D, DP16KD.
#: (nextpnr places a 12k on the 25k die, so the two report the same capacity.)
ECP5_DEVICES: dict[str, dict[str, int]] = {
    "12k": {"luts": 24288, "ffs": 24288, "dsps": 28, "brams": 56},
    "25k": {"luts": 24288, "ffs": 24288, "dsps": 28, "brams": 56},
    "45k": {"luts": 43848, "ffs": 43848, "dsps": 72, "brams": 108},
    "85k": {"luts": 83640, "ffs": 83640, "dsps": 156, "brams": 208},
}

#: Family -> device -> capacity, for every device the resource model covers (the ECP5-5G and
#: ``um`` parts are the same dies as the plain ones).
FPGA_DEVICES: dict[str, dict[str, dict[str, int]]] = {
    "ecp5": {**ECP5_DEVICES, **{f"{kind}-{size}": ECP5_DEVICES[size] for kind in ("um", "um5g")
                                for size in ("25k", "45k", "85k")}},
}


def _ebrs(depth: Any, bits: Any) -> np.ndarray:
    """DP16KD block RAMs of ``depth`` x ``bits`` banks (0: LUT RAM), elementwise."""
    depth, bits = np.asarray(depth, dtype=np.int64), np.asarray(bits, dtype=np.int64)
    fewest = np.min([-(-bits // w) * -(-depth // d) for d, w in _EBR_MODES], axis=0)
    return np.where(depth * bits <= _LUTRAM_MAX_BITS, 0, fewest)


def bank_ebrs(depth: int, bits: int) -> int:
    """DP16KD block RAMs one ``depth`` x ``bits`` bank maps to (0: LUT RAM)."""
    return int(_ebrs(depth, bits))


def _pe_arrays(d: DesignArrays) -> tuple[np.ndarray, np.ndarray]:
    """Flip-flops and logic cells of all PEs (the module docstring's table), per design."""
    ib, ab, sh = d.input_bits, d.acc_bits, d.shadow_stationary.astype(np.int64)
    r, c = d.rows, d.cols
    carry = 2 * -(-ab // 2)
    is_os = d.dataflow == _OS
    inner, top = (r - 1) * c, c
    ff = np.where(is_os, r * c * (2 * ib + ab + 1 + sh * (ab + 1)),
                  inner * (2 * ib + ab) + top * 4 * ib + r * c * sh * (ib + 2))
    lut = np.where(is_os, r * c * (carry + 2 * ab + 1), inner * carry + r * c * sh * (ib + 1))
    return ff, lut


def pe_resources(config: ArrayConfig) -> dict[str, int]:
    """Flip-flops and logic cells of all PEs of ``config`` (the module docstring's table)."""
    ff, lut = _pe_arrays(DesignArrays.from_configs([config]))
    return {"ffs": int(ff[0]), "luts": int(lut[0])}


def _output_stage_arrays(d: DesignArrays) -> tuple[np.ndarray, np.ndarray]:
    ab = np.maximum(d.acc_bits, 32)
    wider_out = d.input_bits - 8  # the lanes' outputs are input_bits wide
    cells = 619.0 + (711.0 - 619.0) / 16.0 * (ab - 32) + (678.0 - 711.0) / 8.0 * wider_out
    ffs = 428.0 + (430.0 - 428.0) / 16.0 * (ab - 32) + (558.0 - 430.0) / 8.0 * wider_out
    return d.cols * cells, d.cols * ffs


def output_stage_resources(config: ArrayConfig) -> tuple[float, float]:
    """Logic cells and FFs of the ``C`` output-stage lanes.

    ``synth_ecp5`` of one ``rtl_gen.OutputStage`` lane, six register stages (Yosys 0.70): 499 LUT4
    + 60 CCU2C (2 cells each) = 619 cells and 428 FFs at 32-bit accumulators and 8-bit outputs,
    591 + 2 * 60 = 711 cells and 430 FFs at 48-bit accumulators, 526 + 2 * 76 = 678 cells and 558
    FFs at 48-bit accumulators and 16-bit outputs; linear in ``acc_bits`` and in the output width
    between.
    """
    luts, ffs = _output_stage_arrays(DesignArrays.from_configs([config]))
    return float(luts[0]), float(ffs[0])


def _block_rams(d: DesignArrays) -> np.ndarray:
    """DP16KD of the per-lane banks (as ``rtl_gen.buffer_layout``; at least 2 words) and the qparam memory."""
    r, c, ib, ab = d.rows, d.cols, d.input_bits, d.acc_bits
    is_is = d.dataflow == _IS
    total = np.zeros(len(d), dtype=np.int64)
    for kib, lanes, bits in ((d.ifmap_sram_kib, np.where(is_is, c, r), ib),
                             (d.weight_sram_kib, np.where(is_is, r, c), ib),
                             (d.ofmap_sram_kib, c, ab)):
        total += lanes * _ebrs(np.maximum(2, kib * 8192 // (lanes * bits)), bits)
    # The output stage's qparam memory: one word of every lane's parameters per column fold
    # (IS: one lane per channel).
    q_lanes = np.where(is_is, 1, c)
    q_depth = np.maximum(2, -(-QPARAM_CHANNELS // q_lanes))
    return total + _ebrs(q_depth, q_lanes * param_bits(ib).astype(np.int64))


def fpga_resource_arrays(designs: DesignArrays, fit: FpgaFit = ECP5_FIT) -> dict[str, np.ndarray]:
    """ECP5 ``luts`` (logic cells), ``ffs``, ``dsps`` and ``brams`` of each design's accelerator top.

    Args:
        designs: the designs.
        fit: the fitted terms (default :data:`ECP5_FIT`).

    Returns:
        Resource -> int64 array, one count per design.
    """
    d = designs
    pe_ff, pe_lut = _pe_arrays(d)
    pe_ff = pe_ff + np.where(d.dataflow == _OS, d.cols * d.acc_bits, 0)  # OS: the result register per column
    lanes = d.rows + 2 * d.cols  # one bank per ifmap, weight and ofmap lane (R + C + C in every dataflow)
    out_luts, out_ffs = _output_stage_arrays(d)
    # One MULT18X18D per PE multiplier; the output stage's 32 x 32 Q31 multiply takes 4 per lane.
    dsps = d.rows * d.cols * (-(-d.input_bits // 18)) ** 2 + d.cols * 4
    return {
        "luts": np.rint(pe_lut + out_luts + fit.lut_fixed + fit.lut_per_lane * lanes).astype(np.int64),
        "ffs": np.rint(pe_ff + out_ffs + fit.ff_fixed + fit.ff_per_lane * lanes).astype(np.int64),
        "dsps": dsps.astype(np.int64),
        "brams": _block_rams(d),
    }


def fpga_resources(config: ArrayConfig, fit: FpgaFit = ECP5_FIT) -> dict[str, int]:
    """ECP5 ``luts`` (logic cells), ``ffs``, ``dsps`` and ``brams`` of ``config``'s accelerator top.

    Args:
        config: the design.
        fit: the fitted terms (default :data:`ECP5_FIT`).

    Returns:
        Resource counts (integers).
    """
    arrays = fpga_resource_arrays(DesignArrays.from_configs([config]), fit)
    return {k: int(v[0]) for k, v in arrays.items()}
