"""Analytic TPU-style performance model: cycles, memory traffic, stalls, energy, area.

Pure functions over numpy arrays, no I/O. The hot path :func:`evaluate_designs` scores many
designs (a :class:`DesignArrays` struct of arrays) on a workload in one vectorised pass;
:func:`evaluate`, :func:`evaluate_op` and :func:`plan_tiles` are thin scalar wrappers over
the same code. Compute cycles follow the RTL contract of :mod:`perf_model.timing` exactly
(sum of ``timing.run_cycles`` over the tiles of :func:`plan_tiles`).

How an op is modelled:

* mapping and fold cycles: :mod:`perf_model.timing`;
* buffer tiling and loop order (DRAM-minimal, spill-free): :mod:`perf_model._tiling`;
* DRAM/SRAM bytes and stalls (per-tile roofline with double buffering): :mod:`perf_model._schedule`;
* energy per access and technology scaling, with sources: :mod:`perf_model._energy`;
* area coefficients, with sources, and the calibration hook: :mod:`perf_model._area`.
"""

from __future__ import annotations

from perf_model._area import (
    AreaCoefficients,
    area_coefficients,
    calibrate_pe_area,
    set_area_coefficients,
)
from perf_model._designs import DesignArrays
from perf_model._energy import DEFAULT_ENERGY, EnergyTable, tech_energy_scale
from perf_model._plan import TilePlan, plan_tiles
from perf_model._scalar import OpResult, WorkloadResult, evaluate, evaluate_op
from perf_model._table import METRICS, OBJECTIVE_METRICS, DesignTable, evaluate_designs

__all__ = [
    "DesignArrays",
    "DesignTable",
    "evaluate_designs",
    "evaluate",
    "evaluate_op",
    "OpResult",
    "WorkloadResult",
    "plan_tiles",
    "TilePlan",
    "METRICS",
    "OBJECTIVE_METRICS",
    "EnergyTable",
    "DEFAULT_ENERGY",
    "tech_energy_scale",
    "AreaCoefficients",
    "area_coefficients",
    "set_area_coefficients",
    "calibrate_pe_area",
]
