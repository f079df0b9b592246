"""The model's accumulator check per operand format: an fp8 product's bound, not the 8-bit lanes'."""

from __future__ import annotations

import perf_model
from accel_dse.config import ArrayConfig
from workloads import Gemm, Workload


def _status(acc_bits: int, k: int, **formats: str) -> tuple[str, str]:
    design = ArrayConfig(rows=4, cols=4, acc_bits=acc_bits, **formats)
    wl = Workload(name="one", ops=(Gemm(m=8, k=k, n=8, name="g"),), counts=(1,))
    result = perf_model.evaluate(design, wl)
    return result.status, result.reason


FP8 = {"weight_format": "fp8_e4m3", "act_format": "fp8_e4m3"}


def test_fp8_overflow_bound_is_the_largest_product_times_k():
    each = (448 * 2**9) ** 2  # largest E4M3 magnitude over the smallest subnormal, squared: 52,613,349,376
    for k in (2, 16, 1000):
        need = (k * each).bit_length() + 1
        assert _status(need, k, **FP8)[0] == "ok"
        status, reason = _status(need - 1, k, **FP8)
        assert status == "overflow" and f"needs acc_bits >= {need}" in reason and "fp8_e4m3" in reason


def test_int8_overflow_bound_is_unchanged():
    k = 1000
    need = (k << 14).bit_length() + 1
    assert _status(need, k)[0] == "ok" and _status(need - 1, k)[0] == "overflow"
