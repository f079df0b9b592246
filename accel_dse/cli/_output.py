"""Small output helpers shared by the subcommands (JSON and aligned tables)."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["emit_json", "format_table", "emit"]


def emit(text: str = "") -> None:
    """Write one line of text to stdout."""
    sys.stdout.write(text + "\n")


def emit_json(obj: Any) -> None:
    """Write ``obj`` as indented JSON to stdout (NaN/inf are refused, never emitted)."""
    sys.stdout.write(json.dumps(obj, indent=2, allow_nan=False) + "\n")


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        if value == 0:
            return "0"
        if abs(value) >= 1e6 or abs(value) < 1e-3:
            return f"{value:.3e}"
        return f"{value:,.4g}" if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


#: Text that shows a number (a column of such text aligns right as numbers do).
_NUMBER_TEXT = re.compile(r"-?[0-9][0-9,]*(\.[0-9]+)?")


def _numeric(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return True
    return isinstance(value, str) and (value == "" or _NUMBER_TEXT.fullmatch(value) is not None)


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Align ``rows`` under ``headers``; numbers right-aligned, text left-aligned."""
    cells = [[_fmt(v) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    numeric = [
        all(_numeric(r[i]) for r in rows) and any(r[i] != "" for r in rows) for i in range(len(headers))
    ]

    def line(values: Sequence[str]) -> str:
        parts = zip(values, widths, numeric, strict=True)
        return "  ".join(v.rjust(w) if n else v.ljust(w) for v, w, n in parts).rstrip()

    out = [line(list(headers)), line(["-" * w for w in widths])]
    out.extend(line(row) for row in cells)
    return "\n".join(out)
