"""Scoring designs: the performance model over a space's weighted workloads.

The search core sees only this: designs (``ArrayConfig`` or columns of field values) in,
metrics out. :class:`ModelEvaluator` calls ``perf_model.evaluate_designs`` once per workload
on a whole batch of designs and aggregates the per-workload totals with the space's weights
(normalised to sum to 1):

* ``area_mm2``, ``power_w``, ``on_die_power_w`` and ``power_density_w_mm2``: the maximum over
  the workloads (the chip must fit its area, power and cooling budget on every workload);
* ``sqnr_db`` (the accuracy of the design's operand formats on the workload,
  ``workloads.accuracy``: computed once per workload and format pair): the minimum over the
  workloads (the formats must be accurate enough on every workload);
* every other metric: the weighted mean over the workloads.

With one workload the aggregate is exactly the model's figure. A design is feasible when it
is feasible on every workload; the reason of the first infeasible one is kept.

With an FPGA target (``fpga``, a space's ``[fpga]`` table) the metrics also hold the device's
:data:`~accel_dse.search.space.metrics.FPGA_METRIC_UNITS` from ``perf_model.fpga_metrics`` (one
vectorised call per batch; they describe the design, not a workload).
"""

from __future__ import annotations

import dataclasses
import importlib
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from accel_dse.search.space.design_space import FpgaTarget
from accel_dse.search.space.metrics import FPGA_METRIC_UNITS, METRIC_NAMES
from accel_spec.config import DATAFLOW_CODES, FIELD_NAMES, ArrayConfig
from accel_spec.errors import ModelError
from accel_spec.number_formats import pair_input_bits, pair_problem

__all__ = ["Evaluation", "BatchEvaluation", "ModelEvaluator", "MAX_METRICS", "MIN_METRICS", "WORKLOAD_FREE"]


def _pair_problems(pairs: Any) -> list[str]:
    """:func:`~accel_spec.number_formats.pair_problem` of each ``(input_bits, weight, act, acc_bits,
    checksum)``, each distinct one once."""
    seen: dict[tuple[Any, ...], str] = {}
    out = []
    for p in pairs:
        if p not in seen:
            seen[p] = pair_problem(int(p[0]), str(p[1]), str(p[2]), int(p[3]), str(p[4]))
        out.append(seen[p])
    return out


def _pair_input_bits(cols: Mapping[str, np.ndarray]) -> np.ndarray:
    """``input_bits`` of each design as ``ArrayConfig`` derives it from its formats
    (:func:`~accel_spec.number_formats.pair_input_bits`): a space that searches the formats
    beside a fixed (or independently sampled) ``input_bits`` scores the pair's own datapath."""
    seen: dict[tuple[Any, ...], int] = {}
    out = []
    for p in zip(cols["input_bits"].tolist(), cols["weight_format"].tolist(), cols["act_format"].tolist(),
                 strict=True):
        if p not in seen:
            seen[p] = pair_input_bits(int(p[0]), str(p[1]), str(p[2]))
        out.append(seen[p])
    return np.asarray(out, dtype=np.int64)


def _sqnr_column(workload: Any, cols: Mapping[str, np.ndarray], index: np.ndarray) -> np.ndarray:
    """``sqnr_db`` of each design ``index`` on ``workload``: one accuracy figure per distinct format pair."""
    from workloads.accuracy import workload_sqnr_db

    out = np.full(index.size, np.nan)
    seen: dict[tuple[str, str], float] = {}
    for j, i in enumerate(index):
        bits = int(cols["input_bits"][i])
        weight, act = (f"int{bits}" if str(v) == "auto" else str(v)
                       for v in (cols["weight_format"][i], cols["act_format"][i]))
        pair = (weight, act)
        if pair not in seen:
            seen[pair] = workload_sqnr_db(workload, *pair) if hasattr(workload, "ops") else math.nan
        out[j] = seen[pair]
    return out


#: Metrics no workload changes (the model gives them without scoring one): ``skip_broken``'s.
WORKLOAD_FREE = ("area_mm2",)


def _unbroken(perf: Any, designs: Any, rules: Sequence[Any], index: np.ndarray, reason: list[str]) -> np.ndarray | None:
    """Per design of ``designs`` (the batch's ``index``) whether it meets every rule of ``rules`` on a
    :data:`WORKLOAD_FREE` metric, the reason of one that does not put in ``reason``; ``None`` when no
    rule is on one (or the model cannot give the area without a workload)."""
    rules = [c for c in rules if c.metric in WORKLOAD_FREE]
    if not rules or not hasattr(perf, "design_area"):
        return None
    area = np.asarray(perf.design_area(designs), dtype=np.float64)
    kept = np.ones(len(area), dtype=bool)
    for c in rules:
        broken = kept & (np.asarray(c.violation(area)) > 0)
        for j in np.flatnonzero(broken).tolist():
            reason[int(index[j])] = f"{c.metric} = {area[j]:.4g} breaks the constraint {c} (not scored)"
        kept &= ~broken
    return kept


