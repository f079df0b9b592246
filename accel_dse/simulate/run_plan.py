"""What both simulate paths share: run directories, the plan of an op's runs, unfinished ops and
the ``network`` entry of a chained run."""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
import time
from pathlib import Path
from typing import IO, Any

from accel_dse.simulate.report import OpResult, SimulationReport
from accel_dse.simulate.runner.cache_bound import try_lock
from accel_dse.simulate.runner.process import ProcessOutcome
from accel_spec.config import ArrayConfig, Dataflow
from accel_spec.errors import SimulationError
from perf_model.compiler.program import output_major

__all__ = ["operand_bits", "k_folds", "new_run_dir", "plan_runs", "unfinished", "network", "report", "FIRST_MISMATCHES",
           "KEEP_RUNS", "CLOCK_PERIOD_NS"]

#: Mismatches listed per op (the count covers all of them).
FIRST_MISMATCHES = 5
#: Runs kept under ``<work_dir>/runs`` (older ones are deleted).
KEEP_RUNS = 20
#: Clock period of the testbench, ns (any value works: only cycles are compared).
CLOCK_PERIOD_NS = 10.0


def operand_bits(design: ArrayConfig) -> dict[str, int | str]:
    """The reference data's widths for ``design``: its lanes and its weight and activation ranges
    (and, for float operands, their format: fp8 codes in the 8-bit lanes)."""
    if not design.weight_fmt.is_int:
        return {"bits": design.input_bits, "number_format": design.weight_fmt.name}
    return {"bits": design.input_bits, "weight_bits": design.weight_fmt.bits, "act_bits": design.act_fmt.bits}


def k_folds(design: ArrayConfig, runs: Any) -> tuple[int, ...] | None:
    """The first ``k`` of each fold a bf16 design sums on its own (``workloads.formats.accumulate``):
    the K tiles of the op's ``runs`` (``(m0, m1, k0, k1, ...)``), and inside each the ``rows``-deep
    folds of a WS/IS array (an OS PE sums the run's whole K). ``None`` for other formats (exact)."""
    if design.weight_fmt.accumulator != "fp32":
        return None
    tiles = sorted({(int(r[2]), int(r[3])) for r in runs})
    step = None if design.dataflow is Dataflow.OS else design.rows
    return tuple(k for k0, k1 in tiles for k in (range(k0, k1, step) if step else (k0,)))


def new_run_dir(work: Path) -> tuple[Path, IO[str]]:
    """A fresh run directory, locked while this process uses it; prunes old unlocked runs."""
    runs = work / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    old = sorted((p for p in runs.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime)
    for path in old[: max(0, len(old) - KEEP_RUNS + 1)]:
        if try_lock(path / "run.lock") is not None:  # a run still in progress keeps its lock
            shutil.rmtree(path, ignore_errors=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = runs / f"{stamp}-{os.getpid()}-{time.monotonic_ns() % 1_000_000:06d}"
    (path / "results").mkdir(parents=True)
    lock = try_lock(path / "run.lock")
    if lock is None:
        raise SimulationError(f"cannot lock the new run directory {path}")
    return path, lock


def plan_runs(design: ArrayConfig, gemm: Any, name: str) -> list[tuple[int, ...]]:
    import perf_model

    plan = perf_model.plan_tiles(design, gemm)
    if not plan.feasible:
        reason = plan.reason or plan.status
        raise SimulationError(
            f"design {design.short_name()} cannot run op {name!r} (m={gemm.m}, k={gemm.k}, n={gemm.n}): {reason}"
        )
    return output_major([tuple(int(v) for v in t) for t in plan.tiles()])


def unfinished(base: OpResult, raw: Any, outcome: ProcessOutcome, run_dir: Path, timeout: float | None) -> OpResult:
    """``base`` for an op the testbench did not finish: no result (killed at the timeout, or the
    simulator ended), or a result that carries the testbench's error (``raw.error``)."""
    if raw is None:
        if outcome.timed_out:
            return dataclasses.replace(base, status="timeout", reason=f"simulation killed after the {timeout:g} s "
                                       "timeout before this op finished")
        return dataclasses.replace(base, reason=f"the simulation ended (exit {outcome.returncode}) without a result "
                                   f"for this op; log: {run_dir / 'sim.log'}")
    return dataclasses.replace(base, sim_seconds=raw.seconds, sim_cycles=raw.sim_cycles, reason=raw.error)


def network(results: list[OpResult]) -> dict[str, Any]:
    """The ``network`` entry of a chained run: every op passed, and the final output's match."""
    final = results[-1]
    elements = math.prod(final.gemm[d] for d in ("m", "n", "batch"))
    finished = final.status in ("pass", "fail") and final.cycles_rtl is not None
    return {
        "chained": True,
        "ops": len(results),
        "passed": all(r.status == "pass" for r in results),
        "final_output": {"op": final.name, "elements": elements, "bits": final.output_bits,
                         "mismatches": final.mismatches if finished else None,
                         "match": finished and final.mismatches == 0},
    }


def report(design: ArrayConfig, *, top: str, fault: Any, spec: str, sim: Any, results: list[OpResult], scale: float,
           build: Any, outcome: ProcessOutcome, run_dir: Path, notes: list[str], chained: bool,
           waves: Path | None = None, mode: str = "exhaustive", **design_extra: Any) -> SimulationReport:
    """The ``SimulationReport`` of a finished run of either path (``design_extra``: more design keys)."""
    design_info = {**design.to_dict(), "config_hash": design.config_hash, "top": top, **design_extra}
    if fault is not None:
        design_info["fault"] = dataclasses.asdict(fault)
    return SimulationReport(
        design=design_info, workload=spec, simulator=sim.name, ops=tuple(results), scale=scale,
        build_seconds=build.seconds, build_cached=build.cached, run_seconds=outcome.seconds,
        run_dir=str(run_dir), notes=tuple(notes), network=network(results) if chained else None,
        waves="" if waves is None or not waves.is_file() else str(waves), mode=mode,
    )
