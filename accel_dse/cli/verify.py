"""``accel-dse verify``: RTL-simulate and synthesise the top designs of a sweep study, record the results."""

from __future__ import annotations

import argparse
import sys

from accel_dse.cli._output import emit, emit_json, format_table
from accel_dse.cli._paths import work_dir
from accel_spec.errors import ExportError

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    from accel_dse.verify import CLAIM_TTL_S, DEFAULT_SCALE, DEFAULT_SIMULATOR, DEFAULT_TIMEOUT_S

    parser = sub.add_parser(
        "verify",
        help="RTL-simulate and synthesise the top-K designs of a study (Pareto set first); results go into it",
        description="Multi-fidelity check after a model-driven sweep: the K best designs are simulated in RTL on "
        "the study's workload (ops scaled as simulate --scale) and synthesised with Yosys; pass/fail, RTL vs "
        "model cycles and synthesis figures are recorded in the study and shown by accel-dse report. "
        "Exit status: 0 all passed, 1 a design failed RTL verification, 2 bad input.",
    )
    parser.add_argument("--storage", required=True, metavar="URL", help="study storage")
    parser.add_argument("--study", required=True, metavar="NAME", help="study name")
    parser.add_argument("--top", required=True, metavar="K", help="how many designs (Pareto set first)")
    parser.add_argument("--workload", metavar="W", help="workload to simulate (default: the study's first)")
    parser.add_argument("--scale", default=None, metavar="F",
                        help=f"shrink each op's M and batch by F in (0, 1] (default {DEFAULT_SCALE:g})")
    parser.add_argument("--full-scale", action="store_true",
                        help="the full-scale sampled check: each op's real program (the tiling, addresses and "
                        "transfers the sweep scored), every class of output tile simulated in place, the repeats "
                        "fast-forwarded on the model's cycles; recorded as mode 'sampled', never as exhaustive")
    parser.add_argument("--max-ops", default=None, metavar="N", help="simulate only the first N ops")
    parser.add_argument("--jobs", default="1", metavar="N",
                        help="designs checked at once, each build and simulation a process of its own (up to the "
                        "machine's cores; default %(default)s)")
    parser.add_argument("--simulator", choices=("verilator", "icarus"), default=DEFAULT_SIMULATOR,
                        help="default: %(default)s")
    parser.add_argument("--timeout", default=str(DEFAULT_TIMEOUT_S), metavar="S",
                        help="seconds one design's simulation may run (default %(default)s)")
    parser.add_argument("--work-dir", metavar="DIR", help="simulation builds and runs (default ~/.cache/accel-dse/sim)")
    parser.add_argument("--no-synth", action="store_true", help="skip Yosys")
    parser.add_argument("--fpga", metavar="FAMILY",
                        help="also place and route each design on this FPGA family (ecp5, nexus, gatemate; cached); "
                        "fits, Fmax and resources go into the study")
    parser.add_argument("--fpga-device", metavar="DEVICE",
                        help="with --fpga: the device (default: the study's [fpga] device, else the family's default)")
    parser.add_argument("--share", action="store_true",
                        help="split the designs with other 'verify --share' processes on this study (other machines "
                        "too): each design is claimed once through the study's storage; a dead verifier's claim "
                        "expires and is taken over")
    parser.add_argument("--claim-ttl", default=str(CLAIM_TTL_S), metavar="S",
                        help="--share: seconds without renewal before a claim expires (default %(default)s)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.set_defaults(func=_verify)


def _default_scale() -> float:
    from accel_dse.verify import DEFAULT_SCALE

    return DEFAULT_SCALE


def _number(option: str, text: str | None, kind: type) -> float | int | None:
    if text is None:
        return None
    try:
        return kind(text)
    except ValueError:
        what = "an integer" if kind is int else "a number"
        raise ExportError(f"{option} must be {what}, not {text!r}") from None


def _verify(args: argparse.Namespace) -> int:
    from accel_dse.export import fpga_line
    from accel_dse.verify import verify_top

    if args.fpga_device is not None and args.fpga is None:
        raise ExportError("--fpga-device needs --fpga FAMILY")
    if args.full_scale:  # any --scale but 1 is refused with it, the default's own value too
        if args.scale is not None and _number("--scale", args.scale, float) != 1:
            raise ExportError(f"--full-scale runs the ops at full scale: --scale {args.scale} does not go with it")
        args.scale = "1"
    elif args.scale is None:
        args.scale = str(_default_scale())
    timeout = _number("--timeout", args.timeout, float)
    if timeout is not None and not timeout > 0:
        raise ExportError(f"--timeout must be a positive number of seconds, not {args.timeout!r}")
    results = verify_top(
        args.storage, args.study, _number("--top", args.top, int),  # type: ignore[arg-type]
        workload_spec=args.workload, scale=_number("--scale", args.scale, float),  # type: ignore[arg-type]
        simulator=args.simulator, max_ops=_number("--max-ops", args.max_ops, int),  # type: ignore[arg-type]
        timeout=timeout, work_dir=work_dir("--work-dir", args.work_dir), synth=not args.no_synth,
        progress=lambda line: print(f"accel-dse verify: {line}", file=sys.stderr, flush=True),
        share=args.share, claim_ttl_s=_number("--claim-ttl", args.claim_ttl, float),  # type: ignore[arg-type]
        fpga=args.fpga, fpga_device=args.fpga_device, mode="sampled" if args.full_scale else "exhaustive",
        jobs=_number("--jobs", args.jobs, int),  # type: ignore[arg-type]
    )
    failed = [r for r in results if not r.passed]
    if args.json:
        emit_json([r.to_dict() for r in results])
        return 1 if failed else 0
    rows = [[r.trial, r.design, "yes" if r.pareto else "", "PASS" if r.passed else r.status.upper(),
             "sampled" if r.mode == "sampled" else f"exhaustive@{r.scale:g}",
             f"{r.runs_simulated}/{r.runs_total}", f"{r.ops_passed}/{r.ops}", r.mismatches,
             "-" if r.cycles_rtl is None else r.cycles_rtl,
             "-" if r.cycles_model is None else r.cycles_model, r.synth.get("cells", "-"),
             r.synth.get("transistors", "-")] for r in results]
    emit(format_table(["trial", "design", "pareto", "rtl", "mode", "runs_sim", "ops", "mismatches", "cycles_rtl",
                       "cycles_model", "cells", "transistors"], rows))
    for r in results:
        if r.fpga:
            emit(f"trial {r.trial} fpga " + (f"{r.fpga['family']} {r.fpga['device']}: FAILED: {r.fpga['error']}"
                                             if "error" in r.fpga else fpga_line(r.fpga)))
    for r in failed:
        emit(f"RTL VERIFICATION FAILED: trial {r.trial} ({r.design}): {r.reason}")
    mine = " by this verifier" if args.share else ""
    emit(f"{len(results) - len(failed)}/{len(results)} designs passed{mine}; results recorded in study {args.study!r}")
    return 1 if failed else 0
