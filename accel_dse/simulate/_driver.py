"""The driver: workload -> tiled runs -> one simulator process -> checked results.

Runs in the user's process (JAX available, no simulator): resolves the workload, takes each
op's exact JAX reference (``workloads.reference``), applies ``scale``, tiles every GEMM
instance with the performance model's tiling (``perf_model.plan_tiles``), lays the tiles out
as the buffers hold them (:mod:`accel_dse.simulate._layout`) and writes one program file. A
single simulator process (cocotb's runner, see :mod:`accel_dse.simulate._run`) runs every tile
of every op; the driver then reassembles each op's output, compares it with JAX element by
element, and compares the sum of the RTL's ``cycles`` register with the model's compute cycles.
"""

from __future__ import annotations

import dataclasses
import fcntl
import math
import os
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np

from accel_dse.config import ArrayConfig, Dataflow
from accel_dse.errors import SimulationError
from accel_dse.simulate._build import build_design, default_work_dir
from accel_dse.simulate._dram_image import qparam_fields
from accel_dse.simulate._layout import ofmap_words, pack_inputs, pack_qparams, qsel_rule, unpack_output, word_bytes
from accel_dse.simulate._process import ProcessOutcome
from accel_dse.simulate._program import (
    RUN_FIELDS,
    OpRaw,
    Program,
    op_result_path,
    read_op_result,
    write_program,
)
from accel_dse.simulate._report import Mismatch, OpResult, SimulationReport
from accel_dse.simulate._run import run_testbench
from accel_dse.simulate._tools import find_simulator
from perf_model._program import output_major

__all__ = ["simulate", "DEFAULT_TIMEOUT_S", "FIRST_MISMATCHES"]

#: Default seconds the simulator process may run before it is killed.
DEFAULT_TIMEOUT_S = 3600.0
#: Mismatches listed per op (the count covers all of them).
FIRST_MISMATCHES = 5
#: Runs kept under ``<work_dir>/runs`` (older ones are deleted).
KEEP_RUNS = 20
#: Clock period of the testbench, ns (any value works: only cycles are compared).
CLOCK_PERIOD_NS = 10.0
#: Cycles the ofmap read takes (rtl_gen's port map: "a fixed latency of one cycle").
OFMAP_READ_LATENCY = 1

TESTBENCH_MODULE = "accel_dse.simulate._testbench"


@dataclasses.dataclass
class _Job:
    """One op, prepared: what to run and what to expect."""

    index: int
    name: str
    gemm: Any  # workloads.ops.Gemm, scaled
    scaled_from: dict[str, int] | None
    cycles_model: int
    expected: np.ndarray  # (batch, m, n) int64: requantised outputs, or raw accumulators
    reads: list[tuple[int, int, int, int, int, int]] = dataclasses.field(default_factory=list)
    runs: int = 0
    output_bits: int = 32
    raw_expected: np.ndarray | None = None  # (batch, m, n) accumulators of a requantised op


