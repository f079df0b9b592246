"""Bytes one chip holds: weights, gradients, optimizer state, activations, KV cache (pure functions).

* Weights of the chip's stage: ``layers / pp`` layers with attention, dense FFN and router over ``tp``,
  experts over ``ep * tp``, the embedding (first stage) or LM head (last stage)
  over ``tp``; at the weight format's width (:func:`~perf_model.pod.steps.operand_bytes`).
* Activations, the KV cache and the logits' neighbours are at the activation format's width.
* Training adds gradients (weight width) and Adam's state (fp32 master weights, first and second
  moments: 12 bytes per weight). ZeRO shards them over ``dp``: stage 1 the optimizer state, 2 and
  the gradients, 3 (FSDP) and the weights (plus one layer gathered at a time).
* Activations kept for the backward pass, per layer and microbatch (Korthikanti et al. 2022,
  "Reducing activation recomputation", eq. 2, 2-byte activations, scaled by the operand width):
  ``s b d (10 + 24 / tp) + 5 heads s^2 b / tp`` (the second term only when the scores are
  materialised); with recomputation ``r`` the kept part is ``(1 - r)`` of that plus ``r`` times the
  layer's input ``2 s b d``. Sequence parallelism shards the ``10 s b d`` over ``tp`` too
  (``34 s b d / tp``); selective recomputation drops the scores' term (eq. 6). Stage ``i`` (from 0)
  keeps ``min(pp - i, microbatches)`` microbatches in flight (1F1B), times ``1 + (pp - 1) / (pp v)``
  with the interleaved schedule of ``v`` chunks (sec. 4.2.3). The last stage holds the LM head's
  logits (fp32) of one microbatch. Stages hold :func:`~perf_model.pod.stages.stage_layers` layers.
* Serving: weights plus the KV cache (``2 layers hd (seq + gen)`` elements per (sequence, KV head)
  pair, ``ceil(seqs * hkv / tp)`` pairs on the chip: sharded over heads, and over the batch when
  ``tp`` exceeds the KV heads) plus one microbatch's layer activations.
"""

from __future__ import annotations

from accel_spec.pod_config import Split, SystemConfig
from perf_model.pod.stages import stage_layers
from perf_model.pod.steps import operand_bytes
from workloads.llm_ops import LlmJob, LlmShape

__all__ = ["stage_params", "chip_memory"]

#: Adam's state per weight in mixed precision: fp32 master copy, first and second moments (bytes).
OPTIMIZER_BYTES = 12


def stage_params(shape: LlmShape, split: Split, *, last: bool, first: bool | None = None,
                 layers: int | None = None) -> tuple[float, float]:
    """Weights on one chip of a stage of ``layers`` layers (default: the last or first stage's),
    with the LM head (``last``) and the embedding (``first``, default ``not last``): ``(dense, expert)``."""
    counts = stage_layers(shape.layers, split.pp)
    first = (not last or split.pp == 1) if first is None else first
    if layers is None:
        layers = counts[-1] if last else counts[0]
    dense = layers * (shape.attention_params + shape.ffn_params + shape.router_params) / split.tp
    dense += shape.head_params / split.tp if (last or split.pp == 1) else 0
    dense += shape.head_params / split.tp if first else 0
    expert = layers * shape.expert_params / (split.ep * split.tp)
    return dense, expert


def _activations(shape: LlmShape, job: LlmJob, split: Split, tokens: int, seq: int, width: float) -> float:
    per_layer = tokens * shape.d * (34 / split.tp if split.sequence_parallel else 10 + 24 / split.tp)
    if not job.fused_attention and not split.selective:
        per_layer += 5 * shape.heads * seq * tokens / split.tp
    per_layer *= width / 2
    kept = (1 - split.recompute) * per_layer + split.recompute * tokens * shape.d * width
    return kept


def chip_memory(system: SystemConfig, job: LlmJob, split: Split, microbatches: int) -> dict[str, float]:
    """Bytes per chip by part (``weights``, ``gradients``, ``optimizer``, ``activations``,
    ``kv_cache``) and ``total``, for the fullest of the first, the second and the last stage."""
    shape = job.shape
    width, act_width = operand_bytes(system.chip)
    counts = stage_layers(shape.layers, split.pp)
    mb_tokens = split.microbatch * job.seq
    best: dict[str, float] = {}
    # the first stage (most microbatches in flight), the second (may hold more layers), the last (LM head)
    for index in sorted({0, min(1, split.pp - 1), split.pp - 1}):
        last = index == split.pp - 1
        layers = counts[index]
        dense, expert = stage_params(shape, split, last=last, first=index == 0, layers=layers)
        params = dense + expert
        parts: dict[str, float] = {}
        if job.training:
            shard_w = split.dp if split.zero >= 3 else 1
            shard_g = split.dp if split.zero >= 2 else 1
            shard_o = split.dp if split.zero >= 1 else 1
            gathered = params / max(1, layers) if split.zero >= 3 else 0.0
            parts["weights"] = (params / shard_w + gathered) * width
            parts["gradients"] = params / shard_g * width
            parts["optimizer"] = params / shard_o * OPTIMIZER_BYTES
            in_flight = float(min(split.pp - index, microbatches))
            if split.interleave > 1:  # Korthikanti et al. 2022, sec. 4.2.3: the first stage holds more
                in_flight *= 1 + (split.pp - 1) / (split.pp * split.interleave)
            act = in_flight * layers * _activations(shape, job, split, mb_tokens, job.seq, act_width)
            if last:
                act += mb_tokens * shape.vocab / split.tp * 4
            parts["activations"] = act
            parts["kv_cache"] = 0.0
        else:
            seqs = job.batch // split.dp
            pairs = -(-seqs * shape.kv_heads // split.tp)  # (sequence, KV head) pairs on the chip
            parts["weights"] = params * width
            parts["gradients"] = parts["optimizer"] = 0.0
            parts["kv_cache"] = 2.0 * layers * pairs * shape.head_dim * (job.seq + job.gen) * act_width
            scores = 0 if job.fused_attention else -(-shape.heads // split.tp) * job.seq * mb_tokens
            # the working activations of a pass, sharded over the tensor group between the layer's
            # matmuls (Pope et al. 2022, sec. 3.2: the weight-stationary layouts keep them sharded)
            parts["activations"] = (4 * mb_tokens * shape.d / split.tp + scores) * act_width
        parts["total"] = sum(parts.values())
        if parts["total"] > best.get("total", -1.0):
            best = parts
    return best
