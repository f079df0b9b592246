"""Pipeline stages: how many layers each holds, which stage is the bottleneck, the schedule (pure).

``pp`` need not divide the layers. The stages take them as evenly as possible: ``layers // pp``
each, and the ``layers % pp`` left over go one each to the middle stages first (the first stage
also holds the embedding and the last the LM head), then to the first stage, then to the last.
BLOOM's 70 layers on 12 stages: 5, 6 x 10, 5 (as Megatron-DeepSpeed counts the embedding and the
head as a layer each: 72 / 12).

The schedule is 1F1B, optionally interleaved (Narayanan et al. 2021, sec. 2.2.2): each stage holds
``v = interleave`` chunks of its layers, a microbatch visits every stage ``v`` times, the bubble
shrinks to ``(pp - 1) / v`` pass times and the stage sends ``v`` times as many activations. The
interleaved schedule needs the microbatches to be a multiple of ``pp``. With stages of unequal
time, every stage runs in step with the slowest (the bottleneck), so a step is::

    pipeline = (m + (pp - 1) / v) * max over stages of (T_f + T_b)
"""

from __future__ import annotations

from accel_spec.pod_config import Split

__all__ = ["stage_layers", "pipeline_s", "bubble_s", "schedule_problem"]


def stage_layers(layers: int, pp: int) -> list[int]:
    """Layers of each of the ``pp`` stages, first to last (module docstring)."""
    base, extra = divmod(layers, pp)
    counts = [base] * pp
    order = list(range(1, pp - 1)) + ([0, pp - 1] if pp > 1 else [0])
    for i in order[:extra]:
        counts[i] += 1
    return counts


def schedule_problem(layers: int, split: Split, microbatches: int) -> str:
    """Why the split's pipeline cannot run (``""`` if it can): stages without layers, interleaving
    with chunks the layers do not fill or microbatches not a multiple of ``pp``."""
    if split.pp > layers:
        return f"pp={split.pp} must be at most the model's layers ({layers})"
    if split.interleave > 1:
        if split.pp * split.interleave > layers:
            return (f"pp * interleave = {split.pp} * {split.interleave} must be at most the model's layers "
                    f"({layers}): every chunk holds a layer")
        if microbatches % split.pp:
            return (f"the interleaved schedule needs the microbatches ({microbatches}) to be a multiple of "
                    f"pp ({split.pp})")
    return ""


def pipeline_s(split: Split, microbatches: int, stage_s: float) -> float:
    """Seconds of the pipeline for ``stage_s`` = the bottleneck stage's ``T_f + T_b``."""
    return (microbatches + (split.pp - 1) / split.interleave) * stage_s


def bubble_s(split: Split, stage_s: float) -> float:
    """Seconds of the pipeline bubble: ``(pp - 1) / v`` pass times."""
    return (split.pp - 1) / split.interleave * stage_s
