"""Held-out points of the third round of issue 51: H100 training, MoE training, TPU serving prefill.

None of these set any constant: the ``h100-cluster`` preset's figures are the datasheet's and a
microbenchmark's (its comments), the shared-cache model has no fitted parameter, and the
``tpu-v4-pod`` preset was built before (``bench/pod_validation_train.py`` holds its calibration point,
PaLM training). The model chooses only what the ``splits`` column of each point says.

======================  ========================================================================
point                   source and setup
======================  ========================================================================
LLaMA-3 405B, 8,192     Llama Team, "The Llama 3 Herd of Models", 2024, Table 4: 8,192 H100,
and 16,384 H100         tensor 8, pipeline 16, data 64 (128 on 16,384), sequence 8,192, batch 32
                        (16) sequences per data-parallel rank (16 M tokens), BF16 MFU 43 % (41 %);
                        shape Table 3 (below);
                        sec. 3.3.2: one layer fewer on the first and last stages (the model's
                        uneven stages do that), interleaved schedule, FSDP of optimizer state
                        and gradients (ZeRO-2 here). Assumed: sequence parallelism; searched:
                        microbatch 1-2, interleave 1-4, selective or full recomputation or none
Mixtral 8x22B, H100     Liu et al., "MoE Parallel Folding" (Megatron-Core), 2025, abstract: up to
                        49.3 % MFU for Mixtral 8x22B on H100. Shape: Mixtral 8x22B's published
                        config (56 layers, d 6,144, 48 heads of 128, 8 KV heads, 8 experts of
                        16,384, top-2, vocab 32,768). Not in the abstract, assumed: 128 GPUs
                        (16 nodes), batch 256 of 4,096, dropless routing; searched: tp 1-4,
                        pp 1-8, ep 1-8, microbatch 1-2, recomputation none or selective
PaLM 540B prefill,      Pope et al., "Efficiently scaling transformer inference", 2022, Table 2:
64 TPU v4               low-latency prefill, batch 1, 2,048 tokens, int8 weights: 0.29 s;
                        high-throughput prefill, batch 512, 2,048 tokens, bf16: 85.2 s (the
                        whole batch's prefill); split searched (tp 1-64, the rest pp;
                        microbatch 1-512)
PaLM 540B decode,       Pope et al. 2022, Table 2: high-throughput generate, batch 512, bf16,
batch 512               64 tokens after a 2,048-token prompt in 6.0 s: 93.75 ms per token
                        (split searched for the shortest time per token, as the paper's
                        generate layout is chosen apart from its prefill layout)
======================  ========================================================================

LLaMA-3 405B shape (Table 3): 126 layers, model dimension 16,384, FFN 53,248, 128 attention
heads, 8 key/value heads, vocabulary 128,000 (128,256 tokens in the released tokenizer).

Not added, and why: an MLPerf Inference LLaMA-2-70B point (its tokens/s could not be checked
against the submission's setup from any source at hand: FP8, in-flight batching and the
dataset's length distribution are part of it), GShard/Switch (encoder-decoder, MoE every other
layer: shapes this model does not have).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pod_validation import Point

from accel_dse.pod_files import load_system
from accel_spec.pod_config import Split, SystemConfig
from perf_model.pod import SystemResult
from workloads.llm_ops import LlmJob, LlmShape, llm_shape

LLAMA3_405B = LlmShape(name="llama3-405b", layers=126, d=16384, heads=128, kv_heads=8, ffn=53248, vocab=128256)
MIXTRAL_8X22B = LlmShape(name="mixtral-8x22b", layers=56, d=6144, heads=48, kv_heads=8, vocab=32768, experts=8,
                         top_k=2, expert_ffn=16384)


def _h100(nodes: int) -> SystemConfig:
    h100, _ = load_system("h100-cluster")
    return dataclasses.replace(h100, pods=nodes)


def _v4(**chip: Any) -> SystemConfig:
    v4, _ = load_system("tpu-v4-pod")
    return dataclasses.replace(v4, chip=dataclasses.replace(v4.chip, **chip) if chip else v4.chip, dims=(4, 4, 4))


def _mfu(r: SystemResult) -> float:
    return 100 * r.metrics["mfu"]


def _llama3_splits(dp: int):
    def make(system: SystemConfig, job: LlmJob) -> list[Split]:
        out = []
        for mb in (1, 2):
            for il in (1, 2, 4):
                for redo in ({"selective": True}, {"recompute": 1.0}, {}):
                    if job.batch % (dp * mb) == 0:
                        out.append(Split(dp=dp, tp=8, pp=16, zero=2, microbatch=mb, interleave=il,
                                         sequence_parallel=True, **redo))
        return out
    return make


def _mixtral_splits(system: SystemConfig, job: LlmJob) -> list[Split]:
    out = []
    for tp in (1, 2, 4):
        for pp in (1, 2, 4, 8):
            dp = system.chips // (tp * pp)
            for ep in (1, 2, 4, 8):
                for mb in (1, 2):
                    for redo in ({"selective": True}, {}):
                        if dp % ep == 0 and job.batch % (dp * mb) == 0:
                            out.append(Split(dp=dp, tp=tp, pp=pp, ep=ep, zero=1, microbatch=mb,
                                             sequence_parallel=tp > 1, **redo))
    return out


def _palm_splits(system: SystemConfig, job: LlmJob) -> list[Split]:
    return [Split(dp=1, tp=tp, pp=64 // tp, microbatch=mb) for tp in (1, 2, 4, 8, 16, 32, 64)
            for mb in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512) if job.batch % mb == 0]


def points() -> list[Point]:
    """The held-out points of this module (its docstring)."""
    out: list[Point] = []
    for gpus, dp, per_rank, mfu in ((8192, 64, 32, 43.0), (16384, 128, 16, 41.0)):
        job = LlmJob(shape=LLAMA3_405B, mode="train", batch=dp * per_rank, seq=8192, fused_attention=True)
        out.append(Point(f"LLaMA-3 405B, {gpus} H100, TP 8 PP 16 DP {dp}", "MFU %", mfu,
                         "Llama 3 Herd of Models 2024, Table 4", (lambda g=gpus: _h100(g // 8)), job,
                         _llama3_splits(dp), _mfu))
    job = LlmJob(shape=MIXTRAL_8X22B, mode="train", batch=256, seq=4096, fused_attention=True)
    out.append(Point("Mixtral 8x22B MoE, 128 H100 (split searched)", "MFU %", 49.3,
                     "MoE Parallel Folding 2025, abstract", lambda: _h100(16), job, _mixtral_splits, _mfu))
    palm = llm_shape("palm540b")
    job = LlmJob(shape=palm, mode="serve", batch=1, seq=2048, gen=1, fused_attention=True)
    out.append(Point("PaLM-540B int8 prefill, batch 1, 64 TPU v4", "s (TTFT)", 0.29, "Pope et al. 2022, Table 2",
                     lambda: _v4(weight_format="int8", act_format="int16"), job, _palm_splits,
                     lambda r: r.metrics["ttft_s"]))
    job = LlmJob(shape=palm, mode="serve", batch=512, seq=2048, gen=1, fused_attention=True)
    out.append(Point("PaLM-540B bf16 prefill, batch 512, 64 TPU v4", "s (prefill)", 85.2,
                     "Pope et al. 2022, Table 2", _v4, job, _palm_splits, lambda r: r.metrics["step_s"]))
    job = LlmJob(shape=palm, mode="serve", batch=512, seq=2048, gen=64, fused_attention=True)
    out.append(Point("PaLM-540B bf16 decode, batch 512, 64 TPU v4", "ms/token", 93.75, "Pope et al. 2022, Table 2",
                     _v4, job, _palm_splits, lambda r: 1e3 * r.metrics["tpot_s"], objective="tpot"))
    return out
