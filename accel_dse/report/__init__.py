"""Reports on sweep studies: Pareto fronts, top designs, per-op breakdown, roofline, history.

:func:`load_study` opens a study read-only from any storage (:class:`StudyView`: objectives,
feasible trials ranked Pareto-first, ``--trial``/``--pick`` resolution, RTL verification
results); :func:`build_report` gathers the report's data and :func:`write_report` writes its
PNGs (matplotlib, Agg), ``report.json`` and ``index.html`` into a new directory.
"""

from __future__ import annotations

from accel_dse.report._data import build_report, per_op_breakdown, roofline, sampler_of
from accel_dse.report._format import metric_column
from accel_dse.report._pod_plot import system_breakdown_png
from accel_dse.report._write import write_report
from accel_dse.study_view import (
    VERIFY_ATTR_PREFIX,
    ObjectiveInfo,
    StudyView,
    load_study,
    pick_choices,
    trial_config,
)

__all__ = [
    "build_report",
    "write_report",
    "per_op_breakdown",
    "roofline",
    "sampler_of",
    "load_study",
    "StudyView",
    "ObjectiveInfo",
    "trial_config",
    "pick_choices",
    "VERIFY_ATTR_PREFIX",
    "system_breakdown_png",
    "metric_column",
]
