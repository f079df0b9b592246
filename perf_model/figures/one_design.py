"""The scalar API: one design on one workload or op, a thin wrapper over the vectorised core."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from accel_spec.config import ArrayConfig
from accel_spec.errors import ModelError
from perf_model.arrays.designs import DesignArrays
from perf_model.arrays.ops import op_arrays
from perf_model.compiler.scorers import COMPILER_SCORERS
from perf_model.compiler.vector_walk import COMPILER_WALKS, op_walk
from perf_model.evaluator.design_ops import ENERGY_PARTS, evaluate_block, order_names, resident_name
from perf_model.evaluator.vector_walk import OpWalk
from perf_model.evaluator.vector_work import host_ops, plan_bytes, vector_columns, workload_vector_ops
from perf_model.figures.design_table import totals
from perf_model.figures.one_program import apply_one_program, one_program_figures
from perf_model.physical.energy import DEFAULT_ENERGY, EnergyTable
from perf_model.physical.pe_area import AreaCoefficients, area_coefficients
from perf_model.vector_timing import plan_cycles, vector_plan
from workloads.ops import Conv2d, Gemm, Op, Workload

__all__ = ["OpResult", "WorkloadResult", "evaluate", "evaluate_op"]

#: Keys of each op in ``WorkloadResult.to_dict()`` (and summed in ``total``).
OP_KEYS = ("folds", "compute_cycles", "stall_cycles", "total_cycles", "utilization", "macs",
           "dram_read_bytes", "dram_write_bytes", "energy_pj")


def _num(value: Any) -> int | float:
    """A Python int when ``value`` is a whole number, else a float."""
    value = float(value)
    return int(value) if value.is_integer() and abs(value) < 2**53 else value


@dataclass(frozen=True)
class OpResult:
    """One op of a workload on one design (all instances: ``count * batch`` GEMMs).

    Attributes:
        name: op name; ``status`` ``"ok"``, ``"infeasible"`` (no tile fits the buffers) or
            ``"overflow"`` (the reduction can overflow ``acc_bits``), and ``reason`` (``""`` if ok).
        count: how often the op runs; ``instances``: GEMM instances (``count * batch``).
        gemm: ``(m, k, n)`` of one instance; ``tile``: ``(mt, kt, nt)``; ``loop_order``: GEMM
            dims of the tile loops, outer to inner (e.g. ``"m,n,k"``); ``resident``: ``"a"`` or
            ``"b"``, the input held in its buffer as a whole strip (read from DRAM once), or ``""``.
        conv_path: a conv's path (``perf_model.evaluator.conv_ops``): ``"chip"`` (windows built on
            chip), ``"host"`` (the host's im2col GEMM; ``conv_note`` says why) or ``"infeasible"``
            (it does not fit on chip; ``reason`` says why); ``""`` for a GEMM.
        on_chip: on-chip reuse across layers (``perf_model.evaluator.reuse_links``, and a chain of convs
            kept as one program: ``perf_model.evaluator.conv_ops``): ``"in"`` (the op before left
            ``A`` in the ifmap), ``"out"`` (the output stays there for the next op), ``"in,out"``,
            or ``""``.
        folds, compute_cycles, stall_cycles, total_cycles, utilization, macs: as in the issue.
        dram_read_bytes, dram_write_bytes, sram_read_bytes, sram_write_bytes: bytes.
        energy_pj: energy, pJ (``energy_breakdown`` by component); latency_s: seconds.
    """

    name: str
    status: str
    reason: str
    count: int
    instances: int
    gemm: tuple[int, int, int]
    tile: tuple[int, int, int]
    loop_order: str
    resident: str
    on_chip: str
    folds: int
    compute_cycles: int
    stall_cycles: float
    total_cycles: float
    utilization: float
    macs: int
    dram_read_bytes: float
    dram_write_bytes: float
    sram_read_bytes: float
    sram_write_bytes: float
    energy_pj: float
    latency_s: float
    energy_breakdown: dict[str, float] = field(default_factory=dict)
    conv_path: str = ""
    conv_note: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The op's entry in ``accel-dse evaluate --json``."""
        out: dict[str, Any] = {"name": self.name, "status": self.status}
        for key in OP_KEYS:
            out[key] = _num(getattr(self, key)) if key != "utilization" else float(self.utilization)
        out["reason"] = self.reason
        out["tile"] = {"m": self.tile[0], "k": self.tile[1], "n": self.tile[2], "order": self.loop_order,
                       "resident": self.resident}
        out["on_chip"] = self.on_chip
        if self.conv_path:
            out["conv_path"] = self.conv_path
            out["conv_note"] = self.conv_note
        return out


@dataclass(frozen=True)
class WorkloadResult:
    """One design on one workload: per-op results and totals.

    Attributes:
        design: the design.
        workload: workload name.
        status: ``"ok"``, or the status of the first op that is not ok (``"infeasible"`` or
            ``"overflow"``); ``reason`` names it.
        ops: per-op results in program order.
        total: totals (``vector_cycles``, latency, area, power, TOPS, TOPS/W, EDP, energy breakdown
            beside the keys of each op); 0 when infeasible. The cycles and what follows from them
            are the walk of the program the compiler emits for the design
            (``perf_model.figures.one_program``): ``network``'s where it runs the workload as one
            program, else the op-by-op programs (the ops' keys summed). The one figure the sweep
            records; ``ops`` are its breakdown by op.
        vector_ops: the workload's vector ops the vector unit runs (``perf_model.evaluator.vector_work``),
            each ``kind``, ``name``, ``runs``, ``elements`` (all runs), ``cycles`` (the unit busy in
            one run of the op's own program), ``total_cycles`` (busy, all runs), ``program_cycles``
            (that program's walk, one run) and the bytes of all runs.
        host_work: the vector ops it cannot run, and the inputs the host reshapes for a conv
            (space-to-depth), each with ``kind``, ``name``, ``runs``, ``elements`` and ``reason``:
            host work, left out of the figures.
        network: a whole CNN, a stack of encoder layers or a decoder block as one program on a
            design with the vector unit (``perf_model.compiler.network_figures``): its walk's cycles
            and queue-loads (then ``total`` is that walk), or its ``reason`` (then the ops run as
            op-by-op programs); ``None`` when the workload is none of these (or the design cannot
            run its ops).
    """

    design: ArrayConfig
    workload: str
    status: str
    reason: str
    ops: list[OpResult]
    total: dict[str, Any]
    vector_ops: list[dict[str, Any]] = field(default_factory=list)
    host_work: list[dict[str, Any]] = field(default_factory=list)
    network: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON of ``accel-dse evaluate --json``."""
        return {
            "design": self.design.to_dict(),
            "workload": self.workload,
            "status": self.status,
            "reason": self.reason,
            "ops": [op.to_dict() for op in self.ops],
            "total": dict(self.total),
            "vector_ops": [dict(v) for v in self.vector_ops],
            "host_work": [dict(h) for h in self.host_work],
            "network": dict(self.network) if self.network is not None else None,
        }


def _evaluate(config: ArrayConfig, ops: Any, name: str, energy: EnergyTable | None,
              area: AreaCoefficients | None, reuse: bool = True) -> WorkloadResult:
    if not isinstance(config, ArrayConfig):
        raise ModelError(f"config must be an ArrayConfig, not {config!r}")
    opa = op_arrays(ops)
    designs = DesignArrays.from_configs([config])
    table = energy or DEFAULT_ENERGY
    block = evaluate_block(designs, opa, table, area or area_coefficients(), scorers=COMPILER_SCORERS, reuse=reuse)
    vector_ops = workload_vector_ops(ops)
    vector = (vector_columns(designs, vector_ops, table, block.vdd, walks=COMPILER_WALKS)
              if vector_ops or config.vector_unit else None)
    tot, breakdown = totals(block, designs.rows, designs.cols, vector)
    if reuse:  # without reuse the ops run as their own programs (simulate --no-reuse's path)
        apply_one_program(designs, ops, tot, breakdown, table)
    pes = config.rows * config.cols
    df = int(designs.dataflow[0])
    results = []
    for o, op_name in enumerate(opa.names):
        ok = bool(block.feasible[0, o])
        compute = int(round(float(block.compute_cycles[0, o])))
        total = float(block.total_cycles[0, o])
        macs = int(block.macs[0, o])
        m, k, n = (int(v) for v in opa.gemm[:, o])
        mt, kt, nt = (int(v) for v in block.tile[:, 0, o])
        conv_path, conv_note = block.conv_note(0, o)
        results.append(OpResult(
            name=op_name,
            status="ok" if ok else "overflow" if block.overflow[0, o] else "infeasible",
            reason=block.failure(0, o),
            count=opa.counts[o],
            instances=int(opa.instances[o]),
            gemm=(m, k, n),
            tile=(mt, kt, nt),
            loop_order=order_names(df, int(block.order[0, o])),
            resident=resident_name(df, int(block.order[0, o]), ok and bool(block.resident[0, o])),
            on_chip=",".join(side for side, flag in (("in", block.a_on_chip[0, o]), ("out", block.c_on_chip[0, o]))
                             if flag),
            folds=int(round(float(block.folds[0, o]))),
            compute_cycles=compute,
            stall_cycles=max(total - compute, 0.0),
            total_cycles=total,
            utilization=macs / (pes * total) if ok and total > 0 else 0.0,
            macs=macs,
            dram_read_bytes=float(block.dram_read[:, 0, o].sum()),
            dram_write_bytes=float(block.dram_write[:, 0, o].sum()),
            sram_read_bytes=float(block.sram_read[:, 0, o].sum()),
            sram_write_bytes=float(block.sram_write[:, 0, o].sum()),
            energy_pj=float(sum(block.energy[p][0, o] for p in ENERGY_PARTS)),
            latency_s=float(block.latency_s[0, o]),
            energy_breakdown={p: float(block.energy[p][0, o]) for p in ENERGY_PARTS},
            conv_path=conv_path,
            conv_note=conv_note,
        ))
    feasible = bool(tot["feasible"][0])
    total_dict: dict[str, Any] = {}
    for key in OP_KEYS:
        if key == "folds":
            total_dict[key] = _num(block.folds[0].sum()) if feasible else 0
        else:
            total_dict[key] = _num(tot[key][0]) if key != "utilization" else float(tot[key][0])
    total_dict["vector_cycles"] = int(tot["vector_cycles"][0])
    for key in ("sram_read_bytes", "sram_write_bytes", "latency_s", "area_mm2", "power_w", "tops",
                "tops_per_w", "edp", "f_max_mhz", "vdd", "sdc_coverage", "dram_power_w", "on_die_power_w",
                "power_density_w_mm2"):
        total_dict[key] = float(tot[key][0])
    total_dict["energy_breakdown"] = {p: float(v[0]) for p, v in breakdown.items()}
    first_bad = next((r for r in results if r.status != "ok"), None)
    misfit = vector.misfit[0] if vector is not None else ""
    misfit = misfit or (str(tot["density_reason"][0]) if tot["too_dense"][0] else "")  # power density
    return WorkloadResult(
        design=config, workload=name,
        status="ok" if feasible else first_bad.status if first_bad else "infeasible",
        reason=first_bad.reason if first_bad else misfit or ("model error: a non-finite result (a perf_model bug; "
                                                             "please report it)" if not feasible else ""),
        ops=results, total=total_dict, vector_ops=_vector_rows(config, vector_ops),
        host_work=host_ops(vector_ops, config.vector_lanes) + _reshapes(results, block),
        network=one_program_figures(config, ops) if isinstance(ops, Workload) and feasible else None,
    )


def _reshapes(results: list[OpResult], block: Any) -> list[dict[str, Any]]:
    """Host work of the convs run over a reshaped input (``perf_model.compiler.conv_forms``): per
    reshape, the elements the host writes (``ConvFigures.host_writes``); no arithmetic."""
    out = []
    for o, r in enumerate(results):
        figures = block.chip_figures(0, o)
        if r.conv_path != "chip" or figures is None:
            continue
        for kind, elements in figures.host_writes:
            out.append({"kind": kind, "name": r.name, "runs": r.count, "elements": elements,
                        "reason": f"{kind}: the host reshapes the conv's input ({r.conv_note}) before it runs: "
                                  "host work"})
    return out


def _vector_rows(config: ArrayConfig, vector_ops: list[tuple[Any, int]]) -> list[dict[str, Any]]:
    """The vector ops the unit of ``config`` runs, each with its own program's walk
    (``perf_model.compiler.vector_walk``): ``cycles`` the unit is busy in one run and
    ``total_cycles`` in all runs, ``program_cycles`` the walk of one run; the DRAM bytes of all runs
    that program's, the SRAM bytes the plan's (elements of ``input_bits // 8`` bytes)."""
    rows = []
    lanes, elem_bytes = config.vector_lanes, config.input_bits // 8
    for op, count in vector_ops:
        plan = vector_plan(op, lanes)
        if isinstance(plan, str):
            continue
        walk = op_walk(config, op)
        bytes_ = {f"{k}_bytes": v * count for k, v in plan_bytes(plan, elem_bytes).items()}
        if isinstance(walk, OpWalk):
            cycles, program = walk.vector, walk.total
            bytes_ |= {"dram_read_bytes": walk.read * count, "dram_write_bytes": walk.written * count}
        else:  # an op whose program cannot be built: the design is infeasible, its reason says why
            cycles, program = plan_cycles(plan), 0
        rows.append({"kind": op.kind, "name": op.name, "runs": count, "elements": op.elements * count,
                     "cycles": cycles, "total_cycles": cycles * count, "program_cycles": program, **bytes_})
    return rows


def evaluate(config: ArrayConfig, workload: Workload, *, energy: EnergyTable | None = None,
             area: AreaCoefficients | None = None, reuse: bool = True) -> WorkloadResult:
    """One design on a whole workload (per-op results and totals).

    ``reuse``: keep an op's output on chip as the next op's input where the workload and the
    design allow it (``perf_model.evaluator.reuse_links``), and run the workload as one program where
    the design can (``perf_model.figures.one_program``); ``False`` runs every op as its own program,
    every output through DRAM (``simulate --no-reuse``).

    Raises:
        ModelError: ``config`` is not an ``ArrayConfig`` or ``workload`` not a ``Workload``.
    """
    if not isinstance(workload, Workload):
        raise ModelError(f"workload must be a Workload, not {type(workload).__name__}")
    return _evaluate(config, workload, workload.name, energy, area, reuse)


def evaluate_op(config: ArrayConfig, op: Op, count: int = 1, *, energy: EnergyTable | None = None,
                area: AreaCoefficients | None = None) -> OpResult:
    """One op (``count`` times) on one design.

    Raises:
        ModelError: ``op`` is not a ``Gemm``/``Conv2d`` or ``count`` not a positive integer.
    """
    if not isinstance(op, (Gemm, Conv2d)):
        raise ModelError(f"op must be a Gemm or Conv2d record, not {op!r}")
    return _evaluate(config, [(op, count)], op.name or "op", energy, area).ops[0]
