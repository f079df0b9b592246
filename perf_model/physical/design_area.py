"""A whole design's floor-plan area by part, in mm^2: the PE array, its skew registers, the buffers,
the output stage and control, taken to the design's node.

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

The PE and the coefficients are :mod:`perf_model.physical.pe_area`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from perf_model import timing
from perf_model.physical.checksum import checksum_um2
from perf_model.physical.format_cost import format_cost
from perf_model.physical.node_density import logic_area_scale
from perf_model.physical.output_stage import lane_um2, qparam_bits
from perf_model.physical.pe_area import AreaCoefficients, area_coefficients

__all__ = [
    "design_area_mm2", "skew_register_bits", "memory_system_um2", "memory_system_logic_um2", "dma_word_bits",
    "area_parts_mm2", "logic_mm2", "QUEUE_BITS", "MEMORY_SYSTEM_FIXED_UM2", "MEMORY_SYSTEM_PER_WORD_BIT_UM2",
]

_OS = timing.DATAFLOW_CODES["os"]


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
