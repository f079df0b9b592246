"""The split search: every split of a pod a job can use, ranked by the evaluated step time or serving
figure (:func:`candidate_splits`, :func:`rank_splits`), and the best one (:func:`evaluate_system`).

Each split is evaluated by :func:`perf_model.pod.evaluate.evaluate_split`; the chips' op times are
evaluated once for all of them (:class:`~perf_model.pod.evaluate.OpCosts`).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Mapping
from typing import Any

from accel_spec.pod_config import Split, SystemConfig
from perf_model.pod.evaluate import OpCosts, SystemResult, evaluate_split, failed_result
from workloads.llm_ops import LlmJob, check_split

__all__ = ["candidate_splits", "rank_splits", "evaluate_system", "OBJECTIVES"]


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def candidate_splits(system: SystemConfig, job: LlmJob, *, microbatches: tuple[int, ...] = (1, 2, 4, 8, 16),
                     zeros: tuple[int, ...] | None = None, recompute: tuple[float, ...] | None = None,
                     overlap: bool = True, fixed: Mapping[str, Any] | None = None) -> list[Split]:
    """Every split the search tries: ``tp``, ``pp``, ``ep`` (MoE) dividing the chips and the model,
    ``dp`` the rest, ``microbatch`` dividing each replica's sequences, ZeRO 0/1/3 and recomputation
    0/1 in training.

    ``fixed`` holds :class:`Split` fields the search keeps: ``dp``, ``tp``, ``pp``, ``ep``,
    ``zero``, ``microbatch`` or ``recompute`` narrow their choices to that value (a fixed ``tp`` or
    ``pp`` need not divide the model: uneven stages and tensor parallelism beyond the heads are
    the caller's to ask for, :func:`split_problem` judges them); any other field (``overlap``,
    ``selective``, ``sequence_parallel``, ``interleave``, ``zero_gather``) is set on every split
    (``selective`` replaces the recomputation choices with 0).
    """
    chips = system.chips
    shape = job.shape
    fixed = dict(fixed or {})
    narrow = {k: fixed.pop(k) for k in ("dp", "tp", "pp", "ep", "zero", "microbatch", "recompute") if k in fixed}
    overlap = bool(fixed.pop("overlap", overlap))
    zeros = zeros if zeros is not None else ((0, 1, 3) if job.training else (0,))
    recompute = recompute if recompute is not None else ((0.0, 1.0) if job.training else (0.0,))
    if fixed.get("selective"):
        recompute = (0.0,)
    zeros = (narrow["zero"],) if "zero" in narrow else zeros
    recompute = (float(narrow["recompute"]),) if "recompute" in narrow else recompute
    microbatches = (narrow["microbatch"],) if "microbatch" in narrow else microbatches
    tps = [narrow["tp"]] if "tp" in narrow else _divisors(chips)
    pps = [narrow["pp"]] if "pp" in narrow else _divisors(chips)
    out = []
    for tp, pp in itertools.product(tps, pps):
        if chips % (tp * pp):
            continue
        if check_split(shape, tp=1 if "tp" in narrow else tp, pp=1 if "pp" in narrow else pp, ep=1):
            continue
        dp = chips // (tp * pp)
        if "dp" in narrow and dp != narrow["dp"]:
            continue
        eps = [e for e in _divisors(dp) if shape.moe and shape.experts % e == 0] or [1]
        eps = [narrow["ep"]] if "ep" in narrow else eps
        for ep, mb, zero, rc in itertools.product(eps, microbatches, zeros, recompute):
            if job.batch % (dp * mb) or dp % ep:
                continue
            out.append(Split(dp=dp, tp=tp, pp=pp, ep=ep, zero=zero, microbatch=mb, recompute=rc, overlap=overlap,
                             **fixed))
    return out


#: What a search ranks splits by: the training step, or serving's tokens/s, TTFT or TPOT.
OBJECTIVES = ("step", "throughput", "ttft", "tpot")


def _objective(result: SystemResult, objective: str | None = None) -> float:
    if result.job.training:
        return result.metrics["step_s"]
    if objective == "ttft":
        return result.metrics["ttft_s"]
    if objective == "tpot":
        return result.metrics["tpot_s"]
    return 1.0 / result.metrics["tokens_per_s"]


def rank_splits(system: SystemConfig, job: LlmJob, splits: list[Split] | None = None,
                costs: OpCosts | None = None, objective: str | None = None) -> list[SystemResult]:
    """Every split of ``splits`` (default: :func:`candidate_splits`) evaluated, the feasible ones
    first, best first (training: step time; serving: most tokens/s, or with ``objective``
    ``"ttft"`` or ``"tpot"`` the shortest time to first token or per output token), then the
    infeasible ones by the memory they need (``costs``: op times of the system's chip already known)."""
    costs = costs if costs is not None and costs.matches(system) else OpCosts.for_system(system)
    tries = splits if splits is not None else candidate_splits(system, job)
    results = [evaluate_split(system, job, s, costs) for s in tries]
    return sorted(results,
                  key=lambda r: (0, _objective(r, objective)) if r.ok else (1, r.memory.get("total", math.inf)))


def evaluate_system(system: SystemConfig, job: LlmJob, split: Split | None = None, *,
                    splits: list[Split] | None = None, objective: str | None = None) -> SystemResult:
    """The job on the system: with ``split`` that split, else the best of ``splits`` (default:
    :func:`candidate_splits`) by step time (training) or tokens/s (serving). When none fits, the
    result is infeasible with the reason of the split that needed the least memory."""
    if split is not None:
        return evaluate_split(system, job, split)
    ranked = rank_splits(system, job, splits, objective=objective)
    if not ranked:
        return failed_result(system, job, Split(dp=system.chips),
                             f"no split of {system.chips} chips fits {job.shape.name}")
    return dataclasses.replace(ranked[0], searched=len(ranked))
