"""``accel-dse evaluate --design FILE|PRESET --workload W [--json]``: the analytic model on one design."""

from __future__ import annotations

import argparse
from typing import Any

from accel_dse.cli._output import emit, emit_json, format_table
from accel_dse.designs import load_design

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "evaluate",
        help="model one design on a workload: cycles, DRAM traffic, energy per op and in total",
        description="Evaluate one design on a workload with the analytic performance model: per-op "
        "folds, compute and stall cycles, utilisation, DRAM bytes and energy, then totals with "
        "latency, area, power and TOPS/W.",
    )
    parser.add_argument("--design", required=True, metavar="FILE|PRESET", help="design file or preset name")
    parser.add_argument("--workload", required=True, metavar="W",
                        help="workload spec: NAME[:k=v,...] (e.g. resnet18, bert_base:seq=128) or module:function")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--no-reuse", action="store_true",
                        help="send every op's output through DRAM (by default an output the next op takes as "
                        "its input as is stays on chip where the design can keep it: the on_chip column)")
    parser.set_defaults(func=_evaluate)


def _evaluate(args: argparse.Namespace) -> int:
    import perf_model
    import workloads

    config = load_design(args.design)
    workload = workloads.resolve(args.workload)
    result = perf_model.evaluate(config, workload, reuse=not args.no_reuse)
    host = _host_work(workload)
    if args.json:
        emit_json(result.to_dict() | {"host_work": host})
        return 0
    emit(f"# {config.short_name()} ({config.config_hash}) on {workload.name}: {result.status}")
    rows = []
    for op in result.ops:
        rows.append([op.name, op.count, f"{op.gemm[0]}x{op.gemm[1]}x{op.gemm[2]}",
                     f"{op.tile[0]}x{op.tile[1]}x{op.tile[2]}", op.folds, op.compute_cycles,
                     round(op.stall_cycles), op.utilization, op.dram_read_bytes + op.dram_write_bytes,
                     op.energy_pj * 1e-6, op.on_chip or "-", op.status])
    emit(format_table(["op", "count", "m x k x n", "tile", "folds", "compute", "stall", "util",
                       "dram_bytes", "energy_uJ", "on_chip", "status"], rows))
    if host:
        emit("host work (vector ops, no cycles until the vector unit lands): "
             + ", ".join(f"{h['kind']} {h['elements']:,} elements" for h in host))
    total = result.total
    emit("")
    if result.status != "ok":
        emit(f"{result.status}: {result.reason}")
        return 0
    summary = [
        ["compute_cycles", total["compute_cycles"]],
        ["stall_cycles", round(float(total["stall_cycles"]))],
        ["total_cycles", round(float(total["total_cycles"]))],
        ["utilization", total["utilization"]],
        ["macs", total["macs"]],
        ["dram_read_bytes", total["dram_read_bytes"]],
        ["dram_write_bytes", total["dram_write_bytes"]],
        ["energy_uJ", total["energy_pj"] * 1e-6],
        ["latency_ms", total["latency_s"] * 1e3],
        ["area_mm2", total["area_mm2"]],
        ["power_w", total["power_w"]],
        ["tops", total["tops"]],
        ["tops_per_w", total["tops_per_w"]],
    ]
    emit(format_table(["total", "value"], summary))
    parts = total["energy_breakdown"]
    energy = total["energy_pj"] or 1.0
    emit("")
    emit(format_table(["energy part", "uJ", "share"],
                      [[name, value * 1e-6, value / energy] for name, value in parts.items()]))
    return 0


def _host_work(workload: Any) -> list[dict[str, Any]]:
    """The workload's vector ops by kind (first-seen order) with runs and elements (all runs): work
    the model gives no cycles, run on the host until the vector unit lands."""
    kinds: dict[str, dict[str, Any]] = {}
    for op, count in zip(workload.vector_ops, workload.vector_counts, strict=True):
        entry = kinds.setdefault(op.kind, {"kind": op.kind, "runs": 0, "elements": 0})
        entry["runs"] += count
        entry["elements"] += op.elements * count
    return list(kinds.values())
