"""A chip whose cores share a cache (SystemConfig.l2_mib): an op takes the slower of its core's time
(streaming from the cache) and the whole chip's op's HBM bytes at the chip's HBM bandwidth."""

from __future__ import annotations

import dataclasses

import pytest

from accel_dse.pod_files import load_system
from accel_spec.config import ArrayConfig
from accel_spec.errors import ConfigError
from accel_spec.pod_config import Split, SystemConfig
from perf_model.pod import evaluate_split
from perf_model.pod.evaluate import OpCosts, l2_chips
from perf_model.pod.steps import OUTPUT, core_op
from workloads.llm_ops import LlmJob, parse_llm_spec
from workloads.ops import Gemm

CHIP = ArrayConfig(rows=64, cols=64, input_bits=16, acc_bits=64, ifmap_sram_kib=256, weight_sram_kib=256,
                   ofmap_sram_kib=256, dram_bytes_per_cycle=8.0, clock_mhz=1000.0, tech_nm=7)


def _system(**kw: object) -> SystemConfig:
    base: dict[str, object] = {"chip": CHIP, "cores": 4, "topology": "ring", "dims": (1,), "hbm_gib": 4.0}
    base.update(kw)
    return SystemConfig(**base)  # type: ignore[arg-type]


def test_a_weight_streaming_op_is_bound_by_its_hbm_bytes_by_hand():
    # 4 cores of 64 x 64 at 1 GHz, 8 bytes a cycle each: HBM 32 GB/s; a 6 MiB cache (2 MiB a buffer)
    # with a port far faster than HBM. A decode-like GEMM 16 x 4096 x 4096 in bf16: the chip reads A
    # (16 x 4096 x 2 = 131,072 bytes, held on chip) and B (4096 x 4096 x 2 = 33,554,432) once and
    # writes C (131,072): 33,816,576 bytes at 32e9 B/s = 1,056.768 us; a core's share (16 x 4096 x
    # 1024: 1,024 weight tiles of 64 x 64 on a weight-stationary array, ~185 us) is shorter.
    system = _system(l2_mib=6.0, l2_gb_per_s=1e6)
    costs = OpCosts.for_system(system)
    chip_op = Gemm(m=16, k=4096, n=4096, name="w", requant=OUTPUT)
    op = core_op(chip_op, 4)
    costs.prepare([op], [chip_op])
    assert costs.l2 is not None and costs.l2.dram_bytes(chip_op) == 33_816_576
    sec, _, why = costs.seconds(op, chip_op)
    assert why == ""
    assert sec == pytest.approx(33_816_576 / 32e9, rel=1e-12)
    assert costs(op)[0] < sec  # the core alone (streaming from the cache) would be faster


def test_the_cores_stream_from_the_cache_at_their_share_of_its_bandwidth():
    port, l2 = l2_chips(_system(l2_mib=6.0, l2_gb_per_s=400.0))
    # 400 GB/s over 4 cores at 1 GHz: 100 bytes a cycle each; the cache's design has 2 MiB buffers
    assert port.dram_bytes_per_cycle == pytest.approx(100.0) and port.dram == "none"
    assert l2 is not None and (l2.ifmap_sram_kib, l2.weight_sram_kib, l2.ofmap_sram_kib) == (2048, 2048, 2048)
    assert l2_chips(_system()) == (CHIP, None)


def test_the_shared_cache_lifts_an_h100_out_of_per_core_starvation():
    h100, _ = load_system("h100-cluster")
    job = LlmJob(shape=parse_llm_spec("llama7b:layers=2"), mode="train", batch=8, seq=2048)
    split = Split(dp=8, zero=1, microbatch=1)
    shared = evaluate_split(h100, job, split)
    alone = evaluate_split(dataclasses.replace(h100, l2_mib=0.0, l2_gb_per_s=0.0), job, split)
    assert shared.ok and alone.ok
    assert shared.metrics["mfu"] > 1.3 * alone.metrics["mfu"]


@pytest.mark.parametrize(("fields", "message"), [
    ({"l2_mib": 8.0}, "l2_gb_per_s must be positive when l2_mib > 0"),
    ({"l2_mib": -1.0, "l2_gb_per_s": 1.0}, "l2_mib must be a non-negative finite number"),
    ({"l2_mib": 8.0, "l2_gb_per_s": float("inf")}, "l2_gb_per_s must be a non-negative finite number"),
])
def test_bad_shared_cache_fields_are_refused_by_name(fields, message):
    with pytest.raises(ConfigError, match=message):
        _system(**fields)
