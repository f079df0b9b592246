"""Metric and objective names the sweep understands (no imports beyond the stdlib).

The performance model reports, per design, the metrics of ``perf_model.DesignTable``
(:data:`METRIC_NAMES`), and the accuracy of the design's operand formats on the workload,
``sqnr_db`` (``workloads.accuracy``). An *objective* is one of the short names of :data:`OBJECTIVES`,
each bound to a metric and a direction; a *constraint* bounds any metric
(``"area_mm2 <= 50"``); objective short names are accepted there too (``"area <= 50"``).

A pod space (an ``[llm]`` table, see :mod:`accel_dse.search.space.pod_space`) has the metrics of
:data:`SYSTEM_METRIC_UNITS` and the objectives of :data:`SYSTEM_OBJECTIVES` instead of the
single-chip ones (``area`` stays).

A space with an FPGA target (``[fpga]``, see :mod:`accel_dse.search.space.space_file`) also has the
metrics of :data:`FPGA_METRIC_UNITS` (``perf_model.fpga_metrics``: predicted resources, Fmax and
utilisation of the device); ``dsp``, ``bram``, ``lut``, ``ff`` and ``fmax`` name them too.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
from typing import TYPE_CHECKING, TypeVar

from accel_spec.errors import ConfigError

if TYPE_CHECKING:
    import numpy as np

#: A metric's value: one design's (float) or a column of designs' (the grid's arrays).
_V = TypeVar("_V", float, "np.ndarray")

__all__ = [
    "METRIC_NAMES",
    "METRIC_UNITS",
    "OBJECTIVES",
    "Objective",
    "Constraint",
    "parse_objective",
    "parse_constraint",
    "metric_of",
    "FPGA_METRIC_UNITS",
    "SYSTEM_METRIC_UNITS",
    "SYSTEM_OBJECTIVES",
    "METRIC_ALIASES",
    "unit_of",
]

#: Metric -> unit, as reported by ``perf_model.DesignTable`` (totals over a workload).
METRIC_UNITS: dict[str, str] = {
    "compute_cycles": "cycles",
    "stall_cycles": "cycles",
    "total_cycles": "cycles",
    "macs": "MACs",
    "dram_read_bytes": "bytes",
    "dram_write_bytes": "bytes",
    "sram_read_bytes": "bytes",
    "sram_write_bytes": "bytes",
    "energy_pj": "pJ",
    "latency_s": "s",
    "area_mm2": "mm^2",
    "power_w": "W",
    "on_die_power_w": "W",
    "power_density_w_mm2": "W/mm^2",
    "tops": "TOPS",
    "tops_per_w": "TOPS/W",
    "edp": "J*s",
    "utilization": "fraction",
    "sdc_coverage": "fraction",
    "sqnr_db": "dB",
}
METRIC_NAMES: tuple[str, ...] = tuple(METRIC_UNITS)

#: Metric -> unit of the FPGA target's metrics (per design, the same on every workload).
FPGA_METRIC_UNITS: dict[str, str] = {
    "luts": "logic cells",
    "ffs": "FFs",
    "dsps": "DSP blocks",
    "brams": "block RAMs",
    "fmax_mhz": "MHz",
    "fpga_utilization": "fraction",
}
#: Metric -> unit of a pod space's metrics (a space with an ``[llm]`` table: the chip in a system on
#: an LLM job, ``perf_model.pod``); ``area_mm2`` (the chip's: cores x the array's) comes with them.
SYSTEM_METRIC_UNITS: dict[str, str] = {
    "step_s": "s", "mfu": "fraction", "tokens_per_s": "tokens/s", "tokens_per_s_per_chip": "tokens/s",
    "ttft_s": "s", "tpot_s": "s", "hbm_used_gib": "GiB", "system_energy_j": "J", "exposed_comm_s": "s",
    "bubble_s": "s",
}
#: Other names of metrics accepted in constraints.
METRIC_ALIASES: dict[str, str] = {"lut": "luts", "ff": "ffs", "dsp": "dsps", "bram": "brams", "fmax": "fmax_mhz"}

#: Objective short name -> (metric, "minimize" | "maximize").
OBJECTIVES: dict[str, tuple[str, str]] = {
    "latency": ("latency_s", "minimize"),
    "energy": ("energy_pj", "minimize"),
    "area": ("area_mm2", "minimize"),
    "edp": ("edp", "minimize"),
    "tops_per_w": ("tops_per_w", "maximize"),
    "power": ("power_w", "minimize"),
    "accuracy": ("sqnr_db", "maximize"),
    "coverage": ("sdc_coverage", "maximize"),
}
#: Objectives of a pod space (``[llm]``), beside ``area``.
SYSTEM_OBJECTIVES: dict[str, tuple[str, str]] = {
    "step_time": ("step_s", "minimize"),
    "tokens_per_s": ("tokens_per_s", "maximize"),
    "mfu": ("mfu", "maximize"),
    "ttft": ("ttft_s", "minimize"),
    "tpot": ("tpot_s", "minimize"),
    "system_energy": ("system_energy_j", "minimize"),
}


@dataclasses.dataclass(frozen=True)
class Objective:
    """One objective of a sweep.

    Attributes:
        name: Short name (``"latency"``, ``"edp"``, ...).
        metric: The metric it reads (``"latency_s"``, ``"edp"``, ...).
        direction: ``"minimize"`` or ``"maximize"``.
    """

    name: str
    metric: str
    direction: str

    @property
    def sign(self) -> float:
        """+1 when smaller is better, -1 when larger is better."""
        return 1.0 if self.direction == "minimize" else -1.0


@dataclasses.dataclass(frozen=True)
class Constraint:
    """``metric <= bound`` or ``metric >= bound``.

    Attributes:
        metric: A name from :data:`METRIC_NAMES`.
        op: ``"<="`` or ``">="`` (``<`` and ``>`` are read as these).
        bound: The limit, in the metric's unit.
    """

    metric: str
    op: str
    bound: float

    def violation(self, value: _V) -> _V:
        """Optuna-style constraint value: ``<= 0`` when satisfied, the excess otherwise (elementwise on arrays)."""
        return value - self.bound if self.op == "<=" else self.bound - value

    def __str__(self) -> str:
        return f"{self.metric} {self.op} {self.bound:g}"


def unit_of(metric: str) -> str:
    """The unit of ``metric`` (a model or FPGA-target metric)."""
    return METRIC_UNITS.get(metric) or FPGA_METRIC_UNITS.get(metric) or SYSTEM_METRIC_UNITS[metric]


def metric_of(name: str, *, where: str) -> str:
    """The metric called ``name`` (a metric or an objective short name), else ``ConfigError``."""
    if name in METRIC_UNITS or name in FPGA_METRIC_UNITS or name in SYSTEM_METRIC_UNITS:
        return name
    if name in OBJECTIVES:
        return OBJECTIVES[name][0]
    if name in SYSTEM_OBJECTIVES:
        return SYSTEM_OBJECTIVES[name][0]
    if name in METRIC_ALIASES:
        return METRIC_ALIASES[name]
    known = sorted(set(METRIC_NAMES) | set(OBJECTIVES) | set(FPGA_METRIC_UNITS) | set(METRIC_ALIASES)
                   | set(SYSTEM_METRIC_UNITS) | set(SYSTEM_OBJECTIVES))
    close = difflib.get_close_matches(name, known, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise ConfigError(f"{where}: unknown metric {name!r}{hint}; metrics: {', '.join(METRIC_NAMES)}; "
                      f"with an [fpga] target also {', '.join(FPGA_METRIC_UNITS)}; "
                      f"with an [llm] job also {', '.join(SYSTEM_METRIC_UNITS)}")


def parse_objective(name: object, *, where: str) -> Objective:
    """Build the :class:`Objective` called ``name`` or raise ``ConfigError`` listing them."""
    table = {**OBJECTIVES, **SYSTEM_OBJECTIVES}
    if not isinstance(name, str) or name not in table:
        shown = name if not isinstance(name, str) else repr(name)
        close = difflib.get_close_matches(name, table, n=1) if isinstance(name, str) else []
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError(
            f"{where}: objective must be one of {', '.join(OBJECTIVES)}, not {shown}{hint} (with an [llm] job "
            f"also {', '.join(SYSTEM_OBJECTIVES)})"
        )
    metric, direction = table[name]
    return Objective(name=name, metric=metric, direction=direction)


_CONSTRAINT_RE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(<=|>=|<|>|=<|=>)\s*(\S+)\s*$")


def parse_constraint(text: object, *, where: str) -> Constraint:
    """Parse ``"metric <= number"`` / ``"metric >= number"`` or raise ``ConfigError``."""
    if not isinstance(text, str):
        raise ConfigError(f"{where}: a constraint must be a string like 'area_mm2 <= 50', not {text!r}")
    match = _CONSTRAINT_RE.match(text)
    if match is None:
        raise ConfigError(
            f"{where}: constraint must read 'METRIC <= NUMBER' or 'METRIC >= NUMBER', not {text!r}"
        )
    name, op, number = match.groups()
    metric = metric_of(name, where=f"{where}: constraint {text!r}")
    try:
        bound = float(number)
    except ValueError:
        bound = math.nan
    if not math.isfinite(bound):
        raise ConfigError(f"{where}: constraint {text!r} needs a finite number bound, not {number!r}")
    op = "<=" if op in ("<=", "<", "=<") else ">="
    return Constraint(metric=metric, op=op, bound=bound)
