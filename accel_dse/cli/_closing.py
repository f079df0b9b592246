"""The sweep's closing summary: what was scored, the best designs in engineering units, what to run next.

Its lines fit in :data:`WIDTH` columns: the workload with its options, the objectives and
constraints, the best feasible designs (latency ms, energy mJ, TOPS, TOPS/W, area mm²,
utilisation %, the objective) and their settings, the trials that did not make it (infeasible
designs by reason, constraint breaks by constraint, apart from real failures), and the
``report`` and ``export`` commands with the study's storage and name filled in.
"""

from __future__ import annotations

import re
import shlex
import textwrap
from collections.abc import Sequence
from typing import Any

from accel_dse.cli._output import format_table
from accel_dse.search import METRIC_UNITS
from accel_dse.trial_outcomes import outcome_words, reason_key, trial_outcomes
from accel_dse.units import METRIC_DISPLAY, fixed, metric_scale, text_header

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

#: The metric columns of the best designs: (metric, label). Each column's unit is
#: :func:`accel_dse.units.metric_scale`'s, the one the report, ``evaluate`` and ``export`` show.
_METRIC_COLUMNS: tuple[tuple[str, str], ...] = (
    ("latency_s", "latency"),
    ("energy_pj", "energy"),
    ("tops", "TOPS"),
    ("tops_per_w", "TOPS/W"),
    ("area_mm2", "area"),
    ("utilization", "util"),
)
#: Objective metrics already in the metric columns (no second column for them).
_SHOWN = {m for m, _ in _METRIC_COLUMNS}


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


def _number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _column(headers: list[str], columns: list[list[Any]], label: str, metric: str | None,
            values: Sequence[Any]) -> None:
    """Append one column of a metric's stored values: in its display unit where it has one
    (:func:`accel_dse.units.metric_scale`, the unit the report, ``evaluate`` and ``export`` show),
    else as recorded with the search's unit in the label."""
    stored = METRIC_UNITS.get(metric or "", "")
    if label == metric:  # a metric's own name: its stored unit's suffix goes (power_w -> power)
        label = re.sub(r"_(s|pj|w|mm2|mhz|db)$", "", label)
    if metric in METRIC_DISPLAY:
        divide, unit = metric_scale(metric, [v for v in values if _number(v)])
        headers.append(text_header(label, unit))
        columns.append(fixed([float(v) / divide if _number(v) else v for v in values]))
        return
    headers.append(label if stored in ("", "fraction") else text_header(label, stored))
    columns.append(fixed(list(values)))


def _metric_table(best: Sequence[dict[str, Any]], space: Any) -> tuple[list[str], list[list[Any]]]:
    headers = ["trial", "design"]
    columns: list[list[Any]] = [[b["trial"] for b in best],
                                [f"{b['design']['rows']}x{b['design']['cols']}-{b['design']['dataflow']}"
                                 if isinstance(b.get("design"), dict) else "" for b in best]]
    for metric, label in _METRIC_COLUMNS:
        _column(headers, columns, label, metric, [b["metrics"].get(metric) for b in best])
    for o in space.objectives:
        if o.metric in _SHOWN:
            continue
        _column(headers, columns, o.name.upper() if o.name == "edp" else o.name, o.metric,
                [b["values"].get(o.name) for b in best])
    shown = _SHOWN | {o.metric for o in space.objectives}
    extra = [c.metric for c in space.constraints if c.metric not in shown]
    if any(p.field == "checksum" for p in space.free_params):  # the option's coverage beside its cost
        extra.insert(0, "sdc_coverage")
    for metric in dict.fromkeys(extra):
        _column(headers, columns, metric, metric, [b["metrics"].get(metric) for b in best])
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
        lines.append("  infeasible designs (the design cannot run the workload; not errors), by kind, one example "
                     "each:")
        for kind, n in outcome["infeasible"].most_common():
            number, reason = outcome["examples"][kind]
            alike = f"; {n - 1} more of this kind" if n > 1 else ""
            lines += _wrap(f"{reason.removeprefix('infeasible: ')} (trial {number}{alike})", " " * 10,
                           first=f"    {n:4d}  ")
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

