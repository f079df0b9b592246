"""``accel-dse evaluate --design FILE|PRESET --workload W [--json]``: the analytic model on one design."""

from __future__ import annotations

import argparse
from typing import Any

from accel_dse.cli._output import emit, emit_json, format_table
from accel_dse.cli.workloads import host_work_lines
from accel_dse.design_files import load_design
from accel_dse.units import eng, fixed, format_column, percent

__all__ = ["register", "refuse_narrow_accumulator"]


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
    refuse_narrow_accumulator(config, workload.name, result)
    accuracy = _accuracy(config, workload)
    bound = _bound(config, workload, result) if result.status == "ok" else None
    if args.json:
        emit_json(result.to_dict() | {"accuracy": accuracy, "bound": bound})
        return 0
    emit(f"# {config.short_name()} ({config.config_hash}) on {workload.name}: {result.status}")
    for line in op_table(result, bound):
        emit(line)
    emit("")
    if result.status != "ok":
        emit(f"{result.status}: {result.reason}")
    else:
        emit(format_table(["total", "value"], total_rows(result.total) + [dram_row(config), _accuracy_row(accuracy)]))
        if bound is not None:
            emit(bound["line"])
        parts = result.total["energy_breakdown"]
        energy = result.total["energy_pj"] or 1.0
        unit, values = format_column([v * 1e-12 for v in parts.values()], "J", highest=1.0)
        shares = fixed([100.0 * v / energy for v in parts.values()], digits=3)
        emit("")
        emit(format_table(["energy part", unit, "share %"],
                          [[name, v, share] for name, v, share in zip(parts, values, shares, strict=True)]))
    for line in conv_lines(result):
        emit(line)
    if result.vector_ops:
        emit("")
        emit(f"vector ops, on the vector unit ({config.vector_lanes} lanes; in the figures above, "
             "after the matrix ops):")
        emit(format_table(["vector op", "name", "runs", "elements", "cycles", "DRAM bytes"],
                          [[v["kind"], v["name"] or "-", v["runs"], f"{v['elements']:,}", f"{v['total_cycles']:,}",
                            f"{v['dram_read_bytes'] + v['dram_write_bytes']:,}"] for v in result.vector_ops]))
    net = result.network
    if net is not None:
        runs = net.get("transposes", 0)
        transposes = f", {runs} transpose run{'' if runs == 1 else 's'}" if runs else ""
        links = net.get("links") or ("on chip" if net.get("links_on_chip") else "through DRAM")
        emit("")
        emit(f"as one program (no host step between ops): cannot be built: {net['reason']}" if "reason" in net else
             f"as one program (no host step between ops): "
             f"{str(net['convs']) + ' convs' if 'convs' in net else str(net['gemms']) + ' GEMMs'} and "
             f"{net['vector_ops']} vector ops"
             f"{transposes}, "
             f"{net['queue_loads']} queue-load(s), links {links}, "
             f"{net['total_cycles']:,} cycles and {net['dram_read_bytes'] + net['dram_write_bytes']:,} DRAM bytes "
             "(the program's walk and transfers, what simulate runs and checks: the totals above; the ops' "
             "rows are their per-op plans)")
    if result.host_work:
        emit("")
        emit("vector ops the vector unit cannot run, on the host and left out of the figures above:")
        emit(format_table(["vector op", "runs", "elements", "reason"],
                          [[h["kind"], h["runs"], f"{h['elements']:,}", h["reason"]] for h in result.host_work]))
    others = host_work_lines(workload, head="other host work, left out of the figures above")
    if others:
        emit("")
        for line in others:
            emit(line)
    return 0


def refuse_narrow_accumulator(config: Any, workload: str, result: Any) -> None:
    """Raise when the design's accumulator cannot hold the workload's sums (status ``overflow``):
    every figure would be zero, so ``evaluate`` exits 2 with every width the ops need.

    Raises:
        ConfigError: an op overflows ``acc_bits`` (:func:`accel_dse.acc_width.acc_error`).
    """
    from accel_dse.acc_width import acc_error, acc_needs
    from accel_spec.errors import ConfigError

    if result.status != "overflow":
        return
    needs = acc_needs(config, result.ops)
    if needs:
        raise ConfigError(acc_error(config, workload, needs))


def _bound(config: Any, workload: Any, result: Any) -> dict[str, Any]:
    """What bounds the design (:func:`accel_dse.bound.bound_by`), the host's work counted beside."""
    from accel_dse.bound import bound_by

    arithmetic = 0
    if hasattr(workload, "other_primitives"):
        from workloads.host_work import host_work

        arithmetic = len(host_work(workload.other_primitives, workload.other_elements).arithmetic)
    return bound_by(result.total, result.ops, config.rows * config.cols, result.host_work, arithmetic)


