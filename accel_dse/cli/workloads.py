"""``accel-dse workloads`` (list the builtins) and ``accel-dse workloads show SPEC``."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from accel_dse.cli._args import ascii_int
from accel_dse.cli._output import emit, emit_json, format_table

__all__ = ["register", "workload_json", "host_work_lines"]

_SPEC_HELP = ("NAME[:k=v,...] (e.g. bert_base:seq=128), package.module:function, or a file: model.onnx[:batch=8], "
              "model.mlir, a jax.export artefact, a SCALE-Sim .csv, a Timeloop .yaml")


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("workloads", help="list the builtin workloads, show a workload's ops",
                            description="List the builtin workloads (default) or show one workload's ops.")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(func=_list)
    wsub = parser.add_subparsers(dest="workloads_command", metavar="ACTION")
    listing = wsub.add_parser("list", help="list the builtin workloads with their options")
    listing.add_argument("--json", action="store_true", help="print JSON")
    listing.set_defaults(func=_list)
    show = wsub.add_parser(
        "show", help="trace a workload and print its ops",
        description="Trace a workload and print, per op, its kind, GEMM dims (m, k, n, batch), run "
        "count, MACs (all runs) and weight bytes; then the totals and the non-matmul primitives.",
    )
    show.add_argument("workload", metavar="SPEC", help=_SPEC_HELP)
    show.add_argument("--bits", type=ascii_int, default=8, help="element width for byte counts (default 8)")
    show.add_argument("--json", action="store_true", help="print JSON")
    show.set_defaults(func=_show)


def _list(args: argparse.Namespace) -> int:
    from workloads import builtin_descriptions, builtin_options

    descriptions = builtin_descriptions()
    if args.json:
        emit_json({name: {"description": text, "options": builtin_options(name)}
                   for name, text in descriptions.items()})
        return 0
    rows = [[name, text] for name, text in descriptions.items()]
    emit(format_table(["workload", "description"], rows))
    emit()
    emit("options (NAME:k=v,...):")
    for name in descriptions:
        emit(f"  {name}: " + ", ".join(f"{k}={v}" for k, v in builtin_options(name).items()))
    emit("or a JAX function of your own: package.module:function, or a file: ONNX, StableHLO, "
         "SCALE-Sim CSV, Timeloop YAML (see docs/workloads.md)")
    return 0


def workload_json(workload: Any, bits: int = 8) -> dict[str, Any]:
    """The JSON form of a workload: per-op GEMM dims, count, MACs (all runs), weight bytes; totals.

    Keys: ``workload``, ``source`` (``builtin``, ``jax``, ``onnx``, ``stablehlo``, ``scalesim``,
    ``timeloop``), ``description``, ``bits``, ``ops`` (each ``name``, ``origin`` (the graph node,
    jaxpr equation or file line it came from), ``kind``, ``m``, ``k``, ``n``, ``batch``, ``count``,
    ``macs`` = ``count * op.macs``, ``weight_bytes`` (one run), for a conv ``conv`` with its
    fields, and ``requant``: ``null`` for raw outputs, else the ``Requant`` fields), ``total_macs``,
    ``total_weight_bytes`` (all runs), ``vector_ops`` (each ``name``, ``origin``, ``kind``, ``shape``,
    ``out_shape``, ``axis``, ``params`` (name -> int), ``count``, ``elements`` = ``count`` times its
    input's elements, ``after`` = matrix ops before it; ``evaluate`` times them on the vector
    unit), ``vector_elements`` (kind -> elements, all runs) ``other_primitives`` (name -> how often
    it runs), ``other_elements`` (name -> the elements it writes in one run of the workload; empty
    where the workload's reader does not know them) and ``host_arithmetic`` (name -> runs: the other
    primitives that are arithmetic on tensors, not data layout or scalar index work; see
    ``workloads.host_work``).
    """
    from workloads.host_work import host_work

    ops = []
    for op, count in zip(workload.ops, workload.counts, strict=True):
        g = op.to_gemm()
        entry: dict[str, Any] = {
            "name": op.name, "origin": op.origin, "kind": op.kind, "m": g.m, "k": g.k, "n": g.n, "batch": g.batch,
            "count": count, "macs": op.macs * count, "weight_bytes": op.weight_bytes(bits),
            "requant": None if op.requant is None else dataclasses.asdict(op.requant),
        }
        if op.kind == "conv2d":
            entry["conv"] = {f.name: getattr(op, f.name) for f in dataclasses.fields(op)
                             if f.name not in ("name", "origin", "requant")}
        ops.append(entry)
    vector = [{"name": v.name, "origin": v.origin, "kind": v.kind, "shape": list(v.shape),
               "out_shape": list(v.out_shape), "axis": v.axis, "params": dict(v.params), "count": count,
               "elements": v.elements * count, "after": after}
              for v, count, after in zip(workload.vector_ops, workload.vector_counts, workload.vector_after,
                                         strict=True)]
    by_kind: dict[str, int] = {}
    for entry in vector:
        by_kind[entry["kind"]] = by_kind.get(entry["kind"], 0) + entry["elements"]
    return {
        "workload": workload.name,
        "source": workload.source,
        "description": workload.description,
        "bits": bits,
        "ops": ops,
        "total_macs": workload.total_macs,
        "total_weight_bytes": workload.weight_bytes(bits),
        "vector_ops": vector,
        "vector_elements": by_kind,
        "other_primitives": dict(workload.other_primitives),
        "other_elements": dict(workload.other_elements),
        "host_arithmetic": {name: runs for name, runs, _ in host_work(workload.other_primitives,
                                                                      workload.other_elements).arithmetic},
    }


def _show(args: argparse.Namespace) -> int:
    from accel_spec.errors import WorkloadError
    from workloads import resolve

    if args.bits < 1:
        raise WorkloadError(f"--bits must be a positive integer, not {args.bits}")
    workload = resolve(args.workload)
    data = workload_json(workload, args.bits)
    if args.json:
        emit_json(data)
        return 0
    emit(f"# {data['workload']}" + (f": {data['description']}" if data["description"] else ""))
    rows = [[o["name"] or "-", o["kind"], o["m"], o["k"], o["n"], o["batch"], o["count"], o["macs"],
             o["weight_bytes"]] for o in data["ops"]]
    emit(format_table(["op", "kind", "m", "k", "n", "batch", "count", "macs",
                       f"weight_bytes@{args.bits}b"], rows))
    emit(f"total: {len(rows)} ops, {data['total_macs']:,} MACs ({data['total_macs'] / 1e9:.3f} G), "
         f"{data['total_weight_bytes']:,} weight bytes")
    if data["vector_ops"]:
        ops_by_kind: dict[str, int] = {}
        for entry in data["vector_ops"]:
            ops_by_kind[entry["kind"]] = ops_by_kind.get(entry["kind"], 0) + entry["count"]
        emit(format_table(["vector op", "runs", "elements"],
                          [[k, ops_by_kind[k], e] for k, e in data["vector_elements"].items()]))
        emit("vector ops run on the vector unit where it can (evaluate gives their cycles and names the rest, "
             "host work, with the reason)")
    for line in host_work_lines(workload):
        emit(line)
    return 0


def host_work_lines(workload: Any, width: int = 100, head: str = "not run on the array") -> list[str]:
    """The work beside the matrix and vector ops (``workloads.host_work``), wrapped at ``width``:
    host arithmetic under ``head``, then data layout and scalar index arithmetic, named as free;
    each primitive with how often it runs and, where known, the elements it writes."""
    from workloads.host_work import host_work

    work = host_work(workload.other_primitives, workload.other_elements)
    lines: list[str] = []
    for items, title in ((work.arithmetic, head), (work.layout, "data layout, free (no arithmetic)"),
                         (work.scalar, "scalar index arithmetic, free (one element a run)")):
        if items:
            lines += _wrapped(items, title, width)
    return lines


def _wrapped(items: tuple[tuple[str, int, int | None], ...], head: str, width: int) -> list[str]:
    import textwrap

    from accel_dse.units import count

    parts = [f"{p} x{c}" + (f" ({count(e)} elements)" if e is not None else "") for p, c, e in items]
    known = [e for _, _, e in items if e is not None]
    head += (f" ({count(sum(known))} elements in all)" if known and len(items) > 1 else "") + ": "
    nbsp = "\u00a0"  # an item is never split over two lines
    text = head + ", ".join(part.replace(" ", nbsp) for part in parts)
    lines = textwrap.wrap(text, width, subsequent_indent="  ", break_on_hyphens=False, break_long_words=False)
    return [line.replace(nbsp, " ") for line in lines]
