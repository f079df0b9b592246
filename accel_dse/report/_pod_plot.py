"""The time breakdown of a system's splits as one PNG (matplotlib Agg): compute, elementwise,
exposed communication, pipeline bubble, optimizer, as stacked bars of seconds per step."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from accel_dse.exit_cleanup import removed_if_stopped

__all__ = ["system_breakdown_png", "BREAKDOWN_PARTS"]

#: Breakdown keys drawn, with their labels and colours.
BREAKDOWN_PARTS = (("compute_s", "compute (GEMMs)", "#30638e"), ("vector_s", "elementwise (HBM)", "#00798c"),
                   ("exposed_comm_s", "exposed communication", "#d1495b"), ("bubble_s", "pipeline bubble", "#edae49"),
                   ("optimizer_s", "optimizer", "#9aa5b1"))


def system_breakdown_png(results: Sequence[Any], path: Path, title: str) -> None:
    """Draw one bar per feasible result (a :class:`perf_model.pod.SystemResult`), labelled by
    its split, and write the PNG to ``path`` whole (a temporary file renamed over it)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    ok = [r for r in results if r.ok]
    fig = Figure(figsize=(8, 1.2 + 0.42 * max(len(ok), 1)), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.set_title(title, fontsize=9)
    if not ok:
        ax.set_axis_off()
        ax.text(0.5, 0.5, "no split fits", ha="center", va="center")
    labels = [r.split.label() for r in ok]
    left = [0.0] * len(ok)
    for key, label, colour in BREAKDOWN_PARTS:
        widths = [r.breakdown.get(key, 0.0) for r in ok]
        ax.barh(range(len(ok)), widths, left=left, color=colour, label=label)
        left = [a + b for a, b in zip(left, widths, strict=True)]
    if ok:
        ax.set_yticks(range(len(ok)), labels, fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("seconds per step (training) or per run (serving)")
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=3)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with removed_if_stopped(tmp), os.fdopen(fd, "wb") as handle:
            fig.savefig(handle, format="png")
            handle.flush()
            os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
