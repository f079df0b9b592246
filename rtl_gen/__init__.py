"""Amaranth RTL generator: a parameterised TPU-style systolic-array accelerator.

Public surface: the components (:class:`PE`, :class:`PERow`, :class:`PEBlock`, :class:`Skew`,
:class:`DelayLine`, :class:`SystolicArray`, :class:`Controller`, :class:`OutputStage`,
:class:`Accelerator`, the AXI4-Lite :class:`ControlRegisters`; the whole SoC block
:class:`AxiAccelerator` with AXI4 DMA and command queue, and its simulation top with a DRAM
model, :class:`SimSystem`), the test-only
:class:`Fault`, the buffer geometry (:func:`buffer_layout`), the control-register map
(:data:`CONTROL_REGMAP`, rendered by :func:`c_header` and :func:`markdown_table`), the port map (:data:`PORT_MAP`,
the docstring of ``rtl_gen._top``), Verilog export (:func:`to_verilog`, :func:`write_verilog`,
:func:`system_verilog`),
lint (:func:`lint_verilog`, :data:`LINT_WAIVERS`), synthesis figures (:func:`synth_stats`)
and the FPGA flow (:func:`fpga_report`, :data:`FAMILIES`).
The timing and buffer contract with the performance model is ``perf_model.timing``, and for
the memory system ``perf_model.dma_timing`` and ``perf_model.program_timing``.
"""

from __future__ import annotations

from ._array import Blackbox, PEBlock, PERow, SystolicArray
from ._controller import A_STRIDE_BITS, Controller, mapped_dims
from ._csr import AXIL_OKAY, AXIL_SLVERR, COUNTERS, ControlRegisters
from ._export import block_rows, export_units, system_verilog, to_verilog, write_verilog
from ._fpga import FAMILIES, flow_commands, fpga_flow, fpga_report, resolve_device
from ._glue import OfmapUpdate, OperandGate
from ._layout import CYCLES_BITS, DIM_BITS, BufferGeometry, BufferLayout, buffer_layout
from ._lint import LINT_WAIVERS, lint_args, lint_verilog, verilator_bin_dir
from ._output_stage import OUTPUT_STAGE_LATENCY, QPARAM_CHANNELS, OutputStage, param_bits, param_fields
from ._pe import PE, Fault
from ._regmap import (
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
from ._sim_top import SimSystem, sim_name
from ._skew import DelayLine, Skew
from ._synth import default_cache_dir, synth_component, synth_stats
from ._system import AxiAccelerator, dram_word_bytes, system_name
from ._top import HOST_SEL, QDATA_LATENCY, Accelerator, top_name
from ._top import __doc__ as PORT_MAP

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
    "mapped_dims",
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
