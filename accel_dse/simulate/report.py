"""Results of a simulation: per-op outcomes and the whole report (plain data, JSON-ready)."""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["STATUSES", "Mismatch", "OpResult", "SimulationReport"]

#: Per-op statuses: ``pass`` (bit-exact and cycles equal), ``fail`` (data or cycles differ),
#: ``error`` (the op could not be run or checked), ``timeout`` (the simulation was killed first).
STATUSES = ("pass", "fail", "error", "timeout")


@dataclasses.dataclass(frozen=True)
class Mismatch:
    """One output element that differs from the JAX reference.

    Attributes:
        index: ``(instance, row, col)``: GEMM instance of the op (batch index), row of C (M) and
            column of C (N).
        expected: The JAX value (the requantised output of a requantised op, else the int32 sum).
        got: The value read from the RTL's ofmap buffer.
    """

    index: tuple[int, int, int]
    expected: int
    got: int

    def to_dict(self) -> dict[str, Any]:
        """``{"index": [b, m, n], "expected": int, "got": int}``."""
        return {"index": list(self.index), "expected": self.expected, "got": self.got}


@dataclasses.dataclass(frozen=True)
class OpResult:
    """How one op of the workload fared in the simulator.

    Attributes:
        name: Op name (unique within the report).
        status: One of :data:`STATUSES`.
        gemm: The simulated GEMM: ``m``, ``k``, ``n``, ``batch`` (after ``--scale``).
        scaled_from: The op's own ``m`` and ``batch`` when ``--scale`` shrank them, else None.
        mismatches: Number of output elements that differ from JAX.
        first_mismatches: The first few of them (row-major order).
        cycles_rtl: Sum of the RTL's ``cycles`` register over all runs of the op (None if not run).
        cycles_model: The performance model's compute cycles for the simulated GEMM.
        tiles: Runs (start pulses) the op took per GEMM instance.
        sim_seconds: Wall time spent in the simulator on this op (loading, running, reading), s.
        sim_cycles: Clock cycles simulated for this op, loading and reading included.
        reason: Why the op failed, errored or timed out ("" when it passed).
        output_bits: Width of the checked outputs: ``input_bits`` when requantised through the
            output stage, else ``acc_bits`` (raw accumulators).
        raw_mismatches: Raw accumulators of a requantised op that differ from JAX (both are checked
            on the host-port path; from DRAM only the requantised output leaves the chip).
        cycles_total_rtl, cycles_total_model: From DRAM: the CYCLES_TOTAL counter summed over the
            op's GEMM instances (program fetch, DMA stalls, fill and drain included), and
            ``perf_model.program_timing``'s total for the same programs (None on the host port).
        stall_cycles_rtl, stall_cycles_model: The same for CYCLES_DMA_STALL (cycles the array idles).
        on_chip: The output stayed in the ifmap as the next op's input (on-chip reuse in a chained
            network from DRAM): it never reaches DRAM, so it is checked through the ops after it
            (their outputs, and the network's final one), not read back here.
        sampled: ``None`` for a whole-op (exhaustive) simulation. For a full-scale sampled check
            (``simulate(mode="sampled")``, ``accel_dse.simulate.dram.sampled``): ``{"mode": "sampled",
            "runs_simulated", "runs_total", "fraction_simulated", "tiles_checked", "tiles_total",
            "classes", "windows", "instances_simulated", "instances_total", "cycles_simulated_rtl",
            "cycles_simulated_model", "cycles_skipped_model", "op_cycles_model"}``; the cycle fields
            above (``cycles_rtl``, ``cycles_total_rtl`` and their model values) are then the
            simulated windows', and the op's whole-program cycles are the model's
            (``op_cycles_model`` = windows' in-place share + ``cycles_skipped_model``).
        sdc_count, sdc_pc: From DRAM: the ``SDC_COUNT`` register summed over the op's programs
            (output words whose checksum or output-stage check mismatched; 0 on a design without
            the checksum) and the ``SDC_PC`` of the last program that counted one (the RUN, or
            the STORE/MOVE, of its last mismatch; 0 when none). None on the host port.
        mismatch_store: From DRAM, an op run from its own GEMM programs with a mismatch: the
            STORE that wrote its first differing element and when (``accel_dse.simulate.mismatch_store``):
            ``{"index", "instance", "command", "queue_load", "cycle", "store_cycles"}``, ``cycle``
            counted from the start of the simulation (what ``--waves-from`` counts); else None.
    """

    name: str
    status: str
    gemm: dict[str, int]
    scaled_from: dict[str, int] | None = None
    mismatches: int = 0
    first_mismatches: tuple[Mismatch, ...] = ()
    cycles_rtl: int | None = None
    cycles_model: int | None = None
    tiles: int = 0
    sim_seconds: float = 0.0
    sim_cycles: int = 0
    reason: str = ""
    output_bits: int = 32
    raw_mismatches: int = 0
    cycles_total_rtl: int | None = None
    cycles_total_model: int | None = None
    stall_cycles_rtl: int | None = None
    stall_cycles_model: int | None = None
    on_chip: bool = False
    sampled: dict[str, Any] | None = None
    sdc_count: int | None = None
    sdc_pc: int | None = None
    mismatch_store: dict[str, Any] | None = None

    @property
    def total_cycles_match(self) -> bool | None:
        """Whether the RTL's total-cycle counter equals the model's total (None: not run from DRAM)."""
        if self.cycles_total_model is None:
            return None
        return self.cycles_total_rtl is not None and self.cycles_total_rtl == self.cycles_total_model

    @property
    def cycles_match(self) -> bool:
        """True when the RTL's cycle count equals the model's."""
        return self.cycles_rtl is not None and self.cycles_rtl == self.cycles_model

    @property
    def cycles_per_second(self) -> float:
        """Simulated clock cycles per wall second on this op (0 when it did not run)."""
        return self.sim_cycles / self.sim_seconds if self.sim_seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (the ``ops`` entries of the report)."""
        return {
            "name": self.name,
            "status": self.status,
            "gemm": dict(self.gemm),
            "scaled_from": None if self.scaled_from is None else dict(self.scaled_from),
            "output_bits": self.output_bits,
            "mismatches": {"count": self.mismatches, "first": [m.to_dict() for m in self.first_mismatches]},
            "raw_mismatches": self.raw_mismatches,
            "on_chip": self.on_chip,
            "cycles_rtl": self.cycles_rtl,
            "cycles_model": self.cycles_model,
            "cycles_match": self.cycles_match,
            "cycles_total_rtl": self.cycles_total_rtl,
            "cycles_total_model": self.cycles_total_model,
            "stall_cycles_rtl": self.stall_cycles_rtl,
            "stall_cycles_model": self.stall_cycles_model,
            "total_cycles_match": self.total_cycles_match,
            "tiles": self.tiles,
            "sim_seconds": round(self.sim_seconds, 6),
            "sim_cycles": self.sim_cycles,
            "cycles_per_second": round(self.cycles_per_second, 1),
            "reason": self.reason,
            "mismatch_store": None if self.mismatch_store is None else dict(self.mismatch_store),
            "sampled": None if self.sampled is None else dict(self.sampled),
            "sdc_count": self.sdc_count,
            "sdc_pc": self.sdc_pc,
        }


@dataclasses.dataclass(frozen=True)
class SimulationReport:
    """The outcome of one ``simulate`` call.

    Attributes:
        design: The design's fields (``ArrayConfig.to_dict()``) plus ``config_hash`` and ``top``.
        workload: The workload spec as given.
        simulator: ``"verilator"`` or ``"icarus"``.
        ops: One result per simulated op, in workload order.
        scale: The ``--scale`` factor (1.0: nothing scaled).
        build_seconds: Wall time of the simulator build, s (of the original build when cached).
        build_cached: Whether the build came from the cache.
        run_seconds: Wall time of the simulator process (start-up included), s.
        run_dir: Directory holding the tile data, the simulator log and the raw results.
        notes: Lines for humans (what was scaled or left out, and why).
        network: For a chained network, ``{"chained", "ops", "passed", "final_output": {"op",
            "elements", "bits", "mismatches", "match"}}``; ``None`` when the ops ran independently.
        waves: The waveform trace of the run (``simulate(waves=True)``), else ``""``.
        mode: ``"exhaustive"`` (every run of every simulated op) or ``"sampled"`` (the full-scale
            sampled check: each op's windows only, the rest fast-forwarded on the model's cycles;
            see ``OpResult.sampled``).
    """

    design: dict[str, Any]
    workload: str
    simulator: str
    ops: tuple[OpResult, ...]
    scale: float = 1.0
    build_seconds: float = 0.0
    build_cached: bool = False
    run_seconds: float = 0.0
    run_dir: str = ""
    notes: tuple[str, ...] = ()
    network: dict[str, Any] | None = None
    waves: str = ""
    mode: str = "exhaustive"

    @property
    def passed(self) -> bool:
        """True when every op passed (bit-exact and cycle-exact)."""
        return bool(self.ops) and all(op.status == "pass" for op in self.ops)

    def totals(self) -> dict[str, Any]:
        """Sums over the ops: statuses, mismatches, cycles, simulator time and rate."""
        counts = {status: sum(op.status == status for op in self.ops) for status in STATUSES}
        sim_seconds = sum(op.sim_seconds for op in self.ops)
        sim_cycles = sum(op.sim_cycles for op in self.ops)
        return {
            "ops": len(self.ops),
            **counts,
            "mismatches": sum(op.mismatches for op in self.ops),
            "raw_mismatches": sum(op.raw_mismatches for op in self.ops),
            "cycles_rtl": sum(op.cycles_rtl or 0 for op in self.ops),
            "cycles_model": sum(op.cycles_model or 0 for op in self.ops),
            "cycles_match": all(op.cycles_match for op in self.ops),
            "cycles_total_rtl": sum(op.cycles_total_rtl or 0 for op in self.ops),
            "cycles_total_model": sum(op.cycles_total_model or 0 for op in self.ops),
            "total_cycles_match": all(op.total_cycles_match is not False for op in self.ops),
            "sim_seconds": round(sim_seconds, 6),
            "sim_cycles": sim_cycles,
            "cycles_per_second": round(sim_cycles / sim_seconds, 1) if sim_seconds > 0 else 0.0,
            "mode": self.mode,
            "runs_simulated": sum(op.sampled["runs_simulated"] if op.sampled else op.tiles * op.gemm.get("batch", 1)
                                  for op in self.ops),
            "runs_total": sum(op.sampled["runs_total"] if op.sampled else op.tiles * op.gemm.get("batch", 1)
                              for op in self.ops),
        }

    def to_dict(self) -> dict[str, Any]:
        """``{"design", "workload", "simulator", "ops", "passed", "totals", ...}`` (JSON-ready)."""
        return {
            "design": dict(self.design),
            "workload": self.workload,
            "simulator": self.simulator,
            "ops": [op.to_dict() for op in self.ops],
            "passed": self.passed,
            "totals": self.totals(),
            "scale": self.scale,
            "mode": self.mode,
            "build": {"seconds": round(self.build_seconds, 3), "cached": self.build_cached},
            "run_seconds": round(self.run_seconds, 3),
            "run_dir": self.run_dir,
            "notes": list(self.notes),
            "network": None if self.network is None else dict(self.network),
        }
