"""``simulate``: a workload's ops on a design's RTL, checked against JAX and the model.

Resolves the workload, selects the ops and decides whether they chain; then runs them from
DRAM through the SoC block (:mod:`accel_dse.simulate.dram.driver`, the default) or through
the core's host port (:mod:`accel_dse.simulate.host.driver`, ``--host-port``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from accel_dse.simulate.report import SimulationReport
from accel_dse.simulate.runner.build import default_work_dir
from accel_dse.simulate.runner.cache_bound import budget_bytes
from accel_dse.simulate.runner.tools import find_simulator
from accel_spec.config import ArrayConfig
from accel_spec.errors import SimulationError

__all__ = ["simulate", "DEFAULT_TIMEOUT_S"]

#: Default seconds the simulator process may run before it is killed.
DEFAULT_TIMEOUT_S = 3600.0


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
    reuse: bool = True,
    waves: bool = False,
    waves_window: Any = None,
    waves_limit_bytes: int | None = None,
    mode: str = "exhaustive",
    conv_path: str = "model",
    waves_around_mismatch: int | None = None,
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
        reuse: In a chained network from DRAM, keep each output on chip as the next op's
            input where the design can (``perf_model.compiler.chain``: ``MOVE`` into the ifmap, read in
            place); such an op's output is checked through the next op and the network's. Convs
            of one batch each reading the previous one's NHWC output (e.g. ``ops`` of one ResNet
            block) run from one program (``accel_dse.simulate.dram.conv_network``); so does each
            chain of convs the model keeps on chip when the whole workload is simulated; without
            ``reuse`` each op runs from its own.
        waves: Trace the run (off by default: tracing slows the simulator) into an FST file in the
            run directory (``report.waves``). The trace covers the ops simulated: choose them with
            ``ops`` (the failing one) to keep it small. Its expected size is said (``progress``)
            before the build, and a trace over ``waves_limit_bytes`` is refused before anything runs
            (``accel_dse.simulate.waves``).
        waves_window: ``accel_dse.simulate.waves.WavesWindow``: the cycles to trace (Icarus;
            default: the whole run).
        waves_limit_bytes: The bound on the trace's estimated size, bytes (default
            ``accel_dse.simulate.waves.DEFAULT_LIMIT_BYTES``, 1 GB).
        mode: ``"exhaustive"`` (default): every run of every op. ``"sampled"``: the full-scale
            sampled check (``scale`` must be 1; ops run unchained, from DRAM): each op's real
            program, the first output tile of every class simulated in place, the rest
            fast-forwarded on the model's cycles (``accel_dse.simulate.dram.sampled``; each op's
            ``sampled`` entry says how much ran). Never to be read as exhaustive.
        conv_path: ``"model"`` (default): each conv runs on the path the model scores (windows on
            chip, or the host's im2col GEMM where that is faster). ``"chip"``: every conv the design
            builds windows for runs them on chip, its cycles checked against its on-chip program
            (``evaluate``'s "windows on chip" figure for the convs it leaves to the host; a note
            names them). DRAM memory only.
        waves_around_mismatch: Trace the cycles around the first mismatch (Icarus, DRAM memory,
            ``waves`` off: this traces): run once untraced; when an output differs, run again
            tracing this many cycles before the STORE that wrote the first differing element
            through the end of that store (``accel_dse.simulate.mismatch_store``; the report's
            notes name the element, the store and the window). Without a mismatch nothing is traced.

    Returns:
        The report; ``report.passed`` is True when every op is bit-exact with equal cycles
        (requantised outputs and their raw accumulators); ``report.network`` describes a chain.

    Raises:
        SimulationError: bad scale/op names/max_ops, ``chain=True`` on ops that do not chain, a
            design that cannot run an op's tiles, a missing simulator or a failed build.
        ConfigError: a selected op's K needs more accumulator bits than ``acc_bits`` (every such
            op named, as ``evaluate`` names them), before anything is built.
    """
    say = progress or (lambda _line: None)
    if waves_around_mismatch is not None:
        return _around_mismatch(dict(
            design=design, workload=workload, ops=ops, max_ops=max_ops, scale=scale, simulator=simulator,
            timeout=timeout, work_dir=work_dir, seed=seed, fault=fault, progress=progress, chain=chain, memory=memory,
            reuse=reuse, waves=waves, waves_window=waves_window, waves_limit_bytes=waves_limit_bytes, mode=mode,
            conv_path=conv_path), waves_around_mismatch, say)
    scale = _check_scale(scale)
    if memory not in ("dram", "host"):
        raise SimulationError(f"memory must be 'dram' or 'host', not {memory!r}")
    if max_ops is not None and (isinstance(max_ops, bool) or not isinstance(max_ops, int) or max_ops < 1):
        raise SimulationError(f"max_ops must be a positive integer, not {max_ops!r}")
    if timeout is not None and not (isinstance(timeout, (int, float)) and timeout > 0):
        raise SimulationError(f"timeout must be a positive number of seconds, not {timeout!r}")
    if conv_path not in ("model", "chip"):
        raise SimulationError(f"conv_path must be 'model' or 'chip', not {conv_path!r}")
    if conv_path == "chip" and memory != "dram":
        raise SimulationError("conv_path 'chip' runs convs from NHWC activations in DRAM: it needs memory 'dram'")
    if mode not in ("exhaustive", "sampled"):
        raise SimulationError(f"mode must be 'exhaustive' or 'sampled', not {mode!r}")
    if mode == "sampled" and (scale != 1.0 or memory != "dram" or chain):
        raise SimulationError("the sampled check runs each op's full-scale program from DRAM, unchained: "
                              f"it needs scale 1 (not {scale:g}), memory 'dram' and no chain")
    from accel_dse.simulate.waves import DEFAULT_LIMIT_BYTES, WavesRequest, WavesWindow

    waves_spec = WavesRequest(waves_window or WavesWindow(),
                              DEFAULT_LIMIT_BYTES if waves_limit_bytes is None else waves_limit_bytes) \
        if waves else None
    from accel_dse.verilog_size import check_verilog_size

    check_verilog_size(design, f"design {design.short_name()}")  # before any work: the Verilog is built for it
    sim = find_simulator(simulator)
    budget_bytes()  # the work directory's cache bound ($ACCEL_DSE_SIM_CACHE_MB), checked before any work

    import workloads

    wl = workload if isinstance(workload, workloads.Workload) else workloads.resolve(workload)
    spec = wl.name if isinstance(workload, workloads.Workload) else workload
    selected = _select_ops(wl, spec, ops, max_ops)
    wbits, abits = design.weight_fmt.bits, design.act_fmt.bits
    if not design.weight_fmt.is_int:  # fp8: the output stage's scale and ReLU (workloads.float_outputs)
        selected = [(name, workloads.float_outputs(op), count) for name, op, count in selected]
    elif min(wbits, abits) < 8:  # int4 operands: output scale and saturation for them (workloads.narrow_outputs)
        selected = [(name, workloads.narrow_outputs(op, abits, wbits), count) for name, op, count in selected]
    _refuse_narrow_accumulator(design, spec, selected)
    chained = _chained([op for _, op, _ in selected], False if mode == "sampled" else chain)
    work = _work_dir(work_dir)
    notes: list[str] = []
    if any(c > 1 for _, _, c in selected):
        notes.append("ops that run several times (count > 1) are simulated once: every run computes the same")

    say(f"preparing {len(selected)} op(s) of {workload} for {design.short_name()}")
    if chained:
        notes.append(f"chained network of {len(selected)} ops: each op's input is the requantised output the "
                     "design gave for the op before")
    if memory == "dram":
        from accel_dse.simulate.dram.driver import run_dram

        network = None
        if chained and reuse and mode != "sampled" and not ops and max_ops is None:
            from accel_dse.simulate.dram.network import network_links

            network = network_links(design, wl, selected, scale, notes)
        conv_chains: list[tuple[int, int]] = []
        whole = False
        conv_spec = None
        encoder = None
        if not chained and reuse and mode != "sampled" and not ops and max_ops is None:
            from accel_dse.simulate.dram.decoder import decoder_for
            from accel_dse.simulate.dram.encoder import encoder_for

            encoder = encoder_for(design, wl, scale, notes)
            if encoder is None:
                encoder = decoder_for(design, wl, scale, notes)
            whole = encoder is not None
        if not chained and reuse and mode != "sampled" and not whole:
            from accel_dse.simulate.dram.conv_network import conv_chain, kept_chains, whole_network

            if (ops or max_ops is not None or not wl.vector_ops) and conv_chain(design, selected, notes):
                conv_chains, whole = [(0, len(selected) - 1)], True
            elif not ops and max_ops is None and (conv_spec := whole_network(design, wl, selected, scale, notes)):
                conv_chains, whole = [(0, len(selected) - 1)], True  # a CNN with its vector ops: one program
            elif not ops:  # the workload (or its first ops): the chains the model keeps, as it scores them
                conv_chains = kept_chains(design, wl, selected, scale, notes)
        vector_ops = _vector_ops(design, wl, ops, max_ops, notes) \
            if mode != "sampled" and network is None and not whole else None
        if mode == "sampled" and design.vector_unit and wl.vector_ops:
            notes.append(f"{len(wl.vector_ops)} vector op(s) not simulated: the sampled check runs matrix ops only")
        return run_dram(design, selected, spec, scale=scale, seed=seed, chained=chained, sim=sim, work=work,
                        timeout=timeout, fault=fault, say=say, notes=notes, reuse=reuse, waves=waves_spec,
                        sampled=mode == "sampled", vector_ops=vector_ops, network=network,
                        conv_chains=conv_chains, force_chip=conv_path == "chip", conv_spec=conv_spec,
                        encoder=encoder)
    from accel_dse.simulate.host.driver import run_host_port

    return run_host_port(design, selected, spec, scale=scale, seed=seed, chained=chained, sim=sim, work=work,
                         timeout=timeout, fault=fault, say=say, notes=notes, waves=waves_spec)


