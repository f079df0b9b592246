"""Reference semantics of the operand formats, checked by brute force, by hand and against JAX."""

from __future__ import annotations

import math
from fractions import Fraction

import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from accel_spec.errors import WorkloadError
from accel_spec.number_formats import FORMATS
from workloads import formats as F

FLOATS = ("fp8_e4m3", "fp8_e5m2", "bf16")
FP8 = ("fp8_e4m3", "fp8_e5m2")
FIXED = ("fp8_e4m3",)  # exact fixed-point accumulators (fp8_e5m2 and bf16 accumulate in float32)


def _all_finite(name: str) -> np.ndarray:
    """Every finite value of an fp8 format, enumerated from its 256 codes (independent of quantise)."""
    dtype = getattr(ml_dtypes, FORMATS[name].ml_dtype)
    values = np.arange(256, dtype=np.uint8).view(dtype).astype(np.float64)
    return np.unique(values[np.isfinite(values)])


@pytest.mark.parametrize("name", FP8)
def test_format_table_matches_the_encoding(name):
    values = _all_finite(name)
    f = FORMATS[name]
    assert values.max() == f.max_finite
    assert values[values > 0].min() == f.min_subnormal
    assert float(ml_dtypes.finfo(getattr(ml_dtypes, f.ml_dtype)).max) == f.max_finite


@pytest.mark.parametrize("name", FP8)
def test_quantise_is_nearest_ties_to_even_and_saturates(name):
    grid = _all_finite(name)
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.normal(0, grid.max() / 8, 2000), (grid[1:] + grid[:-1]) / 2,  # midpoints: ties
                        [grid.max() * 4, -grid.max() * 4, 1e-30, -1e-30]])
    q = F.quantise(x, name)
    dist = np.abs(x[:, None] - grid[None, :])
    best = dist.min(axis=1)
    assert np.all(np.abs(x - q) == np.minimum(best, np.abs(x - q)))  # q is among the nearest
    assert np.all(np.isin(q, grid))
    assert q[-4] == grid.max() and q[-3] == -grid.max()  # saturation, never NaN/Inf
    ties = (grid[1:] + grid[:-1]) / 2
    tq = F.quantise(ties, name)
    codes = tq.astype(getattr(ml_dtypes, FORMATS[name].ml_dtype)).view(np.uint8)
    assert np.all(codes[(ties > 0)] % 2 == 0)  # ties to the even code


def test_int4_quantise_range_and_rounding():
    q = F.quantise(np.array([-9.0, -8.4, -0.5, 0.5, 1.5, 2.5, 6.6, 99.0]), "int4")
    assert q.tolist() == [-8, -8, -0.0, 0, 2, 2, 7, 7]


def test_quantise_refuses_non_finite():
    with pytest.raises(WorkloadError, match="NaN or infinity"):
        F.quantise(np.array([1.0, np.nan]), "fp8_e4m3")


def test_int_accumulate_is_exact_for_int4_extremes():
    a = np.array([[-8.0, 7.0, -8.0]])
    b = np.array([[-8.0], [7.0], [7.0]])
    assert F.accumulate(a, b, "int4").tolist() == [[64 + 49 - 56]]


def test_w4a8_mixed_integers():
    a = np.array([[-128.0, 127.0]])
    b = np.array([[-8.0], [7.0]])
    assert F.accumulate(a, b, "int4", "int8").tolist() == [[1024 + 889]]
    with pytest.raises(WorkloadError, match="not int4 values"):
        F.accumulate(a, np.array([[9.0], [0.0]]), "int4", "int8")


def test_float_formats_do_not_mix():
    with pytest.raises(WorkloadError, match="one format for both"):
        F.accumulate(np.ones((1, 1)), np.ones((1, 1)), "fp8_e4m3", "fp8_e5m2")


@pytest.mark.parametrize("name", FIXED)
def test_fp8_accumulator_is_exact_by_hand(name):
    f = FORMATS[name]
    big, tiny = f.max_finite, f.min_subnormal
    a = np.array([[big, tiny, -0.0, -big]])
    b = np.array([[big], [tiny], [-0.0], [big]])
    acc = F.accumulate(a, b, name)
    s = F.fraction_bits(name)
    # big*big - big*big cancels exactly, leaving tiny**2: what no float32 sum in this order keeps
    assert Fraction(int(acc[0, 0]), 1 << (2 * s)) == Fraction(tiny) ** 2
    assert F.to_float32(acc, name)[0, 0] == np.float32(tiny * tiny)


@pytest.mark.parametrize("name", FIXED)
def test_fp8_sum_is_order_independent(name):
    rng = np.random.default_rng(7)
    a = F.quantise(rng.normal(0, 30, (3, 40)), name)
    b = F.quantise(rng.normal(0, 30, (40, 5)), name)
    perm = rng.permutation(40)
    assert np.array_equal(F.accumulate(a, b, name), F.accumulate(a[:, perm], b[perm], name))
    exact = [[sum(Fraction(x) * Fraction(y) for x, y in zip(a[i], b[:, j], strict=True)) for j in range(5)]
             for i in range(3)]
    s = F.fraction_bits(name)
    acc = F.accumulate(a, b, name)
    assert all(Fraction(int(acc[i, j]), 1 << (2 * s)) == exact[i][j] for i in range(3) for j in range(5))


