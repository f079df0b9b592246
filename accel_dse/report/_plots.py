"""The report's PNG figures, drawn with matplotlib's Agg canvas (no display, no pyplot state).

Each function takes the report dict of :func:`accel_dse.report.build_report` and writes one
PNG; with nothing to show (no feasible trial yet) it still writes a figure that says so.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from accel_dse.report._format import axis_scale

__all__ = ["pareto_png", "history_png", "breakdown_png", "roofline_png", "PLOTS"]

_DPI = 110
_GREY, _FRONT, _BEST, _FAIL = "#9aa5b1", "#d1495b", "#edae49", "#000000"


def _figure(width: float, height: float) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=_DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


#: PNG text key holding the axis labels of a figure (JSON: one ``[x label, y label]`` per axes),
#: so that a test or a user can read which unit a plot shows without reading pixels.
AXES_KEY = "accel-dse axes"


def axis_labels(fig: Any) -> list[list[str]]:
    """``[x label, y label]`` of every axes of ``fig`` (sub-figures included) that shows data."""
    return [[ax.get_xlabel(), ax.get_ylabel()] for ax in fig.get_axes() if ax.axison]


def _save(fig: Any, path: Path) -> None:
    import json

    fig.savefig(path, format="png", metadata={AXES_KEY: json.dumps(axis_labels(fig), ensure_ascii=False)})


def _empty(path: Path, title: str, text: str) -> None:
    fig = _figure(6, 3.5)
    ax = fig.add_subplot()
    ax.set_axis_off()
    ax.set_title(title)
    ax.text(0.5, 0.5, text, ha="center", va="center", wrap=True)
    _save(fig, path)


#: A positive axis whose values span this ratio or more is drawn on a log scale.
LOG_RATIO = 10.0


def _maybe_log(ax: Any, axis: str, values: list[float]) -> None:
    """A log scale for an axis whose positive values span :data:`LOG_RATIO` or more, with plain
    tick labels (``2``, ``5``, ``10``, ``20``; never ``3x10⁰`` next to ``4x10⁰``, which overlap)."""
    good = [v for v in values if v is not None and v > 0]
    if len(good) == len(values) and good and max(good) / min(good) >= LOG_RATIO:
        (ax.set_xscale if axis == "x" else ax.set_yscale)("log")
        _log_ticks(ax.xaxis if axis == "x" else ax.yaxis, math.log10(max(good) / min(good)))


def _log_ticks(target: Any, decades: float) -> None:
    """Labelled ticks at 1, 2, 5 x 10^n (a short span) or 10^n only, the minor ticks unlabelled."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    target.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0) if decades <= 2.5 else (1.0,), numticks=8))
    target.set_major_formatter(FuncFormatter(_tick_text))
    target.set_minor_formatter(NullFormatter())


def _tick_text(value: float, _pos: Any = None) -> str:
    """A tick label without scientific notation where it is short (``0.02``, ``500``), else ``1e+06``."""
    if value == 0:
        return "0"
    if 1e-3 <= abs(value) < 1e5:
        return f"{value:.6g}"
    return f"{value:.0e}"


def _front_2d(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    from accel_dse.search import pareto_mask

    return pareto_mask(np.column_stack([x, y]))


def _panel(ax: Any, x: list[float], y: list[float], numbers: list[int], front: np.ndarray, best: int | None,
           failed: set[int], xlabel: str, ylabel: str, *, staircase: bool = True) -> None:
    """One scatter of the designs with the front marked: a staircase for a 2-D front, points only
    (``staircase=False``) for the projection of a front of more objectives, which is no staircase."""
    ax.scatter(x, y, s=14, c=_GREY, label="feasible designs", zorder=1)
    idx = np.flatnonzero(front)
    if idx.size and not staircase:
        ax.scatter(np.asarray(x)[idx], np.asarray(y)[idx], s=26, c=_FRONT, edgecolors="k", linewidths=0.4,
                   label="on the Pareto front of all objectives", zorder=2)
    elif idx.size:
        order = idx[np.argsort(np.asarray(x)[idx], kind="stable")]
        ax.plot(np.asarray(x)[order], np.asarray(y)[order], "-o", c=_FRONT, ms=5, lw=1.2,
                label="Pareto front", zorder=2, drawstyle="steps-post")
    for xi, yi, n in zip(x, y, numbers, strict=True):
        if n == best:
            ax.scatter([xi], [yi], marker="*", s=180, c=_BEST, edgecolors="k", zorder=3, label=f"best (trial {n})")
        if n in failed:
            ax.scatter([xi], [yi], marker="X", s=120, c=_FAIL, zorder=4, label="RTL verification FAILED")
            ax.annotate(f"#{n} RTL FAIL", (xi, yi), textcoords="offset points", xytext=(6, 6), fontsize=8,
                        color="#b00020", weight="bold")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    _maybe_log(ax, "x", x)
    _maybe_log(ax, "y", y)
    ax.grid(True, alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))
    ax.legend(unique.values(), unique.keys(), fontsize=7)


