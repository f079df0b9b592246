"""The multi-chip model: one chip is the single-chip model, memory limits, bubbles, FLOPs, monotonic links."""

from __future__ import annotations

import dataclasses

import pytest
from pod_testlib import CHIP, DENSE, MOE, serve, system, train

from accel_spec.pod_config import Split
from perf_model import evaluate, evaluate_op
from perf_model.pod import OpCosts, candidate_splits, evaluate_split, evaluate_system, passes
from workloads.llm_ops import backward, head_ops, layer_ops, whole_model_macs
from workloads.ops import Workload


def test_one_chip_equals_the_single_chip_model():
    one = system("ring", (1,))
    job = train(batch=2)
    split = Split(microbatch=2)
    result = evaluate_split(one, job, split)
    assert result.ok, result.reason
    f, b = passes(one, job, split, seqs=2, q_len=job.seq, kv_len=job.seq, head_tokens=2 * job.seq)
    ops = [op for op, _ in f.ops + b.ops]
    counts = [c for _, c in f.ops + b.ops]
    whole = evaluate(CHIP, Workload(name="step", ops=tuple(ops), counts=tuple(counts)))
    assert whole.status == "ok"
    assert result.breakdown["compute_s"] == pytest.approx(whole.total["latency_s"], rel=1e-12)
    # each op's time is exactly what evaluate gives for it alone
    costs = OpCosts(CHIP)
    costs.prepare(ops)
    for op in ops[:6]:
        assert costs(op)[0] == evaluate_op(CHIP, op).latency_s
    # and nothing else costs time but the elementwise work and the optimizer on one chip
    bd = result.breakdown
    assert bd["exposed_comm_s"] == 0.0 and bd["bubble_s"] == 0.0
    assert result.metrics["step_s"] == pytest.approx(bd["compute_s"] + bd["vector_s"] + bd["optimizer_s"], rel=1e-12)


def test_a_split_that_does_not_fit_hbm_is_infeasible_with_a_reason():
    small = system(hbm_gib=0.001)
    result = evaluate_split(small, train(), Split(dp=4))
    assert result.status == "infeasible"
    assert "GiB per chip" in result.reason and "HBM" in result.reason
    searched = evaluate_system(small, train())
    assert searched.status == "infeasible" and "HBM" in searched.reason
    assert evaluate_split(system(), train(), Split(dp=4)).ok


def test_pipeline_bubble_by_hand():
    four = system("ring", (4,))
    job = train(batch=8)
    result = evaluate_split(four, job, Split(pp=4, microbatch=1))  # 8 microbatches, 4 stages
    assert result.ok, result.reason
    bd = result.breakdown
    pipeline = result.metrics["step_s"] - bd["optimizer_s"] - max(0.0, bd["dp_comm_s"])
    # (m + pp - 1) (T_f + T_b) with a bubble of (pp - 1) (T_f + T_b): bubble / rest = 3 / 8
    assert bd["bubble_s"] == pytest.approx(3 / 8 * (pipeline - bd["bubble_s"]), rel=1e-12)
    assert bd["bubble_s"] == pytest.approx(3 / 11 * pipeline, rel=1e-12)


@pytest.mark.parametrize("shape,tp,ep", [(DENSE, 1, 1), (DENSE, 2, 1), (DENSE, 4, 1), (MOE, 1, 1), (MOE, 2, 1),
                                         (MOE, 2, 2), (MOE, 1, 4), (MOE, 4, 2)])
def test_every_split_of_a_layer_sums_to_the_whole_layer(shape, tp, ep):
    seqs, seq = 4, 32
    whole = sum(op.macs for op in layer_ops(shape, seqs=seqs * ep, q_len=seq, kv_len=seq))
    per_chip = sum(op.macs for op in layer_ops(shape, seqs=seqs, q_len=seq, kv_len=seq, tp=tp, ep=ep))
    # ep chips each hold seqs sequences of different data; tp chips share theirs
    assert per_chip * tp * ep == whole
    head = head_ops(shape, tokens=seqs * seq, tp=tp)[0]
    assert head.macs * tp == head_ops(shape, tokens=seqs * seq)[0].macs
    for op in layer_ops(shape, seqs=seqs, q_len=seq, kv_len=seq, tp=tp, ep=ep):
        assert sum(b.macs for b in backward(op)) == 2 * op.macs


