"""How the report shows a metric: one unit with an SI prefix and one number format per column.

:func:`metric_column` turns a column of a metric's values (in the model's base units: pJ, s,
fractions) into a header unit and text cells (``energy`` in mJ or µJ, ``latency`` in ms,
``utilization`` in %, cycles as whole numbers); :func:`axis_scale` gives a plot axis the same
unit and the factor its values are divided by.
"""

from __future__ import annotations

from collections.abc import Sequence

from accel_dse.units import column_scale, fixed

__all__ = ["metric_column", "axis_scale", "DISPLAY"]

#: metric -> (unit of its base value after ``factor``, factor from the stored value, prefixed?)
DISPLAY: dict[str, tuple[str, float, bool]] = {
    "latency_s": ("s", 1.0, True),
    "energy_pj": ("J", 1e-12, True),
    "edp": ("J·s", 1.0, True),
    "power_w": ("W", 1.0, True),
    "area_mm2": ("mm²", 1.0, False),
    "tops": ("TOPS", 1.0, False),
    "tops_per_w": ("TOPS/W", 1.0, False),
    "utilization": ("%", 100.0, False),
    "fpga_utilization": ("%", 100.0, False),
    "macs": ("MAC", 1.0, True),
    "dram_read_bytes": ("B", 1.0, True),
    "dram_write_bytes": ("B", 1.0, True),
    "fmax_mhz": ("MHz", 1.0, False),
}
_WHOLE = ("cycles", "luts", "ffs", "dsps", "brams")


def _number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def axis_scale(metric: str | None, values: Sequence[float | None]) -> tuple[float, str]:
    """``(divide by, unit)`` for a plot axis of ``metric``'s stored values (``("", 1)`` unknown)."""
    unit, factor, prefixed = DISPLAY.get(metric or "", ("", 1.0, False))
    if not prefixed:
        return 1.0 / factor, unit
    scale = column_scale([float(v) * factor for v in values if v is not None and _number(v)], unit,
                         highest=1e12 if unit in ("MAC", "B") else 1.0)
    return scale.factor / factor, scale.unit


def metric_column(metric: str | None, values: Sequence[object]) -> tuple[str, list[str]]:
    """``(unit, cells)`` of a column of ``metric``'s stored values; ``None`` -> empty cell."""
    if metric is not None and (metric.endswith(_WHOLE) or metric in _WHOLE):
        return "", [f"{round(float(v)):,}" if isinstance(v, (int, float)) and _number(v)
                    else ("" if v is None else str(v)) for v in values]
    numbers = [float(v) for v in values if isinstance(v, (int, float)) and _number(v)]
    divide, unit = axis_scale(metric, numbers)
    return unit, fixed([float(v) / divide if isinstance(v, (int, float)) and _number(v) else v for v in values])
