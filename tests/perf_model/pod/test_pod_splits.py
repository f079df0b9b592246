"""The splits people use, by hand: uneven stages, the interleaved schedule, sequence parallelism,
selective recomputation, and serving's prefill running the LM head once per sequence."""

from __future__ import annotations

import dataclasses

import pytest
from pod_testlib import CHIP, DENSE, system, train

from accel_spec.pod_config import Split
from perf_model import evaluate_op
from perf_model.pod import chip_memory, evaluate_split, evaluate_system
from perf_model.pod.stages import bubble_s, pipeline_s, stage_layers
from perf_model.pod.steps import core_op
from workloads.llm_ops import LlmJob, layer_ops

# DENSE (d 256, 8 heads of 32, 4 KV heads, SwiGLU 512, vocab 1024), by hand:
LAYER_PARAMS = 256 * (8 + 2 * 4) * 32 + 8 * 32 * 256 + 3 * 256 * 512  # 589,824
HEAD_PARAMS = 1024 * 256  # 262,144


def test_stage_layers_give_the_leftovers_to_the_middle_stages():
    assert stage_layers(70, 12) == [5] + [6] * 10 + [5]  # BLOOM: 72 "layers" with embedding and head
    assert stage_layers(8, 4) == [2, 2, 2, 2]
    assert stage_layers(7, 2) == [4, 3]
    assert stage_layers(118, 4) == [29, 30, 30, 29]
    assert stage_layers(5, 1) == [5]


def test_interleaved_pipeline_and_bubble_by_hand():
    split = Split(dp=1, pp=4, interleave=2)
    assert pipeline_s(split, 8, 1.0) == pytest.approx(8 + 3 / 2)
    assert bubble_s(split, 1.0) == pytest.approx(1.5)
    assert bubble_s(Split(dp=1, pp=4), 1.0) == pytest.approx(3.0)


def test_uneven_stages_memory_is_the_fullest_stage():
    # 6 layers on 4 stages: 1, 2, 2, 1; 8 sequences of 64, microbatch 1: 8 microbatches
    job = train(batch=8, seq=64)
    split = Split(dp=1, pp=4)
    per_layer = 64 * 256 * 34  # Korthikanti eq. 2, fused attention, tp 1, bf16
    stage0 = (LAYER_PARAMS + HEAD_PARAMS) * 16 + 4 * per_layer  # embedding; 4 microbatches in flight
    stage1 = 2 * LAYER_PARAMS * 16 + 3 * 2 * per_layer  # 2 layers, 3 microbatches in flight
    assert stage1 > stage0
    shape6 = dataclasses.replace(DENSE, layers=6)
    mem = chip_memory(system("ring", (4,)), dataclasses.replace(job, shape=shape6), split, 8)
    assert mem["activations"] == pytest.approx(6 * per_layer)
    assert mem["total"] == pytest.approx(stage1)


def test_uneven_stages_run_and_the_slowest_stage_sets_the_pace():
    shape = dataclasses.replace(DENSE, layers=6)
    job = dataclasses.replace(train(batch=8, seq=64), shape=shape)
    sys4 = system("ring", (4,), hbm_gib=64.0)
    uneven = evaluate_split(sys4, job, Split(dp=1, pp=4))
    assert uneven.ok, uneven.reason
    # 6 layers on 4 stages run at the pace of a 2-layer stage: as 8 layers on 4 stages, minus the
    # last stage's extra layer (the 8-layer split's bottleneck is its last stage: 2 layers + head)
    even8 = evaluate_split(sys4, dataclasses.replace(job, shape=dataclasses.replace(DENSE, layers=8)),
                           Split(dp=1, pp=4))
    assert uneven.metrics["step_s"] < even8.metrics["step_s"]
    assert uneven.breakdown["bubble_s"] == pytest.approx(3 / 11 * (uneven.metrics["step_s"]
                                                                   - uneven.breakdown["optimizer_s"]))