def op_table(result: Any, bound: dict[str, Any] | None = None) -> list[str]:
    """Per-op rows: runs and GEMM instances (a batched op, e.g. 12 attention heads, is 12 instances
    per run), MACs of all of them, and the model's figures in engineering units; with ``bound``
    (:func:`accel_dse.bound.bound_by`) what limits each op (``array`` or ``DRAM``)."""
    ops = result.ops
    macs_unit, macs = format_column([float(op.macs) for op in ops], "MAC")
    dram_unit, dram = format_column([float(op.dram_read_bytes + op.dram_write_bytes) for op in ops], "B")
    energy_unit, energy = format_column([op.energy_pj * 1e-12 for op in ops], "J", highest=1.0)
    util = fixed([100.0 * op.utilization for op in ops], digits=3)
    headers = ["op", "runs", "instances", "m x k x n", f"{macs_unit}s", "tile", "folds", "compute cycles",
               "stall cycles", "util %", f"DRAM {dram_unit}", f"energy {energy_unit}", "on chip"]
    limits = {o["name"]: o["limit"].removesuffix(" bandwidth") for o in (bound or {}).get("ops", [])}
    if limits:
        headers.append("bound")
    show_status = any(op.status != "ok" for op in ops)
    if show_status:
        headers.append("status")
    rows = []
    for i, op in enumerate(ops):
        row = [op.name, op.count, op.instances, "x".join(map(str, op.gemm)), macs[i],
               "x".join(map(str, op.tile)), op.folds, op.compute_cycles, round(op.stall_cycles), util[i],
               dram[i], energy[i], op.on_chip or "-"] + ([limits.get(op.name, "-")] if limits else [])
        rows.append(row + ([op.status] if show_status else []))
    return format_table(headers, rows).splitlines()


def conv_lines(result: Any) -> list[str]:
    """How the convolutions run: on chip (windows built by the accelerator from NHWC activations)
    or as the host's im2col GEMM, with the model's reason for each of those."""
    convs = [op for op in result.ops if op.conv_path]
    if not convs:
        return []
    chip = sum(op.conv_path == "chip" for op in convs)
    out = ["", f"convolutions: {chip} of {len(convs)} on chip (windows built by the accelerator from NHWC "
               f"activations in DRAM), the others as the host's im2col GEMM:"]
    out += [f"  {op.name}: {op.conv_note.removeprefix(f'{op.name}: ')}" for op in convs if op.conv_path == "host"]
    chains: list[list[str]] = []
    for op in result.ops:  # a chain: convs whose output stays on chip as the next one's input
        if op.conv_path == "chip" and "in" in op.on_chip.split(",") and chains:
            chains[-1].append(op.name)
        elif op.conv_path == "chip" and "out" in op.on_chip.split(","):
            chains.append([op.name])
    if chains:
        out.append(f"chains of convolutions kept on chip, each one program whose links never cross DRAM: "
                   f"{'; '.join(' -> '.join(c) for c in chains)}")
    return out


def total_rows(total: dict[str, Any]) -> list[list[str]]:
    """The totals, each in its own engineering unit."""
    return [
        ["compute cycles", f"{int(total['compute_cycles']):,}"],
        ["stall cycles", f"{round(float(total['stall_cycles'])):,}"],
        ["vector cycles", f"{int(total.get('vector_cycles', 0)):,}"],
        ["total cycles", f"{round(float(total['total_cycles'])):,}"],
        ["utilisation", percent(total["utilization"])],
        ["MACs", eng(float(total["macs"]), "MAC")],
        ["DRAM read", eng(float(total["dram_read_bytes"]), "B")],
        ["DRAM write", eng(float(total["dram_write_bytes"]), "B")],
        ["energy", eng(total["energy_pj"] * 1e-12, "J")],
        ["latency", eng(total["latency_s"], "s")],
        ["area", f"{total['area_mm2']:.3g} mm²"],
        ["power", eng(total["power_w"], "W")],
        ["on-die power", f"{eng(total.get('on_die_power_w', 0.0), 'W')} "
                         f"({total.get('power_density_w_mm2', 0.0):.3g} W/mm²)"],
        ["DRAM power", eng(total.get("dram_power_w", 0.0), "W")],
        ["throughput", f"{total['tops']:.3g} TOPS"],
        ["efficiency", f"{total['tops_per_w']:.3g} TOPS/W"],
    ]


def dram_row(config: Any) -> list[str]:
    """The design's DRAM part and the bytes a cycle the model paces it to (``"none"``: ideal memory)."""
    import perf_model
    from accel_spec.config import MEMORY_KINDS, memory_label

    rate = float(perf_model.effective_dram_bytes_per_cycle(config.dram_bytes_per_cycle, config.dram, config.clock_mhz))
    part = MEMORY_KINDS.get(config.dram)
    what = f"{part.gb_per_s:g} GB/s, {part.pj_per_bit:g} pJ/bit" if part is not None else "no DRAM energy"
    return ["DRAM part", f"{memory_label(config.dram)} ({what}; {rate:.4g} B/cycle)"]


def _accuracy(config: Any, workload: Any) -> dict[str, Any]:
    """The design's operand formats and their SQNR on the workload (``workloads.accuracy``)."""
    from workloads.accuracy import workload_sqnr_db

    weight, act = config.weight_fmt.name, config.act_fmt.name
    sqnr = workload_sqnr_db(workload, weight, act)
    return {"weight_format": weight, "act_format": act, "sqnr_db": None if sqnr != sqnr else sqnr}


def _accuracy_row(accuracy: dict[str, Any]) -> list[str]:
    sqnr = accuracy["sqnr_db"]
    shown = "-" if sqnr is None else f"{sqnr:.1f} dB"
    return [f"SQNR vs float32 (W {accuracy['weight_format']}, A {accuracy['act_format']})", shown]