def simulate(
    design: ArrayConfig,
    workload: Any,
    *,
    ops: Sequence[str] | None = None,
    max_ops: int | None = None,
    scale: float = 1.0,
    simulator: str = "verilator",
    timeout: float | None = DEFAULT_TIMEOUT_S,
    work_dir: str | Path | None = None,
    seed: int = 0,
    fault: Any = None,
    progress: Callable[[str], None] | None = None,
    chain: bool | None = None,
    memory: str = "dram",
) -> SimulationReport:
    """Run ``workload`` on the Verilog of ``design`` and check it against JAX, op by op.

    Args:
        design: The accelerator.
        workload: A ``workloads.resolve`` spec (``"mlp"``, ``"bert_base:seq=16"``, ...) or a
            ``workloads.Workload``.
        ops: Names of the ops to simulate (default: all, in workload order).
        max_ops: Simulate only the first ``max_ops`` ops (after ``ops``).
        scale: In (0, 1]: each op's M and batch are multiplied by it (rounded up, at least 1).
        simulator: ``"verilator"`` or ``"icarus"``.
        timeout: Seconds the simulator process may run (build excluded); ``None``: no limit.
        work_dir: Builds and runs directory (default :func:`accel_dse.simulate.default_work_dir`).
        seed: Seed of the reference operands.
        fault: Test-only ``rtl_gen.Fault`` breaking one PE (to prove the checker fails).
        progress: Called with one line of text at each stage (for a CLI's stderr).
        chain: Run the selected ops as a chained network (each op's input is the requantised
            output the design gave for the op before): ``None`` when they chain
            (``workloads.chain_link``: requantised, batch 1, shapes that line up), ``True`` to
            insist, ``False`` for independent per-op data.
        memory: ``"dram"`` (default): the whole SoC block runs each op from DRAM through AXI
            (command queue, DMA, interrupt; ``total_cycles_match`` per op); ``"host"``: the
            compute core alone, its buffers written through the debug host port, run by run.

    Returns:
        The report; ``report.passed`` is True when every op is bit-exact with equal cycles
        (requantised outputs and their raw accumulators); ``report.network`` describes a chain.

    Raises:
        SimulationError: bad scale/op names/max_ops, ``chain=True`` on ops that do not chain, a
            design that cannot run an op's tiles, a missing simulator or a failed build.
    """
    say = progress or (lambda _line: None)
    scale = _check_scale(scale)
    if memory not in ("dram", "host"):
        raise SimulationError(f"memory must be 'dram' or 'host', not {memory!r}")
    if max_ops is not None and (isinstance(max_ops, bool) or not isinstance(max_ops, int) or max_ops < 1):
        raise SimulationError(f"max_ops must be a positive integer, not {max_ops!r}")
    if timeout is not None and not (isinstance(timeout, (int, float)) and timeout > 0):
        raise SimulationError(f"timeout must be a positive number of seconds, not {timeout!r}")
    sim = find_simulator(simulator)

    import workloads

    wl = workload if isinstance(workload, workloads.Workload) else workloads.resolve(workload)
    spec = wl.name if isinstance(workload, workloads.Workload) else workload
    selected = _select_ops(wl, spec, ops, max_ops)
    chained = _chained([op for _, op, _ in selected], chain)
    work = _work_dir(work_dir)
    notes: list[str] = []
    if any(c > 1 for _, _, c in selected):
        notes.append("ops that run several times (count > 1) are simulated once: every run computes the same")

    say(f"preparing {len(selected)} op(s) of {workload} for {design.short_name()}")
    if chained:
        notes.append(f"chained network of {len(selected)} ops: each op's input is the requantised output the "
                     "design gave for the op before")
    if memory == "dram":
        from accel_dse.simulate._dram_driver import run_dram

        return run_dram(design, selected, spec, scale=scale, seed=seed, chained=chained, sim=sim, work=work,
                        timeout=timeout, fault=fault, say=say, notes=notes)
    jobs, program = _prepare(design, selected, scale, seed, chained)
    scaled = [j for j in jobs if j.scaled_from]
    if scaled:
        notes.append(f"scale {scale:g}: M and batch of {len(scaled)} op(s) shrunk "
                     "(rows of C are independent, so the first rows are checked exactly)")

    import rtl_gen

    top = rtl_gen.top_name(design, fault)
    say(f"generating Verilog for {top}")
    verilog = rtl_gen.to_verilog(design, fault=fault)
    say(f"building {top} with {sim.name} (cached by Verilog hash)")
    build = build_design(verilog, top=top, simulator=sim, work_dir=work)
    say(f"build {'reused from cache' if build.cached else f'took {build.seconds:.1f} s'}: {build.directory}")

    run_dir, lock = _new_run_dir(work)
    try:
        program = dataclasses.replace(program, results_dir=str(run_dir / "results"))
        program_path = run_dir / "program.npz"
        write_program(program_path, program)
        say(f"simulating {len(program.runs)} run(s) in one {sim.name} process (timeout "
            f"{'none' if timeout is None else f'{timeout:g} s'}); log: {run_dir / 'sim.log'}")
        outcome = run_testbench(
            build, test_module=TESTBENCH_MODULE, run_dir=run_dir, timeout=timeout,
            env={"ACCEL_DSE_SIM_PROGRAM": str(program_path)}, poll=_progress(jobs, run_dir, say),
        )
        results = [
            _check(design, job, read_op_result(run_dir / "results", job.index), outcome, run_dir, timeout)
            for job in jobs
        ]
    finally:
        lock.close()
    design_info = {**design.to_dict(), "config_hash": design.config_hash, "top": top}
    if fault is not None:
        design_info["fault"] = dataclasses.asdict(fault)
    return SimulationReport(
        design=design_info, workload=spec, simulator=sim.name, ops=tuple(results), scale=scale,
        build_seconds=build.seconds, build_cached=build.cached, run_seconds=outcome.seconds,
        run_dir=str(run_dir), notes=tuple(notes), network=_network(results) if chained else None,
    )


