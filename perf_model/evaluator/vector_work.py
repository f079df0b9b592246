"""The vector work of a workload in the vectorised model: cycles, bytes, energy and area per design.

Each :class:`~workloads.vector_ops.VectorOp` the unit runs (``perf_model.vector_timing``; its
lanes are the ifmap word's, ``ArrayConfig.vector_lanes``: ``R`` for WS/OS, ``C`` for IS, on designs
with ``vector_unit``; a design without it runs none and has no unit area) costs, per run:

* cycles: the walk of the op's own program (``perf_model.compiler.vector_chunks.vector_op_program``:
  its operands LOADed, ``VECTOR``, its output STOREd, in chunks when they do not fit the ifmap
  together; :mod:`perf_model.compiler.vector_walk`, passed in as ``walks``), split into the unit's busy cycles (its
  ``VECTOR`` commands, :func:`perf_model.vector_timing.plan_cycles` per chunk: the RTL's contract)
  and stall cycles (the rest of the walk: the fetch, the transfers the unit waits for);
* DRAM bytes: that program's transfers (``perf_model.program_timing.program_dram_bytes``: every
  operand read and the output written once, padding lanes included; a RoPE's table, one row a
  position, once); SRAM bytes: every pass reads its operands' words and the last pass writes the
  output's words (padding lanes included; a RoPE reads its row once and its table row per row);
* energy: :mod:`perf_model.physical.vector_unit` per lane-word of every pass and per scalar step,
  the SRAM bytes at the ifmap buffer's per-byte energy, the DRAM bytes at the part's, all at the
  node and supply of the design; leakage of the whole design over the vector cycles.

The vector work runs after the matrix work (no overlap with the array). An op the unit cannot
run costs nothing here and stays host work, named with its reason (:func:`host_ops`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from accel_spec.vector_isa import DIV_STEPS, SQRT_STEPS
from perf_model import timing
from perf_model._memory_parts import dram_pj_per_byte
from perf_model.arrays.designs import DesignArrays
from perf_model.evaluator.vector_walk import VectorWalks, design_keys
from perf_model.physical.design_area import logic_mm2
from perf_model.physical.energy import EnergyTable, tech_energy_scale
from perf_model.physical.technology import nominal_vdd
from perf_model.physical.vector_unit import door_um2, lane_word_pj, scalar_step_pj, unit_um2
from perf_model.vector_timing import VectorPlan, vector_plan
from workloads.vector_ops import VectorOp

__all__ = ["VectorColumns", "vector_columns", "vector_lanes", "vector_unit_mm2", "host_ops", "plan_bytes",
           "workload_vector_ops", "VECTOR_ENERGY_PARTS", "row_bytes", "word_reads"]

#: Energy parts of the vector work (beside ``perf_model.evaluator.design_ops.ENERGY_PARTS``).
VECTOR_ENERGY_PARTS = ("vector", "vector_sram", "vector_dram")

_SCALAR_STEPS = {"layernorm": 2 * DIV_STEPS + SQRT_STEPS, "rmsnorm": 2 * DIV_STEPS + SQRT_STEPS, "softmax": DIV_STEPS}


def workload_vector_ops(ops: object) -> list[tuple[VectorOp, int]]:
    """``(op, count)`` of a workload's vector ops (none for a plain list of matrix ops)."""
    vector = getattr(ops, "vector_ops", ())
    return list(zip(vector, getattr(ops, "vector_counts", ()), strict=True)) if vector else []


def host_ops(vector_ops: Sequence[tuple[VectorOp, int]], lanes: int) -> list[dict[str, object]]:
    """The ops the unit cannot run: ``kind``, ``name``, ``runs``, ``elements`` (all runs), ``reason``."""
    out: list[dict[str, object]] = []
    for op, count in vector_ops:
        plan = vector_plan(op, lanes)
        if isinstance(plan, str):
            out.append({"kind": op.kind, "name": op.name, "runs": count, "elements": op.elements * count,
                        "reason": plan})
    return out


