"""The report's ``index.html``: tables and the PNG figures, plus Optuna's interactive plots if plotly is installed."""

from __future__ import annotations

import html
import importlib.util
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from accel_dse.report._data import FPGA_RESOURCES
from accel_dse.report._format import header, metric_column
from accel_dse.units import fixed

__all__ = ["html_page", "plotly_available", "optuna_figures"]

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
th { background: #f0f2f5; } td.text { text-align: left; }
.fail { background: #b00020; color: white; padding: 0.8em 1em; font-weight: bold; border-radius: 4px; }
.note { background: #fff6d5; padding: 0.5em 1em; border-radius: 4px; }
tr.rtlfail td { background: #ffd6dc; }
img { max-width: 100%; border: 1px solid #ddd; margin: 0.5em 0; }
"""


def plotly_available() -> bool:
    """Whether plotly is installed (then Optuna's interactive plots are added to the page)."""
    return importlib.util.find_spec("plotly") is not None


def _value(index: int) -> Callable[[Any], float]:
    """Optuna ``target``: objective ``index`` of a trial."""

    def target(trial: Any) -> float:
        return float(trial.values[index])

    return target


def optuna_figures(study: Any, objective_names: Sequence[str]) -> list[tuple[str, str]]:
    """Optuna's Pareto-front and history plots as HTML fragments (plotly); empty without plotly."""
    if not plotly_available():
        return []
    import optuna.visualization as vis

    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            if len(objective_names) > 1:
                fig = vis.plot_pareto_front(study, target_names=list(objective_names))
                out.append(("Pareto front (Optuna)", fig.to_html(full_html=False, include_plotlyjs="cdn")))
                for i, name in enumerate(objective_names):
                    fig = vis.plot_optimization_history(study, target=_value(i), target_name=name)
                    out.append((f"History of {name} (Optuna)", fig.to_html(full_html=False, include_plotlyjs="cdn")))
            else:
                fig = vis.plot_optimization_history(study, target_name=objective_names[0])
                out.append(("Optimisation history (Optuna)", fig.to_html(full_html=False, include_plotlyjs="cdn")))
        except Exception as exc:  # noqa: BLE001 - interactive extras must never break the report
            out.append(("Optuna plots", f"<p class='note'>not drawn: {html.escape(str(exc))}</p>"))
    return out


def _cell(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, int):
        return f"{value:,}"
    return html.escape("" if value is None else str(value))


_TEXT = " class='text'"


class Num(str):
    """A number already formatted for its column (right-aligned like numbers)."""


def _columns(columns: Sequence[tuple[str, str | None, Sequence[Any]]],
             units: dict[str, Any] | None = None) -> tuple[list[str], list[list[Any]]]:
    """Headers and rows from ``(title, metric, values)`` columns: a metric's column in the report's
    unit for it (``units``) and one number format (:func:`~accel_dse.report._format.metric_column`),
    others as given."""
    headers, cells = [], []
    for title, metric, values in columns:
        if metric is None:
            headers.append(title)
            cells.append(list(values))
            continue
        unit, text = metric_column(metric, values, units)
        headers.append(header(title, unit))
        cells.append([Num(t) for t in text])
    return headers, [list(r) for r in zip(*cells, strict=True)]


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]], classes: Sequence[str] = ()) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = []
    for i, row in enumerate(rows):
        cls = f" class='{classes[i]}'" if i < len(classes) and classes[i] else ""
        cells = "".join(f"<td{_TEXT if isinstance(v, str) and not isinstance(v, Num) else ''}>{_cell(v)}</td>"
                        for v in row)
        body.append(f"<tr{cls}>{cells}</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def _rtl_text(rtl: dict[str, Any] | None) -> str:
    if not rtl:
        return ""
    if rtl.get("passed"):
        return f"pass ({rtl.get('cycles_rtl', '?')} cycles)"
    return f"FAIL: {rtl.get('reason', '')}"


def html_page(report: dict[str, Any], images: Sequence[str], extras: Sequence[tuple[str, str]] = ()) -> str:
    """The whole page for ``report`` showing ``images`` (file names beside it) and ``extras`` (HTML)."""
    e = html.escape
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>accel-dse report: {e(report['study'])}"
             f"</title><style>{_STYLE}</style></head><body>"]
    parts.append(f"<h1>Study {e(report['study'])}</h1>")
    objectives = ", ".join(f"{o['direction']} {o['name']}" for o in report["objectives"])
    states = ", ".join(report["outcomes"])
    parts.append(f"<p>Storage <code>{e(report['storage'])}</code>; objectives: {e(objectives)}; constraints: "
                 f"{e(', '.join(report['constraints']) or 'none')}; workloads: {e(', '.join(report['workloads']))}"
                 f".<br>{report['n_trials']} trials: {e(states)}.</p>")
    if report["rtl_failed"]:
        failed = ", ".join(f"#{n}" for n in report["rtl_failed"])
        parts.append(f"<p class='fail'>RTL VERIFICATION FAILED for trial(s) {e(failed)}: the model's design does "
                     "not compute correctly (or in the predicted cycles) in RTL simulation. Do not export them "
                     "without looking.</p>")
    for note in report["notes"]:
        parts.append(f"<p class='note'>{e(note)}</p>")
    top = report["top"]
    title = "Pareto set" if len(report["objectives"]) > 1 else "Top designs"
    parts.append(f"<h2>{title}</h2>")
    if top:
        metrics = [("area", "area_mm2"), ("latency", "latency_s"), ("energy", "energy_pj"), ("TOPS/W", "tops_per_w"),
                   ("utilisation", "utilization")]
        shown = {o.get("metric") for o in report["objectives"]}
        headers, rows = _columns([
            ("trial", None, [r["trial"] for r in top]), ("design", None, [r["design"] for r in top]),
            ("DRAM", None, [r.get("dram", "") for r in top]),
            *[(o["name"], o.get("metric"), [r["values"].get(o["name"]) for r in top]) for o in report["objectives"]],
            *[(title, m, [r["metrics"].get(m) for r in top]) for title, m in metrics if m not in shown],
            ("sampler", None, [r["sampler"] for r in top]), ("RTL", None, [_rtl_text(r["rtl"]) for r in top]),
            ("config_hash", None, [r["config_hash"] or "" for r in top]),
        ], report.get("units"))
        classes = ["rtlfail" if r["rtl"] and not r["rtl"].get("passed") else "" for r in top]
        parts.append(_table(headers, rows, classes))
        if report["best"]:
            parts.append(f"<p>Best design: trial {report['best']['trial']}, {e(report['best']['how'])}.</p>")
    else:
        parts.append("<p>No feasible design yet.</p>")
    for image in images:
        parts.append(f"<h2>{e(image.rsplit('.', 1)[0].capitalize())}</h2><img src='{e(image)}' alt='{e(image)}'>")
    for one in report.get("workload_breakdowns") or ([{"breakdown": report["breakdown"]}] if report.get("breakdown")
                                                     else []):
        parts.append(_op_table(one["breakdown"]))
    if report["verification"]:
        parts.append("<h2>RTL verification</h2>")
        headers = ["trial", "passed", "simulator", "workload", "mode", "scale", "runs simulated", "cycles_rtl",
                   "cycles_model", "cells", "transistors", "reason"]
        rows, classes = [], []
        for number, v in report["verification"].items():
            synth = v.get("synth") or {}
            rows.append([int(number), "PASS" if v.get("passed") else "FAIL", v.get("simulator"), v.get("workload"),
                         v.get("mode", "exhaustive"), v.get("scale"),
                         f"{v.get('runs_simulated')}/{v.get('runs_total')}" if v.get("runs_total") else None,
                         v.get("cycles_rtl"), v.get("cycles_model"), synth.get("cells"),
                         synth.get("transistors"), v.get("reason", "")])
            classes.append("" if v.get("passed") else "rtlfail")
        parts.append(_table(headers, rows, classes))
    if report.get("fpga"):
        parts.append("<h2>FPGA place and route (nextpnr vs the resource model)</h2>")
        headers = ["trial", "result", "fmax_mhz", "model", *[f"{r} / model" for r in FPGA_RESOURCES]]
        rows = [[f["trial"], f["error"] and f"FAILED: {f['error']}" or f["line"], f["fmax_mhz"], f["model_fmax_mhz"],
                 *[f"{f[r]} / {f['model_' + r]}" for r in FPGA_RESOURCES]] for f in report["fpga"]]
        parts.append(_table(headers, rows))
    for title, fragment in extras:
        parts.append(f"<h2>{e(title)}</h2>{fragment}")
    parts.append("<p><small>accel-dse report; data in report.json</small></p></body></html>")
    return "\n".join(parts) + "\n"


def _op_table(bd: dict[str, Any]) -> str:
    """The per-op table of one workload's breakdown, with its heading."""
    e = html.escape
    parts = []
    parts.append(f"<h2>Per-op breakdown: {e(bd['short_name'])} on {e(bd['workload'])}</h2>")
    ops = bd["ops"]
    headers, rows = _columns([
        ("op", None, [op["name"] for op in ops]), ("count", None, [op["count"] for op in ops]),
        ("instances", None, [op.get("instances", op["count"]) for op in ops]),
        ("m", None, [op["gemm"]["m"] for op in ops]), ("k", None, [op["gemm"]["k"] for op in ops]),
        ("n", None, [op["gemm"]["n"] for op in ops]),
        ("cycles", "total_cycles", [op["total_cycles"] for op in ops]),
        ("compute", "compute_cycles", [op["compute_cycles"] for op in ops]),
        ("stall", "stall_cycles", [op["stall_cycles"] for op in ops]),
        ("utilisation", "utilization", [op["utilization"] for op in ops]),
        *[(f"{what} share", "utilization", [op[f"{what}_share"] for op in ops]) for what in ("stall", "cycle",
                                                                                          "energy")],
    ])
    intensity = fixed([op["intensity_macs_per_byte"] for op in ops])
    headers.append("MACs/byte")
    rows = [[*row, Num(i)] for row, i in zip(rows, intensity, strict=True)]
    parts.append(_table(headers, rows))
    return "\n".join(parts)
