"""``evaluate_designs``: totals per design over a workload, the hot path of every sweep.

Each design's figure is the walk of the program the compiler emits for it
(``perf_model.figures.one_program``): the one program where the design runs the workload as one,
the op-by-op programs (summed per op by ``perf_model.evaluator``) where it does not."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, fields, replace
from functools import cache

import numpy as np

from accel_spec.errors import ModelError
from perf_model.arrays.designs import DesignArrays
from perf_model.arrays.ops import OpArrays, op_arrays
from perf_model.compiler.scorers import COMPILER_SCORERS
from perf_model.compiler.vector_walk import COMPILER_WALKS
from perf_model.evaluator.design_figures import design_figures
from perf_model.evaluator.design_ops import ENERGY_PARTS, Block, evaluate_block
from perf_model.evaluator.vector_work import (
    VECTOR_ENERGY_PARTS,
    VectorColumns,
    vector_columns,
    vector_unit_mm2,
    workload_vector_ops,
)
from perf_model.figures.one_program import apply_one_program
from perf_model.physical.checksum import sdc_coverage
from perf_model.physical.energy import DEFAULT_ENERGY, EnergyTable
from perf_model.physical.pe_area import AreaCoefficients, area_coefficients
from perf_model.physical.power_density import density_reasons, power_split
from workloads.ops import Op, Workload

__all__ = ["DesignTable", "evaluate_designs", "design_area", "METRICS", "OBJECTIVE_METRICS", "totals",
           "TOTAL_ENERGY_PARTS"]

#: Energy parts of a design's totals: the matrix work's, then the vector unit's.
TOTAL_ENERGY_PARTS = ENERGY_PARTS + VECTOR_ENERGY_PARTS

#: Objective name -> direction ("min" or "max").
METRICS: dict[str, str] = {
    "latency": "min", "energy": "min", "area": "min", "edp": "min", "tops_per_w": "max", "power": "min",
    "coverage": "max",
}
#: Objective name -> the DesignTable field it reads.
OBJECTIVE_METRICS: dict[str, str] = {
    "latency": "latency_s", "energy": "energy_pj", "area": "area_mm2", "edp": "edp",
    "tops_per_w": "tops_per_w", "power": "power_w", "coverage": "sdc_coverage",
}
#: Design-op elements per vectorised block (bounds memory; ~1 MB per float array).
BLOCK_ELEMENTS = 16384


@dataclass
class DesignTable:
    """Totals over a workload, one element per design (numpy arrays).

    Infeasible designs have ``feasible = False``, a ``reason`` naming the op, the buffer and
    the tile that does not fit, and 0 in every metric. No metric is ever NaN or inf.

    Attributes:
        feasible: bool.
        reason: ``""`` when feasible.
        overflow: bool, the design is infeasible because an op's reduction can overflow its
            ``acc_bits`` (every tile fits); the reason names the op, ``acc_bits`` and K.
        compute_cycles: array busy cycles (int64, sum of ``timing.run_cycles`` over all runs).
        vector_cycles: vector unit busy cycles (int64, ``perf_model.vector_timing``; after the
            matrix work, not overlapped with it).
        stall_cycles: cycles waiting for DRAM (float64), the vector work's included.
        total_cycles: ``compute_cycles + vector_cycles + stall_cycles`` (float64): the walk of the
            program the compiler emits for the design (``perf_model.figures.one_program``): the one
            program where the design runs the workload as one (then compute, vector and stall cycles
            are that walk's), else the op-by-op programs.
        macs: multiply-accumulates (int64).
        dram_read_bytes, dram_write_bytes, sram_read_bytes, sram_write_bytes: bytes (float64).
        energy_pj: total energy, pJ; ``energy_breakdown`` holds its components.
        latency_s: seconds at ``clock_mhz``.
        area_mm2: die area (array, skew, control, SRAM), mm^2.
        power_w: average power over the workload, W.
        tops: achieved tera-operations per second (2 ops per MAC).
        tops_per_w: ``tops / power_w``.
        edp: energy-delay product, J*s.
        utilization: ``macs / (rows * cols * total_cycles)``.
        f_max_mhz: the clock the design's logic reaches (``perf_model.physical.fmax``), MHz; a design
            whose ``clock_mhz`` exceeds it is infeasible with a reason naming both.
        vdd: the supply that meets ``clock_mhz`` on the node's voltage-frequency curve, V.
        sdc_coverage: share of the corrupting faults of the stored fault-injection campaign the
            design's ``checksum`` detects (``perf_model.physical.checksum``; 0 without one).
        dram_power_w, on_die_power_w, power_density_w_mm2: ``power_w`` split into the DRAM
            device and interface and the die, and the die's W/mm^2
            (``perf_model.physical.power_density``); a design above its limit is infeasible.
        conv_notes: ``""``, or why some of the workload's convs run as the host's im2col GEMM on
            the design (how many, and the first one's reason: a dataflow that builds no windows,
            or the GEMM that is faster), so a sweep sees it per design.
    """

    feasible: np.ndarray
    reason: list[str]
    overflow: np.ndarray
    compute_cycles: np.ndarray
    vector_cycles: np.ndarray
    stall_cycles: np.ndarray
    total_cycles: np.ndarray
    macs: np.ndarray
    dram_read_bytes: np.ndarray
    dram_write_bytes: np.ndarray
    sram_read_bytes: np.ndarray
    sram_write_bytes: np.ndarray
    energy_pj: np.ndarray
    latency_s: np.ndarray
    area_mm2: np.ndarray
    power_w: np.ndarray
    tops: np.ndarray
    tops_per_w: np.ndarray
    edp: np.ndarray
    utilization: np.ndarray
    f_max_mhz: np.ndarray
    vdd: np.ndarray
    sdc_coverage: np.ndarray
    dram_power_w: np.ndarray
    on_die_power_w: np.ndarray
    power_density_w_mm2: np.ndarray
    energy_breakdown: dict[str, np.ndarray] = field(default_factory=dict)
    conv_notes: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return int(self.feasible.shape[0])

    def row(self, i: int) -> dict[str, float | int | bool | str]:
        """Design ``i`` as a flat dict of Python scalars (breakdown as ``energy_<part>_pj``)."""
        out: dict[str, float | int | bool | str] = {}
        for f in fields(self):
            if f.name == "energy_breakdown":
                continue
            value = getattr(self, f.name)[i]
            out[f.name] = value if isinstance(value, str) else value.item()
        for part, values in self.energy_breakdown.items():
            out[f"energy_{part}_pj"] = float(values[i])
        return out


def totals(block: Block, rows: np.ndarray, cols: np.ndarray, vector: VectorColumns | None = None
           ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Sum a block's per design-op results over its ops, add the ``vector`` work (its cycles, bytes,
    energy, the unit's area and the leakage of the longer run) and derive the per-design metrics.

    Returns ``(columns, breakdown)``: the per-design metrics by name, and the energy of each
    part of :data:`TOTAL_ENERGY_PARTS` (pJ). A design whose sums are not finite (a model bug: tests
    check it never happens) comes out infeasible; the column ``failed_finite`` marks it so the
    caller can say so; the column ``vector_misfit`` marks a design whose buffer cannot hold a
    vector op's rows.
    """
    feasible = block.feasible.all(axis=1)
    compute_sum = block.compute_cycles.sum(axis=1)
    total = block.total_cycles.sum(axis=1)
    macs = block.macs.sum(axis=1)
    breakdown = {part: block.energy[part].sum(axis=1) for part in ENERGY_PARTS}
    nd = feasible.shape[0]
    latency = block.latency_s.sum(axis=1)
    area_mm2 = block.area_mm2
    byte_sums = {k: getattr(block, k).sum(axis=(0, 2)) for k in ("dram_read", "dram_write", "sram_read", "sram_write")}
    vector_busy = np.zeros(nd, dtype=np.int64)
    misfit = np.zeros(nd, dtype=bool)
    if vector is None:
        breakdown |= {part: np.zeros(nd) for part in VECTOR_ENERGY_PARTS}
    else:
        vector_busy = vector.busy_cycles
        misfit = np.array([bool(text) for text in vector.misfit], dtype=bool)
        total = total + vector.busy_cycles + vector.stall_cycles
        breakdown |= vector.energy
        # leakage of the whole design (the unit included) over the whole run
        breakdown["leakage"] = breakdown["leakage"] + vector.leak_w_per_mm2 * 1e12 * (
            (area_mm2 + vector.area_mm2) * (latency + vector.latency_s) - area_mm2 * latency)
        area_mm2 = area_mm2 + vector.area_mm2
        latency = latency + vector.latency_s
        for key in byte_sums:
            byte_sums[key] = byte_sums[key] + getattr(vector, key)
    feasible = feasible & ~misfit
    energy = sum(breakdown.values())
    split = power_split(energy, breakdown["dram"] + breakdown["vector_dram"], latency, area_mm2)
    too_dense = feasible & (split["power_density_w_mm2"] > block._designs.max_power_density_w_mm2)
    feasible = feasible & ~too_dense
    finite = np.isfinite(compute_sum) & np.isfinite(total) & np.isfinite(energy)
    failed_finite = feasible & ~finite
    feasible = feasible & finite
    compute = np.rint(np.where(feasible, compute_sum, 0.0)).astype(np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        power = energy * 1e-12 / latency
        tops = 2.0 * macs / latency / 1e12
        out = {
            "feasible": feasible,
            "compute_cycles": compute,
            "vector_cycles": np.where(feasible, vector_busy, 0).astype(np.int64),
            "stall_cycles": np.maximum(total - compute - vector_busy, 0.0),
            "total_cycles": total,
            "macs": macs,
            "dram_read_bytes": byte_sums["dram_read"],
            "dram_write_bytes": byte_sums["dram_write"],
            "sram_read_bytes": byte_sums["sram_read"],
            "sram_write_bytes": byte_sums["sram_write"],
            "energy_pj": energy,
            "latency_s": latency,
            "area_mm2": area_mm2,
            "power_w": power,
            "tops": tops,
            "tops_per_w": tops / power,
            "edp": energy * 1e-12 * latency,
            "utilization": macs / (np.asarray(rows, dtype=np.float64) * cols * total),
            "f_max_mhz": block.f_max_mhz,
            "vdd": block.vdd,
            "sdc_coverage": sdc_coverage(block._designs.dataflow, block._designs.checksum),
            **split,
        }
    for name, values in out.items():
        if name != "feasible":  # 0 for infeasible designs, and for any nan or inf
            out[name] = np.where(feasible & np.isfinite(values), values, 0).astype(values.dtype, copy=False)
    out["failed_finite"] = failed_finite
    out["too_dense"] = too_dense & finite
    out["density_reason"] = density_reasons(split, area_mm2, out["too_dense"], block._designs.max_power_density_w_mm2)
    out["vector_misfit"] = misfit & block.feasible.all(axis=1) & finite
    # the first op that is not ok decides the design's status (the reason is that op's)
    bad = ~block.feasible
    first = bad.argmax(axis=1)
    out["overflow"] = bad.any(axis=1) & block.overflow[np.arange(len(first)), first]
    return out, {k: np.where(feasible, v, 0.0) for k, v in breakdown.items()}


def design_area(designs: DesignArrays, *, area: AreaCoefficients | None = None) -> np.ndarray:
    """Each design's die area, mm^2, as :func:`evaluate_designs` gives it on any workload (``area_mm2``:
    the array, its buffers, control and memory system, and the vector unit on a design that carries
    it, whatever the workload), without scoring one: a constraint on the area can be checked first
    (the grid sampler scores no design that breaks one, ``accel_dse.search.scoring.grid``)."""
    if not isinstance(designs, DesignArrays):
        raise ModelError(f"designs must be a DesignArrays, not {type(designs).__name__}")
    return design_figures(designs, DEFAULT_ENERGY, area or area_coefficients()).area_mm2 + vector_unit_mm2(designs)


def evaluate_designs(
    designs: DesignArrays, ops: Workload | Sequence[tuple[Op, int]], *, energy: EnergyTable | None = None,
    area: AreaCoefficients | None = None, allow_spill: bool = False, reuse: bool = True,
) -> DesignTable:
    """Totals per design over a workload, vectorised over designs x ops.

    Args:
        designs: the designs (struct of arrays).
        ops: a :class:`Workload` or ``(op, count)`` pairs.
        energy: per-access energies (default: :data:`DEFAULT_ENERGY`).
        area: area coefficients (default: the current :func:`area_coefficients`).
        allow_spill: let tilings spill partial sums to DRAM (see ``choose_tiles``).
        reuse: keep outputs on chip as the next op's input where possible (``perf_model.evaluator.reuse_links``).

    Returns:
        A :class:`DesignTable` with one element per design.

    Raises:
        ModelError: ``designs`` is not a ``DesignArrays`` or ``ops`` holds no valid op.
    """
    if not isinstance(designs, DesignArrays):
        raise ModelError(f"designs must be a DesignArrays, not {type(designs).__name__}")
    opa = op_arrays(ops)
    with _no_cycle_collection():
        return _evaluate(designs, ops, opa, energy or DEFAULT_ENERGY, area or area_coefficients(), allow_spill, reuse)


@contextlib.contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """Python's cycle collector off while a call scores its designs, back as it was after. A first
    pass over new designs makes some 10^5 short-lived objects (programs' commands, figures), which
    set off full collections that find nothing to collect (the objects hold no cycles: their
    reference counts free them): measured 0.13 s of ResNet-18's 1.25 s and 0.3 s of MobileNetV2's
    2.96 s on 1,000 new designs (``bench/model_throughput.py --cnn``). The collector's switch is the
    process's: a call that finds it off leaves it off."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _evaluate(designs: DesignArrays, ops: Workload | Sequence[tuple[Op, int]], opa: OpArrays, energy: EnergyTable,
              area: AreaCoefficients, allow_spill: bool, reuse: bool) -> DesignTable:
    """:func:`evaluate_designs` once its arguments are checked."""
    vector_ops = workload_vector_ops(ops)
    _keep_freed_heap()
    n = len(designs)
    step = max(1, BLOCK_ELEMENTS // len(opa))
    # Blocks are homogeneous in reduction dim (WS/IS vs OS) and double buffering: the tiling
    # treats the two dataflow groups apart and single-buffered blocks skip the overlap model.
    # Results go back to the caller's order.
    key = (designs.dataflow == 1).astype(np.int64) * 2 + designs.double_buffered
    perm = np.argsort(key, kind="stable")
    bounds = np.searchsorted(key[perm], np.arange(5))
    in_order = (perm == np.arange(n)).all()
    grouped = designs if in_order else designs.take(perm)  # each block a slice of it (one gather, not one a block)
    figures = design_figures(grouped, energy, area)  # per design: once, not once a block
    parts: list[dict[str, np.ndarray]] = []
    breakdowns: list[dict[str, np.ndarray]] = []
    reasons: list[str] = [""] * n
    notes: list[str] = [""] * n
    for group in range(4):
        for lo in range(int(bounds[group]), int(bounds[group + 1]), step):
            at = slice(lo, min(lo + step, int(bounds[group + 1])))
            index = perm[at]
            if index.size == n:
                chunk, chunk_figures = grouped, figures
            else:
                chunk, chunk_figures = grouped.take(at), figures.take(at)
            block = evaluate_block(chunk, opa, energy, area, scorers=COMPILER_SCORERS, allow_spill=allow_spill,
                                   reuse=reuse, figures=chunk_figures)
            # a design without the unit runs no vector op on chip: the work adds nothing then
            vector = (vector_columns(chunk, vector_ops, energy, block.vdd, walks=COMPILER_WALKS)
                      if chunk.vector_unit.any() else None)
            columns, breakdown = totals(block, chunk.rows, chunk.cols, vector)
            if reuse:  # without reuse the ops run as their own programs (simulate --no-reuse's path)
                apply_one_program(chunk, ops, columns, breakdown, energy)
            parts.append(columns)
            breakdowns.append(breakdown)
            for i, text in block.first_failures().items():
                reasons[int(index[i])] = text
            for i, text in block.host_conv_notes().items():
                notes[int(index[i])] = text
            for j in np.flatnonzero(parts[-1].pop("vector_misfit")):
                reasons[int(index[j])] = vector.misfit[j] if vector is not None else ""
            dense_reasons = parts[-1].pop("density_reason")
            for j, text in zip(np.flatnonzero(parts[-1].pop("too_dense")), dense_reasons, strict=True):
                reasons[int(index[j])] = text
            for j in np.flatnonzero(parts[-1].pop("failed_finite")):
                reasons[int(index[j])] = "model error: a non-finite result (a perf_model bug; please report it)"
    table = replace(_concat(parts, breakdowns, reasons, n), conv_notes=notes)
    if in_order:
        return table
    inverse = np.empty(n, dtype=np.int64)
    inverse[perm] = np.arange(n)
    return _permute(table, inverse, reasons)


@cache
def _keep_freed_heap() -> None:
    """Let the C allocator keep the memory a block frees for the next block (once per process).

    A block allocates and frees some 10 MB of arrays of up to ~400 KB. glibc gives the free top of
    its heap back to the OS past a trim threshold, twice its mmap threshold (128 KiB at start,
    raised to the size of the largest mmapped chunk freed so far, at most 32 MiB), so with only
    arrays of a few hundred KB freed it trims after every block and faults the pages back in:
    measured 11,000 to 38,000 minor page faults and 18 to 74 ms of system time (it varies from
    process to process) in the 0.45-0.5 s of ``bench/model_throughput.py``'s grid, 7 with this.
    Freeing one 24 MiB array (mmapped) raises the thresholds to 24 MiB and 48 MiB, as in any numpy
    program that has freed such an array once. Elsewhere it costs nothing: ``np.empty`` touches no
    page. (An 8 MiB array, 16 MiB of heap kept, was not always enough: in about one process of three
    some 4,500 page faults and 15-30 ms of system time came back in every pass over the grid's
    transformers, measured; none in six processes with this.)
    """
    np.empty(3 << 20)


#: The fields that are no per-design array.
_LISTS = ("reason", "energy_breakdown", "conv_notes")


def _permute(table: DesignTable, index: np.ndarray, reasons: list[str]) -> DesignTable:
    """The table's rows in the order ``index`` (``reasons`` already in the final order)."""
    values = {f.name: getattr(table, f.name)[index] for f in fields(DesignTable)
              if f.name not in _LISTS}
    return DesignTable(reason=reasons, energy_breakdown={k: v[index] for k, v in table.energy_breakdown.items()},
                       conv_notes=table.conv_notes, **values)


def _concat(
    parts: list[dict[str, np.ndarray]], breakdowns: list[dict[str, np.ndarray]], reasons: list[str], n: int
) -> DesignTable:
    if not parts:
        empty = {f.name: np.zeros(0) for f in fields(DesignTable) if f.name not in _LISTS}
        empty["feasible"] = np.zeros(0, dtype=bool)
        empty["overflow"] = np.zeros(0, dtype=bool)
        empty["compute_cycles"] = np.zeros(0, dtype=np.int64)
        empty["vector_cycles"] = np.zeros(0, dtype=np.int64)
        empty["macs"] = np.zeros(0, dtype=np.int64)
        return DesignTable(reason=[], energy_breakdown={k: np.zeros(0) for k in TOTAL_ENERGY_PARTS},
                           **empty)  # type: ignore[arg-type]
    keys = [f.name for f in fields(DesignTable) if f.name not in _LISTS]
    columns = {k: np.concatenate([p[k] for p in parts]) for k in keys}
    breakdown = {k: np.concatenate([b[k] for b in breakdowns]) for k in TOTAL_ENERGY_PARTS}
    return DesignTable(reason=reasons, energy_breakdown=breakdown, **columns)  # type: ignore[arg-type]
