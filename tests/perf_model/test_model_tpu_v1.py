"""The ``tpu-v1`` preset against the TPU v1 paper's pattern (docs/tpu_v1_fidelity.md).

The model is the RTL's machine: ``tpu-v1``'s 48.57 B/cycle of DDR3 arrive through a 64-byte
AXI bus (48.57 rounded up to a power of two), one beat every 64 / 48.57 cycles, so a large GEMM
is bound by its DRAM bytes over 48.57 B/cycle. Held here: raw int32 outputs (DMA-bound in every
run) reach that bound within 2 %; requantised, the 4096^3 GEMM reaches 60 % and within 15 % of
it holding A resident (the first runs over each strip of A load the whole strip, more bytes than
their compute covers: they wait for DRAM while the later runs are compute-bound, a wait no
bound on the totals sees); an MLP layer of batch 200 is memory-bound between 5 % and 25 % (the issue's
reading of Jouppi et al., ISCA 2017).
"""

from __future__ import annotations

import perf_model
import workloads
from accel_dse.design_files import load_design

PES = 256 * 256


def _evaluate(spec: str) -> tuple[float, perf_model.WorkloadResult, int]:
    config = load_design("tpu-v1")
    result = perf_model.evaluate(config, workloads.resolve(spec))
    rate = min(perf_model.axi_data_bytes(config),
               float(perf_model.effective_dram_bytes_per_cycle(config.dram_bytes_per_cycle, config.dram,
                                                               config.clock_mhz)))
    return result.total["macs"] / (PES * result.total["total_cycles"]), result, rate


def _bus_bound(result: perf_model.WorkloadResult, rate: float) -> float:
    """Utilisation if the array never waited but for its DRAM bytes at ``rate`` bytes a cycle."""
    moved = result.total["dram_read_bytes"] + result.total["dram_write_bytes"]
    return result.total["macs"] / PES / max(result.total["macs"] / PES, moved / rate)


def test_a_large_gemm_reaches_its_bus_bound_holding_a_resident():
    util, result, rate = _evaluate("gemm:m=4096,k=4096,n=4096,requant=1")
    assert perf_model.axi_data_bytes(load_design("tpu-v1")) == 64 and rate == 48.57
    (op,) = result.ops
    assert op.resident == "a"
    assert op.dram_read_bytes <= 3 * 4096 * 4096  # A once and B at most twice (it was A 8 times, B 4)
    assert util >= 0.60
    assert 0.85 * _bus_bound(result, rate) <= util <= _bus_bound(result, rate)


def test_raw_int32_outputs_cost_their_bytes():
    util, result, rate = _evaluate("gemm:m=4096,k=4096,n=4096")
    assert result.total["dram_write_bytes"] == 4 * 4096 * 4096
    assert 0.98 * _bus_bound(result, rate) <= util <= _bus_bound(result, rate)


def test_an_mlp_layer_of_batch_200_is_memory_bound_between_5_and_25_percent():
    for spec in ("gemm:m=200,k=2048,n=2048", "gemm:m=200,k=2048,n=2048,requant=1"):
        util, result, _ = _evaluate(spec)
        assert 0.05 <= util <= 0.25
        assert result.total["stall_cycles"] > result.total["compute_cycles"]  # memory-bound
