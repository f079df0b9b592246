"""ZeRO/FSDP communication by hand: the per-layer or per-tensor collectives and their latency."""

from __future__ import annotations

import dataclasses

import pytest

from accel_spec.pod_config import Split
from perf_model.pod import Segment
from perf_model.pod.data_parallel import data_parallel_s, exposed_s, weight_tensors
from tests.perf_model.pod.pod_testlib import DENSE, system
from workloads.llm_ops import LlmShape

GPT = LlmShape(name="gpt", layers=4, d=256, heads=8, ffn=1024, vocab=1024, gated=False)


def _groups(nodes: int, latency: float) -> dict[str, list[Segment]]:
    node = Segment(8, 300e9, 3e-6, False, True)
    dcn = Segment(nodes, 25e9, latency, False, True, True)
    return {"dp_all": [node, dcn], "dp": [node, dcn]}


def test_weight_tensors_count_the_frameworks_tensors():
    assert weight_tensors(GPT) == 12  # qkv, out, up, down: weight + bias; 2 layer norms: scale + bias
    assert weight_tensors(DENSE) == 9  # q, k, v, o, gate, up, down, 2 norm scales


def test_zero3_per_tensor_on_flat_rings_by_hand():
    sys_ = dataclasses.replace(system("switch", (8,), pods=4, dcn_gb_per_s=25.0), dcn_rings="flat")
    split = Split(dp=32, zero=3, recompute=1.0, zero_gather="tensor")
    params = 1e9  # weights on the chip
    groups = _groups(4, 5e-6)
    got = data_parallel_s(sys_, GPT, split, groups, params, 0.0, 4, 2)
    size = 2 * params  # bf16
    bandwidth = 7 / 8 * size / 300e9 + 3 / 4 * (size / 8) / 25e9
    latency = 4 * 12 * 31 * 5e-6  # 4 layers x 12 tensors, a ring of 32 at the DCN's 5 us
    # per microbatch: forward, recomputation and backward gathers, one gradient reduce-scatter; 2 microbatches
    assert got == pytest.approx(2 * 4 * (bandwidth + latency))


def test_zero3_communication_grows_with_the_ranks_as_the_latency_term_says():
    times = []
    for nodes in (48, 96, 192):
        sys_ = dataclasses.replace(system("switch", (8,), pods=nodes, dcn_gb_per_s=25.0), dcn_rings="flat")
        split = Split(dp=8 * nodes, zero=3, recompute=1.0, zero_gather="tensor")
        times.append(data_parallel_s(sys_, GPT, split, _groups(nodes, 5e-6), 1e9, 0.0, 4, 1))
    # bytes per chip stay put (up to the (n-1)/n factor); the latency: 4 layers x 12 tensors x
    # 4 collectives, each a ring of 8 n - 1 hops at 5 us
    for nodes, got in zip((48, 96, 192), times, strict=True):
        bandwidth = 7 / 8 * 2e9 / 300e9 + (nodes - 1) / nodes * 2e9 / 8 / 25e9
        assert got == pytest.approx(4 * (bandwidth + 48 * (8 * nodes - 1) * 5e-6))
    assert times[2] - times[1] > times[1] - times[0] > 0.35


def test_zero3_per_layer_pays_the_latency_per_layer_and_zero1_one_all_reduce():
    sys_ = dataclasses.replace(system("switch", (8,), pods=4, dcn_gb_per_s=25.0), dcn_rings="flat")
    groups = _groups(4, 5e-6)
    layer = data_parallel_s(sys_, GPT, Split(dp=32, zero=3), groups, 0.0 + 1e-9, 0.0, 4, 1)
    assert layer == pytest.approx(3 * 4 * 31 * 5e-6, rel=1e-3)  # 2 gathers + 1 reduce-scatter, 4 layers each
    one = data_parallel_s(sys_, GPT, Split(dp=32, zero=1), groups, 1e9, 0.0, 4, 3)
    assert one == pytest.approx(2 * (7 / 8 * 2e9 / 300e9 + 3 / 4 * 2e9 / 8 / 25e9 + 31 * 5e-6))


def test_exposed_zero3_hides_under_forward_and_backward_zero1_under_backward():
    assert exposed_s(Split(dp=2, zero=3), 10.0, 2, 1.0, 2.0) == pytest.approx(4.0)
    assert exposed_s(Split(dp=2, zero=1), 10.0, 2, 1.0, 2.0) == pytest.approx(6.0)
    assert exposed_s(Split(dp=2, zero=1, overlap=False), 10.0, 2, 1.0, 2.0) == 10.0