def test_sequence_parallel_and_selective_activations_by_hand():
    job = LlmJob(shape=DENSE, mode="train", batch=1, seq=64, fused_attention=False)
    two = system("ring", (2,))
    base = chip_memory(two, job, Split(tp=2), 1)["activations"]
    sp = chip_memory(two, job, Split(tp=2, sequence_parallel=True), 1)["activations"]
    sel = chip_memory(two, job, Split(tp=2, sequence_parallel=True, selective=True), 1)["activations"]
    logits = 64 * 1024 / 2 * 4
    scores = 5 * 8 * 64 * 64 / 2  # 5 a s^2 b / t
    assert base == pytest.approx(4 * (64 * 256 * (10 + 24 / 2) + scores) + logits)
    assert sp == pytest.approx(4 * (64 * 256 * 34 / 2 + scores) + logits)
    assert sel == pytest.approx(4 * (64 * 256 * 34 / 2) + logits)


def test_selective_recomputation_repeats_the_attention_core_once():
    job = LlmJob(shape=DENSE, mode="train", batch=2, seq=64, fused_attention=False)
    one = system("ring", (1,))
    plain = evaluate_split(one, job, Split(microbatch=1))
    selective = evaluate_split(one, job, Split(microbatch=1, selective=True))
    # the scores and context GEMMs of 4 layers, and the softmax's 2 hq T elements per token through HBM
    core = sum(evaluate_op(CHIP, core_op(op, 1)).latency_s for op in layer_ops(DENSE, seqs=1, q_len=64, kv_len=64)
               if op.name in ("scores", "context"))
    hbm = 64.0 * 1000e6
    softmax = 64 * 2 * 8 * 64 * 2 / hbm
    assert selective.metrics["step_s"] - plain.metrics["step_s"] == pytest.approx(2 * 4 * (core + softmax), rel=1e-9)


def test_prefill_runs_the_lm_head_once_per_sequence():
    job = LlmJob(shape=DENSE, mode="serve", batch=2, seq=64, gen=1)
    result = evaluate_split(system("ring", (1,)), job, Split())
    assert result.ok, result.reason
    active = 4 * LAYER_PARAMS + HEAD_PARAMS
    per_token = 2 * active + 4 * 4 * 8 * 32 * 64
    flops = 2 * (64 * per_token - 63 * 2 * HEAD_PARAMS)  # the head for the last prompt token only
    peak = 2 * 16 * 16 * 1000e6
    assert result.metrics["mfu"] * result.metrics["step_s"] * peak == pytest.approx(flops)
    assert result.metrics["mfu"] <= result.metrics["hfu"]


def test_decode_attention_reads_each_kv_head_once_for_its_query_heads():
    from perf_model.pod.steps import chip_layer_ops

    ops = {op.name: op for op in chip_layer_ops(DENSE, seqs=4, q_len=1, kv_len=100, tp=2, ep=1)}
    # 4 sequences x 4 KV heads over 2 chips: 8 pairs, each the 2 query heads that share the KV head
    assert (ops["scores"].m, ops["scores"].k, ops["scores"].n, ops["scores"].batch) == (2, 32, 100, 8)
    assert (ops["context"].m, ops["context"].k, ops["context"].n, ops["context"].batch) == (2, 100, 32, 8)
    # the same MACs as the per-head form: 4 sequences x 4 local heads x 32 x 100
    assert ops["scores"].macs == 4 * 4 * 32 * 100