def pareto_png(report: dict[str, Any], path: Path) -> None:
    """Pareto front(s): objective pairs (several objectives) or objective vs area and latency vs energy."""
    fig = pareto_figure(report)
    if fig is None:
        _empty(path, f"Pareto front of {report['study']}",
               "no feasible trial yet" if not report["scatter"] else "trials record no metrics to plot")
        return
    _save(fig, path)


def pareto_figure(report: dict[str, Any]) -> Any:
    """The figure of :func:`pareto_png` (``None`` with nothing to plot).

    Two objectives: their front as a staircase. Three or more: each pair of objectives as a
    projection with the designs on the front of all objectives marked as points (a front of three
    objectives projected on two is no staircase: a design on it may look dominated in a pair).
    """
    points = report["scatter"]
    if not points:
        return None
    units = report.get("units") or {}
    objectives = report["objectives"]
    best = report["best"]["trial"] if report["best"] else None
    failed = set(report["rtl_failed"])
    panels: list[tuple[list[float], list[float], list[int], np.ndarray, str, str]] = []
    numbers = [p["trial"] for p in points]
    if len(objectives) > 1:
        pareto = set(report["pareto"])
        pairs = [(i, j) for i in range(len(objectives)) for j in range(i + 1, len(objectives))][:3]
        for i, j in pairs:
            x = [p["values"][i] for p in points]
            y = [p["values"][j] for p in points]
            front = np.array([n in pareto for n in numbers])
            panels.append((x, y, numbers, front, _label(objectives[i], f"{objectives[i].get('metric')}"),
                           _label(objectives[j], f"{objectives[j].get('metric')}")))
    else:
        o = objectives[0]
        sign = 1.0 if o["direction"] == "minimize" else -1.0
        for mx, my, xl in ((None, "area_mm2", _label(o, f"{o.get('metric')}")), ("latency_s", "energy_pj",
                                                                                 "latency [latency_s]")):
            rows = [p for p in points if (mx is None or p["metrics"].get(mx) is not None)
                    and p["metrics"].get(my) is not None]
            if not rows:
                continue
            x = [p["values"][0] if mx is None else p["metrics"][mx] for p in rows]
            y = [p["metrics"][my] for p in rows]
            xs = np.asarray(x) * (sign if mx is None else 1.0)
            panels.append((x, y, [p["trial"] for p in rows], _front_2d(xs, np.asarray(y)), xl,
                           f"{my.rsplit('_', 1)[0]} [{my}]"))
    if not panels:
        return None
    fig = _figure(5.2 * len(panels), 4.4)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    staircase = len(objectives) <= 2
    for ax, (x, y, nums, front, xl, yl) in zip(axes, panels, strict=True):
        (x, xl), (y, yl) = (_rescaled(v, label, units) for v, label in ((x, xl), (y, yl)))
        _panel(ax, x, y, nums, front, best, failed, xl, yl, staircase=staircase)
    fig.suptitle(f"{report['study']}: {report['n_feasible']} feasible designs"
                 + (f", {len(failed)} FAILED RTL verification" if failed else "")
                 + ("" if staircase else f"\n{len(objectives)} objectives: each pair is a projection; red points are "
                    "on the front of all objectives"))
    return fig


def _rescaled(values: list[float], label: str, units: dict[str, Any] | None = None) -> tuple[list[float], str]:
    """An axis label ``"name [metric] ..."`` (the metric as a placeholder) with its values in the
    report's unit for the metric (``units``)."""
    for metric in _METRIC_OF_LABEL:
        token = f"[{metric}]"
        if token in label:
            scaled, unit = _scaled(metric, values, units)
            return scaled, label.replace(token, f"[{unit}]" if unit else "")
    return values, label


def _unit(metric: str | None, values: list[float] | None = None) -> str:
    return axis_scale(metric, values or [])[1]


def _label(objective: dict[str, Any], unit: str | None = None) -> str:
    unit = _unit(objective.get("metric")) if unit is None else unit
    arrow = "min" if objective["direction"] == "minimize" else "max"
    return f"{objective['name']} [{unit}] ({arrow})" if unit else f"{objective['name']} ({arrow})"


#: Metrics whose axis labels are written ``[metric]`` until the values' unit is known.
_METRIC_OF_LABEL = ("latency_s", "energy_pj", "area_mm2", "edp", "power_w", "tops_per_w", "tops", "utilization")


