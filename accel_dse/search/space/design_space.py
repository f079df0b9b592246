"""The design space: its parameters (:class:`Param`), workloads and objectives (:class:`DesignSpace`).

A space is built from a space file by :mod:`accel_dse.search.space.space_file`; a
:class:`DesignSpace` that exists is valid. It maps Optuna parameters to ``ArrayConfig``
fields and enumerates its grid.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Mapping
from typing import Any, Literal, TypeGuard

import numpy as np
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)

from accel_dse.search.space.metrics import Constraint, Objective
from accel_spec.config import FIELD_NAMES, ArrayConfig, Dataflow
from accel_spec.errors import ConfigError

__all__ = ["Param", "WorkloadSpec", "FpgaTarget", "PodTarget", "DesignSpace", "SYSTEM_PREFIX", "SPLIT_PREFIX"]

#: Prefixes of a pod space's parameters beside the chip's: ``system.hbm_gib``, ``split.tp``.
SYSTEM_PREFIX, SPLIT_PREFIX = "system.", "split."
_FLOAT_FIELDS = ("dram_bytes_per_cycle", "clock_mhz", "system.link_gb_per_s", "system.link_latency_us",
                 "system.hbm_gib", "system.dcn_gb_per_s", "system.dcn_latency_us", "split.recompute")


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclasses.dataclass(frozen=True)
class Param:
    """How one ``ArrayConfig`` field varies in a space.

    Attributes:
        field: The ``ArrayConfig`` field.
        kind: ``"fixed"``, ``"choice"`` (unordered: dataflow, booleans), ``"ordered"`` (a list
            of numbers, searched by the position of the value in increasing order), ``"int"``
            (integer range), ``"float"`` (real range) or ``"pow2"`` (powers of two from ``low``
            to ``high``, searched by their exponent).
        values: The fixed value (one element) or the choices (as written in the space).
        low: Lower bound of a range (inclusive), in the field's unit.
        high: Upper bound of a range (inclusive), in the field's unit.
        step: Step of a linear range (``None``: 1 for integers, continuous for reals).
        log: Whether a range is searched on a log scale.
    """

    field: str
    kind: str
    values: tuple[Any, ...] = ()
    low: float = 0
    high: float = 0
    step: float | None = None
    log: bool = False

    @property
    def name(self) -> str:
        """The Optuna parameter name: ``<field>``, ``log2_<field>`` (pow2) or ``idx_<field>`` (ordered)."""
        if self.kind == "pow2":
            return f"log2_{self.field}"
        if self.kind == "ordered":
            return f"idx_{self.field}"
        return self.field

    @property
    def ordered_values(self) -> tuple[Any, ...]:
        """The choices of an ``ordered`` parameter in increasing order (index ``i`` is value ``i``)."""
        return tuple(sorted(self.values))

    @property
    def is_free(self) -> bool:
        """Whether the search chooses this field (everything but ``fixed``)."""
        return self.kind != "fixed"

    def distribution(self) -> BaseDistribution:
        """The Optuna distribution of this parameter (not defined for ``fixed``)."""
        if self.kind == "choice":
            return CategoricalDistribution(list(self.values))
        if self.kind == "ordered":
            return IntDistribution(0, len(self.values) - 1)
        if self.kind == "pow2":
            return IntDistribution(int(math.log2(self.low)), int(math.log2(self.high)))
        if self.kind == "int":
            return IntDistribution(int(self.low), int(self.high), log=self.log, step=int(self.step or 1))
        if self.kind == "float":
            return FloatDistribution(float(self.low), float(self.high), log=self.log, step=self.step)
        raise ConfigError(f"parameter {self.field!r} is fixed and has no distribution")

    def decode(self, raw: Any) -> Any:
        """Field value of the Optuna parameter value ``raw``."""
        if self.kind == "pow2":
            value = 2 ** int(raw)
            return float(value) if self.field in _FLOAT_FIELDS else value
        if self.kind == "ordered":
            return self.ordered_values[int(raw)]
        if self.kind == "int":
            return int(raw)
        if self.kind == "float":
            return float(raw)
        return raw

    def encode(self, value: Any) -> Any:
        """Optuna parameter value of the field value ``value`` (inverse of :meth:`decode`)."""
        if self.kind == "pow2":
            return int(round(math.log2(float(value))))
        if self.kind == "ordered":
            return self.ordered_values.index(value)
        return value

    def grid_values(self) -> tuple[Any, ...] | None:
        """Every field value this parameter can take, or ``None`` for a continuous range."""
        if self.kind in ("fixed", "choice", "ordered"):
            return self.values
        if self.kind == "pow2":
            lo, hi = int(math.log2(self.low)), int(math.log2(self.high))
            return tuple(self.decode(e) for e in range(lo, hi + 1))
        if self.kind == "int":
            return tuple(range(int(self.low), int(self.high) + 1, int(self.step or 1)))
        if self.step is None:
            if self.low == self.high:
                return (float(self.low),)
            return None
        return tuple(float(round(self.low + i * self.step, 12)) for i in range(self.grid_count() or 0))

    def grid_count(self) -> int | None:
        """How many values :meth:`grid_values` has, computed without building them (``None``: continuous)."""
        if self.kind in ("fixed", "choice", "ordered"):
            return len(self.values)
        if self.kind == "pow2":
            return int(math.log2(self.high)) - int(math.log2(self.low)) + 1
        if self.kind == "int":
            return len(range(int(self.low), int(self.high) + 1, int(self.step or 1)))
        if self.step is None:
            return 1 if self.low == self.high else None
        ratio = (self.high - self.low) / self.step
        return int(round(ratio)) + 1 if ratio < 2**62 else 2**62

    def describe(self) -> str:
        """One human-readable phrase, e.g. ``4..128 (pow2)``, ``ws|os|is`` or ``4|8|16 (ordered)``."""
        if self.kind in ("fixed", "choice"):
            return "|".join(_show(v) for v in self.values)
        if self.kind == "ordered":
            return "|".join(_show(v) for v in self.ordered_values) + " (ordered)"
        scale = "pow2" if self.kind == "pow2" else ("log" if self.log else "linear")
        step = f", step {self.step:g}" if self.step else ""
        return f"{_show(self.low)}..{_show(self.high)} ({scale}{step})"

    def to_dict(self) -> dict[str, Any]:
        """Canonical JSON-ready form (used for the space fingerprint)."""
        if self.kind == "fixed":
            return {"fixed": _jsonable(self.values[0])}
        if self.kind in ("choice", "ordered"):
            return {"choices": [_jsonable(v) for v in self.values]}
        scale = "pow2" if self.kind == "pow2" else ("log" if self.log else "linear")
        return {"low": self.low, "high": self.high, "step": self.step, "scale": scale, "kind": self.kind}


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _jsonable(value: Any) -> Any:
    return value.value if isinstance(value, Dataflow) else value


@dataclasses.dataclass(frozen=True)
class WorkloadSpec:
    """A workload of a space and its weight in the aggregate metrics.

    Attributes:
        spec: What ``workloads.resolve`` takes (``"resnet18"``, ``"bert_base:seq=128"``, ...).
        weight: Relative weight (> 0); weights are normalised to sum to 1.
    """

    spec: str
    weight: float


@dataclasses.dataclass(frozen=True)
class FpgaTarget:
    """The FPGA a space targets (its ``[fpga]`` table): the sweep adds the device's metrics.

    Attributes:
        family: FPGA family (``"ecp5"``).
        device: Device of that family (``"85k"``).
    """

    family: str
    device: str

    def __str__(self) -> str:
        return f"{self.family} {self.device}"


@dataclasses.dataclass(frozen=True)
class PodTarget:
    """A pod space's job and system (its ``[llm]``, ``[system]`` and ``[split]`` tables).

    The chip of each trial (the space's ``ArrayConfig`` parameters) goes into a system of
    ``cores`` per chip on the topology; the ``system.*`` parameters vary the system, the
    ``split.*`` ones the split (``dp`` is what the chips leave), and without a ``[split]`` table
    every trial searches the split itself (``perf_model.pod.evaluate_system``).

    Attributes:
        llm: the ``[llm]`` table (``model``, ``mode``, ``batch``, ``seq``, ``gen``, ...) as items.
        system: the fixed system fields that are not parameters (``topology``, ``dims``, ...) as items.
        split_searched: no ``[split]`` table: each trial picks the fastest split.
        overlap: the split's ``overlap`` (data-parallel collectives under the backward pass).
    """

    llm: tuple[tuple[str, Any], ...]
    system: tuple[tuple[str, Any], ...]
    split_searched: bool = True
    overlap: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {"llm": {k: _jsonable(v) for k, v in self.llm},
                "system": {k: list(v) if isinstance(v, tuple) else v for k, v in self.system},
                "split_searched": self.split_searched, "overlap": self.overlap}


@dataclasses.dataclass(frozen=True)
class DesignSpace:
    """A validated design space.

    Attributes:
        name: Short name (letters, digits, ``.``, ``_``, ``-``); the default study name.
        description: One line for humans.
        params: One :class:`Param` per ``ArrayConfig`` field, in field order.
        workloads: The workloads and their weights.
        objectives: One (single-objective) or more (Pareto) objectives.
        constraints: Bounds every reported design must meet.
        source: Where the space came from (for messages).
        fpga: The FPGA target (``None``: none; then the FPGA metrics do not exist).
        pod: The pod target (``None``: none; with one the ``params`` after the chip's are
            ``system.*`` and ``split.*`` parameters and the metrics are the system's).
    """

    name: str
    description: str
    params: tuple[Param, ...]
    workloads: tuple[WorkloadSpec, ...]
    objectives: tuple[Objective, ...]
    constraints: tuple[Constraint, ...] = ()
    source: str = "space"
    fpga: FpgaTarget | None = None
    pod: PodTarget | None = None

    # -- the search view ------------------------------------------------------------------
    @property
    def free_params(self) -> tuple[Param, ...]:
        """Parameters the search chooses (not fixed), in field order."""
        return tuple(p for p in self.params if p.is_free)

    @property
    def fixed(self) -> dict[str, Any]:
        """Field -> value of the fixed parameters."""
        return {p.field: p.values[0] for p in self.params if not p.is_free}

    @property
    def directions(self) -> list[Literal["minimize", "maximize"]]:
        """Optuna study directions, one per objective."""
        return ["maximize" if o.direction == "maximize" else "minimize" for o in self.objectives]

    @property
    def is_multi_objective(self) -> bool:
        """Whether the space has more than one objective (the answer is a Pareto set)."""
        return len(self.objectives) > 1

    def distributions(self) -> dict[str, BaseDistribution]:
        """Optuna parameter name -> distribution of every free parameter."""
        return {p.name: p.distribution() for p in self.free_params}

    def param(self, name: str) -> Param:
        """The free parameter whose Optuna name is ``name``."""
        for p in self.free_params:
            if p.name == name:
                return p
        raise ConfigError(f"{self.source}: no free parameter called {name!r}")

    def field_values(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """All field values of the design chosen by Optuna ``params`` (not yet checked)."""
        values = dict(self.fixed)
        for p in self.free_params:
            values[p.field] = p.decode(params[p.name])
        return values

    def design(self, params: Mapping[str, Any]) -> ArrayConfig:
        """The ``ArrayConfig`` chosen by Optuna ``params``; ``ConfigError`` if it is invalid."""
        return ArrayConfig(**{k: v for k, v in self.field_values(params).items() if k in FIELD_NAMES})

    def pod_choice(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The ``system.*`` and ``split.*`` values chosen by Optuna ``params`` (empty without a pod)."""
        return {k: v for k, v in self.field_values(params).items() if k not in FIELD_NAMES}

    def params_of(self, config: ArrayConfig) -> dict[str, Any]:
        """Optuna parameter values that choose ``config`` (inverse of :meth:`design`)."""
        data = config.to_dict()
        return {p.name: p.encode(data[p.field]) for p in self.free_params}

    # -- exhaustive enumeration -------------------------------------------------------------
    def grid_axes(self) -> list[tuple[Param, tuple[Any, ...]]]:
        """Each parameter with all its values; ``ConfigError`` for a continuous range."""
        axes = []
        for p in self.params:
            values = p.grid_values()
            if values is None:
                raise self._continuous(p)
            axes.append((p, values))
        return axes

    def _continuous(self, p: Param) -> ConfigError:
        return ConfigError(f"{self.source}: params.{p.field} is a continuous range ({p.describe()}); "
                           "the grid sampler needs a step or a list of values")

    def _no_pod_grid(self) -> None:
        if self.pod is not None:
            raise ConfigError(f"{self.source}: the grid sampler scores single chips; a space with an [llm] job "
                              "takes another sampler (tpe, random, nsga2, ...)")

    def grid_size(self) -> int:
        """Number of points of the exhaustive grid, computed without listing them (``ConfigError`` if infinite)."""
        self._no_pod_grid()
        counts = []
        for p in self.params:
            count = p.grid_count()
            if count is None:
                raise self._continuous(p)
            counts.append(count)
        return math.prod(counts)

    def grid_columns(self, start: int, stop: int) -> dict[str, np.ndarray]:
        """Field -> array of the grid points ``start <= index < stop`` (mixed radix, last field fastest).

        ``dataflow`` comes as its string values (``"ws"``...), ``double_buffered`` as bool.
        """
        self._no_pod_grid()
        axes = self.grid_axes()
        index = np.arange(start, stop, dtype=np.int64)
        columns: dict[str, np.ndarray] = {}
        for p, values in reversed(axes):
            n = len(values)
            digit = index % n
            index = index // n
            table = np.array([_jsonable(v) for v in values], dtype=object if p.field == "dataflow" else None)
            columns[p.field] = table[digit]
        return {f: columns[f] for f in FIELD_NAMES}

    def grid_params(self, index: int) -> dict[str, Any]:
        """Optuna parameter values of grid point ``index``."""
        cols = self.grid_columns(index, index + 1)
        values = {f: _scalar(cols[f][0]) for f in FIELD_NAMES}
        return {p.name: p.encode(values[p.field]) for p in self.free_params}

    # -- identity ------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Canonical JSON-ready form of everything that defines the search problem."""
        out: dict[str, Any] = {
            "params": {p.field: p.to_dict() for p in self.params},
            "workloads": [{"spec": w.spec, "weight": w.weight} for w in self.workloads],
            "objectives": [o.name for o in self.objectives],
            "constraints": [str(c) for c in self.constraints],
        }
        if self.fpga is not None:  # only then: the fingerprints of spaces without a target stay as they were
            out["fpga"] = {"family": self.fpga.family, "device": self.fpga.device}
        if self.pod is not None:
            out["pod"] = self.pod.to_dict()
        return out

    @property
    def fingerprint(self) -> str:
        """12-hex-digit SHA-256 of :meth:`to_dict` (name and description excluded)."""
        canonical = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def _scalar(value: Any) -> Any:
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    return value
