"""``accel-dse sweep``: search a design space with Optuna or the RL agent, resumably.

``accel-dse sweep`` alone runs the shipped ``edge-int8`` space for 200 trials into
``sqlite:///runs/edge-int8/study.db`` and prints the best designs; the same command again
continues the same study. ``--verify-top K`` then checks the K best designs in RTL simulation
and synthesis (``accel_dse.verify``) and exits 1 if one fails. See docs/sweep.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from pathlib import Path
from typing import Any

from accel_dse.cli._output import emit, emit_json, format_table
from accel_dse.cli._paths import output_file, work_dir
from accel_spec.errors import SearchError
from accel_spec.text import INT_RULE, parse_int, shown

__all__ = ["register"]

DEFAULT_SPACE = "edge-int8"
DEFAULT_TRIALS = 200


def register(sub: argparse._SubParsersAction) -> None:
    from accel_dse.verify import DEFAULT_SCALE, DEFAULT_SIMULATOR

    parser = sub.add_parser(
        "sweep",
        help="search a design space (Optuna samplers or the RL agent); resumable, multi-worker",
        description="Search a design space and print the best designs. The study is stored "
        "(default sqlite:///runs/<study>/study.db); running the same command again continues it.",
    )
    parser.add_argument("--space", default=DEFAULT_SPACE, metavar="NAME|FILE",
                        help=f"shipped space name or space file (default {DEFAULT_SPACE}; see --list-spaces)")
    parser.add_argument("--trials", default=str(DEFAULT_TRIALS), metavar="N",
                        help=f"trials the whole study should hold (default {DEFAULT_TRIALS})")
    parser.add_argument("--sampler", default="bo", metavar="NAME",
                        help="bo (default: Bayesian optimisation, the fewest trials to a good design), tpe, nsga2, "
                        "cmaes, random, grid or rl")
    parser.add_argument("--study", default=None, metavar="NAME", help="study name (default: the space's name)")
    parser.add_argument("--storage", default=None, metavar="URL",
                        help="sqlite:///FILE, postgresql://USER:PW@HOST:PORT/DB, journal:FILE "
                        "(default sqlite:///<out-dir>/study.db)")
    parser.add_argument("--out-dir", default=None, metavar="DIR", help="run directory (default runs/<study>)")
    parser.add_argument("--jobs", default="1", metavar="J", help="worker processes on this machine (default 1)")
    parser.add_argument("--timeout", default=None, metavar="SECONDS", help="stop this run after SECONDS")
    parser.add_argument("--seed", default=None, metavar="N", help="sampler seed (worker i gets N+i)")
    parser.add_argument("--heartbeat", default="10", metavar="SECONDS",
                        help="RDB heartbeat period; a trial silent for 2x this is failed and retried (default 10)")
    parser.add_argument("--top", default="5", metavar="K", help="best designs shown for one objective (default 5)")
    parser.add_argument("--grid-keep", default="20", metavar="K",
                        help="grid sampler: best designs written into the study for one objective (default 20)")
    parser.add_argument("--grid-table", default=None, metavar="FILE.npz",
                        help="grid sampler: also save every design's objective values here")
    parser.add_argument("--force", action="store_true", help="replace the --grid-table file if it exists")
    parser.add_argument("--verify-top", default=None, metavar="K",
                        help="after the search, simulate the K best designs in RTL (Pareto set first) and synthesise "
                        "them, as accel-dse verify; results go into the study; exit 1 if one fails")
    parser.add_argument("--verify-simulator", choices=("verilator", "icarus"), default=DEFAULT_SIMULATOR,
                        help="simulator of --verify-top (default %(default)s)")
    parser.add_argument("--verify-scale", default=None, metavar="F",
                        help=f"--verify-top: shrink each op's M and batch by F in (0, 1] (default {DEFAULT_SCALE:g})")
    parser.add_argument("--verify-work-dir", default=None, metavar="DIR",
                        help="--verify-top: simulation builds and runs (default ~/.cache/accel-dse/sim)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("--quiet", action="store_true", help="no progress line")
    parser.add_argument("--list-spaces", action="store_true", help="list the shipped spaces and exit")
    parser.set_defaults(func=_sweep)


def _int(option: str, text: str | None, *, minimum: int = 1) -> int | None:
    if text is None:
        return None
    value = parse_int(text)
    if value is None:
        raise SearchError(f"{option} must be an integer, not {shown(repr(text), 60)} ({INT_RULE})")
    if value < minimum:
        rule = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise SearchError(f"{option} must be {rule}, not {value}")
    return value


def _seconds(option: str, text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise SearchError(f"{option} must be a positive number of seconds, not {text!r}")
    return value


def _list_spaces(as_json: bool) -> int:
    from accel_dse.search import load_space, space_names

    spaces = [load_space(name) for name in space_names()]
    if as_json:
        emit_json({s.name: {"description": s.description, **s.to_dict()} for s in spaces})
        return 0
    rows = []
    for s in spaces:
        try:
            size: Any = s.grid_size()
        except Exception:  # noqa: BLE001 - a continuous range: no finite size
            size = "continuous"
        work = ", ".join(w.spec for w in s.workloads) or " ".join(f"{k}={v}" for k, v in (s.pod.llm if s.pod else ()))
        rows.append([s.name, ", ".join(o.name for o in s.objectives), work,
                     size, s.description])
    emit(format_table(["space", "objectives", "workloads", "designs", "description"], rows))
    return 0


def _sweep(args: argparse.Namespace) -> int:
    if args.list_spaces:
        return _list_spaces(args.json)
    from accel_dse.search import SweepConfig, check_location, check_study_name, load_space, validate_sweep

    if args.study is not None:
        check_study_name(args.study)
    given_storage = args.storage or ""
    storage_path = given_storage.partition("sqlite:///")[2] or given_storage.partition("journal:")[2] or None
    grid_table = output_file("--grid-table", args.grid_table, suffix=".npz", force=args.force,
                             inputs=[args.space, storage_path])
    given_dir = work_dir("--out-dir", args.out_dir)
    space = load_space(args.space)
    study_name = check_study_name(args.study if args.study is not None else space.name)
    default_dir = given_dir is None
    out_dir = Path("runs") / study_name if given_dir is None else given_dir
    storage = args.storage or f"sqlite:///{out_dir / 'study.db'}"
    config = SweepConfig(
        space=space,
        evaluator=None,
        storage=storage,
        study_name=study_name,
        sampler=args.sampler,
        n_trials=_int("--trials", args.trials),  # type: ignore[arg-type]
        timeout=_seconds("--timeout", args.timeout),
        jobs=_int("--jobs", args.jobs),  # type: ignore[arg-type]
        seed=_int("--seed", args.seed, minimum=0),
        heartbeat_interval=_int("--heartbeat", args.heartbeat),  # type: ignore[arg-type]
        grid_keep=_int("--grid-keep", args.grid_keep),  # type: ignore[arg-type]
        grid_table=grid_table,
    )
    top = _int("--top", args.top)
    verify = _verify_options(args)
    spec = validate_sweep(config)
    if verify is not None and spec.kind == "memory":
        raise SearchError("--verify-top needs a storage that outlives the sweep, not 'memory:'")
    if verify is not None and not space.workloads:  # a pod space: its LLM job is no workload to simulate
        raise SearchError(
            f"--verify-top simulates the designs on the space's workloads, and space {space.name!r} has none "
            "(a pod space's LLM job is not simulated): run accel-dse verify --workload W on the study afterwards"
        )
    if args.storage is not None:
        check_location(spec)
    evaluator = _evaluator(space)
    if args.storage is None:
        try:
            out_dir.mkdir(parents=default_dir, exist_ok=True)
        except OSError as exc:
            raise SearchError(f"run directory {str(out_dir)!r} cannot be created: {exc.strerror or exc}") from None
    from accel_dse.search import run_sweep

    try:
        result = run_sweep(dataclasses.replace(config, evaluator=evaluator),
                           progress=None if args.quiet else sys.stderr)
    except KeyboardInterrupt:
        from accel_dse.search.study.interrupt import resume_message

        sys.stderr.write(resume_message(spec.display) + "\n")
        return 130
    summary = result.summary(top=top or 5)
    failed: list[Any] = []
    if verify is not None:
        results = _verify_top(storage, study_name, verify)
        summary["verification"] = [r.to_dict() for r in results]
        failed = [r for r in results if not r.passed]
    if args.json:
        emit_json(summary)
    else:
        _print_summary(result, summary, None if spec.kind == "memory" else out_dir)
        if verify is not None:
            passed = len(summary["verification"]) - len(failed)
            emit(f"RTL verification: {passed}/{len(summary['verification'])} designs passed "
                 f"({verify['simulator']}, scale {verify['scale']:g}); results recorded in study {study_name!r}")
    for r in failed:
        line = f"RTL VERIFICATION FAILED: trial {r.trial} ({r.design}, {r.config_hash}): {r.status}: {r.reason}"
        if args.json:
            sys.stderr.write(f"accel-dse: {line}\n")
        else:
            emit(line)
    return 1 if failed else 0


def _verify_options(args: argparse.Namespace) -> dict[str, Any] | None:
    """The checked ``--verify-*`` options (``None`` without ``--verify-top``); the simulator must be installed."""
    if args.verify_top is None:
        for option, value in (("--verify-scale", args.verify_scale), ("--verify-work-dir", args.verify_work_dir)):
            if value is not None:
                raise SearchError(f"{option} needs --verify-top K")
        return None
    from accel_dse.simulate import cache_budget_bytes, find_simulator
    from accel_dse.verify import DEFAULT_SCALE

    k = _int("--verify-top", args.verify_top)
    scale = DEFAULT_SCALE
    if args.verify_scale is not None:
        try:
            scale = float(args.verify_scale)
        except ValueError:
            scale = math.nan
        if not 0 < scale <= 1:
            raise SearchError(f"--verify-scale must be a number in (0, 1], not {args.verify_scale!r}")
    find_simulator(args.verify_simulator)  # a missing simulator is reported before the search, not after it
    cache_budget_bytes()  # so is a malformed $ACCEL_DSE_SIM_CACHE_MB
    return {"k": k, "scale": scale, "simulator": args.verify_simulator,
            "work_dir": work_dir("--verify-work-dir", args.verify_work_dir)}


def _verify_top(storage: str, study_name: str, verify: dict[str, Any]) -> list[Any]:
    """RTL-simulate and synthesise the best designs of the study (accel_dse.verify), progress on stderr."""
    from accel_dse.verify import verify_top

    return verify_top(
        storage, study_name, verify["k"], scale=verify["scale"], simulator=verify["simulator"],
        work_dir=verify["work_dir"],
        progress=lambda line: print(f"accel-dse sweep: verify: {line}", file=sys.stderr, flush=True),
    )


def _evaluator(space: Any) -> Any:
    """Resolve the space's workloads here (this imports JAX to trace) and build the model evaluator
    (a pod space's: the system model on its LLM job)."""
    if space.pod is not None:
        from accel_dse.search import PodEvaluator

        return PodEvaluator(space.pod)
    import workloads
    from accel_dse.search import ModelEvaluator

    return ModelEvaluator([(w.spec, w.weight, workloads.resolve(w.spec)) for w in space.workloads], fpga=space.fpga)


def _print_summary(result: Any, summary: dict[str, Any], out_dir: Path | None) -> None:
    """The closing summary (accel_dse.cli._closing): workload, objectives, best designs, what next."""
    from accel_dse.cli._closing import closing_lines

    if result.recovered:
        emit(f"failed and re-queued the trials of dead workers: {result.recovered}")
    if result.grid is not None:
        kept = len(result.grid.index)
        which = "its Pareto set" if len(result.space.objectives) > 1 else "the best"
        emit(f"grid: {result.grid.size:,} designs scored, {result.grid.n_feasible:,} feasible; "
             f"{kept:,} kept as trials ({which}; --grid-table saves every design's scores)")
    trials = result.study.get_trials(deepcopy=False)
    for line in closing_lines(summary, result.space, trials, ran=result.ran,
                              out_dir=None if out_dir is None else str(out_dir)):
        emit(line)
