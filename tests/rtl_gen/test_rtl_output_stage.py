# amaranth: UnusedElaboratable=no
"""The output stage in Amaranth's simulator, bit-exact against the JAX reference ``workloads.output_stage``."""

from __future__ import annotations

import numpy as np
import pytest
from amaranth.sim import Simulator

from accel_spec.errors import ConfigError
from rtl_gen import OUTPUT_STAGE_LATENCY, OutputStage
from workloads import Requant, output_stage

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


def _param_word(bias: int, mult: int, shift: int, zp: int, lo: int, hi: int, bits: int) -> int:
    """One lane's parameter word as the module docstring lays it out (bias at bit 0, ...)."""
    fields = ((bias, 32), (mult, 32), (shift, 5), (zp, bits), (lo, bits), (hi, bits))
    word, at = 0, 0
    for value, width in fields:
        word |= (value & ((1 << width) - 1)) << at
        at += width
    return word


def _signed(value: int, bits: int) -> int:
    return value - (1 << bits) if value >> (bits - 1) else value


def _packed_params(rq: Requant, lanes: int) -> int:
    """All lanes' parameter words of ``rq`` (channel ``c`` in lane ``c``) as one ``params`` value."""
    bits = rq.bits
    lo, hi = rq.bounds
    words = [_param_word(rq.channel_values("bias", lanes)[c], rq.channel_values("multiplier", lanes)[c],
                         rq.channel_values("shift", lanes)[c], rq.zero_point, lo, hi, bits) for c in range(lanes)]
    pw = sum(width for width in (32, 32, 5, bits, bits, bits))
    return sum(w << (c * pw) for c, w in enumerate(words))


def _run_stage(acc: np.ndarray, rqs: list[Requant], acc_bits: int, number_format: str = "int") -> np.ndarray:
    """Feed rows of ``acc`` (one per cycle, channels = lanes) with row ``t``'s parameters from ``rqs[t]``
    (the same cycle, as the accelerator presents them) and collect ``q`` at the documented latency."""
    rows, lanes = acc.shape
    bits = rqs[0].bits
    dut = OutputStage(lanes=lanes, acc_bits=acc_bits, out_bits=bits, number_format=number_format)
    params = [_packed_params(rq, lanes) for rq in rqs]
    got = np.zeros_like(acc)

    async def bench(ctx) -> None:  # type: ignore[no-untyped-def]
        for t in range(rows + OUTPUT_STAGE_LATENCY):
            if t < rows:
                ctx.set(dut.params, params[t])
                ctx.set(dut.acc, sum((int(v) & ((1 << acc_bits) - 1)) << (c * acc_bits)
                                     for c, v in enumerate(acc[t])))
            else:
                ctx.set(dut.params, 0)  # what follows the last row must not reach it
                ctx.set(dut.acc, 0)
            await ctx.tick()
            if t >= OUTPUT_STAGE_LATENCY - 1 and t - (OUTPUT_STAGE_LATENCY - 1) < rows:
                q = ctx.get(dut.q)
                got[t - (OUTPUT_STAGE_LATENCY - 1)] = [_signed((q >> (c * bits)) & ((1 << bits) - 1), bits)
                                                       for c in range(lanes)]

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return got


def _check(acc: list[list[int]] | np.ndarray, rq: Requant, acc_bits: int = 32) -> np.ndarray:
    acc = np.asarray(acc, dtype=np.int64)
    want = np.asarray(output_stage(acc, rq)).astype(np.int64)
    got = _run_stage(acc, [rq] * len(acc), acc_bits)
    assert got.tolist() == want.tolist()
    return got


def test_ties_round_half_up_for_both_signs():
    got = _check([[3, -3, 1, -1], [5, -5, 2, -2]], Requant(multiplier=1 << 30, shift=0))
    assert got.tolist() == [[2, -1, 1, 0], [3, -2, 1, -1]]  # x / 2 rounded half up


def test_saturation_at_the_int8_ends_and_negative_values():
    got = _check([[1000, -1000, 127, -128], [128, -129, -1, 0]], Requant(multiplier=INT32_MAX, shift=0))
    assert got.tolist() == [[127, -128, 127, -128], [127, -128, -1, 0]]


