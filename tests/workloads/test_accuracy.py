"""The accuracy metric: SQNR of a workload's matrix products per format pair, pooled and cached."""

from __future__ import annotations

import math

import numpy as np
import pytest

from accel_spec.errors import WorkloadError
from workloads import Gemm, Workload
from workloads import accuracy as acc
from workloads.formats import sqnr_db


def _one(m: int, k: int, n: int, count: int = 1) -> Workload:
    return Workload(name=f"g{m}x{k}x{n}", ops=(Gemm(m=m, k=k, n=n, name="g"),), counts=(count,))


def test_a_single_product_is_the_formats_error_by_hand():
    # m = k = n = 1: each operand is its own tensor's largest magnitude, so it maps onto int4's 7
    # exactly (up to float64 rounding); what is left is the float32 rounding of the reference's
    # one product, at most 2**-24 relative: 20 log10(2**24) = 144.5 dB or better
    assert acc.workload_sqnr_db(_one(1, 1, 1), "int4", "int4") >= 144.4


def test_pooling_weights_each_op_by_its_runs():
    small, big = _one(4, 8, 4), _one(4, 512, 4)
    s_small = acc.workload_sqnr_db(small, "fp8_e5m2", "fp8_e5m2")
    s_big = acc.workload_sqnr_db(big, "fp8_e5m2", "fp8_e5m2")
    both = Workload(name="both", ops=(small.ops[0], Gemm(m=4, k=512, n=4, name="h")), counts=(1, 1))
    heavy = Workload(name="heavy", ops=both.ops, counts=(1, 50))
    low, high = sorted((s_small, s_big))
    assert low <= acc.workload_sqnr_db(both, "fp8_e5m2", "fp8_e5m2") <= high
    assert abs(acc.workload_sqnr_db(heavy, "fp8_e5m2", "fp8_e5m2") - s_big) < abs(
        acc.workload_sqnr_db(both, "fp8_e5m2", "fp8_e5m2") - s_big)


def test_sqnr_of_int8_on_a_small_gemm_by_hand():
    # the same data the metric draws, scored here with numpy alone: per-tensor int8 quantisation
    # written out (round half to even, clamp to [-128, 127]) and a float64 product
    m, k, n = 3, 16, 5
    rng = np.random.default_rng(np.random.SeedSequence([0, 30, m, k, n]))
    a = rng.standard_normal((m, k)).astype(np.float32).astype(np.float64)
    b = (rng.standard_normal((k, n)) / math.sqrt(k)).astype(np.float32).astype(np.float64)
    sa, sb = np.abs(a).max() / 127, np.abs(b).max() / 127
    qa = np.clip(np.rint(a / sa), -128, 127)
    qb = np.clip(np.rint(b / sb), -128, 127)
    expected = sqnr_db(a @ b, (qa @ qb) * sa * sb)
    assert acc.workload_sqnr_db(_one(m, k, n), "int8", "int8") == pytest.approx(expected, abs=1e-3)


def test_computed_once_per_workload_and_formats():
    wl = _one(8, 64, 8)
    acc.workload_sqnr_db(wl, "bf16", "bf16")
    before = acc._pooled.cache_info().hits
    acc.workload_sqnr_db(_one(8, 64, 8), "bf16", "bf16")  # an equal workload: the same geometry
    assert acc._pooled.cache_info().hits == before + 1


def test_formats_rank_as_their_precision():
    wl = _one(16, 256, 32)
    s = {f: acc.workload_sqnr_db(wl, f, f) for f in ("int4", "fp8_e5m2", "fp8_e4m3", "int8", "bf16", "int16")}
    assert list(s) == sorted(s, key=s.get)
    assert acc.workload_sqnr_db(wl, "int4", "int8") > s["int4"]


def test_unknown_format():
    with pytest.raises(WorkloadError, match="format must be one of int4, int8"):
        acc.workload_sqnr_db(_one(2, 2, 2), "int3", "int8")


def test_the_float32_reference_is_jaxs_to_float32_rounding():
    import jax.numpy as jnp

    rng = np.random.default_rng(2)
    a = rng.standard_normal((16, 300)).astype(np.float32).astype(np.float64)
    b = rng.standard_normal((300, 24)).astype(np.float32).astype(np.float64)
    ours = acc._float32_reference(a, b)
    jax_ref = np.asarray(jnp.matmul(jnp.asarray(a, jnp.float32), jnp.asarray(b, jnp.float32),
                                    preferred_element_type=jnp.float32), dtype=np.float64)
    assert sqnr_db(jax_ref, ours) > 120  # int16, the most precise format, is ~86 dB
