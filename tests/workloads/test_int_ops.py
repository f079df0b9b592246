"""The integer vector ops: bit-exact against numpy written here from the documented formulas
(docs/workloads.md, "Integer vector ops"), on random inputs and edge values, and within their
documented error bounds of the float functions."""

from __future__ import annotations

import math

import numpy as np
import pytest

from workloads import _int_ops as iops

ALL = np.arange(-128, 128)
PAIRS = [g.reshape(-1) for g in np.meshgrid(ALL, ALL)]  # every int8 pair


# -- the documented integer primitives, in int64 numpy ----------------------------------------------------
def rshr(v, s):
    v = np.asarray(v, np.int64)
    s = np.asarray(s, np.int64)
    return np.where(s > 0, (v + (np.int64(1) << np.maximum(s - 1, 0))) >> s, v)


def rdiv(a, b):
    return (np.asarray(a, np.int64) + np.asarray(b, np.int64) // 2) // np.asarray(b, np.int64)


def sat8(v):
    return np.clip(v, -128, 127)


def i8(v):
    return np.asarray(v, np.int8)


def out(x):
    return np.asarray(x).astype(np.int64)


# -- references ------------------------------------------------------------------------------------------
def ref_add(a, b, ratio_a=1.0, ratio_b=1.0):
    ma, mb = round(ratio_a * 2**14), round(ratio_b * 2**14)
    return sat8(rshr(a.astype(np.int64) * ma + b.astype(np.int64) * mb, 14))


def ref_norm(x, centre, eps):
    n = x.shape[-1]
    rows = []
    for row in x.reshape(-1, n).astype(np.int64):
        d = 128 * row - (rdiv(128 * int(row.sum()), n) if centre else 0)
        r = max(0, (n - 1).bit_length() + 2 * int(np.abs(d).max()).bit_length() - 28)
        eps_d = round(eps * n * 2**22)
        q = max(int(rshr(d * d, r).sum()) + int(rshr(eps_d, r)), 1) << (r & 1)
        p = ((32 - q.bit_length()) - 2) // 2
        s = math.isqrt(q << (2 * p))
        b = 15 - ((n - 1).bit_length() + 1) // 2
        c = round(math.sqrt(n) * 2**b)
        f = (c * 2**14 + s // 2) // s
        rows.append(sat8(rshr(d * f, 10 + b + (r >> 1) - p)))
    return np.array(rows).reshape(x.shape)


def ref_softmax(s, scale, offset):
    x = s.astype(np.int64)
    nq, nk = x.shape[-2:]
    valid = np.ones(x.shape, bool)
    if offset is not None:
        valid = np.broadcast_to(np.arange(nk)[None, :] <= np.arange(nq)[:, None] + offset, x.shape)
    top = np.where(valid, x, -128).max(-1, keepdims=True)
    x16 = np.where(valid, x - top, 0) * round(scale * 4096)
    ln2 = round(math.log(2) * 2**16)
    z = (-x16) // ln2
    t = rshr(x16 + z * ln2 + round(1.353 * 2**16), 2)
    e = rshr(round(0.3585 * 2**15) * rshr(t * t, 14), 15) + round(0.344 * 2**14)
    e = np.where(valid, e >> np.minimum(z, 31), 0)
    rec = (1 << 30) // np.maximum(e.sum(-1, keepdims=True), 1)
    return rshr(((e * rec) >> 15) * 127, 15)


def ref_gelu(x):
    q = x.astype(np.int64)
    clip = round(1.769 * 2**14)
    t = np.minimum(np.abs(q) * round(2**14 / (16 * math.sqrt(2))), clip) - clip
    erf = np.sign(q) * (2**14 - rshr(round(0.2888 * 2**15) * rshr(t * t, 14), 15))
    return sat8(rshr(q * (2**14 + erf), 15))


def ref_silu(x, gate=None):
    table = np.array([round(c / 16 / (1 + math.exp(-c / 16)) * 2**11) for c in range(-128, 128)], np.int64)
    v = table[x.astype(np.int64) + 128]
    return sat8(rshr(v, 7) if gate is None else rshr(v * gate.astype(np.int64), 11))


def ref_rope(x, start):
    _, s, _, dh = x.shape
    half = dh // 2
    ang = np.array([[(start + p) * 10000 ** (-i / half) for i in range(half)] for p in range(s)])
    cos = np.vectorize(lambda a: round(math.cos(a) * 2**14))(ang)[None, :, None, :].astype(np.int64)
    sin = np.vectorize(lambda a: round(math.sin(a) * 2**14))(ang)[None, :, None, :].astype(np.int64)
    x1, x2 = x[..., :half].astype(np.int64), x[..., half:].astype(np.int64)
    return sat8(np.concatenate([rshr(x1 * cos - x2 * sin, 14), rshr(x1 * sin + x2 * cos, 14)], -1))


def windows(x, window, stride, pad, fill):
    xp = np.pad(x.astype(np.int64), ((0, 0), (pad, pad), (pad, pad), (0, 0)), constant_values=fill)
    w = np.lib.stride_tricks.sliding_window_view(xp, (window, window), axis=(1, 2))
    return w[:, ::stride, ::stride]


@pytest.fixture
def rng():
    return np.random.default_rng(7)


def rows(rng, count, n, sigmas=(0.3, 1, 4, 32, 200)):
    sigma = rng.choice(sigmas, size=(count, 1))
    centre = rng.integers(-64, 64, size=(count, 1))
    return np.clip(np.round(centre + sigma * rng.standard_normal((count, n))), -128, 127).astype(np.int8)


# -- bit-exact against the references --------------------------------------------------------------------
def test_add_every_pair_and_a_rescale():
    a, b = i8(PAIRS[0]), i8(PAIRS[1])
    assert np.array_equal(out(iops.add(a, b)), ref_add(a, b))
    assert np.array_equal(out(iops.add(a, b, scale_a=1 / 32, scale_b=3 / 64)), ref_add(a, b, 0.5, 0.75))
    # saturation at both ends, and equal scales add exactly
    assert out(iops.add(i8([127, -128, 100]), i8([127, -128, -30]))).tolist() == [127, -128, 70]


def test_mul_relu_relu6_every_input():
    a, b = i8(PAIRS[0]), i8(PAIRS[1])
    assert np.array_equal(out(iops.mul(a, b)), sat8(rshr(a.astype(np.int64) * b, 4)))
    assert np.array_equal(out(iops.relu(i8(ALL))), np.maximum(ALL, 0))
    assert np.array_equal(out(iops.relu6(i8(ALL))), np.clip(ALL, 0, 96))


@pytest.mark.parametrize("window,stride,pad", [(3, 2, 1), (2, 2, 0), (3, 1, 0)])
def test_pools(rng, window, stride, pad):
    x = rng.integers(-128, 128, size=(2, 9, 9, 3), dtype=np.int8)
    x[0, 0, 0, 0], x[1, 4, 4, 2] = -128, 127
    got = out(iops.maxpool(x, window=window, stride=stride, pad=pad))
    assert np.array_equal(got, windows(x, window, stride, pad, -128).max(axis=(-2, -1)))
    got = out(iops.avgpool(x, window=window, stride=stride, pad=pad))
    assert np.array_equal(got, rdiv(windows(x, window, stride, pad, 0).sum(axis=(-2, -1)), window * window))


def test_global_avgpool_rounds_half_up(rng):
    x = rng.integers(-128, 128, size=(2, 4, 4, 5), dtype=np.int8)
    assert np.array_equal(out(iops.global_avgpool(x)), rdiv(x.astype(np.int64).sum(axis=(1, 2)), 16))
    half = np.zeros((1, 2, 1, 2), np.int8)
    half[0, 0, 0] = [1, -1]  # means +0.5 and -0.5: half up gives 1 and 0
    assert out(iops.global_avgpool(half)).tolist() == [[1, 0]]
    assert out(iops.global_avgpool(np.full((1, 3, 3, 1), -128, np.int8))).tolist() == [[-128]]


@pytest.mark.parametrize("n", [1, 5, 64, 768, 4096])
def test_norms_random_rows(rng, n):
    x = rows(rng, 24, n)
    assert np.array_equal(out(iops.layernorm(x)), ref_norm(x, True, 1e-5))
    assert np.array_equal(out(iops.rmsnorm(x)), ref_norm(x, False, 1e-6))


def test_norm_edge_rows():
    n = 768
    x = np.zeros((6, n), np.int8)
    x[0] = 7  # zero variance: LayerNorm gives 0
    x[1] = -128  # the most negative input everywhere
    x[2, ::2], x[2, 1::2] = -128, 127  # the widest row: the square shift is used
    x[3, 0] = 127  # one outlier: it saturates at 127
    x[4, :] = np.arange(n) % 3 - 1  # a tiny spread
    x[5] = 0  # all zero
    ln, rms = out(iops.layernorm(x)), out(iops.rmsnorm(x))
    assert np.array_equal(ln, ref_norm(x, True, 1e-5)) and np.array_equal(rms, ref_norm(x, False, 1e-6))
    assert not ln[0].any() and not ln[1].any() and not ln[5].any() and not rms[5].any()
    assert ln[3, 0] == 127 and rms[1].tolist() == [-16] * n  # -8.0 / 8.0 * 16 codes


@pytest.mark.parametrize("scale,offset", [(1 / 8, None), (1 / math.sqrt(128), 0), (1.0, 3), (4.0, None)])
def test_softmax_random(rng, scale, offset):
    s = rng.integers(-128, 128, size=(2, 3, 9, 12), dtype=np.int8)
    assert np.array_equal(out(iops.softmax(s, scale=scale, causal_offset=offset)), ref_softmax(s, scale, offset))
    s = rng.integers(-128, 128, size=(4, 64, 64), dtype=np.int8)  # many roundings: small constants show
    assert np.array_equal(out(iops.softmax(s, scale=scale, causal_offset=offset)), ref_softmax(s, scale, offset))


def test_softmax_edges():
    equal = np.full((1, 5, 8), 40, np.int8)
    got = out(iops.softmax(equal, scale=0.5))
    assert np.array_equal(got, ref_softmax(equal, 0.5, None)) and np.all(got == got[0, 0, 0])
    assert abs(int(got[0, 0, 0]) - 127 / 8) <= 1
    # causal, no cache: row 0 sees only the diagonal (p = 1), row i sees i + 1 keys
    s = np.full((1, 4, 4), -128, np.int8)
    got = out(iops.softmax(s, causal_offset=0))
    assert np.array_equal(got, ref_softmax(s, 1.0, 0))
    assert got[0, 0].tolist() == [127, 0, 0, 0] and np.all(np.triu(got[0], 1) == 0)
    # a KV cache of 5: the single new query sees all 6 keys; the extremes of the range
    s = np.array([[[127, -128, 0, 0, 0, 127]]], np.int8)
    assert np.array_equal(out(iops.softmax(s, scale=4.0, causal_offset=5)), ref_softmax(s, 4.0, 5))


def test_gelu_silu_every_input():
    a, b = i8(PAIRS[0]), i8(PAIRS[1])
    assert np.array_equal(out(iops.gelu(i8(ALL))), ref_gelu(ALL))
    assert np.array_equal(out(iops.silu(i8(ALL))), ref_silu(ALL))
    assert np.array_equal(out(iops.silu(a, b)), ref_silu(a, b))
    assert out(iops.gelu(i8([-128, 0, 127]))).tolist() == [0, 0, 127]


@pytest.mark.parametrize("start", [0, 2047])
def test_rope(rng, start):
    x = rng.integers(-128, 128, size=(1, 5, 2, 16), dtype=np.int8)
    x[0, 0, 0, :] = 127  # rotated by up to 45 degrees this saturates
    assert np.array_equal(out(iops.rope(x, start=start)), ref_rope(x, start))


def test_isqrt_is_the_exact_floor(rng):
    values = np.concatenate([np.arange(0, 300), rng.integers(0, 2**31 - 1, size=2000),
                             [2**30, 2**31 - 1, 2**28 - 1, 2**28]]).astype(np.int32)
    got = np.asarray(iops.isqrt(values))
    assert got.tolist() == [math.isqrt(int(v)) for v in values]


# -- error against the float functions, within the documented bounds (output LSBs) -----------------------
def err(got, want):
    return float(np.abs(np.asarray(got, np.float64) - np.clip(want, -128, 127)).max())


def test_error_bounds_of_the_element_wise_ops():
    a, b = i8(PAIRS[0]), i8(PAIRS[1])
    af, bf, v = a.astype(np.float64), b.astype(np.float64), ALL / 16
    assert err(iops.add(a, b, scale_b=3 / 64), af + 0.75 * bf) <= 0.5
    assert err(iops.mul(a, b), af * bf / 16) <= 0.5
    gelu = v * 0.5 * (1 + np.vectorize(math.erf)(v / math.sqrt(2))) * 16
    assert err(iops.gelu(i8(ALL)), gelu) <= 0.65
    assert err(iops.silu(i8(ALL)), v / (1 + np.exp(-v)) * 16) <= 0.5
    assert err(iops.silu(a, b), af / 16 / (1 + np.exp(-af / 16)) * bf) <= 0.53


def test_error_bounds_of_the_row_ops(rng):
    for n in (64, 768, 4096):
        x = rows(rng, 64, n)
        v = x.astype(np.float64) / 16
        m = v.mean(-1, keepdims=True)
        assert err(iops.layernorm(x), (v - m) / np.sqrt(((v - m) ** 2).mean(-1, keepdims=True) + 1e-5) * 16) <= 0.75
        assert err(iops.rmsnorm(x), v / np.sqrt((v * v).mean(-1, keepdims=True) + 1e-6) * 16) <= 0.51
    for scale, offset in ((1 / 8, None), (1 / math.sqrt(128), 0), (4.0, None)):
        s = rng.integers(-128, 128, size=(4, 64, 64), dtype=np.int8)
        z = s / 16 * scale
        if offset is not None:
            z = np.where(np.arange(64)[None, :] <= np.arange(64)[:, None] + offset, z, -np.inf)
        p = np.exp(z - z.max(-1, keepdims=True))
        assert err(iops.softmax(s, scale=scale, causal_offset=offset), 127 * p / p.sum(-1, keepdims=True)) <= 0.6
    x = rng.integers(-128, 128, size=(1, 16, 2, 64), dtype=np.int8)
    ang = np.arange(100, 116)[:, None] * 10000.0 ** (-np.arange(32) / 32)
    cos, sin = np.cos(ang)[None, :, None], np.sin(ang)[None, :, None]
    x1, x2 = x[..., :32].astype(np.float64), x[..., 32:].astype(np.float64)
    assert err(iops.rope(x, start=100), np.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1)) <= 0.51