def word_reads(plan: VectorPlan) -> int:
    """Words the unit reads in one run, per operand (a pooling: its windows' in-image pixels; a
    RoPE: its ``2 * words`` reads a row, two lane multiplies every other one)."""
    g = plan.pool
    if g is not None:
        return plan.rows * g.words_c * g.inside(0) * g.inside(1)
    if plan.table_words:
        return plan.rows * plan.table_words
    return plan.rows * plan.words * plan.passes


def plan_bytes(plan: VectorPlan, elem_bytes: int = 1) -> dict[str, int]:
    """Bytes of one run: ``dram_read``, ``dram_write``, ``sram_read``, ``sram_write``, elements of
    ``elem_bytes`` bytes (a bf16 design's lanes hold two: ``input_bits // 8``)."""
    return {k: v * elem_bytes for k, v in _plan_bytes(plan).items()}


def _plan_bytes(plan: VectorPlan) -> dict[str, int]:
    g = plan.pool
    if g is not None:
        return {"dram_read": plan.rows * g.in_h * g.in_w * plan.n, "dram_write": plan.rows * g.out_h * g.out_w * plan.n,
                "sram_read": word_reads(plan) * plan.lanes, "sram_write": plan.rows * plan.out_words * plan.lanes}
    word_bytes = plan.rows * plan.words * plan.lanes
    elements = plan.rows * plan.n
    if plan.table_words:  # a RoPE: x once, its table row for every row, the table from DRAM once
        table = plan.table_words * plan.lanes
        return {"dram_read": elements + plan.table_rows * table, "dram_write": elements,
                "sram_read": word_bytes + plan.rows * table, "sram_write": word_bytes}
    return {"dram_read": elements * plan.operands, "dram_write": elements,
            "sram_read": word_bytes * (plan.operands if plan.passes == 1 else plan.passes), "sram_write": word_bytes}


def row_bytes(plan: VectorPlan) -> int:
    """Buffer bytes a row op needs on chip: one row of each operand and of the output (a RoPE: its
    table row too; 0 for an element-wise op or a pooling, which stream words)."""
    if plan.table_words:
        return (2 * plan.words + plan.table_words) * plan.lanes
    return 0 if plan.passes == 1 or plan.pool is not None else (plan.operands + 1) * plan.words * plan.lanes


@dataclass(frozen=True)
class VectorColumns:
    """Per design: the vector work's busy and stall cycles, bytes, dynamic energy by part (pJ), the
    unit's area (mm^2, 0 on a design without the unit), its latency (s), the leakage
    density (W/mm^2), and ``misfit``: the first op whose rows do not fit the ifmap buffer, with
    its reason (``""``: all fit)."""

    busy_cycles: np.ndarray
    stall_cycles: np.ndarray
    dram_read: np.ndarray
    dram_write: np.ndarray
    sram_read: np.ndarray
    sram_write: np.ndarray
    energy: dict[str, np.ndarray]
    area_mm2: np.ndarray
    latency_s: np.ndarray
    leak_w_per_mm2: np.ndarray
    misfit: list[str]


def vector_lanes(d: DesignArrays) -> np.ndarray:
    """Lanes of each design's vector unit (its ifmap word's: ``R`` for WS/OS, ``C`` for IS), 0 without one."""
    return np.where(np.asarray(d.vector_unit, dtype=bool),
                    np.where(np.asarray(d.dataflow) == timing.dataflow_code("is"), d.cols, d.rows), 0).astype(np.int64)


def vector_unit_mm2(d: DesignArrays) -> np.ndarray:
    """The vector unit's area on every design that carries it, whatever the workload (the RTL builds it),
    its door's converters included on a design whose activations are not int8 (``door_um2``); 0 without
    one (node density, floor plan: ``logic_mm2``)."""
    lanes = vector_lanes(d)
    return np.where(lanes > 0, logic_mm2(unit_um2(lanes) + door_um2(d.act_format, lanes), d.tech_nm), 0.0)


