"""The ``tpu-v1`` preset reproduces the TPU v1 paper's pattern (docs/tpu_v1_fidelity.md).

Thresholds are the issue's reading of Jouppi et al. (ISCA 2017): a CNN-like large GEMM at
60 % of peak or more, an MLP layer of batch 200 between 5 % and 25 %; and the arithmetic
bound a raw int32 output puts on the same GEMM.
"""

from __future__ import annotations

import perf_model
import workloads
from accel_dse.designs import load_design


def _utilisation(spec: str) -> tuple[float, perf_model.WorkloadResult]:
    config = load_design("tpu-v1")
    result = perf_model.evaluate(config, workloads.resolve(spec))
    return result.total["macs"] / (config.rows * config.cols * result.total["total_cycles"]), result


def test_a_large_gemm_with_int8_outputs_reaches_60_percent_holding_a_resident():
    util, result = _utilisation("gemm:m=4096,k=4096,n=4096,requant=1")
    assert util >= 0.60
    (op,) = result.ops
    assert op.resident == "a"
    assert op.dram_read_bytes <= 3 * 4096 * 4096  # A once and B at most twice (it was A 8 times, B 4)


def test_raw_int32_outputs_stay_under_their_byte_bound():
    util, result = _utilisation("gemm:m=4096,k=4096,n=4096")
    moved = 4096 * 4096 * (1 + 1 + 4)  # A, B once, C in int32: the least any schedule moves
    bound = 4096**3 / (256 * 256) / (moved / 48.57)
    assert 0.40 < util <= bound < 0.51


def test_an_mlp_layer_of_batch_200_is_memory_bound_between_5_and_25_percent():
    for spec in ("gemm:m=200,k=2048,n=2048", "gemm:m=200,k=2048,n=2048,requant=1"):
        util, result = _utilisation(spec)
        assert 0.05 <= util <= 0.25
        assert result.total["stall_cycles"] > result.total["compute_cycles"]  # memory-bound