def test_training_flops_of_a_split_equal_the_workload():
    job = train(batch=8)
    four = system("ring", (4,))
    for split in (Split(dp=4), Split(tp=4, microbatch=2), Split(dp=2, tp=2, microbatch=4)):
        f, _ = passes(four, job, split, seqs=split.microbatch, q_len=job.seq, kv_len=job.seq,
                      head_tokens=split.microbatch * job.seq)
        m = job.batch // split.dp // split.microbatch
        assert f.model_macs * m * split.chips == whole_model_macs(DENSE, seqs=job.batch, seq=job.seq)


COSTS = OpCosts(CHIP)  # one cache of op times for every test of this chip


def _splits(sys_, job):
    return [s for s in candidate_splits(sys_, job) if evaluate_split(sys_, job, s, COSTS).ok]


@pytest.mark.parametrize("topology,dims,job", [
    ("torus2d", (2, 4), train()),
    ("ring", (8,), train(MOE, batch=16)),
    ("torus3d", (2, 2, 2), serve()),
    ("switch", (8,), serve(DENSE, batch=16)),
])
def test_doubling_link_bandwidth_never_slows_a_step(topology, dims, job):
    slow = system(topology, dims, link_gb_per_s=5.0, hbm_gib=64.0)
    fast = dataclasses.replace(slow, link_gb_per_s=10.0)
    splits = _splits(slow, job)
    assert len(splits) > 5
    for split in splits:
        a, b = evaluate_split(slow, job, split, COSTS), evaluate_split(fast, job, split, COSTS)
        assert b.metrics["step_s"] <= a.metrics["step_s"], split.label()
    multi = dataclasses.replace(slow, dims=dims[:-1] + (dims[-1] // 2,), pods=2, dcn_gb_per_s=1.0)
    faster = dataclasses.replace(multi, dcn_gb_per_s=2.0)
    for split in _splits(multi, job):
        assert (evaluate_split(faster, job, split, COSTS).metrics["step_s"]
                <= evaluate_split(multi, job, split, COSTS).metrics["step_s"]), split.label()


def test_collectives_cost_time_and_the_search_picks_the_fastest_split():
    sys8 = system("torus2d", (2, 4), hbm_gib=64.0)
    job = train(MOE, batch=16)
    best = evaluate_system(sys8, job)
    assert best.ok and best.searched > 10
    for split in _splits(sys8, job):
        assert evaluate_split(sys8, job, split, COSTS).metrics["step_s"] >= best.metrics["step_s"]
    tp_split = Split(tp=8, microbatch=2)
    with_tp = evaluate_split(sys8, job, tp_split)
    assert with_tp.breakdown["exposed_comm_s"] > 0


def test_serving_reports_ttft_tpot_and_tokens():
    job = serve(batch=8, gen=8)
    result = evaluate_split(system("ring", (4,), hbm_gib=64.0), job, Split(dp=2, pp=2, ep=2, microbatch=2))
    assert result.ok, result.reason
    m = result.metrics
    # 2 microbatches of 2 sequences per replica, 2 stages: TPOT = max(2, 2) stage steps
    assert m["ttft_s"] > 0 and m["tpot_s"] > 0
    assert m["step_s"] == pytest.approx(m["ttft_s"] / 2 * 3 + 7 * m["tpot_s"], rel=1e-12)
    assert m["tokens_per_s"] == pytest.approx(8 * 8 / m["step_s"])
    assert 0 < m["mfu"] < 1 and m["energy_j"] > 0
    assert result.memory["optimizer"] == 0
    # K and V x 2 layers a stage (4 / pp 2) x 4 KV heads x 32 (d 256 / 8 heads) x 72 positions (64 + 8)
    # x 4 sequences a replica (8 / dp 2) x 2 bytes (16-bit operands) = 294,912 bytes a chip
    assert result.memory["kv_cache"] == 2 * 2 * 4 * 32 * 72 * 4 * 2 == 294_912
