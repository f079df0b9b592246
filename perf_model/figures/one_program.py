"""The one figure of a design on a workload: the walk of the program the compiler emits for it.

Where the design runs the workload as one program (a whole CNN, a stack of encoder layers or a
decoder block on a design with the vector unit: ``perf_model.compiler.network_figures``), its
cycles are that program's walk (``perf_model.program_timing``, what ``simulate`` runs and checks);
where it does not (no vector unit, a dataflow that builds no windows, a network the compiler cannot
build as one program, or a workload that is none of these), they are the op-by-op programs, summed
per op by the vectorised evaluator (``perf_model.evaluator``), with the vector unit's work after them.

:func:`apply_one_program` puts the one program's walk into a design table's columns: total,
compute, vector and stall cycles, the latency, and what follows from them (leakage energy, which is
the design's leakage power times the latency, so scales with it exactly; power, TOPS, TOPS/W, EDP,
utilisation). The DRAM bytes are the program's own transfers (``program_timing.program_dram_bytes``:
its bands, weights and outputs, the links it sends through DRAM, its vector ops' chunks), and the
DRAM energy those bytes at the design's pJ per byte (in ``dram``; ``vector_dram`` is then 0, the
vector ops' traffic being part of the program's). The other dynamic energy (MACs, registers, SRAM
accesses, the output stage, the vector unit's logic) stays the per-op figure of the same work: the
per-op rows are the breakdown.

The walk is scalar per design (``compile_conv_network``/``compile_block`` and the program walk
run once a design, a few tens of ms for ResNet-18); :func:`one_program_figures` keeps the last
results per design and workload, so a design scored twice is walked once.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import numpy as np

from accel_spec.config import ArrayConfig
from perf_model._memory_parts import dram_pj_per_byte
from perf_model.arrays.designs import DesignArrays
from perf_model.compiler.network_figures import network_figures
from perf_model.physical.energy import EnergyTable
from perf_model.physical.power_density import density_reasons, power_split
from perf_model.program_timing import dram_rate, program_fields
from workloads.ops import Workload

__all__ = ["one_program_figures", "apply_one_program", "ONE_PROGRAM_FIELDS", "FIGURE_MODEL", "FIGURE_BOUND"]

#: The name of what a design's figure is, recorded with every sweep trial (``figure_model``):
#: ``accel-dse verify`` refuses a trial recorded under another (an older model's per-op sums;
#: ``program-walk-1``: the walk's cycles with the per-op plans' DRAM energy; ``program-walk-2``: a
#: design naming no DRAM part as ``"none"``, DDR3's energy and no pacing, where it now gets
#: ``lpddr5-x32``, which paces it above 25.6 GB/s; ``program-walk-3``: on a design with the vector unit
#: running the workload op by op, its vector ops by the unit's per-op estimate, where each is now its own
#: program's walk).
FIGURE_MODEL = "program-walk-4"
#: How far (relative) a recorded figure may lie from the program walk: none, the two are one number.
FIGURE_BOUND = 0.0

#: The network figure's keys :func:`apply_one_program` takes (cycles of the program's walk).
ONE_PROGRAM_FIELDS = ("total_cycles", "compute_cycles", "vector_cycles", "stall_cycles")

#: Designs' one-program figures kept, most recently used last, by :func:`_program_key`.
_CACHE: OrderedDict[tuple[object, ...], dict[str, Any] | None] = OrderedDict()
_CACHE_SIZE = 4096


def _program_key(config: ArrayConfig, workload: Workload) -> tuple[object, ...]:
    """What the one program and its walk depend on: the design's fields but those it sees through
    the DRAM pacing only, the pacing, and the workload (designs of a sweep that differ in their clock
    or node alone share one walk)."""
    return program_fields(config), dram_rate(config), workload


def one_program_figures(config: ArrayConfig, workload: Workload) -> dict[str, Any] | None:
    """``network_figures(config, workload)`` (``None``, ``{"reason": ...}`` or the walk's figures),
    remembered for the last :data:`_CACHE_SIZE` programs (:func:`_program_key`)."""
    key = _program_key(config, workload)
    try:
        found = _CACHE[key]
    except KeyError:
        found = network_figures(config, workload)
        _CACHE[key] = found
        if len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
        return found
    _CACHE.move_to_end(key)
    return found


def runs_as_one_program(figures: dict[str, Any] | None) -> bool:
    """Whether ``figures`` (of :func:`one_program_figures`) is a program's walk (not ``None``, no reason)."""
    return figures is not None and "total_cycles" in figures


def apply_one_program(designs: DesignArrays, workload: Any, columns: dict[str, np.ndarray],
                      breakdown: dict[str, np.ndarray], table: EnergyTable) -> dict[int, dict[str, Any]]:
    """Replace, in place, the per-op totals of each feasible design that runs ``workload`` as one
    program with that program's walk (module docstring).

    Args:
        designs: the designs of ``columns`` (a block of a design table).
        workload: what they were scored on; only a ``Workload`` can be one program.
        columns: ``perf_model.figures.design_table.totals``' per-design columns.
        breakdown: its energy parts, pJ.
        table: the energy table they were computed with (the DRAM's pJ per byte is the part's).

    Returns:
        Design index -> its one program's figures, for the designs whose columns were replaced.
    """
    if not isinstance(workload, Workload) or not designs.vector_unit.any():
        return {}
    done: dict[int, dict[str, Any]] = {}
    for i in np.flatnonzero(designs.vector_unit & columns["feasible"]):
        figures = one_program_figures(designs.config(int(i)), workload)
        if runs_as_one_program(figures):
            done[int(i)] = figures  # type: ignore[assignment]
    if not done:
        return done
    index = np.fromiter(done, dtype=np.int64, count=len(done))
    total = np.array([float(done[i]["total_cycles"]) for i in index])
    compute = np.array([int(done[i]["compute_cycles"]) for i in index], dtype=np.int64)
    vector = np.array([int(done[i]["vector_cycles"]) for i in index], dtype=np.int64)
    old_latency = columns["latency_s"][index]
    latency = total / (designs.clock_mhz[index] * 1e6)
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where(old_latency > 0, latency / old_latency, 0.0)
    breakdown["leakage"][index] = breakdown["leakage"][index] * scale
    read = np.array([float(done[i]["dram_read_bytes"]) for i in index])
    written = np.array([float(done[i]["dram_write_bytes"]) for i in index])
    breakdown["dram"][index] = (read + written) * dram_pj_per_byte(designs.dram[index])
    if "vector_dram" in breakdown:
        breakdown["vector_dram"][index] = 0.0
    columns["dram_read_bytes"][index] = read
    columns["dram_write_bytes"][index] = written
    energy = sum(part[index] for part in breakdown.values())
    power = energy * 1e-12 / latency
    tops = 2.0 * columns["macs"][index] / latency / 1e12
    rows, cols = designs.rows[index], designs.cols[index]
    updates = {
        "total_cycles": total, "compute_cycles": compute, "vector_cycles": vector,
        "stall_cycles": np.maximum(total - compute - vector, 0.0), "latency_s": latency, "energy_pj": energy,
        "power_w": power, "tops": tops, "tops_per_w": tops / power, "edp": energy * 1e-12 * latency,
        "utilization": columns["macs"][index] / (rows.astype(np.float64) * cols * total),
    }
    dram = breakdown["dram"][index] + (breakdown["vector_dram"][index] if "vector_dram" in breakdown else 0.0)
    updates |= power_split(energy, dram, latency, columns["area_mm2"][index])
    for name, values in updates.items():
        columns[name][index] = values
    # the walk's power decides the density limit as the per-op power did (design_table.totals)
    # (a design the per-op power already made too dense keeps its reason: its columns are 0 by now)
    dense = columns["power_density_w_mm2"] > designs.max_power_density_w_mm2
    newly = columns["feasible"] & dense
    kept = dict(zip(np.flatnonzero(columns["too_dense"]).tolist(), columns["density_reason"], strict=True))
    kept |= zip(np.flatnonzero(newly).tolist(), density_reasons(columns, columns["area_mm2"], newly,
                                                                designs.max_power_density_w_mm2), strict=True)
    columns["too_dense"] = columns["too_dense"] | newly
    columns["feasible"] = columns["feasible"] & ~dense
    columns["density_reason"] = np.array([kept[i] for i in np.flatnonzero(columns["too_dense"]).tolist()], dtype=object)
    return done