#: Cycles of the DRAM testbench's reset before its first op (``accel_dse.simulate.dram.testbench``).
RESET_CYCLES = 3


def _around_mismatch(args: dict[str, Any], before: int, say: Callable[[str], None]) -> SimulationReport:
    """``simulate(waves_around_mismatch=before, **args)``: an untraced run, then, when an output
    differs, a run traced around the STORE that wrote the first differing element."""
    from accel_dse.simulate.mismatch_store import mismatch_window

    if isinstance(before, bool) or not isinstance(before, int) or before < 1:
        raise SimulationError(f"--waves-around-mismatch must be a positive number of cycles, not {before!r}")
    if args["waves"] or args["waves_window"] is not None:
        raise SimulationError("--waves-around-mismatch chooses its own window: leave out --waves, --waves-from and "
                              "--waves-cycles")
    if args["simulator"] != "icarus":
        raise SimulationError("--waves-around-mismatch traces a window of the run: it needs --simulator icarus "
                              "(cocotb's Verilator harness traces every cycle)")
    if args["memory"] != "dram" or args["mode"] != "exhaustive":
        raise SimulationError("--waves-around-mismatch places a mismatch in the op's DRAM program: it needs the "
                              "default DRAM path and whole ops (not --host-port, not --full-scale)")
    first = simulate(**{**args, "waves": False})
    failing = next((op for op in first.ops if op.mismatch_store is not None), None)
    if failing is None or failing.mismatch_store is None:
        why = ("no output differed from JAX" if not any(op.mismatches for op in first.ops) else
               "the first mismatch is not in a program of its op's own (a network's or a chain's one program): "
               "--waves-from/--waves-cycles choose the window by hand")
        return dataclasses.replace(first, notes=(*first.notes, f"--waves-around-mismatch: {why}; nothing traced"))
    at = failing.mismatch_store
    run_end = RESET_CYCLES + sum(op.sim_cycles for op in first.ops)  # the run as measured, setup included
    window = mismatch_window(int(at["cycle"]), int(at["store_cycles"]), before, run_end)
    b, i, j = at["index"]
    line = (f"first mismatch: {failing.name} C[{b}][{i}, {j}], written by the STORE at command {at['command']} "
            f"(queue-load {at['queue_load']}), issued at cycle {at['cycle']:,} of the run; tracing cycles "
            f"{window.first:,}..{window.first + (window.cycles or 0) - 1:,} ({before:,} before the store, the store "
            "and a margin)")
    say(line)
    traced = simulate(**{**args, "waves": True, "waves_window": window})
    return dataclasses.replace(traced, notes=(*traced.notes, line))