def _chained(ops: list[Any], chain: bool | None) -> bool:
    """Whether to run ``ops`` as a network (see :func:`simulate`'s ``chain``)."""
    from workloads._reference import chain_link

    if chain is False or len(ops) < 2:
        if chain is True:
            raise SimulationError(f"a chained network needs at least two ops, not {len(ops)}")
        return False
    broken = next((i for i in range(len(ops) - 1) if not chain_link(ops[i], ops[i + 1])), None)
    if broken is not None and chain is True:
        a, b = ops[broken], ops[broken + 1]
        raise SimulationError(f"ops {a.name or broken!r} and {b.name or broken + 1!r} do not chain: both must be "
                              "requantised single-instance GEMMs with the next m equal and the next k equal to n")
    return broken is None


def _network(results: list[OpResult]) -> dict[str, Any]:
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


def _progress(jobs: list[_Job], run_dir: Path, say: Callable[[str], None]) -> Callable[[], None]:
    """A poll callback announcing each op whose result file has appeared."""
    seen = 0

    def poll() -> None:
        nonlocal seen
        while seen < len(jobs) and op_result_path(run_dir / "results", jobs[seen].index).is_file():
            seen += 1
            say(f"finished op {seen}/{len(jobs)}: {jobs[seen - 1].name}")

    return poll


def _work_dir(work_dir: str | Path | None) -> Path:
    """The work directory, created if needed; ``SimulationError`` if it cannot be."""
    work = Path(work_dir).expanduser().resolve() if work_dir is not None else default_work_dir()
    try:
        work.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise SimulationError(f"work directory {str(work)!r} cannot be created: {exc.strerror or exc}") from None
    return work


def _check_scale(scale: object) -> float:
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale) \
            or not 0 < scale <= 1:
        raise SimulationError(f"scale must be a number in (0, 1], not {scale!r}")
    return float(scale)


def _unique_names(ops: Sequence[Any]) -> list[str]:
    names: list[str] = []
    seen: dict[str, int] = {}
    for i, op in enumerate(ops):
        base = op.name or f"op{i}"
        seen[base] = seen.get(base, 0) + 1
        names.append(base if seen[base] == 1 else f"{base}#{seen[base]}")
    return names


def _select_ops(wl: Any, spec: str, ops: Sequence[str] | None, max_ops: int | None) -> list[tuple[str, Any, int]]:
    names = _unique_names(wl.ops)
    table = list(zip(names, wl.ops, wl.counts, strict=True))
    if ops:
        by_name = {name: (name, op, count) for name, op, count in table}
        unknown = [name for name in ops if name not in by_name]
        if unknown:
            raise SimulationError(f"unknown op {unknown[0]!r} in workload {spec} (ops: {', '.join(names)})")
        table = [by_name[name] for name in dict.fromkeys(ops)]
    if max_ops is not None:
        table = table[:max_ops]
    return table


