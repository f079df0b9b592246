"""``accel-dse simulate``: run a workload on the design's Verilog in a simulator, check it against JAX."""

from __future__ import annotations

import argparse
import sys

from accel_dse.cli._args import ascii_int
from accel_dse.cli._output import emit, emit_json, format_table
from accel_dse.cli._paths import work_dir
from accel_spec.errors import SimulationError
from accel_spec.text import parse_int

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    from accel_dse.simulate import DEFAULT_TIMEOUT_S, SIMULATORS

    parser = sub.add_parser(
        "simulate",
        help="run a workload on the generated Verilog (cocotb + Verilator/Icarus), bit-exact against JAX",
        description="Simulate every op of a workload on the design's generated Verilog and compare the "
        "outputs with JAX bit for bit and the RTL's cycle counter with the performance model. "
        "Exit status: 0 all ops pass, 1 any data or cycle mismatch (or error/timeout), 2 bad input.",
    )
    parser.add_argument("--design", required=True, metavar="FILE|PRESET", help="design file or preset name")
    parser.add_argument("--workload", required=True, metavar="W", help="workload spec, e.g. mlp or bert_base:seq=16")
    pick = parser.add_mutually_exclusive_group()
    pick.add_argument("--ops", metavar="NAME,...", help="only these ops (comma-separated names)")
    pick.add_argument("--max-ops", type=ascii_int, metavar="N", help="only the first N ops")
    parser.add_argument("--scale", type=float, default=1.0, metavar="F",
                        help="shrink each op's M and batch by F in (0, 1] (default 1: no scaling)")
    parser.add_argument("--simulator", choices=SIMULATORS, default=SIMULATORS[0], help="default: %(default)s")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="S",
                        help="seconds the simulation may run before it is killed (default %(default)g)")
    parser.add_argument("--work-dir", metavar="DIR",
                        help="builds and runs directory (default ~/.cache/accel-dse/sim)")
    parser.add_argument("--seed", type=ascii_int, default=0, help="seed of the reference operands (default 0)")
    parser.add_argument("--inject-fault", metavar="ROW,COL[,BIT[,STUCK]]",
                        help="test only: break one PE (stuck product bit) to prove the checker fails")
    parser.add_argument("--no-chain", action="store_true",
                        help="run ops on independent data even when they chain into a network (by default "
                        "requantised ops whose shapes line up run as a network: each op reads the design's "
                        "int8 output of the op before)")
    parser.add_argument("--no-reuse", action="store_true",
                        help="in a chained network, send every op's output through DRAM (by default an output "
                        "stays in the ifmap as the next op's input where the design can keep it: MOVE, read in "
                        "place; such an op shows mismatches 'on chip', checked through the ops after it)")
    parser.add_argument("--host-port", action="store_true",
                        help="debug path: run the compute core alone, its buffers written through the host "
                        "port run by run (default: the whole SoC block from DRAM through AXI, with the "
                        "command queue and DMA)")
    parser.add_argument("--waves", action="store_true",
                        help="write an FST waveform trace of the run into the run directory and print its path; it "
                        "covers the ops simulated, so pick the failing one with --ops NAME (a separate cached build; "
                        "off by default: tracing slows the simulator). Its expected size is printed before the run")
    parser.add_argument("--waves-from", type=ascii_int, default=0, metavar="CYCLE",
                        help="with --waves (Icarus): trace from this cycle of the run (default 0)")
    parser.add_argument("--waves-cycles", type=ascii_int, metavar="N",
                        help="with --waves (Icarus): trace N cycles (default: to the end of the run)")
    parser.add_argument("--waves-around-mismatch", type=ascii_int, metavar="N",
                        help="(Icarus) run, and when an output differs from JAX run again tracing the N cycles "
                        "before the STORE that wrote the first differing element, and that store (instead of "
                        "--waves; the window is printed)")
    parser.add_argument("--waves-limit-mb", type=ascii_int, default=1000, metavar="MB",
                        help="with --waves: refuse a trace whose estimated size passes MB megabytes, naming the "
                        "window that fits (default %(default)d: 1 GB)")
    parser.add_argument("--full-scale", action="store_true",
                        help="the full-scale sampled check instead of whole ops: each op's real program, every class "
                        "of output tile simulated in place, the repeats fast-forwarded on the model's cycles "
                        "(reported as mode 'sampled'; needs --scale 1, runs the ops unchained)")
    parser.add_argument("--conv-path", choices=("model", "chip"), default="model",
                        help="model (default): each conv on the path the model scores (windows on chip, or the "
                        "host's im2col GEMM where that is faster); chip: every conv the design builds windows for "
                        "builds them on chip, checked against its on-chip program's cycles (a note names the "
                        "convs the model would leave to the host)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(func=_simulate)


def _fault(text: str | None):  # noqa: ANN202 (rtl_gen.Fault, imported lazily)
    if text is None:
        return None
    parts = text.split(",")
    parsed = [parse_int(p) for p in parts]
    values = [v for v in parsed if v is not None] if None not in parsed else []
    if not 2 <= len(values) <= 4:
        raise SimulationError(f"--inject-fault must be ROW,COL[,BIT[,STUCK]] integers, not {text!r}")
    from rtl_gen import Fault

    return Fault(*values)


def _simulate(args: argparse.Namespace) -> int:
    from accel_dse.design_files import load_design
    from accel_dse.simulate import simulate

    design = load_design(args.design)
    ops = [name.strip() for name in args.ops.split(",") if name.strip()] if args.ops is not None else None
    if ops is not None and not ops:
        raise SimulationError(f"--ops must name at least one op, not {args.ops!r}")
    waves_window = None
    if not args.waves and (args.waves_from or args.waves_cycles is not None):
        raise SimulationError("--waves-from/--waves-cycles choose the cycles --waves traces: add --waves")
    if args.waves_limit_mb < 1:
        raise SimulationError(f"--waves-limit-mb must be a positive number of megabytes, not {args.waves_limit_mb}")
    if args.waves:
        from accel_dse.simulate.waves import WavesWindow

        waves_window = WavesWindow(args.waves_from, args.waves_cycles)
    report = simulate(
        design, args.workload, ops=ops, max_ops=args.max_ops, scale=args.scale, simulator=args.simulator,
        timeout=args.timeout, work_dir=work_dir("--work-dir", args.work_dir), seed=args.seed,
        fault=_fault(args.inject_fault),
        progress=lambda line: print(f"accel-dse simulate: {line}", file=sys.stderr, flush=True),
        chain=False if args.no_chain else None, memory="host" if args.host_port else "dram",
        reuse=not args.no_reuse, waves=args.waves, waves_window=waves_window,
        waves_limit_bytes=args.waves_limit_mb * 1_000_000, mode="sampled" if args.full_scale else "exhaustive",
        conv_path=args.conv_path, waves_around_mismatch=args.waves_around_mismatch,
    )
    if args.json:
        emit_json(report.to_dict())
        return 0 if report.passed else 1
    _print_report(report)
    return 0 if report.passed else 1


def _print_report(report) -> None:  # noqa: ANN001 (SimulationReport)
    d = report.design
    emit(f"# {d['rows']}x{d['cols']} {d['dataflow']} ({d['top']}) on {report.workload}, {report.simulator}"
         + (f", scale {report.scale:g}" if report.scale != 1 else "")
         + (", FULL-SCALE SAMPLED CHECK (not exhaustive)" if report.mode == "sampled" else ""))
    rows = []
    dram = d.get("memory") == "dram"
    for op in report.ops:
        g = op.gemm
        shape = f"{g['m']}x{g['k']}x{g['n']}" + (f" x{g['batch']}" if g["batch"] > 1 else "")
        if op.scaled_from:
            shape += f" (from m={op.scaled_from['m']}" + (
                f", batch={op.scaled_from['batch']})" if op.scaled_from["batch"] != g["batch"] else ")")
        row = [op.name, shape, op.status, op.output_bits, "on chip" if op.on_chip else op.mismatches,
               "-" if op.cycles_rtl is None else op.cycles_rtl, op.cycles_model, "yes" if op.cycles_match else "no"]
        if dram:
            row += ["-" if op.cycles_total_rtl is None else op.cycles_total_rtl, op.cycles_total_model,
                    "yes" if op.total_cycles_match else "no"]
        rows.append(row + [round(op.sim_seconds, 3), round(op.cycles_per_second)])
    head = ["op", "m x k x n", "status", "out_bits", "mismatches", "compute_rtl", "compute_model", "match"]
    if dram:
        head += ["total_rtl", "total_model", "match"]
    emit(format_table(head + ["sim_s", "cycles/s"], rows))
    t = report.totals()
    emit()
    totals = (f"total cycles rtl {t['cycles_total_rtl']:,} vs model {t['cycles_total_model']:,}; " if dram else "")
    emit(f"total: {t['pass']}/{t['ops']} passed, {t['fail']} failed, {t['error']} errors, {t['timeout']} timed out; "
         f"{t['mismatches']} mismatches; compute cycles rtl {t['cycles_rtl']:,} vs model {t['cycles_model']:,}; "
         + totals +
         f"{t['sim_seconds']:.2f} s in the simulator ({t['cycles_per_second']:,.0f} cycles/s); build "
         + ("cached" if report.build_cached else f"{report.build_seconds:.1f} s"))
    for op in report.ops:
        if op.sampled is not None:
            s = op.sampled
            emit(f"{op.name}: sampled {s['runs_simulated']}/{s['runs_total']} runs, {s['tiles_checked']}/"
                 f"{s['tiles_total']} output tiles checked, {s['classes']} classes in {s['windows']} window(s); "
                 f"{s.get('cycles_simulated_rtl', 0):,} cycles simulated, "
                 f"{s['cycles_skipped_model']:,} fast-forwarded (model) of {s['op_cycles_model']:,}")
    for op in report.ops:
        if op.status != "pass":
            emit(f"{op.name}: {op.status}: {op.reason}")
            for m in op.first_mismatches:
                emit(f"  C[{m.index[0]}][{m.index[1]}, {m.index[2]}]: expected {m.expected}, got {m.got}")
            at = op.mismatch_store
            if at is not None and not report.waves:
                emit(f"  the first was written by the STORE at command {at['command']}, issued at cycle "
                     f"{at['cycle']:,} of the run: --simulator icarus --waves-around-mismatch 2000 traces the "
                     "2,000 cycles before it and the store")
    net = report.network
    if net is not None:
        final = net["final_output"]
        emit(f"network: {net['ops']} chained ops, {'passed' if net['passed'] else 'FAILED'}; final output "
             f"{final['op']} ({final['elements']} x {final['bits']}-bit) "
             + ("matches JAX" if final["match"] else f"does not match JAX ({final['mismatches']} mismatches)"))
    for note in report.notes:
        emit(f"note: {note}")
    emit(f"run directory: {report.run_dir}")
    if report.waves:
        emit(f"waves: {report.waves}")
        failing = [op.name for op in report.ops if op.status != "pass"]
        if failing and len(report.ops) > 1:
            emit(f"  (the trace covers all {len(report.ops)} ops; --ops {failing[0]} --waves traces the first "
                 "failing op alone)")
    emit("PASSED" if report.passed else "FAILED")
