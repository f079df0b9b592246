"""Data-parallel communication of one training step: gradient all-reduce, ZeRO-3/FSDP gathers (pure).

``S`` is the chip's stage weights at the operand width (dense weights over the whole data-parallel
group ``dp_all``, the experts' over ``dp / ep``), ``m`` the microbatches, ``r`` the recomputed
fraction of the forward pass (0 with selective recomputation: the attention core holds no weights):

* ZeRO 0-2: one all-reduce of the gradients per step (ZeRO-2's reduce-scatter plus the all-gather
  of the updated weights moves the same bytes).
* ZeRO 3 (FSDP): per microbatch, the weights are gathered before each pass that needs them
  (forward, the recomputation ``r``, backward: ``2 + r`` all-gathers of ``S``) and the gradients
  reduce-scattered once, ``m`` times a step: nothing is kept between microbatches. Each is issued
  per layer (``zero_gather = "layer"``: one collective per layer, FSDP's per-layer wrapping) or per
  weight tensor (``"tensor"``: :func:`weight_tensors` per layer, DeepSpeed ZeRO-3 of 2021), so the
  latency term, ``(N - 1)`` hops for a flat ring of ``N`` ranks, is paid per layer or tensor: as the
  data-parallel group grows the bytes per chip stay the same and the latency grows with ``N``.

With ``overlap`` the gradient all-reduce runs under the backward passes and ZeRO-3's collectives
under the forward and backward passes (prefetch); what does not fit is exposed. Link contention:
when the tensor-parallel or expert group crosses an axis the data-parallel group crosses too (as
tp = 2 and dp within one NVSwitch node), those collectives and the data-parallel ones share the
links one at a time, so the data-parallel traffic hides only under the part of each pass the
others leave free: ``exposed = max(0, dp - m (T_b - busy_b))`` (ZeRO-3: ``m (T_f - busy_f + T_b -
busy_b)``), ``busy`` the pass's tensor-parallel and expert collective time on shared axes.
"""

from __future__ import annotations

from accel_spec.pod_config import Split, SystemConfig
from perf_model.pod import collectives as coll
from perf_model.pod.steps import operand_bytes
from perf_model.pod.topology import Segment
from workloads.llm_ops import LlmShape

__all__ = ["weight_tensors", "data_parallel_s", "exposed_s", "shared_axes"]


def weight_tensors(shape: LlmShape) -> int:
    """Weight tensors of one layer as the frameworks hold them.

    Gated (LLaMA-style, no biases): Q, K, V, output, gate, up, down and two norm scales: 9.
    Not gated (GPT-style, with biases): fused QKV, output, up and down, each weight and bias, and
    two layer norms' scale and bias: 12. MoE adds each expert's matrices and the router.
    """
    base = 9 if shape.gated else 12
    if shape.moe:
        mats = 3 if shape.gated else 2
        base += shape.experts * mats + 1 - (3 if shape.gated else 4)
    return base


def data_parallel_s(system: SystemConfig, shape: LlmShape, split: Split, groups: dict[str, list[Segment]],
                    dense: float, expert: float, layers: int, microbatches: int) -> float:
    """Seconds of data-parallel communication per step (module docstring); ``dense`` and ``expert``
    are the chip's stage weights (counts), ``layers`` the stage's layers."""
    width, _ = operand_bytes(system.chip)
    flat = system.dcn_rings == "flat"
    if split.zero < 3:
        return (coll.all_reduce(groups["dp_all"], dense * width, flat=flat)
                + coll.all_reduce(groups["dp"], expert * width, flat=flat))
    pieces = max(1, layers) * (weight_tensors(shape) if split.zero_gather == "tensor" else 1)
    gathers = 2.0 + (0.0 if split.selective else split.recompute)
    per_mb = 0.0
    for segs, size in ((groups["dp_all"], dense * width), (groups["dp"], expert * width)):
        one = coll.all_gather(segs, size, flat=flat, pieces=pieces)
        per_mb += (gathers + 1.0) * one
    return microbatches * per_mb


def exposed_s(split: Split, dp_s: float, microbatches: int, t_f: float, t_b: float, busy_f: float = 0.0,
              busy_b: float = 0.0) -> float:
    """The part of ``dp_s`` not hidden under compute (module docstring).

    ``busy_f`` and ``busy_b``: seconds of each forward and backward pass in which the tensor-parallel
    and expert collectives hold links the data-parallel group also uses (:func:`shared_axes`); the
    links serve one collective at a time, so the data-parallel traffic hides only under the rest."""
    if not split.overlap:
        return dp_s
    under = microbatches * ((t_f - busy_f) + (t_b - busy_b) if split.zero >= 3 else t_b - busy_b)
    return max(0.0, dp_s - max(0.0, under))


def shared_axes(groups: dict[str, list[Segment]], kinds: tuple[str, ...] = ("tp", "ep")) -> set[str]:
    """Which of ``kinds`` (groups of a placement) cross an axis the data-parallel group ``dp_all``
    also crosses: their collectives and the data-parallel ones contend for the same links."""
    dp_axes = {s.axis for s in groups.get("dp_all", [])}
    return {k for k in kinds if dp_axes & {s.axis for s in groups.get(k, [])}}