def _refuse_narrow_accumulator(design: ArrayConfig, spec: str, selected: Sequence[tuple[str, Any, int]]) -> None:
    """Refuse, before anything is built, ops whose sums ``acc_bits`` cannot hold: every one of the
    selected ops named with the width it needs, in ``evaluate``'s words (:mod:`accel_dse.acc_width`).

    Raises:
        ConfigError: some selected op's K needs a wider accumulator.
    """
    from accel_dse.acc_width import acc_error, narrow_for
    from accel_spec.errors import ConfigError

    needs = narrow_for(design, [(name, op) for name, op, _ in selected])
    if needs:
        raise ConfigError(acc_error(design, spec, needs))


def _vector_ops(design: ArrayConfig, wl: Any, ops: Sequence[str] | None, max_ops: int | None,
                notes: list[str]) -> list[tuple[str, Any]] | None:
    """The workload's vector ops the design's vector unit runs (``name``, record), when the whole
    workload is simulated (no ``ops``/``max_ops`` selection) on a design with ``vector_unit``;
    what stays host work is named in ``notes``."""
    from perf_model.vector_timing import vector_plan

    if not design.vector_unit or not wl.vector_ops:
        return None
    if ops or max_ops is not None:
        notes.append(f"{len(wl.vector_ops)} vector op(s) not simulated: they run when the whole workload is selected")
        return None
    names = _unique_names([dataclasses.replace(op, name=op.name or op.kind) for op in wl.vector_ops])
    out = []
    for name, op in zip(names, wl.vector_ops, strict=True):
        plan = vector_plan(op, design.vector_lanes)
        if isinstance(plan, str):
            notes.append(f"vector op {name}: host work, not simulated ({plan})")
        else:
            out.append((f"vector/{name}", op))
    return out


def _chained(ops: list[Any], chain: bool | None) -> bool:
    """Whether to run ``ops`` as a network (see :func:`simulate`'s ``chain``)."""
    from workloads import chain_link

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