def test_e5m2_sums_in_float32_in_ascending_k_by_hand():
    # max**2 = 3.0625 * 2**30 and the smallest subnormal squared 2**-32 are exact float32 products;
    # in ascending k, max**2 + 2**-32 rounds back to max**2, + -0, - max**2 cancels to +0 (an exact
    # sum, e4m3's semantics, would keep 2**-32); with the two large products first, 2**-32 survives
    f = FORMATS["fp8_e5m2"]
    big, tiny = f.max_finite, f.min_subnormal
    assert big == float(ml_dtypes.finfo(ml_dtypes.float8_e5m2).max) and big * big == 3.0625 * 2.0 ** 30
    assert tiny == float(ml_dtypes.finfo(ml_dtypes.float8_e5m2).smallest_subnormal)
    a = np.array([[big, tiny, -0.0, -big]])
    b = np.array([[big], [tiny], [-0.0], [big]])
    acc = F.accumulate(a, b, "fp8_e5m2")
    assert acc.dtype == np.float32 and acc[0, 0] == 0.0 and math.copysign(1.0, acc[0, 0]) == 1.0
    order = [0, 3, 1, 2]
    assert F.accumulate(a[:, order], b[order], "fp8_e5m2")[0, 0] == np.float32(2.0 ** -32)
    assert F.accumulate(a, b, "fp8_e5m2", folds=(0, 3))[0, 0] == np.float32(0.0)  # (big**2 + tiny**2) - big**2
    assert F.accumulate(a, b, "fp8_e5m2", folds=(0, 1))[0, 0] == np.float32(0.0)
    assert F.accumulate(np.array([[-0.0]]), np.array([[1.0]]), "fp8_e5m2")[0, 0] == 0.0  # +0 start: -0 is lost
    assert math.copysign(1.0, F.accumulate(np.array([[-0.0]]), np.array([[1.0]]), "fp8_e5m2")[0, 0]) == 1.0


def test_round_to_float32_ties_to_even_by_hand():
    # 2**24 + 1 is halfway between two float32 values: ties to the even one, 2**24
    assert F._round_f32((1 << 24) + 1, 0) == 2.0 ** 24
    assert F._round_f32((1 << 24) + 3, 0) == 2.0 ** 24 + 4
    assert F._round_f32(-((1 << 25) + 3), 0) == -(2.0 ** 25 + 4)


def test_bf16_is_sequential_float32_in_ascending_k():
    # 1 + 2**-24 + 2**-24 in ascending k: each tiny term is lost against 1 (ties to even);
    # summed the other way round they would survive (2**-23 + 1 is a float32).
    one, tiny = 1.0, 2.0 ** -24
    a = np.array([[one, tiny, tiny]])
    b = np.ones((3, 1))
    assert F.accumulate(a, b, "bf16")[0, 0] == np.float32(1.0)
    assert F.accumulate(a[:, ::-1], b, "bf16")[0, 0] == np.float32(1.0 + 2.0 ** -23)


def test_bf16_folds_are_summed_from_zero_then_added_in_order():
    # 1, 2**-24, 2**-24, 2**-24 with folds at k = 0 and 2: (1 + t) rounds to 1, the second fold
    # holds t + t = 2**-23 exactly, and 1 + 2**-23 is a float32: the folds keep what one chain loses
    t = 2.0 ** -24
    a = np.array([[1.0, t, t, t]])
    b = np.ones((4, 1))
    assert F.accumulate(a, b, "bf16")[0, 0] == np.float32(1.0)
    assert F.accumulate(a, b, "bf16", folds=(0, 2))[0, 0] == np.float32(1.0 + 2.0 ** -23)
    assert F.accumulate(a, b, "bf16", folds=(0, 1, 2, 3))[0, 0] == np.float32(1.0)  # each fold alone
    by_hand = np.float32(0)
    for first, end in ((0, 2), (2, 4)):
        part = np.float32(0)
        for k in range(first, end):
            part = np.float32(part + np.float32(a[0, k]) * np.float32(b[k, 0]))
        by_hand = part if first == 0 else np.float32(by_hand + part)
    assert F.accumulate(a, b, "bf16", folds=(0, 2))[0, 0] == by_hand


@pytest.mark.parametrize("folds", [(0, 1), (1,), (0, 3, 2), (0, 4)])
def test_bad_folds_are_refused(folds):
    with pytest.raises(WorkloadError, match="folds must be"):
        F.accumulate(np.ones((1, 4)), np.ones((4, 1)), "bf16", folds=folds if folds != (0, 1) else (0, 1, 1))


def test_bf16_float32_overflow_is_not_data():
    big = FORMATS["bf16"].max_finite
    with pytest.raises(WorkloadError, match="overflow"):
        F.accumulate(np.array([[big, big]]), np.array([[2.0], [2.0]]), "bf16")