def test_relu_zero_point_and_relu6_clamp():
    got = _check([[-50, 0, 20, 400]], Requant(multiplier=1 << 30, shift=0, zero_point=5, act_min=5))
    assert got.tolist() == [[5, 5, 15, 127]]
    got = _check([[-7, 100, 191, 1000]], Requant(multiplier=1 << 30, shift=0, act_min=0, act_max=96))
    assert got.tolist() == [[0, 50, 96, 96]]


@pytest.mark.parametrize("shift", [0, 31])
def test_multipliers_near_2_31_and_the_shift_extremes(shift):
    accs = [[INT32_MAX, INT32_MIN, 1 << 30, -(1 << 30)], [12345, -12345, 1, -1], [0, 255, -256, 1 << 24]]
    rq = Requant(multiplier=(INT32_MAX, INT32_MIN, INT32_MAX - 1, (1 << 30) + 1), shift=(shift,) * 4,
                 bias=(0, -3, 7, 0))
    _check(accs, rq)


def test_wide_accumulators_saturate_to_int32_and_per_channel_random_parameters():
    rng = np.random.default_rng(7)
    lanes = 3
    rq = Requant(multiplier=tuple(int(v) for v in rng.integers(INT32_MIN, INT32_MAX, lanes)),
                 shift=tuple(int(v) for v in rng.integers(0, 31, lanes, endpoint=True)),
                 bias=tuple(int(v) for v in rng.integers(INT32_MIN, INT32_MAX, lanes)), zero_point=-9,
                 act_min=-120, act_max=100)
    acc = rng.integers(-(1 << 40), 1 << 40, (40, lanes))
    acc[0] = [(1 << 47) - 1, -(1 << 47), 0]
    _check(acc, rq, acc_bits=48)


def test_sixteen_bit_outputs():
    _check([[1 << 20, -(1 << 20), 40000, -40000]], Requant(multiplier=1 << 30, shift=0, bits=16))


def test_bad_widths_are_config_errors():
    with pytest.raises(ConfigError, match="output stage out_bits must be an integer in \\[2, 16\\], not 32"):
        OutputStage(lanes=2, acc_bits=32, out_bits=32)


def test_model_mirrors_the_generator_constants():
    from accel_spec.config import ArrayConfig
    from perf_model.physical import output_stage as model
    from rtl_gen import QPARAM_CHANNELS, buffer_layout, param_bits

    assert model.QPARAM_CHANNELS == QPARAM_CHANNELS
    for ib in (8, 16):
        assert float(model.param_bits(ib)) == param_bits(ib)
        lay = buffer_layout(ArrayConfig(rows=4, cols=8, input_bits=ib, acc_bits=48))
        assert lay.qparam.depth * lay.qparam.width == float(model.qparam_bits(ib))  # 4096 / 8 words of 8 lanes


@pytest.mark.parametrize("acc_bits,bits", [(32, 8), (64, 16), (16, 8)])
def test_parameters_that_change_every_cycle_follow_their_own_row_through_the_pipeline(acc_bits, bits):
    """The accelerator changes the parameter word with every ofmap word: each stage must use its own row's."""
    rng = np.random.default_rng(acc_bits + bits)
    lanes, rows = 2, 24
    top = 1 << (bits - 1)
    rqs = []
    for _ in range(rows):
        lo, hi = sorted(int(v) for v in rng.integers(-top, top, 2))
        rqs.append(Requant(multiplier=tuple(int(v) for v in rng.integers(INT32_MIN, INT32_MAX, lanes, endpoint=True)),
                           shift=tuple(int(v) for v in rng.integers(0, 31, lanes, endpoint=True)),
                           bias=tuple(int(v) for v in rng.integers(INT32_MIN, INT32_MAX, lanes, endpoint=True)),
                           zero_point=int(rng.integers(-top, top)), act_min=lo, act_max=hi, bits=bits))
    acc = rng.integers(-(1 << (acc_bits - 1)), 1 << (acc_bits - 1), (rows, lanes), endpoint=False)
    acc[:, 1] >>= rng.integers(0, acc_bits - 1, rows)  # small values too, where the shift decides
    want = np.stack([np.asarray(output_stage(acc[t:t + 1], rq)).astype(np.int64)[0] for t, rq in enumerate(rqs)])
    assert _run_stage(acc, rqs, acc_bits).tolist() == want.tolist()


