"""The output stage in JAX (``workloads.output_stage``), the ``Requant`` record, derived parameters, chains."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import workloads
from accel_spec.errors import WorkloadError
from workloads import Conv2d, Gemm, Requant, chained_references, output_stage, resolve, trace

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


def spec(acc: int, mult: int, shift: int, bias: int = 0, zp: int = 0, lo: int = -128, hi: int = 127) -> int:
    """The documented arithmetic on Python integers (``>>`` floors)."""
    x = max(min(acc + bias, INT32_MAX), INT32_MIN)
    y = (x * mult + (1 << (30 + shift))) >> (31 + shift)
    return min(max(y + zp, lo), hi)


def run(acc, rq: Requant) -> list[int]:
    return np.asarray(output_stage(np.asarray(acc, np.int64).reshape(1, -1), rq)).reshape(-1).tolist()


def test_rounding_is_half_up_on_exact_ties_both_signs():
    half = Requant(multiplier=1 << 30, shift=0)  # scale 1/2: odd inputs are exact ties
    assert run([3, -3, 1, -1, 5, -5, 2, -2], half) == [2, -1, 1, 0, 3, -2, 1, -1]
    quarter = Requant(multiplier=1 << 30, shift=1)  # scale 1/4
    assert run([2, -2, 6, -6, 1, -1, 3, -3], quarter) == [1, 0, 2, -1, 0, 0, 1, -1]


def test_saturation_zero_point_and_clamps():
    one = Requant(multiplier=INT32_MAX, shift=0)  # scale ~1
    assert run([1000, -1000, 127, -128, 0], one) == [127, -128, 127, -128, 0]
    zp = Requant(multiplier=1 << 30, shift=0, zero_point=-10)
    assert run([100, -100, 400, -400], zp) == [40, -60, 127, -128]
    relu = Requant(multiplier=1 << 30, shift=0, zero_point=5, act_min=5)
    assert run([-50, 0, 20], relu) == [5, 5, 15]
    relu6 = Requant(multiplier=1 << 30, shift=0, act_min=0, act_max=96)
    assert run([-7, 100, 191, 193, 1000], relu6) == [0, 50, 96, 96, 96]


def test_bias_saturates_to_int32_before_the_multiply():
    rq = Requant(multiplier=1 << 30, shift=31, bias=INT32_MAX)  # scale 2**-32
    # acc + bias overflows int32: saturated to INT32_MAX, then ~0.5 -> rounds to 0 or 1 by the spec
    assert run([INT32_MAX], rq) == [spec(INT32_MAX, 1 << 30, 31, INT32_MAX)]
    assert run([1 << 40], Requant(multiplier=1 << 30, shift=0, act_min=-128)) == [127]


@pytest.mark.parametrize("mult", [INT32_MAX, INT32_MAX - 1, 1 << 30, (1 << 30) + 1, 1, 0, -1, INT32_MIN])
@pytest.mark.parametrize("shift", [0, 1, 7, 30, 31])
def test_matches_the_integer_spec_on_extremes(mult, shift):
    accs = [0, 1, -1, INT32_MAX, INT32_MIN, (1 << 31) + 5, -(1 << 33), 12345, -12345, 1 << 20, -(1 << 20) - 1]
    rq = Requant(multiplier=mult, shift=shift, bias=-7, zero_point=3)
    assert run(accs, rq) == [spec(a, mult, shift, -7, 3) for a in accs]


def test_random_per_channel_parameters_match_the_spec():
    rng = np.random.default_rng(5)
    n = 37
    mult = rng.integers(INT32_MIN, INT32_MAX, n, endpoint=True)
    shift = rng.integers(0, 31, n, endpoint=True)
    bias = rng.integers(-(1 << 20), 1 << 20, n)
    rq = Requant(multiplier=tuple(mult.tolist()), shift=tuple(shift.tolist()), bias=tuple(bias.tolist()),
                 zero_point=-3, act_min=-100, act_max=90)
    acc = rng.integers(-(1 << 34), 1 << 34, (11, n))
    got = np.asarray(output_stage(acc, rq))
    assert got.dtype == np.int8
    want = [[spec(int(acc[i, c]), int(mult[c]), int(shift[c]), int(bias[c]), -3, -100, 90) for c in range(n)]
            for i in range(11)]
    assert got.tolist() == want
    # channel offset: the last 5 channels of a 37-channel record
    tail = np.asarray(output_stage(acc[:, -5:], rq, start=n - 5))
    assert tail.tolist() == got[:, -5:].tolist()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"multiplier": 1 << 31, "shift": 0},
         "requant multiplier must be an int32 \\(Q31 multiplier\\), not 2147483648"),
        ({"multiplier": 1, "shift": 32}, "requant shift must be an integer in \\[0, 31\\], not 32"),
        ({"multiplier": 1, "shift": -1}, "requant shift must be an integer in \\[0, 31\\], not -1"),
        ({"multiplier": 1, "shift": 0, "zero_point": 128},
         "requant zero_point must be an integer in \\[-128, 127\\] \\(the 8-bit output range\\), not 128"),
        ({"multiplier": 1, "shift": 0, "bias": 1 << 31}, "requant bias must be an int32, not 2147483648"),
        ({"multiplier": 1, "shift": 0, "act_min": 5, "act_max": 4}, "act_min must be <= act_max, not 5 > 4"),
        ({"multiplier": (1, 2), "shift": (1, 2, 3)}, "the same number of channels, not 2, 3 and 1"),
        ({"multiplier": 1.5, "shift": 0}, "requant multiplier must be"),
    ],
)
def test_bad_parameters_name_the_field_and_value(kwargs, match):
    with pytest.raises(WorkloadError, match=match):
        Requant(**kwargs)


def test_channel_count_must_fit_the_op():
    rq3 = Requant(multiplier=(1, 2, 3), shift=0)
    Gemm(m=2, k=2, n=3, requant=rq3)
    Gemm(m=2, k=2, n=1, batch=3, requant=rq3)  # one channel per instance
    Conv2d(n=1, h=4, w=4, c_in=3, c_out=3, kh=1, kw=1, groups=3, requant=rq3)
    assert Conv2d(n=1, h=4, w=4, c_in=3, c_out=3, kh=1, kw=1, groups=3, requant=rq3).to_gemm().requant == rq3
    with pytest.raises(WorkloadError, match="gemm requant must give 1 or 4 per-channel values, not 3"):
        Gemm(m=2, k=2, n=4, requant=rq3)
    with pytest.raises(WorkloadError, match="requant must be a Requant record or None"):
        Gemm(m=2, k=2, n=4, requant=3)  # type: ignore[arg-type]


def test_op_records_stay_hashable_and_compare_requant():
    rq = Requant(multiplier=(1, 2), shift=(3, 4))
    a, b = Gemm(m=2, k=2, n=2, requant=rq), Gemm(m=2, k=2, n=2, requant=Requant(multiplier=(1, 2), shift=(3, 4)))
    assert a == b and hash(a) == hash(b) and len({a, b, Gemm(m=2, k=2, n=2)}) == 2


def test_builtins_carry_requant_on_every_op_except_the_raw_gemm():
    for name in workloads.builtin_names():
        ops = resolve(name).ops
        assert ops, name
        if name == "gemm":
            assert all(op.requant is None for op in ops)
        else:
            assert all(op.requant is not None for op in ops), name
    mlp = resolve("mlp").ops
    assert [op.requant.act_min for op in mlp] == [0, 0, 0, -128]  # ReLU fused except the last layer
    net = resolve("mobilenet_v2").ops
    assert net[0].requant.act_max == 96  # ReLU6 as a clamp


def test_derived_scale_follows_the_value_ranges():
    # sqrt(k) * 32 * 73.9 accumulator RMS -> 32 * sqrt(2) before a ReLU
    for k in (9, 784, 4608):
        rq = workloads.derived_requant(k, "relu")
        real = rq.multiplier[0] * 2.0 ** -(31 + rq.shift[0])
        weight_rms = np.sqrt((256 ** 2 - 1) / 12)
        assert real == pytest.approx(32 * np.sqrt(2) / (np.sqrt(k) * 32 * weight_rms), rel=1e-9)
        assert (1 << 30) <= rq.multiplier[0] < (1 << 31) and 0 <= rq.shift[0] <= 31


def test_gemm_builtin_requant_options_and_bad_values():
    op = resolve("gemm:m=4,k=8,n=4,requant=1,multiplier=1610612736,shift=5,zero_point=-2").ops[0]
    assert op.requant == Requant(multiplier=(1610612736,), shift=(5,), zero_point=-2)
    with pytest.raises(WorkloadError, match="requant shift must be an integer in \\[0, 31\\], not 40"):
        resolve("gemm:m=4,k=8,n=4,requant=1,shift=40")


def test_resolve_equals_trace_up_to_the_attached_parameters():
    model = workloads.builtin_model("mlp:batch=2,d_in=8,hidden=16,layers=2,d_out=4")
    traced = trace(model.fn, *model.example_args())
    resolved = resolve("mlp:batch=2,d_in=8,hidden=16,layers=2,d_out=4").ops
    assert [dataclasses.replace(op, requant=None) for op in resolved] == list(traced.ops)


def test_int8_model_output_is_the_chain_of_output_stages():
    spec_ = "mlp:batch=3,d_in=8,hidden=16,layers=2,d_out=4"
    model = workloads.builtin_model(spec_)
    weights, x = model.make_args(0)
    out = np.asarray(model.fn(weights, x))
    a = np.asarray(x, np.int64)
    for w, op in zip(weights, resolve(spec_).ops, strict=True):
        acc = a @ np.asarray(w, np.int64)
        rq = op.requant
        a = np.array([[spec(int(v), rq.multiplier[0], rq.shift[0], 0, 0, rq.act_min, rq.act_max) for v in row]
                      for row in acc])
    assert out.tolist() == a.tolist()


def test_chained_references_feed_each_output_forward():
    ops = resolve("mlp:batch=5,d_in=12,hidden=9,layers=2,d_out=3").ops
    refs = chained_references(ops, 4)
    assert len(refs) == 3
    for prev, nxt in zip(refs, refs[1:], strict=False):
        assert np.array_equal(prev.q, nxt.a)
    for ref in refs:
        assert np.array_equal(ref.c, ref.a.astype(np.int64) @ ref.b.astype(np.int64))
    assert not np.array_equal(refs[1].b, chained_references(ops, 5)[1].b)
    with pytest.raises(WorkloadError, match="ops 0 and 1 do not chain"):
        chained_references((ops[0], ops[0]), 0)


@pytest.mark.parametrize(("option", "message"), [
    ("shift=40", "requant shift must be an integer in [0, 31], not 40"),
    ("multiplier=2147483648", "gemm option multiplier must be at most 2,147,483,647, not 2,147,483,648"),
    ("multiplier=-2147483649", "requant multiplier must be an int32 (Q31 multiplier), not -2147483649"),
    ("zero_point=-129", "requant zero_point must be an integer in [-128, 127] (the 8-bit output range), not -129"),
])
def test_bad_requant_options_exit_2_with_one_line(run_cli, option, message):
    code, out, err = run_cli("evaluate", "--design", "tiny", "--workload", f"gemm:m=4,k=8,n=4,requant=1,{option}")
    assert code == 2 and out == ""
    assert err == f"accel-dse: error: {message}\n"
