"""``write_report``: the report's files, written atomically into a new directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from accel_dse.report._data import build_report
from accel_dse.report._html import html_page, optuna_figures
from accel_dse.report._plots import PLOTS
from accel_dse.study_view import StudyView

__all__ = ["write_report"]


def write_report(
    view: StudyView, out: str | Path, *, workload: str | None = None, pick: str | None = None, force: bool = False,
) -> dict[str, Any]:
    """Write ``pareto.png``, ``history.png``, ``breakdown.png``, ``roofline.png``, ``report.json`` and
    ``index.html`` for ``view`` into the new directory ``out`` (atomically: all or nothing).

    Returns:
        The report dict (:func:`build_report`) with ``out`` and ``files`` added.

    Raises:
        ExportError: ``out`` is a file, not writable, or non-empty without ``force``.
    """
    from accel_dse.output_dir import atomic_dir, check_out_dir, json_text

    final = check_out_dir(out, force=force)
    report = build_report(view, workload=workload, pick=pick)
    files = [*PLOTS, "report.json", "index.html"]
    report["out"] = str(final)
    report["files"] = files
    with atomic_dir(final, kind="report", force=force) as tmp:
        for name, draw in PLOTS.items():
            draw(report, tmp / name)
        (tmp / "report.json").write_text(json_text(report), encoding="utf-8")
        extras = optuna_figures(view.study, [o["name"] for o in report["objectives"]])
        (tmp / "index.html").write_text(html_page(report, list(PLOTS), extras), encoding="utf-8")
    return report