#: Metrics aggregated by their maximum over the workloads (the rest: weighted mean).
MAX_METRICS = ("area_mm2", "power_w", "on_die_power_w", "power_density_w_mm2")
#: Metrics aggregated by their minimum over the workloads.
MIN_METRICS = ("sqnr_db",)


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """The score of one design.

    Attributes:
        feasible: Whether the design can run every workload (buffers fit, ...).
        reason: Why not, ``""`` when feasible.
        metrics: Aggregate metric -> value (units of :data:`~accel_dse.search.METRIC_UNITS`).
        per_workload: Workload spec -> metric -> value.
        overflow: The design is not feasible because an op's reduction can overflow its
            accumulators (``acc_bits`` too small for K), not for want of buffer space.
        details: What else the trial records (a pod space: the split and the chips).
        notes: ``""``, or what the design leaves to the host per workload (convs run as the host's
            im2col GEMM, how many and why: ``DesignTable.conv_notes``).
    """

    feasible: bool
    reason: str
    metrics: dict[str, float]
    per_workload: dict[str, dict[str, float]]
    overflow: bool = False
    details: dict[str, Any] = dataclasses.field(default_factory=dict)
    notes: str = ""


@dataclasses.dataclass(frozen=True)
class BatchEvaluation:
    """Scores of many designs, one array element per design.

    Attributes:
        feasible: bool array.
        reason: ``""`` for feasible designs, the reason otherwise.
        metrics: Aggregate metric -> float64 array (0 where infeasible).
        overflow: bool array, infeasible by accumulator overflow (see :class:`Evaluation`).
        notes: per design, ``""`` or :attr:`Evaluation.notes`.
    """

    feasible: np.ndarray
    reason: list[str]
    metrics: dict[str, np.ndarray]
    overflow: np.ndarray | None = None
    notes: list[str] | None = None


