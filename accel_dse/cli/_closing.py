"""The sweep's closing summary: what was scored, the best designs in engineering units, what to run next.

Its lines fit in :data:`WIDTH` columns: the workload with its options, the objectives and
constraints, the best feasible designs (latency ms, energy mJ, TOPS, TOPS/W, area mm²,
utilisation %, the objective) and their settings, the trials that did not make it (infeasible
designs by reason, constraint breaks by constraint, apart from real failures), and the
``report`` and ``export`` commands with the study's storage and name filled in.
"""

from __future__ import annotations

import shlex
import textwrap
from collections.abc import Sequence
from typing import Any

from accel_dse.cli._output import format_table
from accel_dse.search import METRIC_UNITS
from accel_dse.trial_outcomes import outcome_words, reason_key, trial_outcomes
from accel_dse.units import column_scale, fixed

__all__ = ["WIDTH", "closing_lines", "trial_outcomes", "reason_key", "workload_line", "wrap_table"]

#: The widest line the summary prints.
WIDTH = 100

#: Short column labels of the design fields (the unit in the label).
FIELD_LABELS = {
    "rows": "rows", "cols": "cols", "dataflow": "flow", "input_bits": "bits", "acc_bits": "acc bits",
    "ifmap_sram_kib": "ifmap KiB", "weight_sram_kib": "weight KiB", "ofmap_sram_kib": "ofmap KiB",
    "dram_bytes_per_cycle": "DRAM B/cycle", "clock_mhz": "clock MHz", "double_buffered": "dbuf",
    "shadow_stationary": "shadow", "tech_nm": "node nm", "dram": "DRAM part", "checksum": "checksum",
    "vector_unit": "vector unit",
}

#: The metric columns of the best designs: (metric, base unit, label, scale of the base unit).
#: ``None`` as the base unit: a plain number in the label's unit.
_METRIC_COLUMNS: tuple[tuple[str, str | None, str, float], ...] = (
    ("latency_s", "s", "latency", 1.0),
    ("energy_pj", "J", "energy", 1e-12),
    ("tops", None, "TOPS", 1.0),
    ("tops_per_w", None, "TOPS/W", 1.0),
    ("area_mm2", None, "area mm²", 1.0),
    ("utilization", None, "util %", 100.0),
)
#: Objective metrics already in the metric columns (no second column for them).
_SHOWN = {m for m, *_ in _METRIC_COLUMNS}
#: Objective metrics shown in an SI-prefixed unit: metric -> (base unit, factor to it).
_OBJECTIVE_UNITS = {"edp": ("J·s", 1.0), "power_w": ("W", 1.0)}


def workload_line(spec: str, weight: float, n_workloads: int) -> tuple[str, str]:
    """``("resnet18 (batch=1, res=224, classes=1000)", its description)``, the weight added when
    there are several workloads (the description is empty for a user's function or a file)."""
    import workloads

    try:
        found = workloads.builtin_settings(spec)
    except Exception:  # noqa: BLE001 - a spec the sweep resolved anyway: show it as given
        found = None
    text = spec if found is None else f"{found[0]} ({', '.join(f'{k}={v}' for k, v in found[1].items())})"
    description = "" if found is None else workloads.builtin_descriptions().get(found[0], "")
    if n_workloads > 1:
        text += f", weight {weight:g}"
    return text, description


def wrap_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], *, keep: int = 1,
               width: int = WIDTH, indent: str = "  ") -> list[str]:
    """``format_table`` split into column groups that each fit ``width`` (the first ``keep`` columns
    repeat in every group)."""
    groups: list[list[int]] = []
    current: list[int] = []
    for i in range(keep, len(headers)):
        trial = list(range(keep)) + current + [i]
        text = format_table([headers[j] for j in trial], [[r[j] for j in trial] for r in rows])
        if current and max(len(indent + line) for line in text.splitlines()) > width:
            groups.append(current)
            current = [i]
        else:
            current.append(i)
    if current or not groups:
        groups.append(current)
    lines: list[str] = []
    for n, group in enumerate(groups):
        cols = list(range(keep)) + group
        if n:
            lines.append("")
        text = format_table([headers[j] for j in cols], [[r[j] for j in cols] for r in rows])
        lines += [indent + line for line in text.splitlines()]
    return lines


def _metric_table(best: Sequence[dict[str, Any]], space: Any) -> tuple[list[str], list[list[Any]]]:
    headers = ["trial", "design"]
    columns: list[list[Any]] = [[b["trial"] for b in best],
                                [f"{b['design']['rows']}x{b['design']['cols']}-{b['design']['dataflow']}"
                                 if isinstance(b.get("design"), dict) else "" for b in best]]
    for metric, unit, label, factor in _METRIC_COLUMNS:
        raw = [b["metrics"].get(metric) for b in best]
        values = [None if v is None else float(v) * factor for v in raw]
        if unit is not None:
            scale = column_scale(values, unit, highest=1.0)
            values = [None if v is None else v / scale.factor for v in values]
            label = f"{label} {scale.unit}"
        headers.append(label)
        columns.append(fixed(values))
    for o in space.objectives:
        if o.metric in _SHOWN:
            continue
        unit, factor = _OBJECTIVE_UNITS.get(o.metric, ("", 1.0))
        values = [None if (v := b["values"].get(o.name)) is None else float(v) * factor for b in best]
        headers.append(o.name.upper() if o.name == "edp" else o.name)
        if unit:
            objective_scale = column_scale(values, unit)
            values = [None if v is None else v / objective_scale.factor for v in values]
            headers[-1] += f" {objective_scale.unit}"
        columns.append(fixed(values))
    shown = _SHOWN | {o.metric for o in space.objectives}
    extra = [c.metric for c in space.constraints if c.metric not in shown]
    if any(p.field == "checksum" for p in space.free_params):  # the option's coverage beside its cost
        extra.insert(0, "sdc_coverage")
    for metric in dict.fromkeys(extra):
        values = [b["metrics"].get(metric) for b in best]
        unit = METRIC_UNITS.get(metric, "")
        label = metric.removesuffix(f"_{unit.lower()}")
        headers.append(label if unit in ("", "fraction") or label == metric else f"{label} {unit}")
        columns.append(fixed(values))
    rows = [list(r) for r in zip(*columns, strict=True)]
    return headers, rows


