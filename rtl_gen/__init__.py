"""Amaranth RTL generator: a parameterised TPU-style systolic-array accelerator.

Public surface: the components (:class:`PE`, :class:`PERow`, :class:`PEBlock`, :class:`Skew`,
:class:`DelayLine`, :class:`SystolicArray`, :class:`Controller`, :class:`OutputStage`,
:class:`Accelerator`), the test-only
:class:`Fault`, the buffer geometry (:func:`buffer_layout`), the port map (:data:`PORT_MAP`,
the docstring of ``rtl_gen._top``), Verilog export (:func:`to_verilog`, :func:`write_verilog`),
lint (:func:`lint_verilog`, :data:`LINT_WAIVERS`), synthesis figures (:func:`synth_stats`)
and the FPGA flow (:func:`fpga_report`, :data:`FAMILIES`).
The timing and buffer contract with the performance model is ``perf_model.timing``.
"""

from __future__ import annotations

from ._array import Blackbox, PEBlock, PERow, SystolicArray
from ._controller import Controller, mapped_dims
from ._export import block_rows, export_units, to_verilog, write_verilog
from ._fpga import FAMILIES, flow_commands, fpga_flow, fpga_report, resolve_device
from ._glue import OfmapUpdate, OperandGate
from ._layout import CYCLES_BITS, DIM_BITS, BufferGeometry, BufferLayout, buffer_layout
from ._lint import LINT_WAIVERS, lint_args, lint_verilog, verilator_bin_dir
from ._output_stage import OUTPUT_STAGE_LATENCY, QPARAM_CHANNELS, OutputStage, param_bits, param_fields
from ._pe import PE, Fault
from ._skew import DelayLine, Skew
from ._synth import default_cache_dir, synth_component, synth_stats
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
    "BufferGeometry",
    "BufferLayout",
    "buffer_layout",
    "mapped_dims",
    "top_name",
    "HOST_SEL",
    "QDATA_LATENCY",
    "PORT_MAP",
    "DIM_BITS",
    "CYCLES_BITS",
    "to_verilog",
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