@pytest.mark.parametrize("acc_bits,bits", [(16, 8), (32, 8), (48, 8), (64, 16), (32, 16), (32, 2)])
def test_the_stage_has_the_contracted_latency_and_the_register_count_the_model_prices(acc_bits, bits):
    from perf_model.physical import output_stage as model

    dut = OutputStage(lanes=3, acc_bits=acc_bits, out_bits=bits)
    assert dut.stages() == OUTPUT_STAGE_LATENCY
    assert dut.register_bits() == 3 * float(model.lane_register_bits(bits))


# -- the fp8 conversion (rtl_gen.core.fp8_output) against workloads.format_codes.fp8_output ----------

def _fp8_rows(acc_bits: int) -> tuple[np.ndarray, list[Requant]]:
    """Edge accumulators (two lanes, per row one shift/bias/ReLU) and random ones."""
    s2 = 18  # E4M3: accumulator units 2**-18
    edge = [  # (acc, shift, relu)
        (448 << s2, 0, False), (-(448 << s2), 0, False),       # the largest magnitude, exactly
        (464 << s2, 0, False), ((464 << s2) - 1, 0, False),     # above it: saturated; just below the tie
        ((1 << (acc_bits - 1)) - 1, 0, False), (-(1 << (acc_bits - 1)), 0, False),  # saturation
        (1 << 9, 0, False), (-(1 << 9), 0, False),             # the smallest subnormal, each sign
        (1 << 8, 0, False), (3 << 8, 0, False), (5 << 8, 3, False),  # ties at the subnormal quantum
        (-(1 << 8), 0, False), (-1, 0, False), (-1, 31, False),  # negative values rounding to zero: -0
        (-(1 << 30), 5, True), (0, 0, False), (0, 31, True),   # ReLU; zero
        ((0b10011 << 20), 0, False), ((0b10001 << 20), 0, False),  # ties in the normal range (to even)
        ((0b11111 << 14), 0, False), ((15 << 30) + 1, 2, False),  # a carry into the exponent; sticky
    ]
    rng = np.random.default_rng(5)
    rows = len(edge) + 40
    acc = np.zeros((rows, 2), dtype=np.int64)
    rqs = []
    for t in range(rows):
        if t < len(edge):
            value, shift, relu = edge[t]
            acc[t] = [value, -value if value > -(1 << (acc_bits - 1)) else value]
            bias = 0
        else:
            acc[t] = rng.integers(-(1 << (acc_bits - 1)), 1 << (acc_bits - 1), 2) >> rng.integers(0, acc_bits - 1, 2)
            shift, relu, bias = int(rng.integers(0, 32)), bool(rng.integers(0, 2)), int(rng.integers(-2**31, 2**31))
        rqs.append(Requant(multiplier=(1 << 30,), shift=(shift,), bias=(bias,), act_min=0 if relu else None, bits=8))
    return acc, rqs


@pytest.mark.parametrize("acc_bits", [37, 48])
def test_fp8_conversion_is_bit_exact_on_edge_codes_and_random_accumulators(acc_bits):
    from workloads.format_codes import fp8_output

    acc, rqs = _fp8_rows(acc_bits)
    want = np.stack([fp8_output(acc[t].astype(object), "fp8_e4m3", shift=rq.shift[0], bias=rq.bias[0],
                                relu=rq.bounds[0] >= 0).astype(np.int64) for t, rq in enumerate(rqs)])
    got = _run_stage(acc, rqs, acc_bits, number_format="fp8_e4m3")
    assert got.tolist() == want.tolist()
    codes = set((want & 0xFF).reshape(-1).tolist())
    assert {0x7E, 0xFE, 0x01, 0x81, 0x80, 0x00} <= codes  # +-448, +-smallest subnormal, -0, +0 all produced


def test_fp8_stage_keeps_the_contracted_latency_and_refuses_other_formats():
    assert OutputStage(lanes=2, acc_bits=48, out_bits=8, number_format="fp8_e4m3").stages() == OUTPUT_STAGE_LATENCY
    for fmt, bits in (("fp8_e5m2", 8), ("bf16", 16), ("fp8_e4m3", 16), ("fp8_e5m2", 16)):
        with pytest.raises(ConfigError, match="number_format"):
            OutputStage(lanes=1, acc_bits=48, out_bits=bits, number_format=fmt)
    assert OutputStage(lanes=2, acc_bits=32, out_bits=8, number_format="fp8_e5m2").stages() == OUTPUT_STAGE_LATENCY