def vector_columns(d: DesignArrays, vector_ops: Sequence[tuple[VectorOp, int]], energy: EnergyTable,
                   vdd: np.ndarray, *, walks: VectorWalks) -> VectorColumns:
    """The vector work of ``vector_ops`` on every design of ``d`` (module docstring); ``walks``:
    each op's own program's walk (``perf_model.compiler.vector_walk.COMPILER_WALKS``)."""
    n = len(d)
    cols = vector_lanes(d)
    busy = np.zeros(n, dtype=np.int64)
    bytes_ = {k: np.zeros(n) for k in ("dram_read", "dram_write", "sram_read", "sram_write")}
    lane_words = np.zeros(n)
    steps = np.zeros(n)
    elem = np.asarray(d.input_bits, dtype=np.int64) // 8  # bytes an element (bf16 lanes: 2)
    stall = np.zeros(n)
    capacity = np.asarray(d.ifmap_sram_kib, dtype=np.int64) * 1024
    misfit = [""] * n
    has = np.flatnonzero(cols > 0)
    position, distinct = design_keys(d, has, walks.key)
    for lanes in np.unique(cols[cols > 0]).tolist():
        at = cols == lanes
        for op, count in vector_ops:
            plan = vector_plan(op, lanes)
            if isinstance(plan, str):
                continue
            need = row_bytes(plan)
            label = " ".join(filter(None, (op.kind, op.name)))
            for i in np.flatnonzero(at & (capacity < need)).tolist():
                misfit[i] = misfit[i] or (f"vector op {label}: a row of {plan.n} elements needs {need} bytes of "
                                          f"ifmap buffer, the design has {int(capacity[i])}")
            b = plan_bytes(plan)
            for key in ("sram_read", "sram_write"):
                bytes_[key][at] += count * b[key] * elem[at]
            lane_words[at] += count * word_reads(plan) * lanes
            steps[at] += count * plan.rows * _SCALAR_STEPS.get(plan.kind, 0)
            # cycles and DRAM bytes: the walk of the op's own program, one per distinct walk key
            found = [walks.walk(config, op, key) if config.vector_lanes == lanes else None for config, key in distinct]
            mine = at[has]
            for j, walk in enumerate(found):
                if walk is None:
                    continue
                where = has[mine & (position == j)]
                if isinstance(walk, str):
                    for i in where.tolist():
                        misfit[i] = misfit[i] or f"vector op {label}: {walk}"
                    continue
                busy[where] += count * walk.vector
                stall[where] += count * (walk.total - walk.vector)
                bytes_["dram_read"][where] += count * walk.read
                bytes_["dram_write"][where] += count * walk.written
    scale = tech_energy_scale(d.tech_nm) * (vdd / nominal_vdd(d.tech_nm)) ** 2
    bank_kib = np.asarray(d.ifmap_sram_kib, dtype=np.float64) / np.where(d.double_buffered, 2.0, 1.0)
    sram_pj = energy.sram_pj_per_byte(bank_kib) * scale
    parts = {
        "vector": (lane_words * lane_word_pj(energy) + steps * scalar_step_pj(energy)) * scale,
        "vector_sram": (bytes_["sram_read"] + bytes_["sram_write"]) * sram_pj,
        "vector_dram": (bytes_["dram_read"] + bytes_["dram_write"]) * dram_pj_per_byte(d.dram),
    }
    area = vector_unit_mm2(d)
    latency = (busy + stall) / (np.asarray(d.clock_mhz, dtype=np.float64) * 1e6)
    return VectorColumns(busy, stall, bytes_["dram_read"], bytes_["dram_write"], bytes_["sram_read"],
                         bytes_["sram_write"], parts, area, latency, energy.leakage_density(d.tech_nm, vdd), misfit)
