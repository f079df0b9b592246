"""Simulation of the generated Verilog on JAX workloads (cocotb on Verilator or Icarus).

The driver (:func:`simulate`) resolves a workload, takes each op's exact int32 reference
from JAX, tiles the op as the performance model does, writes the tile data to a file, and
runs one simulator process (cocotb's Python runner, no Makefiles) that loops over every tile
of every op through the accelerator's host port. It then reassembles the outputs, compares
them bit for bit with JAX, and compares the RTL's cycle counter with the model's cycles.

Building blocks, usable on their own: :func:`find_simulator` (discovery and environment),
:func:`build_design` (the build cache) and :func:`run_testbench` (one cocotb run in its own
process group with a timeout).
"""

from __future__ import annotations

from accel_dse.simulate.driver import DEFAULT_TIMEOUT_S, simulate
from accel_dse.simulate.report import STATUSES, Mismatch, OpResult, SimulationReport
from accel_dse.simulate.runner.build import Build, build_design, default_work_dir, ports_of
from accel_dse.simulate.runner.cache_bound import budget_bytes as cache_budget_bytes
from accel_dse.simulate.runner.launch import run_testbench
from accel_dse.simulate.runner.process import ProcessOutcome
from accel_dse.simulate.runner.tools import SIMULATORS, Simulator, find_simulator

__all__ = [
    "simulate",
    "DEFAULT_TIMEOUT_S",
    "SimulationReport",
    "OpResult",
    "Mismatch",
    "STATUSES",
    "SIMULATORS",
    "Simulator",
    "find_simulator",
    "Build",
    "build_design",
    "default_work_dir",
    "cache_budget_bytes",
    "ports_of",
    "ProcessOutcome",
    "run_testbench",
]