def _scaled(metric: str | None, values: list[float], units: dict[str, Any] | None = None
            ) -> tuple[list[float], str]:
    """``values`` in the unit the report shows ``metric`` in (mJ, ms, ...), and that unit."""
    divide, unit = axis_scale(metric, values, units)
    return [v / divide if v is not None else v for v in values], unit


def history_png(report: dict[str, Any], path: Path) -> None:
    """Objective value of every COMPLETE trial by trial number, per sampler, with its best so far."""
    history = report["history"]
    by_sampler = history["by_sampler"]
    if not by_sampler:
        _empty(path, f"Optimisation history of {report['study']}", "no COMPLETE trial yet")
        return
    objectives = report["objectives"]
    fig = _figure(7.5, 3.2 * len(objectives))
    axes = fig.subplots(len(objectives), 1, squeeze=False)[:, 0]
    colors = ["#00798c", "#d1495b", "#edae49", "#66a182", "#2e4057", "#8d96a3", "#7b2cbf"]
    for k, (ax, o) in enumerate(zip(axes, objectives, strict=True)):
        better = min if o["direction"] == "minimize" else max
        all_values = []
        divide, unit = axis_scale(o.get("metric"), [r[1 + k] for rows in by_sampler.values() for r in rows],
                                  report.get("units"))
        for c, (sampler, rows) in enumerate(sorted(by_sampler.items())):
            color = colors[c % len(colors)]
            numbers = [r[0] for r in rows]
            values = [r[1 + k] / divide for r in rows]
            feasible = [bool(r[-1]) for r in rows]
            all_values += values
            ax.scatter([n for n, f in zip(numbers, feasible, strict=True) if f],
                       [v for v, f in zip(values, feasible, strict=True) if f], s=12, color=color,
                       label=f"{sampler} ({len(rows)} trials)")
            ax.scatter([n for n, f in zip(numbers, feasible, strict=True) if not f],
                       [v for v, f in zip(values, feasible, strict=True) if not f], s=12, facecolors="none",
                       edgecolors=color)
            best_x, best_y, current = [], [], None
            for n, v, f in zip(numbers, values, feasible, strict=True):
                if f:
                    current = v if current is None else better(current, v)
                if current is not None:
                    best_x.append(n)
                    best_y.append(current)
            if best_x:
                ax.step(best_x, best_y, where="post", color=color, lw=1.5)
        ax.set_ylabel(_label(o, unit))
        _maybe_log(ax, "y", all_values)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    axes[-1].set_xlabel("trial number (hollow: breaks a constraint; line: best so far per sampler)")
    fig.suptitle(f"Optimisation history of {report['study']}")
    _save(fig, path)


