"""The float32-accumulating PEs' float32 units against IEEE float32 (numpy): one rounding each, nearest
even, subnormals kept."""

from __future__ import annotations

import ml_dtypes
import numpy as np
from amaranth import Module, Signal
from amaranth.sim import Simulator

from rtl_gen.core.float32 import float_product, fp32_add


def _run(fn, width: int, pairs: list[tuple[int, int]]) -> np.ndarray:  # type: ignore[no-untyped-def]
    m = Module()
    a, b, o = Signal(width), Signal(width), Signal(32)
    m.d.comb += o.eq(fn(m, a, b))
    out: list[int] = []

    async def bench(ctx) -> None:  # type: ignore[no-untyped-def]
        for x, y in pairs:
            ctx.set(a, int(x))
            ctx.set(b, int(y))
            out.append(ctx.get(o))

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    return np.array(out, dtype=np.uint32)


def test_bf16_product_is_the_float32_product():
    rng = np.random.default_rng(40)
    edges = [0x0000, 0x8000, 0x0001, 0x8001, 0x007F, 0x0080, 0x3F80, 0x7F7F, 0xFF7F, 0x0040, 0x3FC0, 0x2000, 0x1F80]
    codes = np.concatenate([rng.integers(0, 1 << 16, (1500, 2)),
                            np.array([[x, y] for x in edges for y in edges])]).astype(np.uint16)
    values = codes.view(ml_dtypes.bfloat16).astype(np.float32)
    keep = np.isfinite(values).all(axis=1)
    codes, values = codes[keep], values[keep]
    with np.errstate(all="ignore"):
        want = (values[:, 0] * values[:, 1]).view(np.uint32)
    got = _run(lambda m, a, b: float_product(m, a, b, "bf16"), 16, codes.tolist())
    assert np.array_equal(got, want)
    assert (want == 0x80000000).any() and (want & 0x7F800000 == 0).sum() > 10  # -0 and subnormal products checked


def test_e5m2_product_is_the_exact_float32_product():
    """Every finite E5M2 code times a spread of codes (the edges: largest magnitude 0x7B, smallest
    subnormal 0x01, -0 0x80, the top subnormal 0x03 and the smallest normal 0x04)."""
    rng = np.random.default_rng(42)
    every = np.arange(256, dtype=np.uint8)
    edges = np.array([0x00, 0x80, 0x01, 0x81, 0x03, 0x04, 0x3C, 0x7B, 0xFB], dtype=np.uint8)
    codes = np.concatenate([np.stack([every, rng.integers(0, 256, 256).astype(np.uint8)], axis=1),
                            np.array([[x, y] for x in edges for y in edges], dtype=np.uint8)])
    values = codes.view(ml_dtypes.float8_e5m2).astype(np.float64)
    keep = np.isfinite(values).all(axis=1)  # Inf/NaN codes are not data
    codes, values = codes[keep], values[keep]
    exact = values[:, 0] * values[:, 1]
    assert np.array_equal(exact.astype(np.float32).astype(np.float64), exact)  # float32 holds every product
    want = exact.astype(np.float32).view(np.uint32)
    got = _run(lambda m, a, b: float_product(m, a, b, "fp8_e5m2"), 8, codes.tolist())
    assert np.array_equal(got, want)
    assert (want == 0x80000000).any() and 0x2F800000 in want  # -0, and 2**-32: two smallest subnormals


def test_fp32_add_is_the_float32_sum():
    rng = np.random.default_rng(41)
    x = rng.integers(0, 1 << 32, 1500, dtype=np.uint64).astype(np.uint32)
    y = rng.integers(0, 1 << 32, 1500, dtype=np.uint64).astype(np.uint32)
    signs = rng.integers(0, 2, 400).astype(np.uint32) << 31
    sub = rng.integers(0, 1 << 23, 400, dtype=np.uint64).astype(np.uint32) | signs
    near = x[:400] ^ np.uint32(1 << 31)  # cancellation: -x + a few ulps
    x = np.concatenate([x, sub, x[:400], [0, 0x80000000, 0x80000000, 1, 0x00800000, 0x3F800000]]).astype(np.uint32)
    y = np.concatenate([y, sub[::-1], near + rng.integers(0, 4, 400).astype(np.uint32),
                        [0x80000000, 0x80000000, 0, 0x80000001, 0x80000001, 0x33800000]]).astype(np.uint32)
    fx, fy = x.view(np.float32), y.view(np.float32)
    with np.errstate(all="ignore"):
        total = fx + fy
    keep = np.isfinite(fx) & np.isfinite(fy) & np.isfinite(total)
    want = total.view(np.uint32)[keep]
    got = _run(fp32_add, 32, list(zip(x[keep].tolist(), y[keep].tolist(), strict=True)))
    assert np.array_equal(got, want)
    assert (want == 0).sum() >= 2 and (want == 0x80000000).any()  # +0 from cancellation, -0 + -0 = -0