class ModelEvaluator:
    """Scores designs with an analytic model over weighted workloads.

    Args:
        workloads: ``(name, weight, workload)`` triples; ``workload`` is what the model takes
            (a ``workloads.Workload`` or a sequence of ``(op, count)``). Weights > 0.
        model: Name of the module that provides ``DesignArrays`` and ``evaluate_designs``
            (the real ``perf_model`` by default; a name keeps the evaluator picklable for
            worker processes); with ``fpga`` also ``fpga_metrics``.
        fpga: The FPGA target whose metrics are added (``None``: none).
    """

    def __init__(self, workloads: Sequence[tuple[str, float, Any]], *, model: str = "perf_model",
                 fpga: FpgaTarget | None = None) -> None:
        if not workloads:
            raise ModelError("an evaluator needs at least one workload, not none")
        total = 0.0
        for name, weight, _ in workloads:
            if not isinstance(weight, (int, float)) or not math.isfinite(weight) or weight <= 0:
                raise ModelError(f"weight of workload {name!r} must be a positive finite number, not {weight!r}")
            total += float(weight)
        self.workloads = [(str(n), float(w) / total, wl) for n, w, wl in workloads]
        self.model = model
        self.fpga = fpga
        self._module: Any = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_module"] = None
        return state

    def _perf(self) -> Any:
        if self._module is None:
            self._module = importlib.import_module(self.model)
        return self._module

    @property
    def figure_model(self) -> str:
        """What the model's figures are (``perf_model.FIGURE_MODEL``; ``""`` for a model that does not
        say): each trial records it, and ``accel-dse verify`` refuses a trial recorded under another."""
        return str(getattr(self._perf(), "FIGURE_MODEL", ""))

    # -- batches ---------------------------------------------------------------------------
    def evaluate_columns(
        self, columns: Mapping[str, Any], *, per_workload: bool = False, skip_broken: Sequence[Any] = ()
    ) -> BatchEvaluation | tuple[BatchEvaluation, dict[str, dict[str, np.ndarray]]]:
        """Score the designs given as columns of ``ArrayConfig`` field values.

        Args:
            columns: Field -> array (one element per design); ``dataflow`` as strings or codes.
                Designs that break a cross-field rule (``acc_bits < 2 * input_bits``) come
                back infeasible with that reason instead of raising.
            per_workload: Also return workload -> metric -> array.
            skip_broken: Constraints (``Constraint``); those on a metric no workload changes
                (:data:`WORKLOAD_FREE`: the die area, the model's ``design_area``) are checked before
                the workloads are scored, and a design that breaks one is not scored: it comes back
                infeasible, the constraint and its area as its reason (the grid sampler, which keeps
                no such design). The others are left to the caller.

        Returns:
            The aggregate :class:`BatchEvaluation` (and the per-workload arrays if asked).
        """
        cols = {f: np.asarray(columns[f]) for f in FIELD_NAMES}
        n = len(cols["rows"])
        dataflow = cols["dataflow"]
        if dataflow.dtype.kind in ("U", "S", "O"):
            cols["dataflow"] = np.array([DATAFLOW_CODES[str(getattr(d, "value", d))] for d in dataflow],
                                        dtype=np.int64)
        cols["input_bits"] = _pair_input_bits(cols)
        valid = cols["acc_bits"].astype(np.int64) >= 2 * cols["input_bits"].astype(np.int64)
        reason = ["" if ok else "acc_bits must be >= 2 * input_bits" for ok in valid]
        notes: list[list[str]] = [[] for _ in range(n)]
        pairs = zip(cols["input_bits"].tolist(), cols["weight_format"].tolist(), cols["act_format"].tolist(),
                    cols["acc_bits"].tolist(), cols["checksum"].tolist(), strict=True)
        for i, problem in enumerate(_pair_problems(pairs)):
            if problem and valid[i]:
                valid[i], reason[i] = False, problem
        feasible = valid.copy()
        overflow = np.zeros(n, dtype=bool)
        names = METRIC_NAMES + (tuple(FPGA_METRIC_UNITS) if self.fpga is not None else ())
        metrics = {m: np.zeros(n) for m in names}
        details: dict[str, dict[str, np.ndarray]] = {}
        index = np.flatnonzero(valid)
        if index.size:
            perf = self._perf()
            designs = perf.DesignArrays.from_columns(**{f: cols[f][index] for f in FIELD_NAMES})
            kept = _unbroken(perf, designs, skip_broken, index, reason) if skip_broken else None
            if kept is not None:
                feasible[index[~kept]] = False
                index, designs = index[kept], designs.take(kept)
        if index.size:
            for position, (name, weight, workload) in enumerate(self.workloads):
                table = perf.evaluate_designs(designs, workload)
                ok = np.asarray(table.feasible, dtype=bool)
                over = np.asarray(getattr(table, "overflow", np.zeros(len(ok), dtype=bool)), dtype=bool)
                for j in np.flatnonzero(~ok):
                    i = index[j]
                    if feasible[i]:
                        feasible[i] = False
                        overflow[i] = over[j]
                        reason[i] = f"{name}: {table.reason[j]}"
                for k, note in enumerate(getattr(table, "conv_notes", ())):
                    if note:
                        notes[index[k]].append(f"{name}: {note}")
                detail = {}
                sqnr = _sqnr_column(workload, cols, index)
                for m in METRIC_NAMES:
                    if m == "sqnr_db":
                        values = sqnr
                    elif not hasattr(table, m):
                        continue
                    else:
                        values = np.asarray(getattr(table, m), dtype=np.float64)
                    detail[m] = values
                    if m in MIN_METRICS:
                        first = position == 0
                        metrics[m][index] = values if first else np.minimum(metrics[m][index], values)
                    elif m in MAX_METRICS:
                        metrics[m][index] = np.maximum(metrics[m][index], values)
                    else:
                        metrics[m][index] += weight * values
                if per_workload:
                    full = {m: np.zeros(n) for m in detail}
                    for m, values in detail.items():
                        full[m][index] = values
                    details[name] = full
            if self.fpga is not None:
                for m, values in perf.fpga_metrics(designs, self.fpga.family, self.fpga.device).items():
                    metrics[m][index] = values
        for m in metrics:
            metrics[m][~feasible] = 0.0
        batch = BatchEvaluation(feasible=feasible, reason=reason, metrics=metrics, overflow=overflow,
                                notes=["; ".join(ns) if ok else "" for ns, ok in zip(notes, feasible, strict=True)])
        return (batch, details) if per_workload else batch

    # -- one design ------------------------------------------------------------------------
    def evaluate(self, config: ArrayConfig) -> Evaluation:
        """Score one design (the same vectorised code on a batch of one)."""
        data = config.to_dict()
        columns = {f: np.array([data[f]]) for f in FIELD_NAMES}
        batch, details = self.evaluate_columns(columns, per_workload=True)  # type: ignore[misc]
        metrics = {m: float(v[0]) for m, v in batch.metrics.items()}
        per_workload = {w: {m: float(v[0]) for m, v in d.items()} for w, d in details.items()}
        return Evaluation(
            feasible=bool(batch.feasible[0]), reason=batch.reason[0], metrics=metrics, per_workload=per_workload,
            overflow=bool(batch.overflow[0]) if batch.overflow is not None else False,
            notes=batch.notes[0] if batch.notes else "",
        )
