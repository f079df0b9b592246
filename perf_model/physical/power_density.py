"""On-die power, DRAM power and power density, with the limit a design must stay under.

A design's power over a workload (``power_w``) is its energy over its latency. Part of that
energy is spent off the die: the DRAM device and its interface (the parts ``dram`` and
``vector_dram`` of the breakdown, charged per byte by the memory part). The rest is on-die
power, and on-die power over the design's floor-plan area is its power density::

    dram_power_w        = (dram + vector_dram) pJ * 1e-12 / latency_s
    on_die_power_w      = power_w - dram_power_w
    power_density_w_mm2 = on_die_power_w / area_mm2

**The limit** is the design's ``max_power_density_w_mm2`` (``ArrayConfig``; a space may fix or
search it, and constrain ``power_density_w_mm2`` by name). Its default,
:data:`accel_spec.config.MAX_POWER_DENSITY_W_MM2` (1.0 W/mm^2), is the highest average power density
of a shipped datacenter accelerator we know is NVIDIA's H100 SXM5, 700 W of board power (NVIDIA
H100 datasheet; the die's share is less) over a die of 814 mm^2 (NVIDIA Hopper architecture
whitepaper, 2022): 0.86 W/mm^2 with the best air and liquid cooling of its generation. TPU v1
(40 W busy over at most 331 mm^2, Jouppi et al., ISCA 2017) ran at about 0.12 W/mm^2. A design
above its limit on average cannot be cooled as the design says; it is infeasible with the
reason (``evaluate``, the sweep). Hot spots above the average are not modelled.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from accel_spec.config import MAX_POWER_DENSITY_W_MM2

__all__ = ["MAX_POWER_DENSITY_W_MM2", "power_split", "density_reason", "density_reasons"]


def power_split(energy_pj: Any, dram_pj: Any, latency_s: Any, area_mm2: Any) -> dict[str, np.ndarray]:
    """``{"dram_power_w", "on_die_power_w", "power_density_w_mm2"}`` of designs (vectorised; 0 where the
    latency or the area is 0)."""
    latency = np.asarray(latency_s, dtype=np.float64)
    area = np.asarray(area_mm2, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        dram_w = np.where(latency > 0, np.asarray(dram_pj, dtype=np.float64) * 1e-12 / latency, 0.0)
        on_die_w = np.where(latency > 0, (np.asarray(energy_pj, dtype=np.float64)
                                          - np.asarray(dram_pj, dtype=np.float64)) * 1e-12 / latency, 0.0)
        density = np.where(area > 0, on_die_w / area, 0.0)
    return {"dram_power_w": dram_w, "on_die_power_w": on_die_w, "power_density_w_mm2": density}


def density_reason(density_w_mm2: float, on_die_w: float, area_mm2: float,
                   limit: float = MAX_POWER_DENSITY_W_MM2) -> str:
    """The reason a design is too dense to cool (``""`` when it is not); ``limit`` is its
    ``max_power_density_w_mm2``, W/mm^2."""
    if not density_w_mm2 > limit:
        return ""
    why = (" (the default: the densest shipped datacenter accelerator, H100 SXM, runs at 0.86 W/mm^2)"
           if limit == MAX_POWER_DENSITY_W_MM2 else "")
    return (f"power density {density_w_mm2:.2f} W/mm^2 ({on_die_w:.3g} W on die over {area_mm2:.3g} mm^2) exceeds "
            f"max_power_density_w_mm2 = {limit:g} W/mm^2{why}")


def density_reasons(split: Mapping[str, Any], area_mm2: Any, too_dense: Any,
                    limit: Any = MAX_POWER_DENSITY_W_MM2) -> np.ndarray:
    """:func:`density_reason` of each design where ``too_dense``, in design order (an object array):
    ``split`` holds :func:`power_split`'s ``power_density_w_mm2`` and ``on_die_power_w`` per design;
    ``limit`` is one limit for all or one per design (``max_power_density_w_mm2``), W/mm^2."""
    density, on_die, area = split["power_density_w_mm2"], split["on_die_power_w"], np.asarray(area_mm2)
    limits = np.broadcast_to(np.asarray(limit, dtype=np.float64), np.shape(density))
    return np.array([density_reason(float(density[i]), float(on_die[i]), float(area[i]), float(limits[i]))
                     for i in np.flatnonzero(too_dense)], dtype=object)
