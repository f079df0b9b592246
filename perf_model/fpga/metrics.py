"""The FPGA metrics of designs on one device: resources, utilisation and Fmax (the sweep's FPGA target).

:func:`fpga_metrics` puts the resource model (:mod:`perf_model.fpga.resources`) and the Fmax
model (:mod:`perf_model.fpga.fmax`) together for a named device::

    luts, ffs, dsps, brams   predicted counts (ECP5: TRELLIS_COMB, TRELLIS_FF, MULT18X18D, DP16KD)
    fmax_mhz                 predicted Fmax, MHz
    fpga_utilization         the largest used/available fraction of the four (> 1: does not fit)

All of it is vectorised (no synthesis, no place and route).
"""

from __future__ import annotations

import numpy as np

from accel_spec.errors import ModelError
from perf_model.arrays.designs import DesignArrays
from perf_model.fpga.fmax import fpga_fmax_arrays
from perf_model.fpga.resources import FPGA_DEVICES, fpga_resource_arrays

__all__ = ["fpga_device", "fpga_metrics"]


def fpga_device(family: str, device: str) -> dict[str, int]:
    """Capacity of ``device`` of ``family`` (``luts``, ``ffs``, ``dsps``, ``brams``).

    Raises:
        ModelError: a family or device the model does not cover (the message lists those it does).
    """
    if not isinstance(family, str) or family not in FPGA_DEVICES:
        raise ModelError(f"FPGA family must be one of {', '.join(FPGA_DEVICES)} (the families the resource "
                         f"model covers), not {family!r}")
    devices = FPGA_DEVICES[family]
    if not isinstance(device, str) or device not in devices:
        raise ModelError(f"{family} device must be one of {', '.join(devices)}, not {device!r}")
    return devices[device]


def fpga_metrics(designs: DesignArrays, family: str, device: str) -> dict[str, np.ndarray]:
    """The metrics of the module docstring of each design on ``device`` of ``family``, float64 arrays.

    Raises:
        ModelError: an unknown family or device.
    """
    capacity = fpga_device(family, device)
    used = fpga_resource_arrays(designs)
    metrics = {k: v.astype(np.float64) for k, v in used.items()}
    metrics["fmax_mhz"] = fpga_fmax_arrays(designs)
    metrics["fpga_utilization"] = np.max([metrics[k] / capacity[k] for k in used], axis=0)
    return metrics
