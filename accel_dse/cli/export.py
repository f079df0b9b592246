"""``accel-dse export``: the RTL package of one design (Verilog, design.json, testbench, synth.json, README)."""

from __future__ import annotations

import argparse
import shlex
import sys

from accel_dse.cli._output import emit, emit_json
from accel_dse.units import metric_text
from accel_spec.errors import ExportError

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "export",
        help="write a design's Verilog, design.json, standalone testbench, synth.json and README into DIR",
        description="Export one design, from a design file or preset or from a trial of a sweep study, into a "
        "new directory: the Verilog (as simulated), design.json, synth.json (Yosys), a standalone cocotb "
        "testbench with its runner (python run.py re-verifies the Verilog against numpy) and a README. "
        "The directory appears complete or not at all.",
    )
    what = parser.add_argument_group("design (one of)")
    what.add_argument("--design", metavar="FILE|PRESET", help="design file or preset name")
    what.add_argument("--storage", metavar="URL", help="study storage (sqlite:///FILE, postgresql://..., journal:FILE)")
    parser.add_argument("--study", metavar="NAME", help="study name (with --storage)")
    parser.add_argument("--trial", metavar="N|best", help="trial number or 'best' (with --storage)")
    parser.add_argument("--pick", metavar="RULE",
                        help="with --trial best on a multi-objective study: which Pareto design, e.g. min-area "
                        "(default: min-edp when EDP is recorded, else the first objective; report picks the same)")
    parser.add_argument("--out", required=True, metavar="DIR", help="directory to create (its parent must exist)")
    parser.add_argument("--workload", metavar="W",
                        help="workload of the predicted metrics (default: the study's first workload, else gemm)")
    parser.add_argument("--force", action="store_true", help="replace DIR if it exists and is not empty")
    parser.add_argument("--no-synth", action="store_true", help="skip Yosys (synth.json says it was skipped)")
    parser.add_argument("--fpga", metavar="FAMILY",
                        help="also place and route on this FPGA family (ecp5, nexus, gatemate; cached): adds "
                        "fpga.json (report, commands, model prediction) and fpga_flow.sh")
    parser.add_argument("--fpga-device", metavar="DEVICE",
                        help="with --fpga: the device (default: the study's [fpga] device, else the family's default)")
    parser.add_argument("--json", action="store_true", help="print what was written as JSON")
    parser.set_defaults(func=_export)


def _source(args: argparse.Namespace):  # noqa: ANN202 (DesignSource, imported lazily)
    from accel_dse.export import design_from_spec, design_from_study

    if args.design is not None and args.storage is not None:
        raise ExportError("give either --design or --storage/--study/--trial, not both")
    if args.design is not None:
        extra = [opt for opt, value in (("--study", args.study), ("--trial", args.trial), ("--pick", args.pick))
                 if value is not None]
        if extra:
            raise ExportError(f"{extra[0]} needs --storage (it selects a trial of a study), not --design")
        return design_from_spec(args.design)
    if args.storage is None:
        raise ExportError("say what to export: --design FILE|PRESET, or --storage URL --study NAME --trial N|best")
    if args.study is None or args.trial is None:
        missing = "--study NAME" if args.study is None else "--trial N|best"
        raise ExportError(f"--storage needs {missing} (export --storage URL --study NAME --trial N|best)")
    return design_from_study(args.storage, args.study, args.trial, pick=args.pick)


def _stage_lines(prefix: str):  # noqa: ANN202 - a progress callback
    """A progress callback: each stage on its own stderr line, with the time the stage before it took
    (the long ones, Verilog and synthesis of a large array, take minutes)."""
    import time

    last = {"at": time.monotonic(), "steps": 0.0}

    def say(line: str) -> None:
        now = time.monotonic()
        took = f" (previous step took {now - last['at']:.1f} s)" if last["steps"] and now - last["at"] >= 1 else ""
        print(f"{prefix}: {line}{took}", file=sys.stderr, flush=True)
        last["at"], last["steps"] = now, last["steps"] + 1

    return say


def _export(args: argparse.Namespace) -> int:
    from accel_dse.export import check_out_dir, export_design, fpga_line, resolve_fpga

    check_out_dir(args.out, force=args.force)
    if args.fpga_device is not None and args.fpga is None:
        raise ExportError("--fpga-device needs --fpga FAMILY")
    source = _source(args)
    device = None if args.fpga is None else resolve_fpga(args.fpga, args.fpga_device, source.info.get("fpga_target"))
    result = export_design(
        source.config, args.out, workload=args.workload or source.workload, force=args.force, source=source.info,
        synth=not args.no_synth, fpga=args.fpga, fpga_device=device,
        progress=_stage_lines("accel-dse export"),
    )
    if args.json:
        emit_json(result.to_dict())
        return 0
    config = source.config
    where = (f"trial {source.info['trial']} of study {source.info['study']!r}" if source.info.get("kind") == "study"
             else f"{source.info.get('kind')} {source.info.get(source.info.get('kind', ''), '')}")
    emit(f"exported {config.short_name()} ({result.top}, from {where}) to {result.out}")
    if source.info.get("kind") == "study" and not str(source.info.get("how", "")).startswith("--trial"):
        emit(f"best: trial {source.info['trial']}, {source.info['how']}")
    emit(f"files: {', '.join(result.files)}")
    total = result.predicted
    if total:
        shown = ", ".join(metric_text(key, total.get(key, 0)) for key in ("latency_s", "energy_pj", "area_mm2"))
        emit(f"predicted on {result.workload}: {total.get('total_cycles', 0):,.0f} cycles, {shown}, "
             f"utilisation {metric_text('utilization', total.get('utilization', 0))}")
    else:
        emit(f"predicted on {result.workload}: infeasible (see design.json)")
    if result.synth is not None:
        emit(f"synthesis: {result.synth['cells']:,} cells, ~{result.synth['transistors']:,} transistors "
             "(SRAM buffers excluded)")
    if result.fpga is not None:
        emit(f"fpga {fpga_line(result.fpga['report'])}; fpga.json, fpga_flow.sh")
    rtl = source.info.get("rtl_verification")
    if isinstance(rtl, dict) and not rtl.get("passed", False):
        emit(f"WARNING: this design FAILED RTL verification in the study: {rtl.get('reason', '')}")
    emit(f"re-verify: cd {shlex.quote(str(result.out))} && {shlex.quote(sys.executable)} run.py"
         "   (a Python with numpy and cocotb: this one)")
    return 0
