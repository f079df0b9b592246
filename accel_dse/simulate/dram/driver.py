"""The DRAM path of ``simulate``: compile each op, lay out DRAM, run the SoC block, check it.

Every GEMM instance of an op is one program (``perf_model.compile_gemm``: the model's tiling as
commands) with its own DRAM image; the expected total cycles are
``perf_model.gemm_program_cycles`` of that program (one queue-load after another when it is
longer than the command queue) against the same DRAM model (latency
:data:`DRAM_LATENCY`; a design whose memory is slower than its bus, ``perf_model.dram_rate``,
gets a DRAM model paced to that rate and the walk the same pacing), so ``total_cycles_match``
says the RTL is the machine the model scores.

A chained network with ``reuse`` is compiled as one chain (``perf_model.compiler.chain``): where a
link stays on chip the producer MOVEs its output into the ifmap and the consumer reads it there
(the programs run one after the other in one simulation, so the ifmap keeps it); such an op's
output never reaches DRAM and is checked through the ops after it.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import numpy as np

from accel_dse.simulate.dram.conv import conv_instances, on_chip_conv
from accel_dse.simulate.dram.image import (
    pack_qparam_lanes,
    pack_tensor,
    program_image,
    qparam_fields,
    unpack_tensor,
)
from accel_dse.simulate.dram.job_files import (
    DramProgram,
    DramResult,
    layout_dict,
    read_dram_result,
    write_dram_program,
)
from accel_dse.simulate.dram.sampled_check import SAMPLED_NOTE
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
from accel_dse.simulate.runner.process import ProcessOutcome
from accel_spec.config import ArrayConfig
from accel_spec.errors import ModelError, SimulationError
from accel_spec.isa import DRAM_LATENCY

__all__ = ["DramJob", "prepare_dram", "check_dram", "run_dram", "DRAM_LATENCY", "DRAM_TESTBENCH_MODULE",
           "dram_words"]

DRAM_TESTBENCH_MODULE = "accel_dse.simulate.dram.testbench"


@dataclasses.dataclass
class DramJob:
    """One op, compiled: what to run and what to expect."""

    index: int
    name: str
    gemm: Any
    scaled_from: dict[str, int] | None
    expected: np.ndarray  # (batch, m, n)
    c_layout: Any
    cycles_model: int  # compute cycles (sum of the runs' run_cycles)
    total_model: int
    stall_model: int
    runs: int
    output_bits: int
    kept_on_chip: bool = False  # the output went to the next op through the ifmap, not to DRAM
    conv: bool = False  # a conv from NHWC activations, windows built on chip (``_dram_conv``)
    sampled: Any = None  # a sampled check: accel_dse.simulate.dram.sampled_check.SampledJob
    program: Any = None  # the GemmProgram every instance ran (an op run from its own programs): places a mismatch


#: Smallest DRAM model per simulator, bytes. The memory's size is in the Verilog, so in the build's
#: cache key: a Verilator build (minutes for a big array) gets one size large enough for every op
#: of the usual networks (ResNet-18's largest image at full scale is a few MiB), so a design's
#: simulator is built once for every op, GEMM shape and verify. Icarus builds in seconds and
#: allocates its arrays in full, so it gets what the images need (at least 64 KiB).
DRAM_MIN_BYTES = {"verilator": 1 << 24}
_DRAM_MIN_BYTES_DEFAULT = 1 << 16


def dram_words(program: DramProgram, simulator: str = "icarus") -> int:
    """DRAM model words the images need on ``simulator``: a power of two, at least
    :data:`DRAM_MIN_BYTES` of the simulator (default 64 KiB) worth."""
    W = int(program.meta["data_bytes"])
    need = max([len(img) for img in program.images.values()]
               + [DRAM_MIN_BYTES.get(simulator, _DRAM_MIN_BYTES_DEFAULT)])
    return 1 << math.ceil(math.log2(-(-need // W)))


def prepare_dram(design: ArrayConfig, selected: list[tuple[str, Any, int]], scale: float, seed: int,
                 chained: bool, regs: dict[str, int], clock_period_ns: float, *,
                 reuse: bool = False, sampled: bool = False,
                 vector_ops: list[tuple[str, Any]] | None = None,
                 network: list[Any] | None = None,
                 conv_chains: list[tuple[int, int]] | None = None,
                 force_chip: bool = False, conv_spec: Any = None,
                 encoder: Any = None) -> tuple[list[DramJob], DramProgram]:
    """Compile and lay out every op (``results_dir`` of the program's meta is filled in later);
    ``network``: the link ops of a chain run from one program (``accel_dse.simulate.dram.network``);
    ``conv_chains``: ``(first, last)`` ops of ``selected`` each run as one conv-network program
    (``accel_dse.simulate.dram.conv_network``), one op of the program's meta named ``network``
    when it is the whole selection, else its convs' names joined by ``+``; ``force_chip``: every
    conv the design builds windows for runs them on chip, also where the model scores the host's
    im2col GEMM faster (``simulate``'s ``conv_path="chip"``); ``conv_spec``: the whole selection is
    one CNN with its vector ops (``accel_dse.simulate.dram.conv_network.whole_network``);
    ``encoder``: the whole selection is a stack of encoder layers (an ``EncoderLayer``,
    ``accel_dse.simulate.dram.encoder``) or a decoder block (a ``DecoderBlock``,
    ``accel_dse.simulate.dram.decoder``) run from one program.

    Raises:
        SimulationError: an op the design cannot run (the compiler's reason).
    """
    import perf_model
    import workloads
    from perf_model.compiler.conv_score import conv_figures
    from perf_model.evaluator.conv_ops import ConvFigures
    from rtl_gen.soc.sim_system import BACKDOOR
    from workloads import channel_start

    W = perf_model.axi_data_bytes(design)

    def meta(ops: list[dict[str, Any]], host_convs: list[str], **more: Any) -> dict[str, Any]:
        """The program's meta: what the testbench reads besides the images."""
        return {"data_bytes": W, "clock_period_ns": clock_period_ns, "regs": regs, "results_dir": "", "ops": ops,
                "host_convs": host_convs, "backdoor": BACKDOOR, **more}

    if network is not None:
        from accel_dse.simulate.dram.network import network_job

        job, entry, net_images = network_job(design, selected, network, scale, seed, DRAM_LATENCY, DramJob,
                                             operand_bits(design))
        return [job], DramProgram(meta([entry], []), net_images)
    if encoder is not None:
        job, entry, net_images = _block(encoder)[0](design, selected, encoder, seed, DRAM_LATENCY, DramJob,
                                                    operand_bits(design))
        return [job], DramProgram(meta([entry], []), net_images)
    chain_at = {first: last for first, last in conv_chains or []}
    jobs: list[DramJob] = []
    ops_meta: list[dict[str, Any]] = []
    images: dict[str, np.ndarray] = {}
    fulls = [op.to_gemm() for _, op, _ in selected]
    gemms = [workloads.Gemm(m=max(1, math.ceil(f.m * scale)), k=f.k, n=f.n, name=f.name)  # one instance, M scaled
             for f in fulls]
    chain_programs, plan = _chain_programs(design, gemms) if chained and reuse else (None, None)
    folds = [k_folds(design, chain_programs[i].runs if chain_programs is not None else plan_runs(design, g, g.name))
             for i, g in enumerate(gemms)] if chained and not design.weight_fmt.is_int else None
    refs = workloads.chained_references([op for _, op, _ in selected], seed, **operand_bits(design), k_folds=folds) \
        if chained else None
    host_convs: list[str] = []
    reshaped: list[str] = []  # convs run over a reshaped input (perf_model.compiler.conv_forms)
    forced: list[str] = []  # convs on chip that the model scores faster as the host's im2col GEMM
    upto = 0  # the ops before it ran in a chain's program
    for index, (name, op, _count) in enumerate(selected):
        if index < upto:
            continue
        pos = len(ops_meta)  # its op in the program's meta (a chain is one): its images' and results' index
        if index in chain_at:
            from accel_dse.simulate.dram.conv_network import conv_network_job

            last = chain_at[index]
            part = selected[index:last + 1]
            whole = len(part) == len(selected)
            try:
                job, entry, net_images = conv_network_job(
                    design, part, seed, DRAM_LATENCY, DramJob, index=pos, scale=scale,
                    name="network" if whole else "+".join(n for n, _, _ in part), spec=conv_spec if whole else None,
                    whole=whole)
            except ModelError as exc:
                raise SimulationError(f"the convs {part[0][0]} .. {part[-1][0]} as one program: {exc}") from exc
            jobs.append(job)
            ops_meta.append(entry)
            images.update(net_images)
            upto = last + 1
            continue
        path = on_chip_conv(design, name, op, chained, force_chip)
        if path and path != "chip":
            host_convs.append(path)
        elif path and force_chip and on_chip_conv(design, name, op, chained) != "chip":
            forced.append(name)
        if path == "chip":
            program, timing, expected, dram, gemm = conv_instances(design, name, op, seed, scale, DRAM_LATENCY)
            form = conv_figures(design, op, op.requant is not None)
            if isinstance(form, ConvFigures) and form.form:
                reshaped.append(f"{name} ({form.form})")
            instances = []
            conv_sampled = None
            if sampled:  # the images' one program, its windows only (accel_dse.simulate.dram.sampled)
                from accel_dse.simulate.dram.sampled_check import sampled_job

                conv_sampled = sampled_job(design, program, 1, DRAM_LATENCY, perf_model.dram_rate(design))
            for instance, image in enumerate(dram):
                if conv_sampled is not None:
                    images[f"img_{pos}_{instance}"] = conv_sampled.extend(image)
                    instances += conv_sampled.entries(f"img_{pos}_{instance}", layout_dict(program.tensors["a"]),
                                                      layout_dict(program.tensors["c"]))
                    continue
                images[f"img_{pos}_{instance}"] = image
                instances.append({"chunks": [[program.queue_base + a * 32, b - a] for a, b in program.chunks],
                                  "limit": 4 * timing.total + 10_000, "a": layout_dict(program.tensors["a"]),
                                  "c": layout_dict(program.tensors["c"])})
            ops_meta.append({"name": name, "a_src": -1, "on_chip": False, "instances": instances, "conv": True})
            jobs.append(DramJob(pos, name, gemm, {"m": gemm.m, "batch": op.n}
                                if gemm.m != op.n * op.out_h * op.out_w else None,
                                expected, program.tensors["c"], timing.compute, timing.total, timing.stall,
                                len(program.runs), design.acc_bits if op.requant is None else design.input_bits,
                                conv=True, sampled=conv_sampled))
            continue
        full = fulls[index]
        rq = op.requant
        gemm = gemms[index]
        m = gemm.m
        batch = max(1, math.ceil(full.batch * scale))
        plan_runs(design, gemm, name)  # an infeasible design: the model's reason, as on the host port
        try:
            program = chain_programs[index] if chain_programs is not None else \
                perf_model.compile_gemm(design, gemm, requant=rq is not None)
        except ModelError as exc:
            raise SimulationError(f"op {name!r}: {exc}") from exc
        timing = perf_model.gemm_program_cycles(design, program, latency=DRAM_LATENCY,
                                                rate=perf_model.dram_rate(design))
        expected = np.zeros((batch, m, full.n), dtype=np.int64)
        instances = []
        job_sampled = None
        if sampled:  # instance 0's program, its windows only (accel_dse.simulate.dram.sampled)
            from accel_dse.simulate.dram.sampled_check import sampled_job

            job_sampled = sampled_job(design, program, batch, DRAM_LATENCY, perf_model.dram_rate(design))
        for instance in range(1 if sampled else batch):
            ref = refs[index] if refs is not None else workloads.reference(
                op, seed, index=instance, **operand_bits(design), k_folds=k_folds(design, program.runs))
            a, b = np.asarray(ref.a[:m]).astype(np.int64), np.asarray(ref.b).astype(np.int64)
            expected[instance] = np.asarray(ref.c if ref.q is None else ref.q)[:m]
            tensors = {"a": pack_tensor(program.tensors["a"], a), "b": pack_tensor(program.tensors["b"], b)}
            if rq is not None:
                tensors["q"] = pack_qparam_lanes(program.tensors["q"],
                                                 qparam_fields(rq, full.n, channel_start(op, instance)))
            if job_sampled is not None:
                images[f"img_{pos}_{instance}"] = job_sampled.image(program, tensors)
                instances += job_sampled.entries(f"img_{pos}_{instance}", layout_dict(program.tensors["a"]),
                                                 layout_dict(program.tensors["c"]))
                continue
            images[f"img_{pos}_{instance}"] = program_image(program, tensors)
            chunks = [[program.queue_base + a * 32, b - a] for a, b in program.chunks]
            instances.append({"chunks": chunks, "limit": 4 * timing.total + 10_000,
                              "a": layout_dict(program.tensors["a"]), "c": layout_dict(program.tensors["c"])})
        a_on_chip = plan is not None and plan.a_region(index) is not None
        c_on_chip = plan is not None and plan.c_region(index) is not None
        ops_meta.append({"name": name, "a_src": index - 1 if chained and index > 0 and not a_on_chip else -1,
                         "on_chip": c_on_chip, "instances": instances})
        jobs.append(DramJob(pos, name, gemm, {"m": full.m, "batch": full.batch}
                            if (m, batch) != (full.m, full.batch) else None, expected, program.tensors["c"],
                            timing.compute, timing.total, timing.stall, len(program.runs),
                            design.acc_bits if rq is None else design.input_bits,
                            kept_on_chip=c_on_chip, sampled=job_sampled,
                            program=program if job_sampled is None else None))
    vector_notes: list[str] = []
    if vector_ops:  # on the vector unit, each from a program of its own (accel_dse.simulate.dram.vector)
        from accel_dse.simulate.dram.vector import vector_jobs

        more, metas, vector_images, vector_notes = vector_jobs(design, vector_ops, scale, seed, len(ops_meta),
                                                               DRAM_LATENCY, DramJob)
        jobs += more
        ops_meta += metas
        images.update(vector_images)
    return jobs, DramProgram(meta(ops_meta, host_convs, vector_notes=vector_notes, reshaped_convs=reshaped,
                                  forced_convs=forced), images)


def _chain_programs(design: ArrayConfig, gemms: list[Any]) -> tuple[Any, Any]:
    """The programs of a chained network's GEMMs compiled as one chain (on-chip reuse), and its plan."""
    from perf_model.compiler.chain import compile_chain

    try:
        plan, programs = compile_chain(design, gemms, [True] * len(gemms))
    except ModelError as exc:
        raise SimulationError(f"chain: {exc}") from exc
    return programs, plan


def check_dram(job: DramJob, raw: DramResult | None, outcome: ProcessOutcome, run_dir: Path,
               timeout: float | None) -> OpResult:
    """The op's result: C against JAX, the counters against the model."""
    batch = job.expected.shape[0]
    base = OpResult(
        name=job.name, status="error",
        gemm={"m": job.gemm.m, "k": job.gemm.k, "n": job.gemm.n, "batch": batch},
        scaled_from=job.scaled_from, cycles_model=job.cycles_model * batch, tiles=job.runs,
        output_bits=job.output_bits, cycles_total_model=job.total_model * batch,
        stall_cycles_model=job.stall_model * batch,
    )

    if job.sampled is not None:
        base = dataclasses.replace(base, cycles_model=job.sampled.compute_model, tiles=job.runs,
                                   cycles_total_model=job.sampled.total_model,
                                   stall_cycles_model=job.sampled.total_model - job.sampled.compute_model,
                                   sampled=job.sampled.summary())
    if raw is None or raw.error:
        return unfinished(base, raw, outcome, run_dir, timeout)
    base = dataclasses.replace(base, sim_seconds=raw.seconds, sim_cycles=raw.sim_cycles)
    if raw.sdc_count is not None and len(raw.sdc_count):
        pcs = [int(p) for c, p in zip(raw.sdc_count, raw.sdc_pc, strict=True) if c]  # type: ignore[arg-type]
        base = dataclasses.replace(base, sdc_count=int(raw.sdc_count.sum()), sdc_pc=pcs[-1] if pcs else 0)
    codes = [int(c) for c in raw.error_code if c]
    if codes:
        from accel_spec.isa import ERROR_NAMES

        return dataclasses.replace(base, reason=f"the accelerator stopped with error {codes[0]} "
                                   f"({ERROR_NAMES.get(codes[0], '?')}) at command {int(raw.error_pc[0])}")
    if job.kept_on_chip:  # nothing in DRAM to read: the ops after it (and the network) check it
        wrong = np.zeros((0, 3), dtype=np.int64)
        got = job.expected
        base = dataclasses.replace(base, on_chip=True)
    elif job.sampled is not None:  # the tiles the windows produced, from the C read after the last one
        got, wrong = job.sampled.compare(unpack_tensor(job.c_layout, raw.c[-1]), job.expected[0])
    else:
        got = np.stack([unpack_tensor(job.c_layout, c) for c in raw.c])
        wrong = np.argwhere(got != job.expected)
    first = tuple(Mismatch((int(b), int(i), int(j)), int(job.expected[b, i, j]), int(got[b, i, j]))
                  for b, i, j in wrong[:FIRST_MISMATCHES])
    result = dataclasses.replace(base, mismatches=len(wrong), first_mismatches=first,
                                 cycles_rtl=int(raw.compute.sum()), cycles_total_rtl=int(raw.total.sum()),
                                 stall_cycles_rtl=int(raw.stall.sum()))
    if result.sampled is not None:
        result = dataclasses.replace(result, sampled={**result.sampled,
                                                      "cycles_simulated_rtl": result.cycles_total_rtl})
    problems = []
    if len(wrong):
        checked = f"{job.sampled.elements_checked} checked" if job.sampled is not None else f"{got.size}"
        problems.append(f"{len(wrong)} of {checked} outputs differ from JAX")
    if result.cycles_rtl != result.cycles_model:
        problems.append(f"the array was busy {result.cycles_rtl} cycles, the model says {result.cycles_model}")
    if not result.total_cycles_match:
        problems.append(f"RTL took {result.cycles_total_rtl} cycles in total, the model says "
                        f"{result.cycles_total_model}")
    return dataclasses.replace(result, status="fail" if problems else "pass", reason="; ".join(problems))


def _block(block: Any) -> tuple[Any, Any]:
    """The job and note functions of a transformer block run from one program (encoder or decoder)."""
    from perf_model.compiler.decoder import DecoderBlock

    if isinstance(block, DecoderBlock):
        from accel_dse.simulate.dram.decoder import decoder_job, decoder_note

        return decoder_job, decoder_note
    from accel_dse.simulate.dram.encoder import encoder_job, encoder_note

    return encoder_job, encoder_note


def run_dram(design: ArrayConfig, selected: list[tuple[str, Any, int]], spec: str, *, scale: float, seed: int,
             chained: bool, sim: Any, work: Path, timeout: float | None, fault: Any, say: Any,
             notes: list[str], reuse: bool = True, waves: Any = None, sampled: bool = False,
             vector_ops: list[tuple[str, Any]] | None = None, network: list[Any] | None = None,
             conv_chains: list[tuple[int, int]] | None = None, force_chip: bool = False,
             conv_spec: Any = None, encoder: Any = None) -> SimulationReport:
    """``simulate`` from DRAM: compile, build the simulation top, run, check (see ``simulate``);
    ``vector_ops``: ``(name, VectorOp)`` to run on the design's vector unit after the matrix ops;
    ``encoder``: the workload is encoder layers or a decoder block, run from one program."""
    import rtl_gen
    from accel_dse.simulate.runner.build import build_design, hier_blocks_for
    from accel_dse.simulate.runner.launch import run_testbench, waves_file

    regs = {reg.name: reg.offset for reg in rtl_gen.CONTROL_REGMAP}
    jobs, program = prepare_dram(design, selected, scale, seed, chained, regs, CLOCK_PERIOD_NS, reuse=reuse,
                                 sampled=sampled, vector_ops=vector_ops or [], network=network,
                                 conv_chains=conv_chains, force_chip=force_chip, conv_spec=conv_spec,
                                 encoder=encoder)
    if encoder is not None:
        notes.append(_block(encoder)[1](design, encoder))
    if network is not None:
        from accel_dse.simulate.dram.network import network_note

        notes.append(network_note(design, selected, network, scale))
    if conv_chains and conv_chains[0] == (0, len(selected) - 1):
        from accel_dse.simulate.dram.conv_network import conv_network_note

        notes.append(conv_network_note(design, selected, scale, conv_spec))
    elif conv_chains:
        from accel_dse.simulate.dram.conv_network import kept_chains_note

        notes.append(kept_chains_note(selected, conv_chains))
    notes += program.meta.get("vector_notes", [])
    if vector_ops:
        ran = sum(1 for op in program.meta["ops"] if op.get("vector"))
        notes.append(f"{ran} vector op(s) on the vector unit ({design.vector_lanes} lanes), each from its own "
                     "program: operands LOADed into the ifmap, VECTOR, output STOREd from the ifmap")
    if sampled:
        notes.append(SAMPLED_NOTE)
    kept = sum(j.kept_on_chip for j in jobs)
    networks = {op["name"] for op in program.meta["ops"] if op.get("one_program")}
    convs = sum(j.conv and j.name not in networks for j in jobs)  # a conv network's program has its own note
    from workloads.ops import Conv2d

    if program.meta.get("forced_convs"):
        notes.append("conv_path 'chip': conv(s) the model scores faster as the host's im2col GEMM run with their "
                     "windows on chip; their model cycles are their on-chip program's (evaluate's 'windows on "
                     "chip' figure), not the workload's: " + ", ".join(program.meta["forced_convs"]))
    if program.meta.get("reshaped_convs"):
        notes.append("conv(s) run over an input the host reshapes (space-to-depth, kernel rows stacked), as the "
                     "model scores them (the output checked against the conv itself): "
                     + "; ".join(program.meta["reshaped_convs"]))
    for why in program.meta.get("host_convs", []):
        notes.append(f"conv windows built by the host (im2col A through DRAM): {why}")
    if chained and any(isinstance(op, Conv2d) for _, op, _ in selected):
        notes.append("conv windows built by the host (im2col A through DRAM): a chained network's links are "
                     "GEMM-shaped")
    if convs:
        notes.append(f"{convs} conv op(s) run from NHWC activations in DRAM, kernel windows built on chip "
                     "(one program for all the op's images, which share its weights on chip; M is not scaled)")
    if chained and network is None:
        notes.append(f"on-chip reuse: {kept} of {len(jobs) - 1} link(s) kept in the ifmap (MOVE, read in place)"
                     if reuse else "on-chip reuse off: every op's output goes through DRAM")
    if any(j.scaled_from for j in jobs):
        notes.append(f"scale {scale:g}: M and batch of {sum(bool(j.scaled_from) for j in jobs)} op(s) shrunk "
                     "(rows of C are independent, so the first rows are checked exactly)")
    import perf_model

    rate = perf_model.dram_rate(design)
    W = program.meta["data_bytes"]
    pace = f"one {W}-byte beat per cycle" if rate is None else \
        f"{W}-byte beats paced to {float(rate):g} bytes per cycle (the design's memory)"
    notes.append(f"from DRAM through AXI: DRAM model latency {DRAM_LATENCY} cycles, {pace}")
    words = dram_words(program, sim.name)
    top = rtl_gen.sim_name(design, fault)
    say(f"generating Verilog for {top} (SoC block + {words * W >> 10} KiB DRAM model)")
    verilog = rtl_gen.system_verilog(design, fault=fault, dram=(DRAM_LATENCY, words),
                                     rate=None if rate is None else (rate.numerator, rate.denominator),
                                     cache_dir=Path(work) / "verilog")
    cycles = [job.sampled.total_model if job.sampled is not None else job.total_model * job.expected.shape[0]
              for job in jobs]
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
        program.meta["results_dir"] = str(run_dir / "results")
        path = run_dir / "dram_program.npz"
        write_dram_program(path, program)
        from accel_dse.simulate.dram.job_files import dram_result_path
        from accel_dse.simulate.runner.eta import expectation, measured_speed, op_poll, record_speed, speed_estimate

        say(f"simulating {len(jobs)} op(s) from DRAM in one {sim.name} process; log: {run_dir / 'sim.log'}")
        say(expectation(sum(cycles), measured_speed(build.directory),
                        speed_estimate(sim.name, design.rows * design.cols)))
        poll = op_poll([job.name for job in jobs], cycles,
                       lambda i: dram_result_path(run_dir / "results", jobs[i].index).is_file(), say)
        outcome = run_testbench(build, test_module=DRAM_TESTBENCH_MODULE, run_dir=run_dir, timeout=timeout,
                                env={"ACCEL_DSE_SIM_PROGRAM": str(path)}, waves=waves is not None,
                                waves_args=waves_args, poll=poll)
        poll()  # the ops that finished after the last poll
        if outcome.ok and waves is None:  # a traced run is slower: not the speed to expect
            record_speed(build.directory, sum(cycles), outcome.seconds)
        raws = [read_dram_result(run_dir / "results", job.index) for job in jobs]
        from accel_dse.simulate.mismatch_store import placed

        results = [placed(design, job.program, raw, check_dram(job, raw, outcome, run_dir, timeout), DRAM_LATENCY)
                   for job, raw in zip(jobs, raws, strict=True)]
    finally:
        lock.close()
    return report(design, top=top, fault=fault, spec=spec, sim=sim, results=results, scale=scale, build=build,
                  outcome=outcome, run_dir=run_dir, notes=notes, chained=chained, memory="dram",
                  mode="sampled" if sampled else "exhaustive",
                  waves=waves_file(build, run_dir) if waves is not None else None)
