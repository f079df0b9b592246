"""Bytes one chip holds: weights, gradients, optimizer state, activations, KV cache (pure functions).

* Weights of the chip's stage: ``layers / pp`` layers with attention, dense FFN and router over ``tp``,
  experts over ``ep * tp``, the embedding (first stage) or LM head (last stage)
  over ``tp``; at the operand width (``input_bits / 8`` bytes).
* Training adds gradients (operand width) and Adam's state (fp32 master weights, first and second
  moments: 12 bytes per weight). ZeRO shards them over ``dp``: stage 1 the optimizer state, 2 and
  the gradients, 3 (FSDP) and the weights (plus one layer gathered at a time).
* Activations kept for the backward pass, per layer and microbatch (Korthikanti et al. 2022,
  "Reducing activation recomputation", eq. 2, 2-byte activations, scaled by the operand width):
  ``s b d (10 + 24 / tp) + 5 heads s^2 b / tp`` (the second term only when the scores are
  materialised); with recomputation ``r`` the kept part is ``(1 - r)`` of that plus ``r`` times the
  layer's input ``2 s b d``. The first stage keeps ``min(pp, microbatches)`` microbatches in flight
  (1F1B). The last stage holds the LM head's logits (fp32) of one microbatch.
* Serving: weights plus the KV cache of the chip's sequences (``2 layers/pp hkv hd (seq + gen)``
  elements each) plus one microbatch's layer activations.
"""

from __future__ import annotations

from accel_spec.pod_config import Split, SystemConfig
from workloads.llm_ops import LlmJob, LlmShape

__all__ = ["stage_params", "chip_memory"]

#: Adam's state per weight in mixed precision: fp32 master copy, first and second moments (bytes).
OPTIMIZER_BYTES = 12


def stage_params(shape: LlmShape, split: Split, *, last: bool) -> tuple[float, float]:
    """Weights on one chip of the first or last stage: ``(dense, expert)`` counts."""
    layers = shape.layers // split.pp
    dense = layers * (shape.attention_params + shape.ffn_params + shape.router_params) / split.tp
    dense += shape.head_params / split.tp if (last or split.pp == 1) else 0
    dense += shape.head_params / split.tp if (not last or split.pp == 1) else 0
    expert = layers * shape.expert_params / (split.ep * split.tp)
    return dense, expert


def _activations(shape: LlmShape, job: LlmJob, split: Split, tokens: int, seq: int, width: float) -> float:
    per_layer = tokens * shape.d * (10 + 24 / split.tp)
    if not job.fused_attention:
        per_layer += 5 * shape.heads * seq * tokens / split.tp
    per_layer *= width / 2
    kept = (1 - split.recompute) * per_layer + split.recompute * tokens * shape.d * width
    return kept


def chip_memory(system: SystemConfig, job: LlmJob, split: Split, microbatches: int) -> dict[str, float]:
    """Bytes per chip by part (``weights``, ``gradients``, ``optimizer``, ``activations``,
    ``kv_cache``) and ``total``, for the fuller of the first and the last stage."""
    shape = job.shape
    width = system.chip.input_bits / 8
    layers = shape.layers // split.pp
    mb_tokens = split.microbatch * job.seq
    best: dict[str, float] = {}
    for last in (False, True):
        dense, expert = stage_params(shape, split, last=last)
        params = dense + expert
        parts: dict[str, float] = {}
        if job.training:
            shard_w = split.dp if split.zero >= 3 else 1
            shard_g = split.dp if split.zero >= 2 else 1
            shard_o = split.dp if split.zero >= 1 else 1
            gathered = params / layers if split.zero >= 3 else 0.0
            parts["weights"] = (params / shard_w + gathered) * width
            parts["gradients"] = params / shard_g * width
            parts["optimizer"] = params / shard_o * OPTIMIZER_BYTES
            in_flight = min(split.pp, microbatches) if not last else 1
            act = in_flight * layers * _activations(shape, job, split, mb_tokens, job.seq, width)
            if last:
                act += mb_tokens * shape.vocab / split.tp * 4
            parts["activations"] = act
            parts["kv_cache"] = 0.0
        else:
            seqs = job.batch // split.dp
            hkv = -(-shape.kv_heads // split.tp)
            parts["weights"] = params * width
            parts["gradients"] = parts["optimizer"] = 0.0
            parts["kv_cache"] = 2.0 * layers * hkv * shape.head_dim * (job.seq + job.gen) * seqs * width
            scores = 0 if job.fused_attention else -(-shape.heads // split.tp) * job.seq * mb_tokens
            parts["activations"] = (4 * mb_tokens * shape.d + scores) * width
        parts["total"] = sum(parts.values())
        if parts["total"] > best.get("total", -1.0):
            best = parts
    return best