def _breakdowns(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Each workload's ``{"workload", "breakdown", "roofline"}`` (every workload of the study)."""
    found = report.get("workload_breakdowns")
    if found:
        return list(found)
    if report.get("breakdown"):
        return [{"workload": report["breakdown"]["workload"], "breakdown": report["breakdown"],
                 "roofline": report.get("roofline")}]
    return []


def breakdown_png(report: dict[str, Any], path: Path, *, limit: int = 30) -> None:
    """Per-op cycles (compute + stall) and energy share of the best design, one row of panels per workload."""
    shown = [w["breakdown"] for w in _breakdowns(report) if w["breakdown"]["ops"]]
    if not shown:
        _empty(path, "Per-op breakdown", "no best design or workload to break down")
        return
    heights = [max(3.0, 0.28 * min(len(bd["ops"]), limit) + 1.5) for bd in shown]
    fig = _figure(11, sum(heights))
    subfigs = fig.subfigures(len(shown), 1, height_ratios=heights, squeeze=False)[:, 0]
    for sub, bd in zip(subfigs, shown, strict=True):
        _breakdown_panels(sub, bd, limit)
    _save(fig, path)


def _breakdown_panels(fig: Any, bd: dict[str, Any], limit: int) -> None:
    ops = sorted(bd["ops"], key=lambda op: op["total_cycles"], reverse=True)[:limit][::-1]
    names = [op["name"] or "op" for op in ops]
    y = np.arange(len(ops))
    ax1, ax2 = fig.subplots(1, 2, sharey=True)
    compute = [op["compute_cycles"] for op in ops]
    stall = [op["stall_cycles"] for op in ops]
    ax1.barh(y, compute, color="#00798c", label="compute")
    ax1.barh(y, stall, left=compute, color="#d1495b", label="stall (DRAM)")
    for yi, op in zip(y, ops, strict=True):
        ax1.text(op["total_cycles"], yi, f" {op['utilization']:.0%}", va="center", fontsize=7)
    ax1.set_yticks(y, names, fontsize=7)
    ax1.set_xlabel("cycles (label: utilisation)")
    ax1.legend(fontsize=7)
    ax2.barh(y, [100 * op["energy_share"] for op in ops], color="#edae49")
    ax2.set_xlabel("share of workload energy [%]")
    for ax in (ax1, ax2):
        ax.grid(True, axis="x", alpha=0.3)
    more = f" (top {limit} of {len(bd['ops'])} ops by cycles)" if len(bd["ops"]) > limit else ""
    fig.suptitle(f"{bd['short_name']} on {bd['workload']}{more}")


#: Ops named in the roofline's legend at most (the rest share one grey "other ops" entry).
ROOFLINE_NAMED = 16
_MARKERS = "os^Dv<>pPhX*"


def roofline_png(report: dict[str, Any], path: Path) -> None:
    """Roofline of the best design: MACs/cycle against MACs per DRAM byte, one point per op.

    Points carry no text labels (they overlap where ops sit together): each of the
    :data:`ROOFLINE_NAMED` ops with the most cycles has its own marker and colour in a legend
    beside the axes, the others share one grey entry.
    """
    shown = [w for w in _breakdowns(report) if w.get("roofline") and w["roofline"]["points"]]
    if not shown:
        _empty(path, "Roofline", "no best design or workload to place on the roofline")
        return
    fig = _figure(9.5, 4.8 * len(shown))
    for ax, one in zip(fig.subplots(len(shown), 1, squeeze=False)[:, 0], shown, strict=True):
        _roofline_axes(ax, one["roofline"], one["breakdown"])
    _save(fig, path)


def _roofline_axes(ax: Any, roof: dict[str, Any], bd: dict[str, Any]) -> None:
    peak, bw = roof["peak_macs_per_cycle"], roof["dram_bytes_per_cycle"]
    pts = [p for p in roof["points"] if p["intensity"] is not None and p["macs_per_cycle"] > 0]
    xs = [p["intensity"] for p in pts] or [roof["ridge_macs_per_byte"]]
    lo = min(min(xs), roof["ridge_macs_per_byte"]) / 4
    hi = max(max(xs), roof["ridge_macs_per_byte"]) * 4
    grid = np.geomspace(lo, hi, 200)
    ax.plot(grid, np.minimum(peak, bw * grid), c="k", lw=1.5, label=f"roof: {peak:,} MACs/cycle, {bw:g} B/cycle")
    ax.axvline(roof["ridge_macs_per_byte"], c="#8d96a3", ls=":", lw=1)
    cycles = {op["name"]: op["total_cycles"] for op in bd.get("ops", [])}
    ranked = sorted(range(len(pts)), key=lambda i: -cycles.get(pts[i]["name"], 0.0))
    named = set(ranked[:ROOFLINE_NAMED]) if len(pts) > ROOFLINE_NAMED + 1 else set(ranked)
    colors = _palette(len(named))
    for rank, i in enumerate(i for i in ranked if i in named):
        p = pts[i]
        ax.scatter([p["intensity"]], [p["macs_per_cycle"]], s=30, zorder=3, color=colors[rank],
                   marker=_MARKERS[rank % len(_MARKERS)], edgecolors="k", linewidths=0.4, label=p["name"])
    rest = [pts[i] for i in ranked if i not in named]
    if rest:
        ax.scatter([p["intensity"] for p in rest], [p["macs_per_cycle"] for p in rest], s=14, zorder=2,
                   color=_GREY, label=f"{len(rest)} other ops")
    ax.set_xscale("log")
    ax.set_yscale("log")
    _log_ticks(ax.xaxis, math.log10(hi / lo))
    ys = [p["macs_per_cycle"] for p in pts] or [peak]
    _log_ticks(ax.yaxis, math.log10(2 * peak / min(min(ys), bw * lo)))
    ax.set_xlabel("arithmetic intensity [MACs per DRAM byte]")
    ax.set_ylabel("performance [MACs per cycle]")
    ax.set_ylim(top=peak * 2)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=6.5, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0,
              title=f"ops by cycles{f' (top {ROOFLINE_NAMED} named)' if rest else ''}", title_fontsize=7)
    peak_tops = 2 * peak * roof["clock_mhz"] * 1e6 / 1e12
    ax.set_title(f"Roofline of {bd['short_name']} on {bd['workload']} (peak {peak_tops:.3g} TOPS)")
    if math.isfinite(roof["ridge_macs_per_byte"]):
        ax.text(roof["ridge_macs_per_byte"], peak * 1.15, " ridge", fontsize=7, color="#555")


def _palette(n: int) -> list[Any]:
    from matplotlib import colormaps

    cmap = colormaps["tab20"] if n > 10 else colormaps["tab10"]
    return [cmap(i % cmap.N) for i in range(n)]


#: File name -> drawing function, in the order the HTML page shows them.
PLOTS = {
    "pareto.png": pareto_png,
    "history.png": history_png,
    "breakdown.png": breakdown_png,
    "roofline.png": roofline_png,
}
