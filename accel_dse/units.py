"""Engineering units for what people read (stdlib only): one SI prefix and one format per column.

The model keeps its base units (``energy_pj`` in pJ, ``latency_s`` in s, ``utilization`` a
fraction); tables and the report show them scaled. :func:`column_scale` picks one prefix for
a whole column so its numbers compare at a glance (``3.85 ms | 12.1 ms``, never ``0.003854``
next to ``1.2e-02``); :func:`fixed` gives the column one number of decimals.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import NamedTuple

__all__ = ["PREFIXES", "Scaled", "column_scale", "fixed", "format_column", "eng", "percent", "count", "METRIC_DISPLAY",
           "metric_scale", "metric_text", "text_header"]

#: SI prefixes from tera down to pico, factor -> symbol.
PREFIXES: tuple[tuple[float, str], ...] = (
    (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""), (1e-3, "m"), (1e-6, "µ"), (1e-9, "n"),
    (1e-12, "p"),
)


class Scaled(NamedTuple):
    """Divide a base-unit value by ``factor`` to show it in ``unit`` (the prefixed unit)."""

    factor: float
    unit: str


def _finite(values: Iterable[object]) -> list[float]:
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            continue
        if math.isfinite(float(v)):
            out.append(abs(float(v)))
    return out


def column_scale(values: Iterable[object], unit: str, *, lowest: float = 1e-12, highest: float = 1e12) -> Scaled:
    """The SI prefix that puts the column's largest magnitude in [1, 1000).

    ``values`` are in the base ``unit`` (``"J"``, ``"s"``); prefixes outside ``[lowest,
    highest]`` are not used (``highest=1.0`` keeps seconds from becoming ks).
    """
    allowed = [(f, p) for f, p in PREFIXES if lowest <= f <= highest]
    big = max(_finite(values), default=0.0)
    if big == 0.0:
        return Scaled(1.0, unit)
    for factor, prefix in allowed:
        if big >= factor * (1 - 5e-4):
            return Scaled(factor, prefix + unit)
    factor, prefix = allowed[-1]
    return Scaled(factor, prefix + unit)


def _decimals(big: float, digits: int) -> int:
    """Decimals that show ``digits`` significant digits of ``big``."""
    if big <= 0 or not math.isfinite(big):
        return 0
    whole = math.floor(math.log10(big)) + 1
    return max(0, digits - whole)


def fixed(values: Sequence[object], *, digits: int = 3, thousands: bool = True, max_decimals: int = 3) -> list[str]:
    """Numbers with one number of decimals for the whole column.

    Enough decimals for ``digits`` significant digits of the largest value and two of the
    smallest non-zero one, at most ``max_decimals``. Non-numbers pass through as text (``""``
    for ``None``).
    """
    magnitudes = [v for v in _finite(values) if v > 0]
    places = 0
    if magnitudes:
        places = max(_decimals(max(magnitudes), digits), _decimals(min(magnitudes), 2))
    places = min(places, max_decimals)
    numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if numbers and all(isinstance(v, int) for v in numbers):
        places = 0  # counts stay whole
    sep = "," if thousands else ""
    out = []
    for v in values:
        if v is None or v == "":
            out.append("")
        elif isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(float(v)):
            out.append(str(v))
        else:
            out.append(f"{float(v):{sep}.{places}f}")
    return out


def format_column(values: Sequence[object], unit: str, *, digits: int = 3, lowest: float = 1e-12,
                  highest: float = 1e12) -> tuple[str, list[str]]:
    """``(unit with prefix, formatted values)`` of a column of base-unit values."""
    scale = column_scale(values, unit, lowest=lowest, highest=highest)
    def scaled(v: object) -> object:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or scale.factor == 1.0:
            return v
        return v / scale.factor

    return scale.unit, fixed([scaled(v) for v in values], digits=digits)


def eng(value: float, unit: str, *, digits: int = 3) -> str:
    """One value with its own prefix: ``eng(0.003854, "s")`` -> ``"3.85 ms"``."""
    if not isinstance(value, (int, float)) or not math.isfinite(float(value)):
        return f"{value} {unit}"
    unit_, text = format_column([value], unit, digits=digits)
    return f"{text[0]} {unit_}"


def percent(fraction: float, *, digits: int = 1) -> str:
    """A fraction as a percentage: ``0.8123`` -> ``"81.2 %"``."""
    return f"{100.0 * fraction:.{digits}f} %"


def count(value: float) -> str:
    """A large count with a prefix and no unit: ``1_814_073_344`` -> ``"1.81 G"``, ``512`` -> ``"512"``."""
    if abs(value) < 1000:
        return f"{value:,.0f}"
    return eng(value, "")


#: How a model metric is shown: metric -> (display unit, factor from the stored value to that
#: unit, SI-prefixed?). ``energy_pj`` is stored in pJ and shown in J with a prefix (mJ, µJ);
#: ``utilization`` is a fraction shown in %; ``tops_per_w`` is a plain number in TOPS/W.
METRIC_DISPLAY: dict[str, tuple[str, float, bool]] = {
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


def metric_scale(metric: str | None, values: Iterable[object]) -> tuple[float, str]:
    """``(divide by, unit)`` that shows ``metric``'s stored values in one unit (``(1, "")`` unknown).

    The one place a quantity's display unit is chosen: the prefix puts the largest magnitude of
    ``values`` in [1, 1000) (seconds and J·s never above the base unit). The report's table, its
    plots and the command-line tables all ask here, with all the values they show.
    """
    unit, factor, prefixed = METRIC_DISPLAY.get(metric or "", ("", 1.0, False))
    if not prefixed:
        return 1.0 / factor, unit
    numbers = [float(v) * factor for v in values
               if isinstance(v, (int, float)) and not isinstance(v, bool)]
    scale = column_scale(numbers, unit, highest=1e12 if unit in ("MAC", "B") else 1.0)
    return scale.factor / factor, scale.unit


def metric_text(metric: str, value: float, *, digits: int = 3) -> str:
    """One stored value of ``metric`` with its unit: ``metric_text("energy_pj", 5.734e9)`` -> ``"5.73 mJ"``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(float(value)):
        return str(value)
    divide, unit = metric_scale(metric, [value])
    shown = value / divide
    text = f"{shown:#.{digits}g}".rstrip(".") if abs(shown) < 10 ** digits else f"{shown:,.0f}"
    return f"{text} {unit}".strip()


def text_header(title: str, unit: str) -> str:
    """A text table's header, ``"latency ms"``; a title that already is (or ends in) its unit stays
    as it is (``"TOPS/W"``, never ``"TOPS/W TOPS/W"``)."""
    if not unit or title.strip() == unit or title.endswith(f" {unit}"):
        return title
    return f"{title} {unit}"
