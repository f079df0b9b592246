"""``accel-dse rtl verilog DESIGN [-o FILE]``, ``accel-dse rtl synth DESIGN [--json]`` and
``accel-dse rtl fpga DESIGN [--family F] [--device D] [--freq MHz] [--json]``."""

from __future__ import annotations

import argparse
import sys

from accel_dse.cli._args import ascii_int
from accel_dse.cli._output import emit, emit_json, format_table
from accel_dse.cli._paths import output_file, write_whole
from accel_dse.design_files import load_design
from accel_spec.errors import ExportError

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("rtl", help="generate the Verilog of a design, synthesis figures")
    rsub = parser.add_subparsers(dest="rtl_command", metavar="ACTION", required=True)
    ver = rsub.add_parser("verilog", help="write the design's Verilog (top module accel_<config_hash>)")
    ver.add_argument("design", metavar="FILE|PRESET")
    ver.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    ver.add_argument("--flat", action="store_true", help="one module per PE instance (slow for big arrays)")
    ver.add_argument("--force", action="store_true", help="replace FILE if it exists (never the design file)")
    ver.set_defaults(func=_verilog)
    syn = rsub.add_parser("synth", help="Yosys cells and transistor estimate (cached per design)")
    syn.add_argument("design", metavar="FILE|PRESET")
    syn.add_argument("--json", action="store_true", help="print JSON")
    syn.add_argument("--no-cache", action="store_true", help="do not read or write the synthesis cache")
    syn.add_argument("--full-array", action="store_true",
                     help="also synthesise the whole PE array flat (minutes and ~1 GB at 16x16)")
    syn.set_defaults(func=_synth)
    fpga = rsub.add_parser("fpga", help="FPGA synthesis, place and route: resources, Fmax, fits (cached)")
    fpga.add_argument("design", metavar="FILE|PRESET")
    fpga.add_argument("--family", default="ecp5", metavar="FAMILY", help="ecp5 (default), nexus or gatemate")
    fpga.add_argument("--device", metavar="DEVICE", help="device of the family (ecp5 default 85k)")
    fpga.add_argument("--freq", type=float, metavar="MHZ", help="target clock, MHz (default the design's clock_mhz)")
    fpga.add_argument("--seed", type=ascii_int, default=1, help="nextpnr placement seed (default 1)")
    fpga.add_argument("--json", action="store_true", help="print JSON")
    fpga.add_argument("--no-cache", action="store_true", help="do not read or write the report cache")
    fpga.set_defaults(func=_fpga)


#: Verilog generation (Amaranth + Yosys), seconds = base + per PE x PEs: measured on 2 cores,
#: ``rtl verilog tiny`` (4x4) 11.7 s and ``edge`` (16x16) 17.6 s, less ~3 s of Python start-up.
VERILOG_BASE_S, VERILOG_PER_PE_S = 8.5, 0.025


def _verilog(args: argparse.Namespace) -> int:
    from accel_dse.simulate.runner.eta import duration
    from accel_dse.verilog_size import check_verilog_size
    from rtl_gen import Accelerator, to_verilog

    path = output_file("-o", args.output, force=args.force, inputs=[args.design])
    config = load_design(args.design)
    check_verilog_size(config, f"design {args.design}", flat=args.flat)  # before anything is generated
    Accelerator(config)  # a design the RTL cannot build is refused (one line) before the estimate
    seconds = VERILOG_BASE_S + VERILOG_PER_PE_S * config.rows * config.cols
    if seconds >= 10:  # a step over 10 s says what it does and how long it takes
        print(f"accel-dse rtl verilog: generating the Verilog of the {config.rows}x{config.cols} design: about "
              f"{duration(seconds)} on 2 cores{' (--flat: longer)' if args.flat else ''}", file=sys.stderr, flush=True)
    text = to_verilog(config, flat=args.flat)
    if path is None:
        emit(text.rstrip("\n"))
        return 0
    try:
        write_whole(path, text.encode("utf-8"))
    except OSError as exc:
        raise ExportError(f"cannot write Verilog to {str(path)!r}: {exc.strerror or exc}") from exc
    return 0


def _synth(args: argparse.Namespace) -> int:
    from rtl_gen import synth_stats

    config = load_design(args.design)
    stats = synth_stats(config, use_cache=not args.no_cache, full_array=args.full_array,
                        progress=lambda line: print(f"accel-dse rtl synth: {line}", file=sys.stderr, flush=True))
    if args.json:
        emit_json({"design": config.to_dict(), **stats})
        return 0
    emit(f"# {config.short_name()}  top = {stats['top']}")
    rows = [
        [name, part["cells"], part["transistors"], part["count"],
         part["cells"] * part["count"], part["transistors"] * part["count"]]
        for name, part in stats["parts"].items()
    ]
    rows.append(["array (PEs)", "", "", "", stats["array"]["cells"], stats["array"]["transistors"]])
    rows.append(["total", "", "", "", stats["total"]["cells"], stats["total"]["transistors"]])
    if "full_array" in stats:
        full = stats["full_array"]
        rows.append(["full array (flat synth)", "", "", "", full["cells"], full["transistors"]])
    emit(format_table(["part", "cells", "transistors", "count", "total cells", "total transistors"], rows))
    emit(f"excluded: {stats['excluded']}")
    return 0


def _fpga(args: argparse.Namespace) -> int:
    from accel_dse.export import overflow_text
    from rtl_gen import fpga_report

    config = load_design(args.design)
    rep = fpga_report(config, family=args.family, device=args.device, freq_mhz=args.freq, seed=args.seed,
                      use_cache=not args.no_cache)
    if args.json:
        emit_json({"design": config.to_dict(), **rep})
        return 0
    where = "out of context" if rep["out_of_context"] else "in context"
    source = "cached" if rep["cached"] else f"synth {rep['seconds']['synth']:.1f} s, P&R {rep['seconds']['pnr']:.1f} s"
    emit(f"# {config.short_name()}  top = {rep['top']}  {rep['family']} {rep['device']} {where} "
         f"seed {rep['seed']} ({source})")
    if not rep["fits"]:
        emit(f"fits: no ({overflow_text(rep['overflow'])})")
        return 0
    emit(format_table(["resource", "cells"], [[k, v] for k, v in rep["resources"].items()]))
    emit(format_table(["bel", "used", "available", "%"],
                      [[k, v["used"], v["available"], round(100 * v["used"] / v["available"], 1)]
                       for k, v in rep["utilisation"].items()]))
    for clock, mhz in rep["fmax_mhz"].items():
        verdict = "meets" if mhz >= rep["freq_mhz"] else "misses"
        emit(f"fmax {clock}: {mhz:.2f} MHz ({verdict} {rep['freq_mhz']:g} MHz)")
    path = rep["critical_path"]
    if path:
        emit(f"critical path: {path['from']} -> {path['to']}, {path['delay_ns']:.2f} ns "
             f"({path['logic_ns']:.2f} ns logic)")
    emit("fits: yes")
    return 0
