"""The host-port path of ``simulate`` (``--host-port``, a debug path): workload -> tiled runs ->
one simulator process -> checked results.

Runs in the user's process (JAX available, no simulator): takes each op's exact JAX reference
(``workloads.reference``), applies ``scale``, tiles every GEMM instance with the performance
model's tiling (``perf_model.plan_tiles``), lays the tiles out as the buffers hold them
(:mod:`accel_dse.simulate.host.layout`) and writes one program file. A single simulator process
(cocotb's runner, see :mod:`accel_dse.simulate.runner.launch`) runs every tile of every op through the
core's host port; the driver then reassembles each op's output, compares it with JAX element
by element, and compares the sum of the RTL's ``cycles`` register with the model's compute
cycles.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from accel_dse.simulate.dram.image import qparam_fields
from accel_dse.simulate.host.job_files import (
    RUN_FIELDS,
    OpRaw,
    Program,
    op_result_path,
    read_op_result,
    write_program,
)
from accel_dse.simulate.host.layout import ofmap_words, pack_inputs, pack_qparams, qsel_rule, unpack_output, word_bytes
from accel_dse.simulate.report import Mismatch, OpResult, SimulationReport
from accel_dse.simulate.run_plan import (
    CLOCK_PERIOD_NS,
    FIRST_MISMATCHES,
    k_folds,
    new_run_dir,
    operand_bits,
    plan_runs,
    report,
    unfinished,
)
from accel_dse.simulate.runner.build import build_design, hier_blocks_for
from accel_dse.simulate.runner.launch import run_testbench, waves_file
from accel_dse.simulate.runner.process import ProcessOutcome
from accel_spec.config import ArrayConfig, Dataflow
from accel_spec.errors import SimulationError

__all__ = ["run_host_port"]

#: Cycles the ofmap read takes (rtl_gen's port map: "a fixed latency of one cycle").
OFMAP_READ_LATENCY = 1

TESTBENCH_MODULE = "accel_dse.simulate.host.testbench"


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


def run_host_port(design: ArrayConfig, selected: list[tuple[str, Any, int]], spec: str, *, scale: float, seed: int,
                  chained: bool, sim: Any, work: Path, timeout: float | None, fault: Any, say: Callable[[str], None],
                  notes: list[str], waves: Any = None) -> SimulationReport:
    """``simulate`` through the core's host port (``memory="host"``): one program file, one
    simulator process, every op checked against JAX and the model's compute cycles."""
    jobs, program = _prepare(design, selected, scale, seed, chained)
    scaled = [j for j in jobs if j.scaled_from]
    if scaled:
        notes.append(f"scale {scale:g}: M and batch of {len(scaled)} op(s) shrunk "
                     "(rows of C are independent, so the first rows are checked exactly)")

    import rtl_gen

    top = rtl_gen.top_name(design, fault)
    say(f"generating Verilog for {top}")
    verilog = rtl_gen.to_verilog(design, fault=fault)
    cycles = [job.cycles_model * job.expected.shape[0] for job in jobs]
    waves_args: list[str] = []
    if waves is not None:  # the trace's size said, and a trace over the limit refused, before the build
        from accel_dse.simulate.waves import plan_for_run, window_plusargs

        plan = plan_for_run(verilog, waves, run_cycles=sum(cycles), simulator=sim.name)
        say(plan.line())
        waves_args = window_plusargs(plan, CLOCK_PERIOD_NS)
    from accel_dse.simulate.runner.eta import build_line

    say(f"building {top} with {sim.name} (cached by Verilog hash)")
    build = build_design(verilog, top=top, simulator=sim, work_dir=work, waves=waves is not None,
                         hier_blocks=hier_blocks_for(design.rows, design.cols),
                         announce=lambda: say(build_line(sim.name, design.rows, design.cols)))
    say(f"build {'reused from cache' if build.cached else f'took {build.seconds:.1f} s'}: {build.directory}")

    run_dir, lock = new_run_dir(work)
    try:
        program = dataclasses.replace(program, results_dir=str(run_dir / "results"))
        program_path = run_dir / "program.npz"
        write_program(program_path, program)
        from accel_dse.simulate.runner.eta import expectation, measured_speed, op_poll, record_speed, speed_estimate

        say(f"simulating {len(program.runs)} run(s) in one {sim.name} process (timeout "
            f"{'none' if timeout is None else f'{timeout:g} s'}); log: {run_dir / 'sim.log'}")
        say(expectation(sum(cycles), measured_speed(build.directory),
                        speed_estimate(sim.name, design.rows * design.cols)))
        poll = op_poll([job.name for job in jobs], cycles,
                       lambda i: op_result_path(run_dir / "results", jobs[i].index).is_file(), say)
        outcome = run_testbench(
            build, test_module=TESTBENCH_MODULE, run_dir=run_dir, timeout=timeout,
            env={"ACCEL_DSE_SIM_PROGRAM": str(program_path)}, poll=poll, waves=waves is not None,
            waves_args=waves_args,
        )
        poll()  # the ops that finished after the last poll
        if outcome.ok and waves is None:
            record_speed(build.directory, sum(cycles), outcome.seconds)
        results = [
            _check(design, job, read_op_result(run_dir / "results", job.index), outcome, run_dir, timeout)
            for job in jobs
        ]
    finally:
        lock.close()
    return report(design, top=top, fault=fault, spec=spec, sim=sim, results=results, scale=scale, build=build,
                  outcome=outcome, run_dir=run_dir, notes=notes, chained=chained,
                  waves=waves_file(build, run_dir) if waves is not None else None)


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
    from workloads import channel_start

    df = timing.dataflow_code(design.dataflow)
    widths = tuple(w for _, w in rtl_gen.param_fields(design.input_bits))
    q_depth = rtl_gen.buffer_layout(design).qparam.depth
    folds = [k_folds(design, plan_runs(design, workloads.Gemm(m=max(1, math.ceil(op.to_gemm().m * scale)),
                                                              k=op.to_gemm().k, n=op.to_gemm().n), name))
             for name, op, _ in selected] if chained and not design.weight_fmt.is_int else None
    refs = workloads.chained_references([op for _, op, _ in selected], seed, **operand_bits(design), k_folds=folds) \
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
        tiles = plan_runs(design, workloads.Gemm(m=m, k=full.k, n=full.n, name=full.name, requant=flag), name)
        cycles_model = int(perf_model.evaluate_op(design, gemm).compute_cycles)
        expected = np.zeros((batch, m, full.n), dtype=np.int64)
        job = _Job(index, name, gemm, scaled_from, cycles_model, expected,
                   output_bits=design.acc_bits if rq is None else design.input_bits)
        if rq is not None:
            job.raw_expected = np.zeros_like(expected)
        a_src = index - 1 if chained and index > 0 else -1
        for instance in range(batch):
            ref = refs[index] if refs is not None else workloads.reference(op, seed, index=instance,
                                                                           **operand_bits(design),
                                                                           k_folds=k_folds(design, tiles))
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
    from accel_spec.isa import WINDOW_FIELDS

    names = {name: name for name in ("clk", "rst", "m", "k", "n", "accumulate", "start", "done", "cycles", "x_base",
                                     "y_base", "o_base", "host_overlap", "a_stride", "move_we", "move_addr",
                                     "window", *WINDOW_FIELDS)}
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
