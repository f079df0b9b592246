"""Analytic TPU-style performance model: cycles, memory traffic, stalls, energy, area.

Pure functions over numpy arrays, no I/O. The hot path :func:`evaluate_designs` scores many
designs (a :class:`DesignArrays` struct of arrays) on a workload in one vectorised pass;
:func:`evaluate`, :func:`evaluate_op` and :func:`plan_tiles` are thin scalar wrappers over
the same code. An op is ``count * batch`` independent ``m x k x n`` GEMMs (a convolution is its
im2col GEMM; its A matrix is what moves, overlapping windows included).

Mapping and cycles (the RTL contract, :mod:`perf_model.timing`, which is authoritative)::

    WS: K on the R rows, N on the C columns, M streamed      (B stationary)
    OS: M on rows, N on columns, K streamed                  (C stationary)
    IS: K on rows, M on columns, N streamed                  (A stationary)
    folds       = ceil(rows-dim / R) * ceil(cols-dim / C)    (edge folds cost the same)
    run_cycles  = RUN_OVERHEAD + folds * fold_cycles + tail  (one ``start`` of the RTL)
    shadow stationary registers (default): fold_cycles = max(Ds, R, 2), folds overlap,
        tail = Ds - fold_cycles + 2R + C (WS/IS: first load, last flush), 1 + 2R + C (OS)
    plain PEs: fold_cycles = Ds + 2R + C - 2 + FOLD_OVERHEAD, tail = 0 (load, stream, flush)

An op's compute cycles are ``run_cycles`` summed over the buffer tiles of :func:`plan_tiles`
(the runs the RTL simulator executes), so simulated cycles equal the model's exactly; the model
reads the contract's constants (and checks its formula) at run time.

How the rest is modelled, module by module:

* tiling and loop order, DRAM-minimal and spill-free (partial sums stay in the ofmap buffer):
  :mod:`perf_model.evaluator.tiling`; a design whose buffers cannot hold the smallest tile is infeasible
  (a result with a reason naming the buffer and the tile);
* DRAM/SRAM bytes, stalls from ``dram_bytes_per_cycle`` (per-tile roofline with double
  buffering, serial without): :mod:`perf_model.evaluator.schedule`; outputs leave at ``acc_bits``, or at
  ``input_bits`` through the output stage when the op is requantised (``op.requant``; the ofmap
  buffer still accumulates at ``acc_bits``); its energy and area: :mod:`perf_model.physical.output_stage`;
* an op whose reduction can overflow the accumulator (``K * 4**(b-1) > 2**(a-1) - 1``, exact)
  has status ``overflow`` (a reason naming the op, K and ``acc_bits``), like an infeasible one;
* energy per access with sources (Horowitz ISSCC 2014) and scaling to ``tech_nm``:
  :mod:`perf_model.physical.energy`;
* area: a dataflow-aware PE (each cell's registers and selects as ``rtl_gen`` builds them,
  multiplier, adder and accumulator-extension terms per cell), calibrated to Yosys by default
  (:data:`CALIBRATED_AREA`; the Horowitz-derived prior is :data:`HOROWITZ_AREA`), with sources
  and the calibration hook (:func:`calibrate_pe_area`, :func:`set_area_coefficients`):
  :mod:`perf_model.physical.pe_area`, :mod:`perf_model.physical.design_area` (the whole design by part)
  and :mod:`perf_model.physical.pe_area_calibration`;
* the clock the logic reaches: per pipeline stage (PE multiply-accumulate, controller, SRAM
  access) a critical-path depth in FO4 from our RTL synthesised with Yosys/ABC, times the
  node's FO4 delay; a design whose ``clock_mhz`` exceeds its ``f_max`` is infeasible with a
  reason naming both: :mod:`perf_model.physical.fmax` (calibration points in ``fmax_fit``);
* supply voltage and leakage: the lowest supply that meets the clock on an alpha-power
  voltage-frequency curve per node, dynamic energy times ``(V / V_nom)^2``, leakage power per
  mm^2 per node (on by default) times the runtime: :mod:`perf_model.physical.technology`;
* the memory part a design names (``dram``): bandwidth ``min(dram_bytes_per_cycle, GB/s /
  clock)`` and its pJ/bit: :mod:`perf_model._memory_parts`.
"""

