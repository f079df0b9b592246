"""One design, one reason: ``evaluate`` and ``evaluate_designs`` name the same cause for a design that
breaks several rules at once (its clock and a build rule)."""

from __future__ import annotations

import pytest

import perf_model
import workloads
from accel_spec.config import ArrayConfig
from perf_model.physical import checksum

GEMM = "gemm:m=40,k=70,n=50"

CASES = {
    # OS + detect is not built; 5 GHz is beyond any 45 nm array's f_max
    "clock and build": dict(dataflow="os", checksum="detect", clock_mhz=5000),
    "build only": dict(dataflow="os", checksum="detect"),
    "clock only": dict(dataflow="ws", clock_mhz=5000),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_evaluate_and_evaluate_designs_give_the_same_reason(name):
    config = ArrayConfig(rows=8, cols=8, **CASES[name])
    workload = workloads.resolve(GEMM)
    one = perf_model.evaluate(config, workload)
    table = perf_model.evaluate_designs(perf_model.DesignArrays.from_configs([config]), workload)
    assert one.status != "ok" and not bool(table.feasible[0])
    assert table.reason[0] == one.reason
    if "clock" in name:
        assert "MHz" in one.reason and one.reason != checksum.BUILD_REASON
    elif "build" in name:
        assert one.reason == checksum.BUILD_REASON
