"""A small stand-in for ``perf_model`` (tests only): same API shape, simple closed forms.

``DesignArrays.from_columns`` + ``evaluate_designs(designs, ops)`` -> a table with the metric
fields of ``perf_model.DesignTable``. The formulas are deliberately simple so tests can
recompute expected values by hand:

* compute cycles per GEMM: ``perf_model.timing.run_cycles`` on the whole GEMM (no tiling);
* feasible iff one ``rows x cols`` weight tile fits the weight buffer:
  ``rows * cols * input_bits / 8 <= weight_sram_kib * 1024``;
* DRAM bytes = inputs + weights + outputs once; stall cycles = max(0, dram_bytes /
  dram_bytes_per_cycle - compute cycles) (0 when double buffered is False: added instead);
* area (mm^2) = (rows*cols*(input_bits/8)^2 * 0.002 + total SRAM KiB * 0.003) * (tech_nm/28)^2;
* energy (pJ) = macs * 0.25 * (input_bits/8)^2 + dram bytes * 20 + sram bytes * 1;
* latency = total cycles / clock (``dram``, the memory kind, is ignored);
  power = energy / latency; tops = 2 * macs / latency / 1e12.

Environment knobs for process tests: ``STANDIN_DELAY_S`` sleeps that long per call;
``STANDIN_MARKER_DIR`` touches ``<dir>/<pid>-<n>`` at each call; ``STANDIN_HANG_AT`` makes the
process's call of that number sleep for an hour (a trial that is certainly still running; with
``STANDIN_HANG_IN_FINALISER`` set, the hour is spent in finalisers, as in JAX's garbage-collection
callback, where a raised ``KeyboardInterrupt`` is printed as "Exception ignored" and lost); ``STANDIN_NAN_CLOCK`` makes
designs at that clock return NaN latency; ``STANDIN_RAISE_CLOCK`` makes them raise.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from perf_model.timing import run_cycles

FIELDS = ("rows", "cols", "dataflow", "input_bits", "acc_bits", "ifmap_sram_kib", "weight_sram_kib",
          "ofmap_sram_kib", "dram_bytes_per_cycle", "clock_mhz", "double_buffered", "shadow_stationary",
          "tech_nm", "dram", "checksum")
CALLS = [0]


@dataclass
class DesignArrays:
    rows: np.ndarray
    cols: np.ndarray
    dataflow: np.ndarray
    input_bits: np.ndarray
    acc_bits: np.ndarray
    ifmap_sram_kib: np.ndarray
    weight_sram_kib: np.ndarray
    ofmap_sram_kib: np.ndarray
    dram_bytes_per_cycle: np.ndarray
    clock_mhz: np.ndarray
    double_buffered: np.ndarray
    shadow_stationary: np.ndarray
    tech_nm: np.ndarray
    dram: np.ndarray  # the memory kind: carried, not used by the formulas
    checksum: np.ndarray  # carried, not used by the formulas
    weight_format: np.ndarray  # the operand formats: carried, not used by the formulas
    act_format: np.ndarray
    vector_unit: np.ndarray  # carried, not used by the formulas
    pack_int4: np.ndarray  # carried, not used by the formulas
    max_power_density_w_mm2: np.ndarray  # carried, not used by the formulas

    @classmethod
    def from_columns(cls, **arrays):
        arrays = {k: np.asarray(v) for k, v in arrays.items()}
        n = max(len(np.atleast_1d(v)) for v in arrays.values())
        out = {k: np.broadcast_to(np.atleast_1d(v), (n,)) for k, v in arrays.items()}
        if np.any(out["acc_bits"] < 2 * out["input_bits"]):
            raise ValueError("acc_bits < 2*input_bits reached the stand-in model")
        return cls(**out)

    def __len__(self):
        return len(self.rows)


@dataclass
class Table:
    feasible: np.ndarray
    reason: list
    compute_cycles: np.ndarray
    stall_cycles: np.ndarray
    total_cycles: np.ndarray
    macs: np.ndarray
    dram_read_bytes: np.ndarray
    dram_write_bytes: np.ndarray
    sram_read_bytes: np.ndarray
    sram_write_bytes: np.ndarray
    energy_pj: np.ndarray
    latency_s: np.ndarray
    area_mm2: np.ndarray
    power_w: np.ndarray
    tops: np.ndarray
    tops_per_w: np.ndarray
    edp: np.ndarray
    utilization: np.ndarray
    sdc_coverage: np.ndarray


def _ops(workload):
    if hasattr(workload, "gemms"):
        return list(workload.gemms())
    return [(op.to_gemm(), count) for op, count in workload]


class _SlowFinaliser:
    def __del__(self) -> None:
        time.sleep(0.05)


def _hang(in_finaliser: bool) -> None:
    """Sleep for an hour; ``in_finaliser``: in one finaliser after another."""
    end = time.monotonic() + 3600
    while time.monotonic() < end:
        if in_finaliser:
            _SlowFinaliser()  # dropped at once: its __del__ runs here
        else:
            time.sleep(1)


def evaluate_designs(d: DesignArrays, workload) -> Table:
    CALLS[0] += 1
    delay = float(os.environ.get("STANDIN_DELAY_S", "0") or 0)
    marker = os.environ.get("STANDIN_MARKER_DIR")
    if marker:
        Path(marker, f"{os.getpid()}-{CALLS[0]}").touch()
    if delay:
        time.sleep(delay)
    if os.environ.get("STANDIN_HANG_AT") == str(CALLS[0]):
        _hang(bool(os.environ.get("STANDIN_HANG_IN_FINALISER")))
    raise_clock = os.environ.get("STANDIN_RAISE_CLOCK")
    if raise_clock and np.any(d.clock_mhz == float(raise_clock)):
        raise RuntimeError("stand-in evaluator blew up")
    n = len(d)
    bytes_per = d.input_bits / 8
    compute = np.zeros(n)
    macs = np.zeros(n)
    dram = np.zeros(n)
    for g, count in _ops(workload):
        reps = count * g.batch
        compute += reps * run_cycles(d.dataflow, d.rows, d.cols, g.m, g.k, g.n, d.shadow_stationary)
        macs += reps * g.m * g.k * g.n
        dram += reps * (g.m * g.k + g.k * g.n + g.m * g.n) * bytes_per
    feasible = d.rows * d.cols * bytes_per <= d.weight_sram_kib * 1024
    transfer = dram / d.dram_bytes_per_cycle
    stall = np.where(d.double_buffered, np.maximum(0.0, transfer - compute), transfer)
    total = compute + stall
    sram = 2 * dram
    scale = (d.tech_nm / 28.0) ** 2
    area = (d.rows * d.cols * bytes_per**2 * 0.002
            + (d.ifmap_sram_kib + d.weight_sram_kib + d.ofmap_sram_kib) * 0.003) * scale
    energy = macs * 0.25 * bytes_per**2 + dram * 20 + sram * 1.0
    latency = total / (d.clock_mhz * 1e6)
    power = energy * 1e-12 / latency
    tops = 2 * macs / latency / 1e12
    nan_clock = os.environ.get("STANDIN_NAN_CLOCK")
    if nan_clock:
        latency = np.where(d.clock_mhz == float(nan_clock), np.nan, latency)
    table = Table(
        feasible=feasible, reason=["" if f else "weight tile does not fit weight buffer" for f in feasible],
        compute_cycles=compute, stall_cycles=stall, total_cycles=total, macs=macs,
        dram_read_bytes=dram, dram_write_bytes=np.zeros(n), sram_read_bytes=sram, sram_write_bytes=np.zeros(n),
        energy_pj=energy, latency_s=latency, area_mm2=area, power_w=power, tops=tops, tops_per_w=tops / power,
        edp=energy * 1e-12 * latency, utilization=macs / np.maximum(compute * d.rows * d.cols, 1),
        sdc_coverage=np.zeros(n),
    )
    for name in ("compute_cycles", "stall_cycles", "total_cycles", "macs", "dram_read_bytes", "energy_pj",
                 "area_mm2", "power_w", "tops", "tops_per_w", "edp", "utilization", "sram_read_bytes"):
        setattr(table, name, np.where(feasible, getattr(table, name), 0.0))
    table.latency_s = np.where(feasible, table.latency_s, 0.0)
    return table