def _settings_table(best: Sequence[dict[str, Any]], space: Any) -> tuple[list[str], list[list[Any]]]:
    free = [p.field for p in space.free_params]
    headers = ["trial", *[FIELD_LABELS.get(f, f) for f in free]]
    rows = []
    for b in best:
        row: list[Any] = [b["trial"]]
        for f in free:
            v = b["params"].get(f, "")
            if isinstance(v, bool):
                v = "yes" if v else "no"
            elif isinstance(v, float) and v.is_integer():
                v = int(v)
            row.append(v)
        rows.append(row)
    return headers, rows


def _wrap(text: str, indent: str, *, first: str = "") -> list[str]:
    """``text`` wrapped at :data:`WIDTH`, the first line after ``first``, the others after ``indent``."""
    return textwrap.wrap(text, WIDTH, initial_indent=first, subsequent_indent=indent,
                         break_long_words=False, break_on_hyphens=False) or [first.rstrip()]


def next_commands(storage: str, study: str, out_dir: str | None, trial: int | None) -> list[list[str]]:
    """The ``report`` and ``export`` commands for this study (paths under the run directory), each
    as its words, an option with its value as one word."""
    base = [f"--storage {shlex.quote(storage)}", f"--study {shlex.quote(study)}"]
    where = out_dir or "."
    commands = [["accel-dse report", *base, f"--out {shlex.quote(f'{where}/report')}"]]
    if trial is not None:
        commands.append(["accel-dse export", *base, f"--trial {trial}",
                         f"--out {shlex.quote(f'{where}/design-{trial}')}"])
    return commands


def _command_lines(words: Sequence[str]) -> list[str]:
    """A shell command in lines of at most :data:`WIDTH` columns, continued with ``\\``."""
    lines, current = [], "  "
    for word in words:
        if current.strip() and len(current) + 1 + len(word) + 2 > WIDTH:
            lines.append(current + " \\")
            current = "      "
        current += ("" if not current.strip() else " ") + word
    lines.append(current)
    return lines


def closing_lines(summary: dict[str, Any], space: Any, trials: Sequence[Any], *, ran: int,
                  out_dir: str | None, shown: int = 20) -> list[str]:
    """The closing summary, line by line (each at most :data:`WIDTH` columns where it can be).

    Args:
        summary: :func:`accel_dse.search.summary_dict` of the study.
        space: The design space searched.
        trials: Every trial of the study (``FrozenTrial``).
        ran: Trials this run added.
        out_dir: The run directory (the next commands write under it).
        shown: Best designs shown at most.
    """
    lines = [f"study {summary['study']!r} in {summary['storage']}"]  # a long path is one word: not wrapped
    for w in space.workloads:
        text, description = workload_line(w.spec, w.weight, len(space.workloads))
        lines += _wrap(f"workload: {text}", "  ")
        if description:
            lines += _wrap(description, "  ", first="  ")
    objectives = ", ".join(f"{o.direction} {o.name}" for o in space.objectives)
    constraints = ", ".join(str(c) for c in space.constraints) or "none"
    lines.append(f"objective{'s' if len(space.objectives) > 1 else ''}: {objectives}; constraints: {constraints}")
    outcome = trial_outcomes(trials, space.constraints)
    parts = outcome_words(outcome)
    lines.append(f"trials: {len(trials)} ({ran} this run): " + ", ".join(parts))
    if ran == 0 and trials:  # a re-run of the same command: --trials is the study's total, already reached
        lines.append(f"  the study already holds its {len(trials)} trials (--trials is the study's total): "
                     f"--trials {2 * len(trials)} continues it")
    if outcome["constraint"]:
        lines.append("  broke (scored, not shown below): "
                     + ", ".join(f"{c} x{n}" for c, n in outcome["constraint"].most_common()))
    if outcome["infeasible"]:
        lines.append("  infeasible designs (the design cannot run the workload; not errors):")
        for reason, n in outcome["infeasible"].most_common():
            lines += _wrap(reason.removeprefix("infeasible: "), " " * 10, first=f"    {n:4d}  ")
    if outcome["failed"]:
        lines.append("  FAILED (errors, not design results; see the trials' reason attribute):")
        lines += [f"    {n:4d}  {status}" for status, n in outcome["failed"].most_common()]
    best = summary["best"]
    lines.append("")
    if not best:
        lines.append("no feasible design yet (every trial failed or broke a constraint)")
    else:
        title = "Pareto set" if space.is_multi_objective else "best designs"
        more = f", first {shown} of {len(best)} (--json for all)" if len(best) > shown else ""
        order = "" if space.is_multi_objective else f" by {space.objectives[0].name}"
        lines.append(f"{title}{order}{more}:")
        headers, rows = _metric_table(best[:shown], space)
        lines += wrap_table(headers, rows, keep=1)
        lines.append("")
        lines.append("their settings:")
        headers, rows = _settings_table(best[:shown], space)
        lines += wrap_table(headers, rows, keep=1)
    lines.append("")
    lines.append("next:")
    trial = best[0]["trial"] if best else None
    for command in next_commands(summary["storage"], summary["study"], out_dir, trial):
        lines += _command_lines(command)
    return lines

