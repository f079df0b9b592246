"""Pods of one chip design: LLM training and serving split over many chips (pure functions, no I/O).

The single-chip model (:func:`perf_model.evaluate`) gives each chip's op times; this package
places a split's groups on the topology (:mod:`~perf_model.pod.topology`), costs collectives
(:mod:`~perf_model.pod.collectives`), builds each chip's passes
(:mod:`~perf_model.pod.steps`), checks memory against HBM (:mod:`~perf_model.pod.memory`) and
composes step time, MFU, tokens/s, TTFT/TPOT and energy (:mod:`~perf_model.pod.evaluate`) and
searches the splits (:mod:`~perf_model.pod.split_search`).
docs/system.md states the formulas.
"""

from __future__ import annotations

from perf_model.pod.collectives import all_gather, all_reduce, all_to_all, p2p, reduce_scatter
from perf_model.pod.evaluate import (
    LINK_PJ_PER_BIT,
    SYSTEM_METRICS,
    OpCosts,
    SystemResult,
    evaluate_split,
    l2_chips,
    split_problem,
)
from perf_model.pod.memory import chip_memory, stage_params
from perf_model.pod.split_search import OBJECTIVES, candidate_splits, evaluate_system, rank_splits
from perf_model.pod.steps import Pass, core_op, passes
from perf_model.pod.topology import Axis, Segment, place, system_axes

__all__ = [
    "evaluate_system", "evaluate_split", "candidate_splits", "rank_splits", "l2_chips", "split_problem",
    "SystemResult", "OpCosts", "OBJECTIVES",
    "LINK_PJ_PER_BIT", "SYSTEM_METRICS", "chip_memory", "stage_params", "Pass", "passes", "core_op", "Axis",
    "Segment", "place", "system_axes", "all_gather", "all_reduce", "all_to_all", "p2p", "reduce_scatter",
]