# -- the float conversion (rtl_gen.core.bf16_output) against workloads.format_codes.float_output ------

def _f32(x: float) -> int:
    """The float32 pattern of ``x`` as a signed int32."""
    return int(np.array([x], dtype=np.float32).view(np.int32)[0])


_F32MAX = float(np.finfo(np.float32).max)
#: Per output format: edge accumulators ``(value, shift, relu)`` (two lanes: the value and its negation).
_FLOAT_EDGES = {
    "bf16": [
        (float.fromhex("0x1.fep127"), 0, False), (_F32MAX, 0, False),  # the largest bf16 exactly; above it: saturated
        (float.fromhex("0x1.ff7ffep127"), 0, False),           # just below the rounding point: bf16 max
        (float.fromhex("0x1.ff8p127"), 0, False),              # the tie: rounds up to 2**128, saturated
        (_F32MAX, 1, False), (_F32MAX, 31, False),             # scaled down: no saturation
        (2.0 ** -133, 0, False), (2.0 ** -134, 0, False),      # bf16's smallest subnormal; the tie below it: 0
        (3 * 2.0 ** -134, 0, False), (2.0 ** -149, 0, False),  # tie to even (2**-132); float32's smallest: 0
        (2.0 ** -120, 31, False), (1.0, 31, True),             # into the subnormals by the shift; ReLU
        (1 + 2.0 ** -8, 0, False), (1 + 3 * 2.0 ** -8, 0, False),  # ties in the normal range, to even
        (1 + 2.0 ** -8 + 2.0 ** -20, 0, False),                # above the tie by a sticky bit
        (float.fromhex("0x1.ffp0"), 0, False), (0.0, 0, False), (0.0, 0, True),  # a carry into the exponent; zero
        (2.0 ** -126, 0, False), (float.fromhex("0x1.fffffep-127"), 0, False),  # bf16 normal edge; rounds up to it
    ],
    "fp8_e5m2": [
        (57344.0, 0, False), (_F32MAX, 0, False), (61439.0, 0, False),  # the largest E5M2; saturated; below the tie
        (61440.0, 0, False), (57344.0 * 2 ** 31, 31, False),   # the tie rounds up to 2**16: saturated; scaled
        (2.0 ** -16, 0, False), (2.0 ** -17, 0, False),        # the smallest subnormal; the tie below it: 0
        (3 * 2.0 ** -17, 0, False), (3 * 2.0 ** -16, 0, False),  # tie to even (2**-15); the largest subnormal
        (2.0 ** -149, 0, False), (2.0 ** -14, 0, False),       # float32's smallest: 0 (a long shift); smallest normal
        (2.0 ** 15, 31, False), (1.0, 31, True),               # into the subnormals by the shift; ReLU
        (1.125, 0, False), (1.375, 0, False), (1.125 + 2.0 ** -20, 0, False),  # ties to even; a sticky bit
        (1.875, 0, False), (0.0, 0, False), (0.0, 0, True),    # a carry into the exponent; zero
    ],
}


