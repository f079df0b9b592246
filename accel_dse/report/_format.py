"""How the report shows a metric: one unit with an SI prefix and one number format per metric.

The unit of a metric is chosen once per report (:func:`report_units`, from every value the
report shows: the table, the scatter and the history) with :func:`accel_dse.units.metric_scale`,
and the table, the plots and ``report``'s text table all use it. :func:`metric_column` turns a
column of a metric's values (in the model's base units: pJ, s, fractions) into a header unit and
text cells; :func:`axis_scale` gives a plot axis its unit and the factor its values are divided by;
:func:`header` writes ``title [unit]`` without repeating a unit the title already is.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from accel_dse.units import METRIC_DISPLAY, fixed, metric_scale

__all__ = ["metric_column", "axis_scale", "DISPLAY", "report_units", "header"]

#: metric -> (unit of its base value after ``factor``, factor from the stored value, prefixed?)
DISPLAY = METRIC_DISPLAY
_WHOLE = ("cycles", "luts", "ffs", "dsps", "brams")


def _number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def axis_scale(metric: str | None, values: Sequence[float | None],
               units: Mapping[str, Mapping[str, Any]] | None = None) -> tuple[float, str]:
    """``(divide by, unit)`` for a plot axis of ``metric``'s stored values (``(1, "")`` unknown).

    ``units`` (the report's ``units``): the report's unit for the metric, when it has one.
    """
    chosen = (units or {}).get(metric or "")
    if chosen is not None:
        return float(chosen["divide"]), str(chosen["unit"])
    return metric_scale(metric, [v for v in values if v is not None])


def metric_column(metric: str | None, values: Sequence[object],
                  units: Mapping[str, Mapping[str, Any]] | None = None) -> tuple[str, list[str]]:
    """``(unit, cells)`` of a column of ``metric``'s stored values; ``None`` -> empty cell."""
    if metric is not None and (metric.endswith(_WHOLE) or metric in _WHOLE):
        return "", [f"{round(float(v)):,}" if isinstance(v, (int, float)) and _number(v)
                    else ("" if v is None else str(v)) for v in values]
    numbers = [float(v) for v in values if isinstance(v, (int, float)) and _number(v)]
    divide, unit = axis_scale(metric, numbers, units)
    return unit, fixed([float(v) / divide if isinstance(v, (int, float)) and _number(v) else v for v in values])


def header(title: str, unit: str) -> str:
    """``"latency [ms]"``; a title that already is its unit stays as it is (``"TOPS/W"``, never
    ``"TOPS/W [TOPS/W]"``)."""
    if not unit or title.strip() == unit or title.endswith(f" {unit}") or title.endswith(f"[{unit}]"):
        return title
    return f"{title} [{unit}]"


def report_units(metric_values: Mapping[str, Iterable[object]]) -> dict[str, dict[str, Any]]:
    """The report's one unit per metric: ``{metric: {"unit": "µJ·s", "divide": 1e-06}}`` from all
    the values of each metric the report shows (cycle counts and unknown metrics are left out)."""
    out: dict[str, dict[str, Any]] = {}
    for metric, values in metric_values.items():
        if metric not in METRIC_DISPLAY:
            continue
        divide, unit = metric_scale(metric, [v for v in values if _number(v)])
        out[metric] = {"unit": unit, "divide": divide}
    return out
