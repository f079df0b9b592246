"""``accel-dse report``: Pareto plots, top designs, per-op breakdown, roofline and history of a study."""

from __future__ import annotations

import argparse
import sys

from accel_dse.cli._output import emit, format_table

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "report",
        help="plots and tables of a sweep study: Pareto front, top designs, per-op breakdown, roofline, history",
        description="Write a report of a sweep study (finished or interrupted, any storage) into a new directory: "
        "pareto.png, history.png, breakdown.png, roofline.png, report.json and index.html.",
    )
    parser.add_argument("--storage", required=True, metavar="URL",
                        help="study storage (sqlite:///FILE, postgresql://..., journal:FILE)")
    parser.add_argument("--study", required=True, metavar="NAME", help="study name")
    parser.add_argument("--out", required=True, metavar="DIR", help="directory to create (its parent must exist)")
    parser.add_argument("--workload", metavar="W",
                        help="workload of the per-op breakdown and roofline (default: the study's first); one that "
                        "cannot be read is an error (exit 2) unless --best-effort")
    parser.add_argument("--best-effort", action="store_true",
                        help="write the report even when the --workload cannot be read (its breakdown is left out "
                        "with a note)")
    parser.add_argument("--pick", metavar="RULE",
                        help="multi-objective: which Pareto design is broken down, e.g. min-edp (the default)")
    parser.add_argument("--force", action="store_true", help="replace DIR if it exists and is not empty")
    parser.add_argument("--json", action="store_true", help="print the report data as JSON")
    parser.set_defaults(func=_report)


def _report(args: argparse.Namespace) -> int:
    from accel_dse.output_dir import check_out_dir
    from accel_dse.report import load_study, write_report

    check_out_dir(args.out, force=args.force)
    if args.workload is not None and not args.best_effort:
        import workloads

        workloads.resolve(args.workload)  # a bad --workload fails here, before anything is written (cached)
    view = load_study(args.storage, args.study)
    if args.pick is not None:
        view.parse_pick(args.pick)
    report = write_report(view, args.out, workload=args.workload, pick=args.pick, force=args.force)
    if args.json:
        from accel_dse.output_dir import json_text

        sys.stdout.write(json_text(report))  # a NaN an old study holds is null ("-" in the text report)
        return 0
    emit(f"study {report['study']!r} in {report['storage']}: {report['n_trials']} trials: "
         + ", ".join(report["outcomes"]))
    for note in report["notes"]:
        emit(f"note: {note}")
    if report["top"]:
        objectives = [o["name"] for o in report["objectives"]]
        extra = [] if "area_mm2" in {o["metric"] for o in report["objectives"]} else ["area_mm2"]
        more = len(report["top"]) > 20
        emit(("Pareto set" if len(objectives) > 1 else "top designs") + (" (first 20; see index.html)" if more else "")
             + ":")
        from accel_dse.report import metric_column

        top = report["top"][:20]
        columns, headers = [], []
        for o in report["objectives"]:
            unit, cells = metric_column(o.get("metric"), [r["values"][o["name"]] for r in top], report["units"])
            headers.append(f"{o['name']} {unit}".strip())
            columns.append(cells)
        for m in extra:
            unit, cells = metric_column(m, [r["metrics"].get(m) for r in top], report["units"])
            headers.append(f"{m.removesuffix('_mm2')} {unit}".strip())
            columns.append(cells)
        rows = []
        for i, r in enumerate(top):
            rtl = r["rtl"]
            rows.append([r["trial"], r["design"], r.get("dram", ""), *[c[i] for c in columns], r["sampler"],
                         "" if rtl is None else ("pass" if rtl.get("passed") else "FAIL")])
        emit(format_table(["trial", "design", "dram", *headers, "sampler", "rtl"], rows))
    if report["best"]:
        emit(f"best: trial {report['best']['trial']}, {report['best']['how']}")
    for f in report["fpga"]:
        model = f"model {f['model_fmax_mhz']:.1f} MHz" if f["model_fmax_mhz"] is not None else "no model"
        used = ", ".join(f"{r} {f[r]} (model {f['model_' + r]})" for r in ("luts", "ffs", "dsps", "brams")
                         if f[r] is not None)
        emit(f"fpga trial {f['trial']}: " + (f"{f['family']} {f['device']}: FAILED: {f['error']}" if f["error"]
                                             else f"{f['line']}, {model}; {used}"))
    for number in report["rtl_failed"]:
        v = report["verification"][str(number)]
        emit(f"RTL VERIFICATION FAILED: trial {number} ({v.get('design', '')}): {v.get('reason', '')}")
    emit(f"wrote {len(report['files'])} files to {report['out']} (open index.html)")
    return 0