def _float_rows(fmt: str) -> tuple[np.ndarray, list[Requant]]:
    """Edge float32 accumulators (two lanes: the value and its negation; per row one shift/ReLU,
    bias +0) and random ones with random float32 biases (per channel)."""
    edge = _FLOAT_EDGES[fmt]
    rng = np.random.default_rng(7)
    rows = len(edge) + 40
    acc = np.zeros((rows, 2), dtype=np.int64)
    rqs = []
    for t in range(rows):
        bias: tuple[int, ...] = (0,)
        if t < len(edge):
            value, shift, relu = edge[t]
            acc[t] = [_f32(value), _f32(-value)]
        else:
            bits = rng.integers(0, 1 << 32, 2, dtype=np.uint64).astype(np.uint32)
            bits[(bits >> 23) & 0xFF == 0xFF] &= 0xFF7FFFFF  # finite only (infinity and NaN are not data)
            if fmt == "fp8_e5m2":  # near the format's range, so few rows saturate or vanish
                bits = (bits & 0x807FFFFF) | (rng.integers(100, 150, 2).astype(np.uint32) << 23)
            acc[t] = bits.view(np.int32)
            shift, relu = int(rng.integers(0, 32)), bool(rng.integers(0, 2))
            values = acc[t].astype(np.int32).view(np.float32)
            # per channel: the negated accumulator (exact cancellation to +0), a few ulps off it, or a random one
            choice = rng.integers(0, 3, 2)
            b = [-v if c == 0 else v * np.float32(-1 + 2.0 ** -20) if c == 1 else v * np.float32(rng.normal())
                 for v, c in zip(values, choice, strict=True)]
            bias = tuple(_f32(float(x)) for x in b)
        rqs.append(Requant(multiplier=(1 << 30,), shift=(shift,), bias=bias, act_min=0 if relu else None,
                           bits=16 if fmt == "bf16" else 8))
    return acc, rqs


@pytest.mark.parametrize("fmt", ["bf16", "fp8_e5m2"])
def test_float_conversion_is_bit_exact_on_edge_values_and_random_accumulators(fmt):
    from workloads.format_codes import float_output

    acc, rqs = _float_rows(fmt)
    want = np.stack([float_output(acc[t].astype(np.int32).view(np.float32), fmt, shift=rq.shift[0],
                                  bias=np.asarray(rq.channel_values("bias", 2)), relu=rq.bounds[0] >= 0
                                  ).astype(np.int64) for t, rq in enumerate(rqs)])
    got = _run_stage(acc, rqs, 32, number_format=fmt)
    assert got.tolist() == want.tolist()
    bits = 16 if fmt == "bf16" else 8
    codes = set((want & ((1 << bits) - 1)).reshape(-1).tolist())
    top, sub, sign = (0x7F7F, 0x0001, 0x8000) if fmt == "bf16" else (0x7B, 0x01, 0x80)
    # +-max (saturation included), +-smallest subnormal, -0 and +0 all produced
    assert {top, top | sign, sub, sub | sign, sign, 0} <= codes
    assert want[1].tolist() == [top, _signed(top | sign, bits)]  # float32 max saturates to the format's max
    # the biases count: without them (bias +0) most random rows differ
    plain = np.stack([float_output(acc[t].astype(np.int32).view(np.float32), fmt, shift=rq.shift[0],
                                   relu=rq.bounds[0] >= 0).astype(np.int64) for t, rq in enumerate(rqs)])
    assert (plain != want).any(axis=1).sum() > 20


def test_float_output_adds_the_float32_bias_by_hand():
    from workloads.format_codes import float_output

    # bf16: 1.5 + (-0.5) = 1.0 (0x3F80); (1 + 2**-8) + 2**-8 = 1 + 2**-7, a bf16 (0x3F81), where 1 + 2**-8
    # alone ties to 1.0; E5M2: 3 + 2**-24 would tie to 3 without the bias (-1): 2 + ... is 0x40
    assert float_output(np.float32([1.5]), "bf16", shift=0, bias=[_f32(-0.5)]).tolist() == [0x3F80]
    assert float_output(np.float32([1 + 2.0 ** -8]), "bf16", shift=0, bias=[_f32(2.0 ** -8)]).tolist() == [0x3F81]
    assert float_output(np.float32([1 + 2.0 ** -8]), "bf16", shift=0).tolist() == [0x3F80]
    assert float_output(np.float32([3.0]), "fp8_e5m2", shift=1, bias=[_f32(-1.0)]).tolist() == [0x3C]  # (3-1)/2 = 1
    assert float_output(np.float32([-0.0]), "fp8_e5m2", shift=0).tolist() == [0]  # -0 + +0 is +0


def test_bf16_stage_keeps_the_contracted_latency_and_refuses_other_widths():
    assert OutputStage(lanes=2, acc_bits=32, out_bits=16, number_format="bf16").stages() == OUTPUT_STAGE_LATENCY
    for acc_bits, bits in ((48, 16), (32, 8)):
        with pytest.raises(ConfigError, match="number_format"):
            OutputStage(lanes=1, acc_bits=acc_bits, out_bits=bits, number_format="bf16")