from __future__ import annotations

from perf_model._memory_parts import effective_dram_bytes_per_cycle
from perf_model.arrays.designs import DesignArrays
from perf_model.compiler.plan import TilePlan, plan_tiles
from perf_model.compiler.program import GemmProgram, TensorLayout, compile_gemm
from perf_model.figures.design_table import METRICS, OBJECTIVE_METRICS, DesignTable, design_area, evaluate_designs
from perf_model.figures.one_design import OpResult, WorkloadResult, evaluate, evaluate_op
from perf_model.figures.one_program import FIGURE_BOUND, FIGURE_MODEL
from perf_model.fpga.fmax import ECP5_FMAX_FIT, FmaxFit, fpga_fmax_arrays, fpga_fmax_mhz, fpga_path_arrays
from perf_model.fpga.metrics import fpga_device, fpga_metrics
from perf_model.fpga.resources import (
    ECP5_DEVICES,
    ECP5_FIT,
    FPGA_DEVICES,
    FpgaFit,
    bank_ebrs,
    fpga_resource_arrays,
    fpga_resources,
    pe_resources,
)
from perf_model.physical.design_area import dma_word_bits, memory_system_logic_um2, memory_system_um2
from perf_model.physical.energy import DEFAULT_ENERGY, EnergyTable, tech_energy_scale
from perf_model.physical.fmax import STAGES as TIMING_STAGES
from perf_model.physical.fmax import design_fmax
from perf_model.physical.pe_area import (
    CALIBRATED_AREA,
    HOROWITZ_AREA,
    AreaCoefficients,
    PeCellArea,
    area_coefficients,
    set_area_coefficients,
)
from perf_model.physical.pe_area_calibration import calibrate_pe_area
from perf_model.physical.technology import fo4_ps, supply_voltage
from perf_model.program_timing import (
    ProgramTiming,
    axi_data_bytes,
    dram_rate,
    gemm_program_cycles,
    program_cycles,
    transfer_word_beats,
    word_beats,
)

__all__ = [
    "dma_word_bits",
    "memory_system_um2",
    "memory_system_logic_um2",
    "GemmProgram",
    "TensorLayout",
    "compile_gemm",
    "ProgramTiming",
    "axi_data_bytes",
    "dram_rate",
    "program_cycles",
    "gemm_program_cycles",
    "word_beats",
    "transfer_word_beats",
    "DesignArrays",
    "DesignTable",
    "evaluate_designs",
    "design_area",
    "evaluate",
    "evaluate_op",
    "OpResult",
    "WorkloadResult",
    "plan_tiles",
    "TilePlan",
    "METRICS",
    "OBJECTIVE_METRICS",
    "FIGURE_MODEL",
    "FIGURE_BOUND",
    "EnergyTable",
    "DEFAULT_ENERGY",
    "tech_energy_scale",
    "AreaCoefficients",
    "PeCellArea",
    "CALIBRATED_AREA",
    "HOROWITZ_AREA",
    "area_coefficients",
    "set_area_coefficients",
    "calibrate_pe_area",
    "FpgaFit",
    "ECP5_FIT",
    "ECP5_DEVICES",
    "bank_ebrs",
    "fpga_resources",
    "fpga_resource_arrays",
    "pe_resources",
    "FPGA_DEVICES",
    "fpga_device",
    "fpga_metrics",
    "FmaxFit",
    "ECP5_FMAX_FIT",
    "fpga_path_arrays",
    "fpga_fmax_arrays",
    "fpga_fmax_mhz",
    "design_fmax",
    "TIMING_STAGES",
    "effective_dram_bytes_per_cycle",
    "fo4_ps",
    "supply_voltage",
]