def test_tensor_parallel_beyond_the_heads_splits_columns_and_shards_the_kv_cache_over_the_batch():
    from perf_model.pod.steps import chip_layer_ops

    mqa = dataclasses.replace(DENSE, kv_heads=1)
    ops = {op.name: op for op in chip_layer_ops(mqa, seqs=8, q_len=1, kv_len=64, tp=16, ep=1)}
    assert ops["qkv"].n == -(-(8 + 2) * 32 // 16)  # 20 columns of 320
    assert ops["out"].k == 8 * 32 // 16 and ops["up"].n == 512 // 16
    assert ops["scores"].batch == 1 and ops["scores"].m == 8  # 8 (sequence, KV head) pairs over 16: 1 each
    job = LlmJob(shape=mqa, mode="serve", batch=8, seq=48, gen=16)
    mem = chip_memory(system("ring", (4,)), job, Split(tp=4), 1)
    # 8 sequences' single KV head over 4 chips: 2 each, 4 layers, K and V, 32 wide, 64 positions, bf16
    assert mem["kv_cache"] == pytest.approx(2 * 4 * 2 * 32 * 64 * 2)
    result = evaluate_split(system("ring", (16,)), dataclasses.replace(job, batch=16),
                            Split(tp=16, microbatch=16))
    assert result.ok, result.reason


def test_an_int8_inference_chip_is_refused_for_training_and_serves():
    int8 = dataclasses.replace(CHIP, input_bits=8, acc_bits=32)
    pod = dataclasses.replace(system("ring", (2,)), chip=int8)
    result = evaluate_split(pod, train(batch=2), Split(dp=2))
    assert not result.ok
    assert "weight operands are int8 (8-bit integers): training needs 16-bit" in result.reason
    searched = evaluate_system(pod, train(batch=2))
    assert not searched.ok and "training needs 16-bit" in searched.reason
    assert evaluate_split(pod, LlmJob(shape=DENSE, mode="serve", batch=2, seq=32, gen=4), Split(dp=2)).ok
    # bf16 (16-bit) operands train
    assert evaluate_split(system("ring", (2,)), train(batch=2), Split(dp=2)).ok


def test_weights_and_activations_keep_their_own_widths():
    from perf_model.pod.steps import operand_bytes

    w8a16 = dataclasses.replace(CHIP, weight_format="int8", act_format="int16")
    assert operand_bytes(w8a16) == (1.0, 2.0)
    assert operand_bytes(CHIP) == (2.0, 2.0)
    assert operand_bytes(dataclasses.replace(CHIP, input_bits=8, acc_bits=32, weight_format="int4",
                                             act_format="int8")) == (1.0, 1.0)
    job = LlmJob(shape=DENSE, mode="serve", batch=2, seq=48, gen=16)
    mem = chip_memory(dataclasses.replace(system("ring", (1,)), chip=w8a16), job, Split(), 1)
    # 1-byte weights: 4 layers and the embedding and the LM head; 2-byte KV cache: 2 sequences x 4 KV heads
    assert mem["weights"] == pytest.approx(4 * LAYER_PARAMS + 2 * HEAD_PARAMS)
    assert mem["kv_cache"] == pytest.approx(2 * 4 * (2 * 4) * 32 * 64 * 2)


def test_an_op_is_cut_over_the_cores_the_fastest_way_the_chip_model_knows():
    from perf_model.pod import OpCosts
    from perf_model.pod.steps import CoreSplit, core_splits
    from workloads.ops import Gemm

    op = Gemm(m=64, k=1024, n=24, name="x")
    cands = core_splits(op, 8, 2.0)
    shapes = [(c.m, c.k, c.n, c.batch, extra) for c, extra in cands]
    # m cut, n cut, k cut (the cores' 64 x 24 partial sums: 8 read, 1 written, 2 bytes each)
    assert shapes == [(8, 1024, 24, 1, 0.0), (64, 1024, 3, 1, 0.0), (64, 128, 24, 1, 9 * 64 * 24 * 2.0)]
    assert [(c.m, c.batch) for c, _ in core_splits(Gemm(m=64, k=64, n=64, batch=16, name="b"), 8, 2.0)] == [(64, 2)]
    hbm = 64e9
    cut = CoreSplit(8, OpCosts(CHIP), hbm, 2.0)
    cut.prepare([op])
    chosen, extra = cut(op)
    times = [evaluate_op(CHIP, c).latency_s + e / hbm for c, e in cands]
    assert evaluate_op(CHIP, chosen).latency_s + extra / hbm == pytest.approx(min(times))
    # without costs: the rule (the wider of m and n)
    assert CoreSplit(8)(op)[0].m == 8
