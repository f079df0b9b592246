"""The data of a report: study summary, top designs, per-op breakdown, roofline, history, RTL results.

:func:`build_report` returns one JSON-ready dict; the plots and the HTML page are drawn from
it (:mod:`accel_dse.report._plots`, :mod:`accel_dse.report._html`), and ``--json`` prints it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from accel_dse.report._format import report_units
from accel_dse.study_view import StudyView, trial_config, trial_table
from accel_dse.trial_outcomes import outcome_words, trial_outcomes
from accel_spec.config import memory_label
from accel_spec.errors import AccelDseError
from accel_spec.number_formats import format_tag

__all__ = ["build_report", "sampler_of", "per_op_breakdown", "roofline", "TOP_ROWS"]

#: Rows of the top-design table for a single objective (a Pareto set is shown whole, up to 50).
TOP_ROWS = 10
_MAX_PARETO_ROWS = 50


def sampler_of(trial: Any) -> str:
    """Which sampler made ``trial``: the ``sampler`` user attribute if recorded, else inferred.

    Inferred from what samplers leave behind: ``source = "grid"`` (exhaustive grid), ``rl:``
    system attributes (the RL agent), ``NSGAIISampler:`` (NSGA-II), ``cma:`` (CMA-ES); TPE and
    random sampling leave nothing, so they show as ``tpe/random``.
    """
    recorded = trial.user_attrs.get("sampler")
    if isinstance(recorded, str) and recorded:
        return recorded
    if trial.user_attrs.get("source") == "grid":
        return "grid"
    keys = list(trial.system_attrs)
    for prefix, name in (("rl:", "rl"), ("NSGAIISampler", "nsga2"), ("NSGAIIISampler", "nsga3"),
                         ("cma:", "cmaes"), ("sepcma:", "cmaes"), ("cmawm:", "cmaes")):
        if any(k.startswith(prefix) for k in keys):
            return name
    if trial.system_attrs.get("fixed_params") is not None:
        return "enqueued"
    return "tpe/random"


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _row(view: StudyView, trial: Any, pareto: set[int]) -> dict[str, Any]:
    config = trial_table(trial, "config")
    metrics = {str(k): v for k, v in trial_table(trial, "metrics").items() if _finite(v) is not None}
    tag = format_tag(config.get("input_bits"), config.get("weight_format"), config.get("act_format"))
    short = f"{config.get('rows')}x{config.get('cols')}-{config.get('dataflow')}-{tag}" if config else ""
    return {
        "trial": trial.number,
        "design": short,
        "dram": memory_label(str(config["dram"])) if "dram" in config else "",
        "config": config,
        "config_hash": trial.user_attrs.get("config_hash"),
        "values": {o.name: float(v) for o, v in zip(view.objectives, trial.values or (), strict=False)},
        "metrics": metrics,
        "sampler": sampler_of(trial),
        "pareto": trial.number in pareto,
        "rtl": view.verification(trial.number),
    }


def per_op_breakdown(config: Any, workload: str) -> dict[str, Any]:
    """The analytic model's per-op figures of ``config`` on ``workload`` with shares of the totals.

    Each op: cycles (compute, stall, total), utilisation, stall share (of the op's cycles),
    cycle share and energy share (of the workload's), MACs, DRAM bytes, arithmetic intensity
    (MACs per DRAM byte) and achieved MACs per cycle.
    """
    import perf_model
    import workloads

    result = perf_model.evaluate(config, workloads.resolve(workload))
    total_cycles = sum(op.total_cycles for op in result.ops) or 1.0
    total_energy = sum(op.energy_pj for op in result.ops) or 1.0
    ops = []
    for op in result.ops:
        dram = op.dram_read_bytes + op.dram_write_bytes
        ops.append({
            "name": op.name,
            "status": op.status,
            "reason": op.reason,
            "count": op.count,
            "instances": op.instances,
            "gemm": {"m": op.gemm[0], "k": op.gemm[1], "n": op.gemm[2]},
            "compute_cycles": op.compute_cycles,
            "stall_cycles": float(op.stall_cycles),
            "total_cycles": float(op.total_cycles),
            "utilization": float(op.utilization),
            "stall_share": float(op.stall_cycles / op.total_cycles) if op.total_cycles > 0 else 0.0,
            "cycle_share": float(op.total_cycles / total_cycles),
            "energy_pj": float(op.energy_pj),
            "energy_share": float(op.energy_pj / total_energy),
            "macs": int(op.macs),
            "dram_bytes": float(dram),
            "intensity_macs_per_byte": float(op.macs / dram) if dram > 0 else None,
            "macs_per_cycle": float(op.macs / op.total_cycles) if op.total_cycles > 0 else 0.0,
        })
    return {
        "workload": workload,
        "design": config.to_dict(),
        "short_name": config.short_name(),
        "status": result.status,
        "reason": result.reason,
        "ops": ops,
        "total": {k: v for k, v in result.total.items() if k != "energy_breakdown"},
        "energy_breakdown": dict(result.total.get("energy_breakdown") or {}),
    }


def roofline(config: Any, breakdown: dict[str, Any]) -> dict[str, Any]:
    """Roofline of ``config``: peak MACs/cycle, DRAM bytes/cycle, ridge point, and the ops on it."""
    import perf_model

    peak = config.rows * config.cols
    # what the model uses: the per-cycle limit, capped by a named memory part's GB/s at the clock
    bandwidth = float(perf_model.effective_dram_bytes_per_cycle(config.dram_bytes_per_cycle, config.dram,
                                                                config.clock_mhz))
    points = [
        {"name": op["name"], "intensity": op["intensity_macs_per_byte"], "macs_per_cycle": op["macs_per_cycle"],
         "bound": "compute" if (op["intensity_macs_per_byte"] or math.inf) * bandwidth >= peak else "memory"}
        for op in breakdown["ops"] if op["status"] == "ok"
    ]
    return {
        "peak_macs_per_cycle": peak,
        "dram_bytes_per_cycle": bandwidth,
        "ridge_macs_per_byte": peak / bandwidth,
        "clock_mhz": config.clock_mhz,
        "points": points,
    }


def _history(view: StudyView) -> dict[str, Any]:
    """Per sampler: ``[trial number, values..., meets constraints]`` of every COMPLETE trial, in order."""
    out: dict[str, list[list[Any]]] = {}
    for t in view.trials():
        if t.state.name != "COMPLETE" or t.values is None:
            continue
        values = [_finite(v) for v in t.values]
        if any(v is None for v in values):
            continue
        limits = t.user_attrs.get("constraint_values")
        ok = all(_finite(v) is not None and v <= 0 for v in (limits if isinstance(limits, list) else ()))
        out.setdefault(sampler_of(t), []).append([t.number, *values, ok])
    return {"objectives": [o.name for o in view.objectives], "directions": [o.direction for o in view.objectives],
            "by_sampler": out}


#: Metrics the report's tables show beside the objectives.
TABLE_METRICS = ("area_mm2", "latency_s", "energy_pj", "tops_per_w", "utilization")


def _shown_values(view: StudyView, rows: list[dict[str, Any]], scatter: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """Every value of each metric the report shows (table rows, scatter), by metric: one unit is
    chosen from them so that the table and the plots agree."""
    out: dict[str, list[Any]] = {}
    for row in rows:
        for o in view.objectives:
            out.setdefault(o.metric or o.name, []).append(row["values"].get(o.name))
        for metric, value in row["metrics"].items():
            out.setdefault(metric, []).append(value)
    for point in scatter:
        for o, value in zip(view.objectives, point["values"], strict=False):
            out.setdefault(o.metric or o.name, []).append(value)
        for metric, value in point["metrics"].items():
            out.setdefault(metric, []).append(value)
    return out


def best_how(view: StudyView, number: int, pick: str | None, *, given: bool = False) -> str:
    """How the report chose its best design and how to export that design: ``StudyView.best``
    with ``pick`` (``StudyView.default_pick`` when none was given), the same as ``export --trial best``."""
    import shlex

    where = f"--storage {shlex.quote(view.storage)} --study {shlex.quote(view.name)}"
    if pick is None:
        return f"{view.pick_how(None, given=given)}; export it with: accel-dse export {where} --trial best"
    return (f"{view.pick_how(pick, given=given)}; export it with: accel-dse export {where} --trial best "
            f"--pick {pick} (or --trial {number})")


def build_report(view: StudyView, *, workload: str | None = None, pick: str | None = None) -> dict[str, Any]:
    """Everything the report shows, JSON-ready.

    Args:
        view: The study.
        workload: Workload of the per-op breakdown and roofline (default: the study's first).
        pick: Which Pareto design is "best" for a multi-objective study (default
            ``StudyView.default_pick``: ``min-edp`` when EDP is recorded, else the first objective in
            its own direction; ``export --trial best`` uses the same default).

    Returns:
        ``study``, ``storage``, ``objectives``, ``constraints``, ``workloads``, ``states``,
        ``n_trials``, ``n_feasible``, ``interrupted``, ``pareto`` (trial numbers), ``top``
        (rows), ``best`` (trial, pick), ``breakdown`` and ``roofline`` (or ``None``), ``history``,
        ``verification`` (trial -> result), ``rtl_failed`` (trial numbers), ``fpga_target``
        (the space's ``[fpga]`` table or ``None``), ``fpga`` (rows of place-and-route results
        recorded by ``verify --fpga``, beside the model's prediction), ``notes``.
    """
    notes: list[str] = []
    states = view.state_counts()
    layers = view.ranked_layers()
    pareto_trials = layers[0] if view.multi_objective and layers else ([layers[0][0]] if layers else [])
    pareto = {t.number for t in pareto_trials} if view.multi_objective else set()
    if view.multi_objective:
        shown = pareto_trials[:_MAX_PARETO_ROWS]
        if len(pareto_trials) > len(shown):
            notes.append(f"Pareto set has {len(pareto_trials)} designs; the table shows the first {len(shown)}")
    else:
        shown = [layer[0] for layer in layers[:TOP_ROWS]]
    top = [_row(view, t, pareto) for t in shown]
    if states.get("RUNNING"):
        notes.append(f"{states['RUNNING']} trial(s) still RUNNING (an interrupted or ongoing sweep): "
                     "the report covers the finished trials")
    best_rule = pick or view.default_pick()
    best_info: dict[str, Any] | None = None
    breakdown = roof = None
    per_workload: list[dict[str, Any]] = []
    if layers:
        try:
            best = view.best(best_rule)
        except AccelDseError as exc:
            if pick is not None:
                raise
            best, best_rule = layers[0][0], None
            notes.append(f"best design: the first Pareto design ({exc})")
        best_info = {"trial": best.number, "pick": best_rule, "row": _row(view, best, pareto),
                     "how": best_how(view, best.number, best_rule, given=pick is not None)}
        specs = [workload] if workload else list(view.workloads)
        if not specs:
            notes.append("the study records no workload: give --workload for the per-op breakdown and roofline")
        for spec in specs:
            try:
                config = trial_config(best, study=f"study {view.name!r}")
                one = per_op_breakdown(config, spec)
                per_workload.append({"workload": spec, "breakdown": one, "roofline": roofline(config, one)})
            except AccelDseError as exc:
                notes.append(f"no per-op breakdown on {spec}: {exc}")
        if per_workload:
            breakdown, roof = per_workload[0]["breakdown"], per_workload[0]["roofline"]
    else:
        notes.append("no feasible COMPLETE trial yet: nothing to rank")
    verification = {str(k): v for k, v in view.verifications().items()}
    rtl_failed = sorted(int(k) for k, v in verification.items() if not v.get("passed", False))
    scatter = _scatter(view)
    top_rows = top + ([best_info["row"]] if best_info else [])
    outcome = trial_outcomes(view.trials(), view.constraints)
    return {
        "study": view.name,
        "storage": view.storage,
        "objectives": [{"name": o.name, "metric": o.metric, "direction": o.direction} for o in view.objectives],
        "constraints": view.constraints,
        "workloads": view.workloads,
        "states": states,
        "outcomes": outcome_words(outcome),
        "n_trials": sum(states.values()),
        "n_feasible": sum(len(layer) for layer in layers),
        "interrupted": bool(states.get("RUNNING")),
        "pareto": sorted(pareto) if view.multi_objective else [],
        "top": top,
        "best": best_info,
        "breakdown": breakdown,
        "roofline": roof,
        "history": _history(view),
        "scatter": scatter,
        "units": report_units(_shown_values(view, top_rows, scatter)),
        "workload_breakdowns": per_workload,
        "verification": verification,
        "rtl_failed": rtl_failed,
        "fpga_target": view.space.get("fpga"),
        "fpga": fpga_rows(verification),
        "notes": notes,
    }


#: Resources compared in :func:`fpga_rows` (the model's names; ECP5 bel types mapped to them).
FPGA_RESOURCES = ("luts", "ffs", "dsps", "brams")


def fpga_rows(verification: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per trial with recorded place-and-route figures: tool vs the resource model.

    Each row: ``trial``, ``family``, ``device``, ``line`` (one line: fits, Fmax, target),
    ``fmax_mhz`` and ``model_fmax_mhz``, ``<resource>`` and ``model_<resource>`` for
    :data:`FPGA_RESOURCES`, ``error`` (the tools failed, else ``""``).
    """
    from accel_dse.export import fpga_line

    def table(value: Any) -> Mapping[str, Any]:
        return value if isinstance(value, Mapping) else {}

    rows = []
    for number, v in verification.items():
        placed = table(v.get("fpga"))
        if not placed:
            continue
        model, used = table(placed.get("model")), table(placed.get("used"))
        error = placed.get("error", "")
        error = error if isinstance(error, str) else str(error)
        try:  # a record another tool or an older accel-dse wrote may hold anything: shown as "-"
            line = "" if error else fpga_line(dict(placed))
        except (KeyError, TypeError, ValueError, AttributeError):
            line = "-"
        rows.append({
            "trial": int(number), "family": _text(placed.get("family")), "device": _text(placed.get("device")),
            "line": line, "error": error,
            "fmax_mhz": _number(placed.get("fmax_mhz")), "model_fmax_mhz": _number(model.get("fmax_mhz")),
            **{r: _number(used.get(r)) for r in FPGA_RESOURCES},
            **{f"model_{r}": _number(model.get(r)) for r in FPGA_RESOURCES},
        })
    return rows


def _number(value: Any) -> int | float | None:
    """A recorded figure if it is a finite number (an integer kept as one), else ``None`` (shown as "-")."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return _finite(value)


def _text(value: Any) -> str | None:
    """A recorded name as text (``None`` when missing)."""
    return None if value is None else str(value)


def _scatter(view: StudyView) -> list[dict[str, Any]]:
    """Objective values and a few metrics of every feasible trial (for the Pareto plots)."""
    out = []
    for t in view.feasible():
        metrics = trial_table(t, "metrics")
        out.append({
            "trial": t.number,
            "values": [float(v) for v in t.values],
            "metrics": {k: _finite(metrics.get(k)) for k in ("area_mm2", "latency_s", "energy_pj", "edp", "power_w")},
        })
    return out
