"""``accel-dse system evaluate|presets|models``: pods of a chip design on an LLM job."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from accel_dse.cli._args import ascii_int
from accel_dse.cli._output import emit, emit_json, format_table
from accel_spec.errors import ConfigError
from accel_spec.text import parse_int

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "system", help="model pods of a chip on LLM training and serving (splits, collectives, memory)",
        description="Pods of one chip design on a ring, 2D or 3D torus or a switch: LLM training steps and "
        "serving split by data, tensor, pipeline and expert parallelism (docs/system.md).")
    cmds = parser.add_subparsers(dest="system_command", metavar="SUBCOMMAND", required=True)
    ev = cmds.add_parser(
        "evaluate", help="step time, MFU, tokens/s, TTFT/TPOT, memory per chip, energy and the split",
        description="Evaluate a system on an LLM job. Without --split the best split is searched "
        "(training: shortest step; serving: most tokens/s).")
    ev.add_argument("--system", required=True, metavar="FILE|PRESET",
                    help="system file ([design] + [system] tables) or preset (see 'system presets')")
    ev.add_argument("--model", required=True, metavar="NAME[:k=v,...]",
                    help="LLM shape, e.g. llama70b or qwen3_moe_235b:layers=48 (see 'system models')")
    ev.add_argument("--mode", choices=("train", "serve"), default="train", help="training step or serving")
    ev.add_argument("--batch", type=ascii_int, default=None,
                    help="sequences in the global batch (default 1024 training, 256 serving)")
    ev.add_argument("--seq", type=ascii_int, default=2048, help="sequence (training) or prompt length")
    ev.add_argument("--gen", type=ascii_int, default=128, help="tokens generated per sequence (serving)")
    ev.add_argument("--materialised-attention", action="store_true",
                    help="attention scores go through HBM (no fused attention)")
    ev.add_argument("--split", metavar="k=v,...", default=None,
                    help="the split: dp, tp, pp, ep, zero, microbatch, recompute, overlap, selective, "
                    "sequence_parallel, interleave, zero_gather, capacity_factor (e.g. dp=64,tp=8,pp=8,selective=1); "
                    "default: the file's [split], else searched")
    ev.add_argument("--fix", metavar="k=v,...", default=None,
                    help="search the split with these fields fixed (e.g. tp=8,pp=12 searches dp's microbatch, "
                    "ZeRO stage and recomputation; sequence_parallel=1 or selective=1 apply to every split)")
    ev.add_argument("--objective", choices=("throughput", "ttft", "tpot"), default=None,
                    help="serving: rank the searched splits by most tokens/s (default), shortest time to first "
                    "token or shortest time per output token")
    ev.add_argument("--dims", metavar="A[,B[,C]]", default=None, help="override the topology's dims")
    ev.add_argument("--pods", type=ascii_int, default=None, help="override the number of pods")
    ev.add_argument("--figure", metavar="FILE.png", default=None,
                    help="also draw the time breakdown (compute, elementwise, exposed communication, bubble, "
                    "optimizer) of the best splits, the chosen one first (needs the [report] extra)")
    ev.add_argument("--force", action="store_true", help="replace the --figure file if it exists")
    ev.add_argument("--json", action="store_true", help="print JSON")
    ev.set_defaults(func=_evaluate)
    pr = cmds.add_parser("presets", help="list the shipped systems")
    pr.set_defaults(func=_presets)
    md = cmds.add_parser("models", help="list the LLM shapes")
    md.set_defaults(func=_models)


def _check_positive(args: argparse.Namespace) -> None:
    for flag in ("batch", "seq", "gen", "pods"):
        value = getattr(args, flag)
        if value is not None and value <= 0:
            raise ConfigError(f"--{flag} must be a positive integer, not {value}")


_BOOL_KEYS = ("overlap", "selective", "sequence_parallel")


def parse_split(text: str) -> Any:
    """``dp=8,tp=4,...`` as a :class:`Split` (one-line ``ConfigError`` on a bad item)."""
    from accel_spec.pod_config import Split

    return Split(**split_values(text, "--split"))


def split_values(text: str, flag: str) -> dict[str, Any]:
    """``k=v,...`` of :class:`Split` fields as a dict (one-line ``ConfigError`` on a bad item)."""
    from accel_spec.pod_config import SPLIT_FIELDS

    values: dict[str, Any] = {}
    for item in filter(None, (t.strip() for t in text.split(","))):
        key, eq, raw = item.partition("=")
        if not eq or key not in SPLIT_FIELDS:
            raise ConfigError(f"{flag} item {item!r} must be KEY=VALUE with KEY one of {', '.join(SPLIT_FIELDS)}")
        try:
            if key in _BOOL_KEYS:
                if raw not in ("0", "1", "true", "false"):
                    raise ValueError
                values[key] = raw in ("1", "true")
            elif key in ("recompute", "capacity_factor"):
                values[key] = float(raw)
            elif key == "zero_gather":
                values[key] = raw
            else:
                number = parse_int(raw)
                if number is None:
                    raise ValueError
                values[key] = number
        except ValueError:
            raise ConfigError(f"{flag} {key} must be {'0 or 1' if key in _BOOL_KEYS else 'a number'}, "
                              f"not {raw!r}") from None
    return values


def _evaluate(args: argparse.Namespace) -> int:
    from accel_dse.cli._paths import output_file
    from accel_dse.pod_files import load_system
    from accel_spec.pod_config import Split
    from perf_model.pod import candidate_splits, evaluate_split, rank_splits, split_problem
    from workloads.llm_ops import LlmJob, parse_llm_spec

    _check_positive(args)
    figure = output_file("--figure", args.figure, suffix=".png", force=args.force, inputs=[args.system])
    system, split = load_system(args.system)
    changes: dict[str, Any] = {}
    if args.dims is not None:
        dims = [parse_int(d) for d in args.dims.split(",")]
        if any(d is None for d in dims):
            raise ConfigError(f"--dims must be integers separated by commas, not {args.dims!r}")
        changes["dims"] = tuple(dims)
    if args.pods is not None:
        changes["pods"] = args.pods
    if changes:
        system = dataclasses.replace(system, **changes)
    if args.split is not None:
        split = parse_split(args.split)
    batch = args.batch or (1024 if args.mode == "train" else 256)
    job = LlmJob(shape=parse_llm_spec(args.model), mode=args.mode, batch=batch, seq=args.seq, gen=args.gen,
                 fused_attention=not args.materialised_attention)
    if args.objective is not None and job.training:
        raise ConfigError(f"--objective {args.objective} ranks serving runs (--mode serve); training is ranked by "
                          "its step time")
    if args.fix is not None and args.split is not None:
        raise ConfigError("--fix narrows the split search and --split gives the whole split: use one of them")
    if split is not None and args.fix is None:
        why = split_problem(system, job, split)
        if why:
            raise ConfigError(f"split {split.label()}: {why}")
        result = evaluate_split(system, job, split)
        ranked = [result]
    else:
        tries = None
        if args.fix is not None:
            fixed = split_values(args.fix, "--fix")
            Split(**{**fixed, "dp": fixed.get("dp", 1) * fixed.get("ep", 1)})  # the fields' own checks
            tries = candidate_splits(system, job, fixed=fixed)
            runnable = [s for s in tries if not split_problem(system, job, s)]
            if not runnable:
                why = split_problem(system, job, tries[0]) if tries else (
                    f"no split of {system.chips} chips has {args.fix} (dp * tp * pp must be the chips, "
                    "microbatch * dp must divide the batch)")
                raise ConfigError(f"--fix {args.fix}: {why}")
            tries = runnable
        ranked = rank_splits(system, job, tries, objective=args.objective)
        if not ranked:
            raise ConfigError(
                f"no split of the {system.chips:,} chips ({system.pods} pod(s) of {system.chips_per_pod:,}) can cut "
                f"{job.shape.name} at batch {batch}: data, tensor, pipeline and expert parallelism must divide the "
                "chips, the batch, the heads and the layers; change --batch, --pods or --dims, or give --split"
            )
        result = dataclasses.replace(ranked[0], searched=len(ranked))
    if figure is not None:
        _figure(figure, result, ranked)
    if args.json:
        emit_json(result.to_dict())
        return 0
    _print(result)
    return 0


def _figure(path: Any, result: Any, ranked: list[Any]) -> None:
    """The chosen split and the fastest split of each other (tp, pp, ep), at most 12 bars."""
    from accel_dse.report import system_breakdown_png
    from accel_spec.errors import ExportError

    shown, seen = [result], {(result.split.tp, result.split.pp, result.split.ep)}
    for r in ranked:
        key = (r.split.tp, r.split.pp, r.split.ep)
        if r.ok and key not in seen and len(shown) < 12:
            shown.append(r)
            seen.add(key)
    title = f"{result.system.name or 'system'}, {result.system.chips} chips: {result.job.name}"
    try:
        system_breakdown_png(shown, path, title)
    except OSError as exc:
        raise ExportError(f"cannot write --figure {str(path)!r}: {exc.strerror or exc}") from None


def _print(result: Any) -> None:
    system, job = result.system, result.job
    name = system.name or "system"
    emit(f"# {name}: {system.chips} chips ({system.topology} {'x'.join(map(str, system.dims))}"
         f"{f' x {system.pods} pods' if system.pods > 1 else ''}) of {system.cores} x "
         f"{system.chip.short_name()}, {job.name}: {result.status}")
    emit(f"split: {result.split.label()}" + (f"  (best of {result.searched} searched)" if result.searched > 1 else ""))
    if not result.ok:
        emit(f"{result.status}: {result.reason}")
        return
    from accel_dse.units import count, eng, fixed, format_column, percent

    m = result.metrics
    rows: list[list[Any]] = [["step_s" if job.training else "run_s", eng(m["step_s"], "s")],
                             ["mfu", percent(m["mfu"])], ["hfu", percent(m["hfu"])],
                             ["tokens_per_s", count(m["tokens_per_s"])],
                             ["tokens_per_s_per_chip", count(m["tokens_per_s_per_chip"])]]
    if not job.training:
        rows += [["ttft_s", eng(m["ttft_s"], "s")], ["tpot_s", eng(m["tpot_s"], "s")],
                 ["decode_tokens_per_s", count(m["decode_tokens_per_s"])]]
    rows += [["energy_j", eng(m["energy_j"], "J")]]
    emit(format_table(["metric (--json key)", "value"], rows))
    emit("")
    total = m["step_s"] or 1.0
    parts = {k: v for k, v in result.breakdown.items() if k != "dp_comm_s"}
    unit, times = format_column(list(parts.values()), "s", highest=1.0)
    shares = fixed([100.0 * v / total for v in parts.values()], max_decimals=1)
    emit(format_table(["time", unit, "share %"], [[k.removesuffix("_s"), t, sh]
                                                  for k, t, sh in zip(parts, times, shares, strict=True)]))
    emit("")
    mem = result.memory
    emit(format_table(["memory per chip", "GiB"], [[k.removesuffix("_bytes"), v / 2**30] for k, v in mem.items()]))


def _presets(args: argparse.Namespace) -> int:
    from accel_dse.pod_files import load_system, system_preset_names

    rows = []
    for name in system_preset_names():
        system, _ = load_system(name)
        rows.append([name, system.chips, f"{system.topology} {'x'.join(map(str, system.dims))}", system.cores,
                     system.chip.short_name(), system.peak_macs_per_s * 2e-12, system.hbm_gib, system.link_gb_per_s])
    emit(format_table(["preset", "chips", "topology", "cores", "core", "peak_tflops", "hbm_gib", "link_gb_per_s"],
                      rows))
    return 0


def _models(args: argparse.Namespace) -> int:
    from workloads.llm_ops import LLM_SHAPES

    rows = [[s.name, s.params / 1e9, s.active_matmul_params / 1e9, s.layers, s.d, s.heads, s.kv_heads,
             s.experts or "-", s.source] for s in LLM_SHAPES.values()]
    emit(format_table(["model", "params_b", "active_b", "layers", "d", "heads", "kv_heads", "experts", "source"],
                      rows))
    return 0
