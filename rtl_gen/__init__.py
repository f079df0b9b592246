"""Amaranth RTL generator: a parameterised TPU-style systolic-array accelerator.

Public surface: the components (:class:`PE`, :class:`PERow`, :class:`PEBlock`, :class:`Skew`,
:class:`DelayLine`, :class:`SystolicArray`, :class:`Controller`, :class:`OutputStage`,
:class:`Accelerator`, the AXI4-Lite :class:`ControlRegisters`; the whole SoC block
:class:`AxiAccelerator` with AXI4 DMA and command queue, and its simulation top with a DRAM
model, :class:`SimSystem`), the test-only
:class:`Fault`, the buffer geometry (:func:`buffer_layout`), the control-register map
(:data:`CONTROL_REGMAP`, rendered by :func:`c_header` and :func:`markdown_table`), the port map (:data:`PORT_MAP`,
the docstring of ``rtl_gen.core.accelerator``), Verilog export (:func:`to_verilog`, :func:`write_verilog`,
:func:`system_verilog`),
lint (:func:`lint_verilog`, :data:`LINT_WAIVERS`), synthesis figures (:func:`synth_stats`)
and the FPGA flow (:func:`fpga_report`, :data:`FAMILIES`).
The timing and buffer contract with the performance model is ``perf_model.timing``, and for
the memory system ``perf_model.dma_timing`` and ``perf_model.program_timing``.
"""

from __future__ import annotations

from rtl_gen.core.accelerator import Accelerator, top_name
from rtl_gen.core.accelerator import __doc__ as PORT_MAP
from rtl_gen.core.accelerator_paths import HOST_SEL, QDATA_LATENCY
from rtl_gen.core.array import Blackbox, PEBlock, PERow, SystolicArray
from rtl_gen.core.buffer_datapath import OfmapUpdate, OperandGate
from rtl_gen.core.buffer_layout import CYCLES_BITS, DIM_BITS, BufferGeometry, BufferLayout, buffer_layout
from rtl_gen.core.controller import A_STRIDE_BITS, Controller
from rtl_gen.core.output_stage import OUTPUT_STAGE_LATENCY, QPARAM_CHANNELS, OutputStage, param_bits, param_fields
from rtl_gen.core.pe import PE, Fault
from rtl_gen.core.skew import DelayLine, Skew
from rtl_gen.soc.csr import AXIL_OKAY, AXIL_SLVERR, COUNTERS, ControlRegisters
from rtl_gen.soc.regmap import (
    CONTROL_REGMAP,
    CSR_MAGIC,
    CSR_VERSION,
    DATAFLOW_CODES,
    ErrorCode,
    Field,
    Register,
    RegisterMap,
    c_header,
    markdown_table,
)
from rtl_gen.soc.sim_system import SimSystem, sim_name
from rtl_gen.soc.system import AxiAccelerator, dram_word_bytes, system_name
from rtl_gen.tools.fpga import FAMILIES, flow_commands, fpga_flow, fpga_report, resolve_device
from rtl_gen.tools.lint import LINT_WAIVERS, lint_args, lint_verilog, verilator_bin_dir
from rtl_gen.tools.synth import default_cache_dir, synth_component, synth_stats
from rtl_gen.tools.verilog_export import block_rows, export_units, system_verilog, to_verilog, write_verilog

__all__ = [
    "PE",
    "PERow",
    "PEBlock",
    "DelayLine",
    "Blackbox",
    "Fault",
    "Skew",
    "SystolicArray",
    "OperandGate",
    "OfmapUpdate",
    "OutputStage",
    "OUTPUT_STAGE_LATENCY",
    "QPARAM_CHANNELS",
    "param_bits",
    "param_fields",
    "Controller",
    "Accelerator",
    "ControlRegisters",
    "AXIL_OKAY",
    "AXIL_SLVERR",
    "COUNTERS",
    "Field",
    "Register",
    "RegisterMap",
    "ErrorCode",
    "CONTROL_REGMAP",
    "CSR_MAGIC",
    "CSR_VERSION",
    "DATAFLOW_CODES",
    "c_header",
    "markdown_table",
    "BufferGeometry",
    "BufferLayout",
    "buffer_layout",
    "top_name",
    "HOST_SEL",
    "QDATA_LATENCY",
    "PORT_MAP",
    "DIM_BITS",
    "A_STRIDE_BITS",
    "CYCLES_BITS",
    "to_verilog",
    "system_verilog",
    "AxiAccelerator",
    "SimSystem",
    "system_name",
    "sim_name",
    "dram_word_bytes",
    "write_verilog",
    "export_units",
    "block_rows",
    "LINT_WAIVERS",
    "lint_args",
    "lint_verilog",
    "verilator_bin_dir",
    "synth_stats",
    "synth_component",
    "default_cache_dir",
    "FAMILIES",
    "fpga_flow",
    "fpga_report",
    "flow_commands",
    "resolve_device",
]