@pytest.mark.parametrize("name", ["bf16", "fp8_e5m2"])
@pytest.mark.parametrize("folds", [None, (0, 4, 8), (0, 5, 30)])
def test_float32_folds_within_the_derived_bound_of_jax(folds, name):
    rng = np.random.default_rng(9)
    a = F.quantise(rng.normal(0, 1, (8, 40)) * rng.choice([1, 1e-3, 1e3], (8, 40)), name)
    b = F.quantise(rng.normal(0, 1, (40, 6)), name)
    ref = F.accumulate(a, b, name, folds=folds).astype(np.float64)
    diff = np.abs(_jax(a, b, name).astype(np.float64) - ref)
    assert np.all(diff <= F.jax_bound(a, b, name))
    # The data is order-sensitive, so the bound is exercised: the same sums taken in the reverse
    # order differ (whether XLA's CPU backend happens to take this machine's fold order or not).
    reverse = F.accumulate(a[:, ::-1], b[::-1], name, folds=folds).astype(np.float64)
    assert np.abs(reverse - ref).max() > 0
    exact_a = rng.integers(-8, 8, (8, 40)) * 2.0 ** rng.integers(-5, 0, (8, 40))
    exact_b = rng.integers(-8, 8, (40, 6)) * 2.0 ** rng.integers(-5, 0, (40, 6))
    assert np.array_equal(F.accumulate(exact_a, exact_b, name, folds=folds), _jax(exact_a, exact_b, name))


def test_bf16_edge_values():
    big = float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)
    sub = float(ml_dtypes.finfo(ml_dtypes.bfloat16).smallest_subnormal)
    assert big == FORMATS["bf16"].max_finite and sub == FORMATS["bf16"].min_subnormal
    a = np.array([[sub, -0.0, 1.0]])
    b = np.array([[1.0], [1.0], [sub]])
    assert F.accumulate(a, b, "bf16")[0, 0] == np.float32(2 * sub)  # subnormals kept
    assert F.quantise(np.array([big * 2]), "bf16")[0] == big


def _jax(a, b, name):
    dtype = getattr(jnp, FORMATS[name].ml_dtype)
    return np.asarray(jnp.matmul(jnp.asarray(a, dtype), jnp.asarray(b, dtype), preferred_element_type=jnp.float32))


@pytest.mark.parametrize("name", FLOATS)
def test_equals_jax_where_float32_cannot_round(name):
    # significands of at most 3 bits (all formats hold them) and scales 2**-5..2**-1: every
    # partial sum of 32 products is a multiple of 2**-10 below 2**13, so float32 holds it exactly
    rng = np.random.default_rng(11)
    a = rng.integers(-8, 8, (6, 32)) * 2.0 ** rng.integers(-5, 0, (6, 32))
    b = rng.integers(-8, 8, (32, 7)) * 2.0 ** rng.integers(-5, 0, (32, 7))
    ref = F.accumulate(a, b, name)
    ref = F.to_float32(ref, name) if name in FIXED else ref
    assert np.array_equal(ref, _jax(a, b, name))


@pytest.mark.parametrize("name", FLOATS)
def test_within_the_derived_bound_of_jax_on_full_range_data(name):
    f = FORMATS[name]
    rng = np.random.default_rng(5)
    scale = f.max_finite / 4 if name != "bf16" else 1.0
    a = F.quantise(rng.normal(0, 1, (8, 256)) * rng.choice([1, 1e-3, 1e-6], (8, 256)) * scale, name)
    b = F.quantise(rng.normal(0, 1, (256, 8)) * rng.choice([1, 1e-3], (256, 8)) * min(scale, 16.0), name)
    ref = F.accumulate(a, b, name)
    ref = F.to_float32(ref, name) if name in FIXED else ref
    diff = np.abs(_jax(a, b, name).astype(np.float64) - ref.astype(np.float64))
    bound = F.jax_bound(a, b, name)
    assert np.all(diff <= bound)
    assert bound.max() > 0


def test_sqnr_by_hand():
    # signal 3**2 + 4**2 = 25, noise 0.5**2 = 0.25: 10 log10(100) = 20 dB
    assert F.sqnr_db(np.array([3.0, 4.0]), np.array([3.0, 4.5])) == pytest.approx(20.0)
    assert F.sqnr_db(np.array([1.0]), np.array([1.0])) == math.inf
    with pytest.raises(WorkloadError, match="non-zero"):
        F.sqnr_db(np.zeros(2), np.ones(2))


def test_dequantised_product_orders_the_formats():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(16, 64)), rng.normal(size=(64, 16))
    ref = a @ b
    s = {n: F.sqnr_db(ref, F.dequantised_product(a, b, n)) for n in ("int4", "int8", "int16", *FLOATS)}
    assert s["int4"] < s["fp8_e5m2"] < s["fp8_e4m3"] < s["int8"] < s["bf16"] < s["int16"]
