"""Export a design for hardware work: Verilog, ``design.json``, a standalone testbench, synthesis figures.

:func:`export_design` writes, into a new directory, the Verilog of ``rtl_gen.to_verilog`` (byte
for byte what ``accel-dse simulate`` runs), ``design.json`` (design, hash, predicted metrics,
port map, buffer layouts, cycle formula, tool versions, provenance), ``synth.json`` (Yosys
cells and transistor estimate), a cocotb testbench with its runner script that re-verify the
Verilog against numpy without accel-dse, and a README. The directory appears complete or not
at all (:func:`atomic_dir`). With an FPGA family it adds the place-and-route report
(``fpga.json``) and the commands that produced it (``fpga_flow.sh``); :func:`fpga_figures` is the
short form ``verify --fpga`` records in a study.
"""

from __future__ import annotations

from accel_dse.export._export import DEFAULT_WORKLOAD, STANDALONE_FILES, ExportResult, export_design
from accel_dse.export._fpga import fpga_document, fpga_figures, fpga_line, overflow_text, resolve_fpga
from accel_dse.export._manifest import CYCLE_FORMULA, DIM_MAPPING, FORMAT, check_gemms
from accel_dse.export._source import DesignSource, design_from_spec, design_from_study, parse_trial
from accel_dse.output_dir import atomic_dir, check_out_dir, json_text

__all__ = [
    "export_design",
    "ExportResult",
    "DEFAULT_WORKLOAD",
    "STANDALONE_FILES",
    "FORMAT",
    "CYCLE_FORMULA",
    "DIM_MAPPING",
    "check_gemms",
    "DesignSource",
    "design_from_spec",
    "design_from_study",
    "parse_trial",
    "atomic_dir",
    "check_out_dir",
    "json_text",
    "fpga_document",
    "fpga_figures",
    "fpga_line",
    "overflow_text",
    "resolve_fpga",
]
