"""The figures of a design that no op changes (internal): its buffers' words, clock, supply, area and
per-access energies, one element per design.

``evaluate_block`` needs them for every block of designs; ``evaluate_designs`` computes them once
over all its designs (:func:`design_figures`) and hands each block its rows (:meth:`DesignFigures.take`):
the same element-wise expressions, run once instead of once a block, and once per distinct design:
the figures read only the fields in :data:`PHYSICAL_FIELDS` (and the bus's: ``bandwidth``, ``axi_bytes``
and ``dram_pj``, computed for every design), so designs equal in those share them (a grid that varies the
DRAM bandwidth holds each such design once per bandwidth).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from accel_spec.config import FORMAT_CODES
from perf_model._memory_parts import dram_pj_per_byte, effective_dram_bytes_per_cycle
from perf_model.arrays.designs import DesignArrays
from perf_model.evaluator.failures import max_products
from perf_model.evaluator.problem import buffer_words
from perf_model.evaluator.transfers import axi_data_bytes
from perf_model.physical.checksum import builds, checksum_pj_per_mac, output_check_pj
from perf_model.physical.design_area import design_area_mm2
from perf_model.physical.energy import EnergyTable, tech_energy_scale
from perf_model.physical.fmax import fmax_mhz, stage_depths_fo4
from perf_model.physical.format_cost import format_energy_ratio, pe_cell_codes
from perf_model.physical.output_stage import output_stage_pj
from perf_model.physical.pe_area import AreaCoefficients
from perf_model.physical.technology import nominal_vdd, supply_voltage

__all__ = ["DesignFigures", "design_figures", "packed_any", "PHYSICAL_FIELDS", "distinct_rows"]

#: The ``DesignArrays`` fields the figures other than the bus's (``bandwidth``, ``axi_bytes``, ``dram_pj``) read.
PHYSICAL_FIELDS = ("rows", "cols", "dataflow", "input_bits", "acc_bits", "ifmap_sram_kib", "weight_sram_kib",
                   "ofmap_sram_kib", "tech_nm", "shadow_stationary", "double_buffered", "checksum", "weight_format",
                   "act_format", "pack_int4", "clock_mhz")
_KEY_SPAN = 1 << 62  # an int64 key's room
_FEW = 64  # designs below which looking for repeats costs more than it can save


@dataclass(frozen=True)
class DesignFigures:
    """Per design (last axis), for one energy table and one set of area coefficients.

    Attributes:
        a_bits, b_bits, q_bits: ``DesignArrays.operand_bits`` (bits).
        buffer_words: ``(3, n)`` words of the ifmap, weight and ofmap buffers one tile may use.
        depths, f_max_mhz, critical: the logic's stage depths (FO4), the clock they reach (MHz) and
            the critical stage (``perf_model.physical.fmax``).
        clock_ok: ``clock_mhz <= f_max_mhz``; ``vdd``: the supply that meets ``clock_mhz`` (V).
        build_ok: the RTL builds the design's checksum.
        max_product: the largest product in accumulator units (``failures.max_products``).
        scale: per-access energies' factor (the node's scale times ``(V / V_nom)^2``).
        sram_pj: ``(3, n)`` pJ per byte of a bank of each buffer (at 45 nm, nominal supply).
        area_mm2: the die's area, mm^2.
        mac_pj: pJ per MAC (at 45 nm, nominal supply), the PE's format cost included.
        dram_pj: DRAM pJ per byte moved.
        output_stage_pj, output_check_pj: pJ per output element of the output stage and its check.
        checksum_pj: the checksum's pJ per MAC.
        leak_w: the die's leakage, W.
        bandwidth: sustained DRAM bytes per cycle; ``axi_bytes``: the AXI data width in bytes.
    """

    a_bits: np.ndarray
    b_bits: np.ndarray
    q_bits: np.ndarray
    buffer_words: np.ndarray
    depths: np.ndarray
    f_max_mhz: np.ndarray
    critical: np.ndarray
    clock_ok: np.ndarray
    vdd: np.ndarray
    build_ok: np.ndarray
    max_product: np.ndarray
    scale: np.ndarray
    sram_pj: np.ndarray
    area_mm2: np.ndarray
    mac_pj: np.ndarray
    dram_pj: np.ndarray
    output_stage_pj: np.ndarray
    output_check_pj: np.ndarray
    checksum_pj: np.ndarray
    leak_w: np.ndarray
    bandwidth: np.ndarray
    axi_bytes: np.ndarray

    def take(self, index: Any) -> DesignFigures:
        """The figures of the designs at ``index`` (a slice or an integer array), as ``DesignArrays.take``."""
        return DesignFigures(**{f.name: getattr(self, f.name)[..., index] for f in fields(self)})


def design_figures(d: DesignArrays, energy: EnergyTable, area: AreaCoefficients) -> DesignFigures:
    """The :class:`DesignFigures` of every design of ``d`` with per-access energies ``energy`` and area
    coefficients ``area`` (computed once per distinct design: the module docstring)."""
    if len(d) < _FEW:
        return DesignFigures(**_physical(d, energy, area), **_bus(d))
    first, inverse = distinct_rows([getattr(d, name) for name in PHYSICAL_FIELDS])
    if 4 * len(first) > 3 * len(d):  # few repeats: the gathers would cost more than they save
        return DesignFigures(**_physical(d, energy, area), **_bus(d))
    physical = _physical(d.take(first), energy, area)
    return DesignFigures(**{name: values[..., inverse] for name, values in physical.items()}, **_bus(d))


def distinct_rows(columns: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """``(first, inverse)``: the index of the first of each distinct row of the equal-length 1-D ``columns``
    (in the order of their keys) and, per row, the index of its distinct row in ``first``."""
    key = np.zeros(len(columns[0]), dtype=np.int64)
    span = 1
    for column in columns:
        if column.dtype.kind in "biu" and column.size and column.min() >= 0:
            codes, size = column.astype(np.int64), int(column.max()) + 1
        elif column.size and (column == column[0]).all():
            codes, size = np.zeros(len(column), dtype=np.int64), 1
        else:
            values, codes = np.unique(column, return_inverse=True)
            size = len(values)
        if span * size >= _KEY_SPAN:  # renumber the key so far densely
            values, key = np.unique(key, return_inverse=True)
            span = len(values)
        key = key * size + codes
        span *= size
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    return first, inverse


def _bus(d: DesignArrays) -> dict[str, np.ndarray]:
    """The figures of the memory and the bus (fields outside :data:`PHYSICAL_FIELDS`), per design."""
    return {"dram_pj": dram_pj_per_byte(d.dram),
            "bandwidth": effective_dram_bytes_per_cycle(d.dram_bytes_per_cycle, d.dram, d.clock_mhz),
            "axi_bytes": axi_data_bytes(d.rows, d.cols, d.input_bits, d.dram_bytes_per_cycle, d.dataflow == 2,
                                        packed_any(d))}


def _physical(d: DesignArrays, energy: EnergyTable, area: AreaCoefficients) -> dict[str, np.ndarray]:
    """The figures other than the bus's, of every design of ``d``, by field name."""
    kib = (d.ifmap_sram_kib, d.weight_sram_kib, d.ofmap_sram_kib)
    a_bits, b_bits, q_bits = d.operand_bits()  # packed int4: 4 bits in DRAM and in the buffers
    cells = pe_cell_codes(d.weight_format, d.act_format, d.pack_int4)  # the PE's format (int4 PE: pack_int4 W4A4)
    depths = stage_depths_fo4(d.dataflow, d.input_bits, d.acc_bits, kib, d.double_buffered, cells)
    f_max, critical = fmax_mhz(depths, d.tech_nm)
    # the supply per distinct (clock, f_max, node): a bisection of 24 steps, for a few values of f_max
    if len(d) < _FEW:
        vdd = supply_voltage(d.clock_mhz, f_max, d.tech_nm)
    else:
        first, inverse = distinct_rows([d.clock_mhz, f_max, d.tech_nm])
        vdd = supply_voltage(d.clock_mhz[first], f_max[first], d.tech_nm[first])[inverse]
    # Energy (pJ): per-access figures at 45 nm times the node's scale (see _energy), times
    # (V / V_nom)^2 at the supply that meets the clock (see _technology).
    v_ratio = vdd / nominal_vdd(d.tech_nm)
    ib_d, ab_d = d.input_bits.astype(np.float64), d.acc_bits.astype(np.float64)
    bank = np.stack(kib).astype(np.float64) / np.where(d.double_buffered, 2.0, 1.0)
    area_mm2 = design_area_mm2(d.rows, d.cols, d.dataflow, d.input_bits, d.acc_bits, kib, d.tech_nm, area,
                               d.shadow_stationary, d.double_buffered, d.checksum, cells, (a_bits, b_bits))
    return dict(
        a_bits=a_bits, b_bits=b_bits, q_bits=q_bits,
        buffer_words=buffer_words(d.dataflow, d.rows, d.cols, d.input_bits, d.acc_bits, kib, d.double_buffered,
                                  (a_bits, b_bits)),
        depths=depths, f_max_mhz=f_max, critical=critical, clock_ok=d.clock_mhz <= f_max, vdd=vdd,
        build_ok=builds(d.dataflow, d.checksum),  # the RTL builds the checksum for WS and IS only
        max_product=max_products(d),
        scale=tech_energy_scale(d.tech_nm) * v_ratio**2,
        sram_pj=energy.sram_pj_per_byte(bank),
        area_mm2=area_mm2,
        mac_pj=energy.mac_pj(ib_d, ab_d) * format_energy_ratio(area, d),
        output_stage_pj=output_stage_pj(energy, ib_d, ab_d),
        output_check_pj=output_check_pj(energy, ib_d, ab_d, d.checksum),
        checksum_pj=checksum_pj_per_mac(energy, d.rows, d.cols, ib_d, ab_d, d.checksum),
        leak_w=energy.leakage_density(d.tech_nm, vdd) * area_mm2,
    )


def packed_any(d: DesignArrays) -> np.ndarray:
    """Per design: some operand is packed int4 (``ArrayConfig.packed_kinds`` not empty)."""
    int4 = FORMAT_CODES.index("int4")
    return d.pack_int4 & ((d.weight_format == int4) | (d.act_format == int4))
