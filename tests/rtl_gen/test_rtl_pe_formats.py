# amaranth: UnusedElaboratable=no
"""The one PE cell in its fp8 (E4M3) form, bit-exact against ``workloads.formats`` on every code pair class."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from rtl_testlib import run_bench, wrap

from accel_spec.errors import ConfigError
from rtl_gen.core.pe import PE, product_bits
from workloads import formats as F

ACC = 48
CODES = np.arange(256, dtype=np.uint8)
VALUES = CODES.view(ml_dtypes.float8_e4m3fn).astype(np.float64)
FINITE = CODES[np.isfinite(VALUES)]  # 254 codes: the two NaN codes are not data
#: +0, -0, smallest subnormal, largest subnormal, smallest normal, 1, largest finite, and their negatives
EDGES = [0x00, 0x80, 0x01, 0x81, 0x07, 0x87, 0x08, 0x88, 0x38, 0xB8, 0x7E, 0xFE]


def _fixed(code_a: int, code_b: int) -> int:
    """The exact product in units of 2**-18, from the reference semantics."""
    a = np.array([[VALUES[code_a]]])
    b = np.array([[VALUES[code_b]]])
    return int(F.accumulate(a, b, "fp8_e4m3")[0, 0])


def _signed8(code: int) -> int:
    return code - 256 if code >= 128 else code


def _pairs(rng: np.random.Generator, n: int) -> list[tuple[int, int]]:
    pairs = [(a, b) for a in EDGES for b in EDGES]
    pairs += [(int(a), int(b)) for a, b in rng.choice(FINITE, (n, 2))]
    return pairs


def test_product_width_holds_the_largest_product():
    assert _fixed(0x7E, 0x7E) == 448 * 448 * (1 << 18)
    assert abs(_fixed(0x7E, 0xFE)).bit_length() + 1 <= product_bits("fp8_e4m3", 8) == 37


def test_ws_fp8_pe_adds_the_exact_product_to_the_partial_sum():
    rng = np.random.default_rng(30)
    pe = PE(dataflow="ws", input_bits=8, acc_bits=ACC, number_format="fp8_e4m3")
    pairs = _pairs(rng, 150)
    psums = rng.integers(-(1 << 40), 1 << 40, len(pairs))
    psums[:2] = [-(1 << (ACC - 1)), (1 << (ACC - 1)) - 1]  # wraps like the integer PE
    seen: list[int] = []

    async def bench(ctx) -> None:  # type: ignore[no-untyped-def]
        for (a, w), v in zip(pairs, psums, strict=True):
            ctx.set(pe.shift, 1)
            ctx.set(pe.s_in, _signed8(w))
            await ctx.tick()
            ctx.set(pe.shift, 0)
            ctx.set(pe.a_in, _signed8(a))
            ctx.set(pe.v_in, int(v))
            await ctx.tick()
            seen.append(ctx.get(pe.v_out))

    run_bench(pe, bench)
    for ((a, w), v), got in zip(zip(pairs, psums, strict=True), seen, strict=True):
        assert got == wrap(np.int64(v) + _fixed(a, w), ACC), (hex(a), hex(w), int(v))


def test_os_fp8_pe_accumulates_a_dot_product_exactly():
    rng = np.random.default_rng(31)
    pe = PE(dataflow="os", input_bits=8, acc_bits=ACC, number_format="fp8_e4m3")
    a = [*EDGES, *(int(c) for c in rng.choice(FINITE, 40))]
    b = [*reversed(EDGES), *(int(c) for c in rng.choice(FINITE, 40))]
    sums: list[int] = []

    async def bench(ctx) -> None:  # type: ignore[no-untyped-def]
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            ctx.set(pe.a_in, _signed8(x))
            ctx.set(pe.v_in, _signed8(y))
            ctx.set(pe.f_in, int(i == 0))
            await ctx.tick()
            sums.append(ctx.get(pe.s_out))

    run_bench(pe, bench)
    expected = F.accumulate(VALUES[np.array(a)][None, :], VALUES[np.array(b)][:, None], "fp8_e4m3")[0, 0]
    assert sums[-1] == int(expected)
    # every prefix too: the accumulator is exact, no rounding anywhere along the way
    for n in (1, len(EDGES), len(a) // 2):
        prefix = F.accumulate(VALUES[np.array(a[:n])][None, :], VALUES[np.array(b[:n])][:, None], "fp8_e4m3")
        assert sums[n - 1] == int(prefix[0, 0])


@pytest.mark.parametrize(("fmt", "bits", "acc", "rule"), [
    ("fp8_e5m2", 8, 64, "a fp8_e5m2 PE needs input_bits 8 and acc_bits 32"),
    ("fp8_e5m2", 16, 32, "a fp8_e5m2 PE needs input_bits 8 and acc_bits 32"),
    ("fp8_e5m3", 8, 32, "number_format must be one of int, int4, fp8_e4m3, bf16, fp8_e5m2"),
    ("int4", 16, 32, "an int4 PE needs input_bits 8"),
    ("bf16", 8, 32, "a bf16 PE needs input_bits 16 and acc_bits 32"),
    ("fp8_e4m3", 8, 32, "needs input_bits 8 and acc_bits >= 37"),
    ("fp8_e4m3", 16, 48, "needs input_bits 8"),
])
def test_unbuilt_pe_formats_are_refused(fmt, bits, acc, rule):
    with pytest.raises(ConfigError, match=rule):
        PE(dataflow="ws", input_bits=bits, acc_bits=acc, number_format=fmt)


# -- the bf16 form: float32 product and sum, each rounded once (rtl_gen.core.float32) ------------------

#: bf16 codes: +-0, smallest subnormal, largest subnormal, smallest normal, 1, 1.5, a tie maker, the largest finite
BF16_EDGES = [0x0000, 0x8000, 0x0001, 0x8001, 0x007F, 0x0080, 0x3F80, 0xBFC0, 0x3F81, 0x7F7F, 0xFF7F, 0x1F80]


def _bf16_values(codes: list[int]) -> np.ndarray:
    return np.array(codes, dtype=np.uint16).view(ml_dtypes.bfloat16).astype(np.float32)


def _signed16(code: int) -> int:
    return code - 65536 if code >= 32768 else code


def _f32_bits(x: np.float32) -> int:
    return int(np.float32(x).view(np.uint32))


def _bf16_codes(rng: np.random.Generator, n: int, scale: float) -> list[int]:
    """Codes of normal values times ``scale`` (finite products), subnormal codes among them."""
    values = (rng.standard_normal(n) * scale).astype(ml_dtypes.bfloat16)
    codes = values.view(np.uint16).astype(int).tolist()
    return codes + rng.integers(0, 0x80, 8).tolist() + (rng.integers(0, 0x80, 8) | 0x8000).tolist()


def test_ws_bf16_pe_rounds_the_product_then_the_sum_as_float32():
    rng = np.random.default_rng(32)
    pe = PE(dataflow="ws", input_bits=16, acc_bits=32, number_format="bf16")
    small = [e for e in BF16_EDGES if e not in (0x7F7F, 0xFF7F)]
    pairs = [(a, w) for a in small for w in small] + list(zip(_bf16_codes(rng, 80, 3.0), _bf16_codes(rng, 80, 3.0),
                                                              strict=True))
    pairs += [(0x7F7F, 0x3F00), (0xFF7F, 0x3F00)]  # the largest magnitude times 0.5
    psums = (rng.standard_normal(len(pairs)) * 10).astype(np.float32)
    psums[:4] = [0.0, -0.0, np.float32(2.0 ** -149), np.float32(-(2.0 ** -149))]
    psums[4:8] = [-x * y for x, y in zip(_bf16_values([p[0] for p in pairs[4:8]]),
                                          _bf16_values([p[1] for p in pairs[4:8]]), strict=True)]  # cancellation
    seen: list[int] = []

    async def bench(ctx) -> None:  # type: ignore[no-untyped-def]
        for (a, w), v in zip(pairs, psums, strict=True):
            ctx.set(pe.shift, 1)
            ctx.set(pe.s_in, _signed16(w))
            await ctx.tick()
            ctx.set(pe.shift, 0)
            ctx.set(pe.a_in, _signed16(a))
            ctx.set(pe.v_in, _f32_bits(v) - (1 << 32) * (_f32_bits(v) >> 31))
            await ctx.tick()
            seen.append(ctx.get(pe.v_out) & 0xFFFFFFFF)

    run_bench(pe, bench)
    va, vw = _bf16_values([p[0] for p in pairs]), _bf16_values([p[1] for p in pairs])
    for i, got in enumerate(seen):
        want = _f32_bits(np.float32(psums[i] + np.float32(va[i] * vw[i])))  # IEEE float32: two roundings
        assert got == want, (hex(pairs[i][0]), hex(pairs[i][1]), float(psums[i]), hex(got), hex(want))


def test_os_bf16_pe_sums_in_ascending_k_as_the_reference():
    rng = np.random.default_rng(33)
    pe = PE(dataflow="os", input_bits=16, acc_bits=32, number_format="bf16")
    a = [0x8000, *_bf16_codes(rng, 40, 2.0)]  # a -0 product first: the sum starts at +0
    b = [0x3F80, *_bf16_codes(rng, 40, 2.0)]
    sums: list[int] = []

    async def bench(ctx) -> None:  # type: ignore[no-untyped-def]
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            ctx.set(pe.a_in, _signed16(x))
            ctx.set(pe.v_in, _signed16(y))
            ctx.set(pe.f_in, int(i == 0))
            await ctx.tick()
            sums.append(ctx.get(pe.s_out) & 0xFFFFFFFF)

    run_bench(pe, bench)
    va, vb = _bf16_values(a).astype(np.float64), _bf16_values(b).astype(np.float64)
    for n in (1, 2, len(a) // 2, len(a)):
        want = F.accumulate(va[None, :n], vb[:n, None], "bf16")[0, 0]
        assert sums[n - 1] == _f32_bits(want)
    assert sums[0] == 0  # +0, not -0


# -- the fp8_e5m2 form: bf16's float32 path, 8-bit lanes (the product always exact) --------------------

E5M2_CODES = np.arange(256, dtype=np.uint8)
E5M2_VALUES = E5M2_CODES.view(ml_dtypes.float8_e5m2).astype(np.float64)
E5M2_FINITE = E5M2_CODES[np.isfinite(E5M2_VALUES)]  # the Inf and NaN codes are not data
#: +-0, +-smallest subnormal, largest subnormal, smallest normal, 1, 1.25, +-largest finite (57344)
E5M2_EDGES = [0x00, 0x80, 0x01, 0x81, 0x03, 0x04, 0x3C, 0x3D, 0x7B, 0xFB]


@pytest.mark.parametrize("df", ["ws", "os"])
def test_e5m2_pe_sums_float32_products_as_the_reference(df):
    """WS: each step adds one product to an arbitrary float32 partial sum (cancellation, -0 and
    float32's smallest subnormal among them); OS: the accumulator sums a fold in ascending k from +0."""
    rng = np.random.default_rng(34)
    pe = PE(dataflow=df, input_bits=8, acc_bits=32, number_format="fp8_e5m2")
    pairs = [(a, b) for a in E5M2_EDGES for b in E5M2_EDGES]
    pairs += [(int(a), int(b)) for a, b in rng.choice(E5M2_FINITE, (60, 2))]
    va = E5M2_VALUES[[p[0] for p in pairs]].astype(np.float32)
    vb = E5M2_VALUES[[p[1] for p in pairs]].astype(np.float32)
    psums = (rng.standard_normal(len(pairs)) * 1000).astype(np.float32)
    psums[:4] = [0.0, -0.0, np.float32(2.0 ** -149), np.float32(-(2.0 ** -149))]
    psums[10:20] = -va[10:20] * vb[10:20]  # exact cancellation: +0
    big = pairs.index((0x7B, 0x7B))
    psums[big] = psums[big + 1] = 0.0  # max * max and max * -max onto +0: the largest products exactly
    seen: list[int] = []

    async def bench(ctx) -> None:  # type: ignore[no-untyped-def]
        for i, (a, b) in enumerate(pairs):
            if df == "ws":
                ctx.set(pe.shift, 1)
                ctx.set(pe.s_in, _signed8(b))
                await ctx.tick()
                ctx.set(pe.shift, 0)
                ctx.set(pe.a_in, _signed8(a))
                ctx.set(pe.v_in, _f32_bits(psums[i]) - (1 << 32) * (_f32_bits(psums[i]) >> 31))
                await ctx.tick()
                seen.append(ctx.get(pe.v_out) & 0xFFFFFFFF)
            else:
                ctx.set(pe.a_in, _signed8(a))
                ctx.set(pe.v_in, _signed8(b))
                ctx.set(pe.f_in, int(i == 0))
                await ctx.tick()
                seen.append(ctx.get(pe.s_out) & 0xFFFFFFFF)

    run_bench(pe, bench)
    if df == "ws":
        for i, got in enumerate(seen):
            want = _f32_bits(np.float32(psums[i] + va[i] * vb[i]))  # the product exact, the sum rounded once
            assert got == want, (hex(pairs[i][0]), hex(pairs[i][1]), float(psums[i]), hex(got), hex(want))
        assert 0x80000000 in seen and seen[big:big + 2] == [0x4F440000, 0xCF440000]  # -0; +-max**2 = 3.0625 * 2**30
    else:
        for n in (1, 2, len(E5M2_EDGES), len(pairs) // 2, len(pairs)):
            want = F.accumulate(va[None, :n].astype(np.float64), vb[:n, None].astype(np.float64), "fp8_e5m2")[0, 0]
            assert seen[n - 1] == _f32_bits(want)
        assert seen[0] == 0  # 0 * 0 from +0: +0