def _new_run_dir(work: Path) -> tuple[Path, IO[str]]:
    """A fresh run directory, locked while this process uses it; prunes old unlocked runs."""
    runs = work / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    old = sorted((p for p in runs.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime)
    for path in old[: max(0, len(old) - KEEP_RUNS + 1)]:
        if _try_lock(path / "run.lock") is not None:  # a run still in progress keeps its lock
            shutil.rmtree(path, ignore_errors=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = runs / f"{stamp}-{os.getpid()}-{time.monotonic_ns() % 1_000_000:06d}"
    (path / "results").mkdir(parents=True)
    lock = _try_lock(path / "run.lock")
    if lock is None:
        raise SimulationError(f"cannot lock the new run directory {path}")
    return path, lock


def _try_lock(path: Path) -> IO[str] | None:
    """An open, exclusively locked handle on ``path``, or None if another process holds it."""
    try:
        handle = open(path, "a")  # noqa: SIM115 (held for the run's lifetime)
    except OSError:
        return None
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        return None
    return handle


def _plan(design: ArrayConfig, gemm: Any, name: str) -> list[tuple[int, ...]]:
    import perf_model

    plan = perf_model.plan_tiles(design, gemm)
    if not plan.feasible:
        reason = plan.reason or plan.status
        raise SimulationError(
            f"design {design.short_name()} cannot run op {name!r} (m={gemm.m}, k={gemm.k}, n={gemm.n}): {reason}"
        )
    return output_major([tuple(int(v) for v in t) for t in plan.tiles()])


def _prepare(
    design: ArrayConfig, selected: list[tuple[str, Any, int]], scale: float, seed: int, chained: bool = False,
) -> tuple[list[_Job], Program]:
    """Plan, reference and lay out every op; the program's ``results_dir`` is filled in later.

    ``chained``: the ops form a network (``workloads.chain_link``): op ``i > 0`` reads the
    requantised output op ``i - 1`` read back from the design, and the expected values are the
    JAX network's (``workloads.chained_references``).
    """
    import perf_model
    import rtl_gen
    import workloads
    from perf_model import timing
    from workloads._reference import channel_start

    df = timing.dataflow_code(design.dataflow)
    widths = tuple(w for _, w in rtl_gen.param_fields(design.input_bits))
    q_depth = rtl_gen.buffer_layout(design).qparam.depth
    refs = workloads.chained_references([op for _, op, _ in selected], seed, bits=design.input_bits) \
        if chained else None
    rows, if_parts, w_parts, qp_parts = [], [], [], []
    if_total = w_total = qp_total = 0
    jobs = []
    for index, (name, op, _count) in enumerate(selected):
        full = op.to_gemm()
        rq = op.requant
        m = max(1, math.ceil(full.m * scale))
        batch = max(1, math.ceil(full.batch * scale))
        # The model tiles and times a requantised op knowing it is one (its output leaves at
        # input_bits); the per-tensor form of its parameters says so for any batch.
        flag = None if rq is None else dataclasses.replace(rq, multiplier=rq.multiplier[:1], shift=rq.shift[:1],
                                                            bias=rq.bias[:1])
        gemm = workloads.Gemm(m=m, k=full.k, n=full.n, batch=batch, name=full.name, requant=flag)
        scaled_from = {"m": full.m, "batch": full.batch} if (m, batch) != (full.m, full.batch) else None
        tiles = _plan(design, workloads.Gemm(m=m, k=full.k, n=full.n, name=full.name, requant=flag), name)
        cycles_model = int(perf_model.evaluate_op(design, gemm).compute_cycles)
        expected = np.zeros((batch, m, full.n), dtype=np.int64)
        job = _Job(index, name, gemm, scaled_from, cycles_model, expected,
                   output_bits=design.acc_bits if rq is None else design.input_bits)
        if rq is not None:
            job.raw_expected = np.zeros_like(expected)
        a_src = index - 1 if chained and index > 0 else -1
        for instance in range(batch):
            ref = refs[index] if refs is not None else workloads.reference(op, seed, index=instance,
                                                                           bits=design.input_bits)
            a, b = ref.a[:m], ref.b
            expected[instance] = (ref.c if ref.q is None else ref.q)[:m]
            if job.raw_expected is not None:
                job.raw_expected[instance] = ref.c[:m]
            first_channel = channel_start(op, instance)
            loaded_if = loaded_w = None
            for t, (m0, m1, k0, k1, n0, n1, acc) in enumerate(tiles):
                last = t + 1 == len(tiles) or not tiles[t + 1][6]
                mt, kt, nt = m1 - m0, k1 - k0, n1 - n0
                # The host writes only what changed: a buffer keeps its words across runs.
                if_key, w_key = (m0, m1, k0, k1), (k0, k1, n0, n1)
                if_cnt = w_cnt = 0
                if_off = if_total if a_src < 0 else -1
                if if_key != loaded_if or w_key != loaded_w:
                    if_words, w_words = pack_inputs(design, a[m0:m1, k0:k1], b[k0:k1, n0:n1])
                    if if_key != loaded_if:
                        if a_src < 0:
                            if_parts.append(if_words)
                        if_cnt = len(if_words)
                    if w_key != loaded_w:
                        w_parts.append(w_words)
                        w_cnt = len(w_words)
                loaded_if, loaded_w = if_key, w_key
                read_cnt = ofmap_words(design, mt, nt) if last else 0
                qp_cnt = q_div = 0
                q_mod = 1
                if last and rq is not None:
                    qp_words = _qparam_words(design, rq, first_channel + n0, nt, widths, q_depth, name)
                    qp_parts.append(qp_words)
                    qp_cnt = len(qp_words)
                    q_div, q_mod = qsel_rule(design, mt, nt)
                run = int(timing.run_cycles(df, design.rows, design.cols, mt, kt, nt, design.shadow_stationary))
                rows.append((index, mt, kt, nt, int(bool(acc)), if_off, if_cnt, w_total, w_cnt, read_cnt,
                             _watchdog_cycles(run), a_src, m0, m1, k0, k1, n0, n1, qp_total, qp_cnt, q_div, q_mod))
                if a_src < 0:
                    if_total += if_cnt
                w_total += w_cnt
                qp_total += qp_cnt
                if last:
                    job.reads.append((instance, m0, m1, n0, n1, read_cnt))
                job.runs += 1
        jobs.append(job)
    if_lanes, w_lanes = (design.cols, design.rows) if design.dataflow is Dataflow.IS else (design.rows, design.cols)
    if_bytes, w_bytes = word_bytes(if_lanes, design.input_bits), word_bytes(w_lanes, design.input_bits)
    q_lanes = 1 if design.dataflow is Dataflow.IS else design.cols
    program = Program(
        port=_port(design),
        op_names=tuple(j.name for j in jobs),
        runs=np.array(rows, dtype=np.int64).reshape(-1, len(RUN_FIELDS)),
        ifmap_words=np.concatenate(if_parts) if if_parts else np.zeros((0, if_bytes), np.uint8),
        weight_words=np.concatenate(w_parts) if w_parts else np.zeros((0, w_bytes), np.uint8),
        results_dir="",
        qparam_words=np.concatenate(qp_parts) if qp_parts else np.zeros((0, word_bytes(q_lanes, sum(widths))),
                                                                       np.uint8),
    )
    return jobs, program


def _qparam_words(design: ArrayConfig, rq: Any, first: int, count: int, widths: tuple[int, ...], depth: int,
                  name: str) -> np.ndarray:
    """qparam words of channels ``first .. first + count - 1`` of ``rq`` (``rtl_gen`` port map order)."""
    words = pack_qparams(design, qparam_fields(rq, count, first), widths)
    if len(words) > depth:
        raise SimulationError(f"op {name!r}: a tile of {count} output channels needs {len(words)} qparam words, "
                              f"more than the {depth} the design's parameter buffer holds")
    return words


def _watchdog_cycles(run_cycles: int) -> int:
    """Cycles the testbench waits for ``done`` before it declares the op hung and resets the design."""
    return 2 * run_cycles + 64


def _port(design: ArrayConfig) -> dict[str, Any]:
    import rtl_gen

    names = {name: name for name in ("clk", "rst", "m", "k", "n", "accumulate", "start", "done", "cycles", "x_base",
                                     "y_base", "o_base", "host_overlap")}
    names.update(sel="host_sel", addr="host_addr", wdata="host_wdata", we="host_we", rdata="host_rdata",
                 qsel="host_qsel", qdata="host_qdata")
    return {
        "names": names,
        "select": dict(rtl_gen.HOST_SEL),
        "read_latency": OFMAP_READ_LATENCY,
        "qdata_latency": rtl_gen.QDATA_LATENCY,
        "clock_period_ns": CLOCK_PERIOD_NS,
        "ofmap_word_bytes": word_bytes(design.cols, design.acc_bits),
        "qdata_word_bytes": word_bytes(design.cols, design.input_bits),
        "reset_cycles": 2,
        "design": design.to_dict(),
    }


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


def _check(
    design: ArrayConfig, job: _Job, raw: OpRaw | None, outcome: ProcessOutcome, run_dir: Path,
    timeout: float | None,
) -> OpResult:
    """The op's result: compare what the testbench read back with JAX and the model."""
    base = OpResult(
        name=job.name, status="error",
        gemm={"m": job.gemm.m, "k": job.gemm.k, "n": job.gemm.n, "batch": job.gemm.batch},
        scaled_from=job.scaled_from, cycles_model=job.cycles_model, tiles=job.runs, output_bits=job.output_bits,
    )
    if raw is None or raw.error:
        return unfinished(base, raw, outcome, run_dir, timeout)
    base = dataclasses.replace(base, sim_seconds=raw.seconds, sim_cycles=raw.sim_cycles)
    raw_got = np.zeros_like(job.expected)
    q_got = np.zeros_like(job.expected) if job.raw_expected is not None else None
    offset = 0
    for instance, m0, m1, n0, n1, count in job.reads:
        words = slice(offset, offset + count)
        raw_got[instance, m0:m1, n0:n1] = unpack_output(design, raw.ofmap[words], m1 - m0, n1 - n0)
        if q_got is not None:
            q_got[instance, m0:m1, n0:n1] = unpack_output(design, raw.qdata[words], m1 - m0, n1 - n0,
                                                          design.input_bits)
        offset += count
    got = raw_got if q_got is None else q_got
    raw_wrong = 0 if job.raw_expected is None else int((raw_got != job.raw_expected).sum())
    wrong = np.argwhere(got != job.expected)
    first = tuple(
        Mismatch((int(b), int(i), int(j)), int(job.expected[b, i, j]), int(got[b, i, j]))
        for b, i, j in wrong[:FIRST_MISMATCHES]
    )
    cycles_rtl = int(raw.cycles.sum())
    problems = []
    if len(wrong):
        kind = "requantised " if q_got is not None else ""
        problems.append(f"{len(wrong)} of {got.size} {kind}outputs differ from JAX")
    if raw_wrong:
        problems.append(f"{raw_wrong} of {got.size} raw accumulators differ from JAX")
    if cycles_rtl != job.cycles_model:
        problems.append(f"RTL took {cycles_rtl} cycles, the model says {job.cycles_model}")
    return dataclasses.replace(
        base, status="fail" if problems else "pass", mismatches=len(wrong), first_mismatches=first,
        cycles_rtl=cycles_rtl, reason="; ".join(problems), raw_mismatches=raw_wrong,
    )
