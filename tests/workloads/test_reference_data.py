"""Reference data: bit-exact against numpy int64, the conv lowering proven against JAX and a direct conv."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from accel_spec.errors import WorkloadError
from workloads import Conv2d, Gemm, reference, resolve


def exact(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a.astype(np.int64) @ b.astype(np.int64)


def direct_conv(x: np.ndarray, w: np.ndarray, op: Conv2d) -> np.ndarray:
    """int64 convolution tap by tap (no im2col), NHWC x HWIO -> NHWC."""
    xp = np.pad(x.astype(np.int64), ((0, 0), (op.pad_h, op.pad_h_hi), (op.pad_w, op.pad_w_hi), (0, 0)))
    out = np.zeros((x.shape[0], op.out_h, op.out_w, w.shape[3]), np.int64)
    for i in range(op.kh):
        for j in range(op.kw):
            y0, x0 = i * op.dilation_h, j * op.dilation_w
            patch = xp[:, y0:y0 + op.stride_h * (op.out_h - 1) + 1:op.stride_h,
                       x0:x0 + op.stride_w * (op.out_w - 1) + 1:op.stride_w, :]
            out += np.einsum("nhwc,co->nhwo", patch, w[i, j].astype(np.int64))
    return out


def test_gemm_reference_is_exact_and_covers_the_extremes():
    op = Gemm(m=33, k=70, n=17, batch=3)
    for index in range(3):
        r = reference(op, 5, index=index)
        assert r.a.shape == (33, 70) and r.b.shape == (70, 17) and r.c.shape == (33, 17)
        assert r.a.dtype == np.int8 and r.b.dtype == np.int8 and r.c.dtype == np.int32
        assert np.array_equal(r.c, exact(r.a, r.b))
        for t in (r.a, r.b):
            assert t.min() == -128 and t.max() == 127


def test_reference_is_deterministic_and_seeded():
    op = Gemm(m=8, k=8, n=8, batch=2)
    a, b = reference(op, 1), reference(op, 1)
    assert np.array_equal(a.a, b.a) and np.array_equal(a.b, b.b)
    assert not np.array_equal(reference(op, 2).a, a.a)
    assert not np.array_equal(reference(op, 1, index=1).a, a.a)
    # the name is a label, not part of the data
    assert np.array_equal(reference(Gemm(m=8, k=8, n=8, batch=2, name="x"), 1).a, a.a)


CONVS = [
    Conv2d(n=1, h=9, w=9, c_in=3, c_out=5, kh=3, kw=3, pad_h=1, pad_w=1),
    Conv2d(n=2, h=10, w=7, c_in=4, c_out=6, kh=3, kw=2, stride_h=2, stride_w=3, pad_h=0, pad_h_hi=1, pad_w=1),
    Conv2d(n=1, h=12, w=12, c_in=2, c_out=3, kh=3, kw=3, dilation_h=2, dilation_w=3, pad_h=2, pad_w=1),
    Conv2d(n=1, h=8, w=8, c_in=6, c_out=6, kh=3, kw=3, stride_h=2, stride_w=2, pad_h=1, pad_w=1, groups=6),
    Conv2d(n=1, h=6, w=5, c_in=8, c_out=4, kh=1, kw=1, stride_h=2, stride_w=2, groups=2),
]


@pytest.mark.parametrize("op", CONVS, ids=lambda op: f"{op.h}x{op.w}x{op.c_in}k{op.kh}{op.kw}g{op.groups}")
def test_conv_lowering_matches_jax_and_a_direct_conv(op):
    g = op.to_gemm()
    refs = [reference(op, 7, index=i) for i in range(g.batch)]
    for r in refs:
        assert r.a.shape == (g.m, g.k) and r.b.shape == (g.k, g.n)
        assert np.array_equal(exact(r.a, r.b), r.c)  # a @ b is JAX's conv output, reshaped
        direct = direct_conv(r.x, r.w, op).reshape(g.m, g.n)
        assert np.array_equal(r.c, direct)
        for t in (r.a, r.b):
            assert t.min() == -128 and t.max() == 127
    # The per-group slices are the groups of one real grouped convolution computed by JAX.
    x = np.concatenate([r.x for r in refs], axis=3)
    w = np.concatenate([r.w for r in refs], axis=3)
    full = lax.conv_general_dilated(
        x, w, (op.stride_h, op.stride_w), ((op.pad_h, op.pad_h_hi), (op.pad_w, op.pad_w_hi)),
        rhs_dilation=(op.dilation_h, op.dilation_w), dimension_numbers=("NHWC", "HWIO", "NHWC"),
        feature_group_count=op.groups, preferred_element_type=jnp.int32)
    per_group = np.concatenate([r.c.reshape(op.n, op.out_h, op.out_w, g.n) for r in refs], axis=3)
    assert np.array_equal(np.asarray(full), per_group)


def test_references_of_traced_layers():
    resnet = resolve("resnet18")
    downsample = next(op for op in resnet.ops if op.name == "layer2.0.downsample")
    r = reference(downsample, 0)
    assert r.a.shape == (28 * 28, 64) and np.array_equal(exact(r.a, r.b), r.c)
    mobilenet = resolve("mobilenet_v2:res=64")
    depthwise = next(op for op in mobilenet.ops if op.kind == "conv2d" and op.groups > 1)
    r = reference(depthwise, 0, index=depthwise.groups - 1)
    assert r.b.shape == (9, 1) and np.array_equal(exact(r.a, r.b), r.c)


def test_sixteen_bit_operands_use_int64_results():
    r = reference(Gemm(m=5, k=9, n=4), 0, bits=16)
    assert r.a.dtype == np.int16 and r.c.dtype == np.int64
    assert r.a.min() == -32768 and r.a.max() == 32767
    assert np.array_equal(r.c, exact(r.a, r.b))


def test_long_int8_contraction_switches_to_int64():
    # 2^14 * k overflows int32 once k > 131071.
    short, long = reference(Gemm(m=1, k=131071, n=1)), reference(Gemm(m=1, k=131072, n=1))
    assert short.c.dtype == np.int32 and long.c.dtype == np.int64
    assert np.array_equal(long.c, exact(long.a, long.b))


def test_narrow_operands_stay_in_range():
    r = reference(Gemm(m=6, k=6, n=6), 0, bits=4)
    assert r.a.min() == -8 and r.a.max() == 7 and np.array_equal(r.c, exact(r.a, r.b))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"index": 2}, r"index must be an integer in \[0, 1\] \(the op's batch\), not 2"),
        ({"index": -1}, r"index must be"),
        ({"bits": 1}, r"bits must be an integer in \[2, 16\], not 1"),
        ({"bits": 17}, r"bits must be"),
        ({"seed": -1}, r"seed must be a non-negative integer, not -1"),
    ],
)
def test_bad_reference_arguments(kwargs, message):
    with pytest.raises(WorkloadError, match=message):
        reference(Gemm(m=2, k=2, n=2, batch=2), **kwargs)


def test_reference_rejects_non_ops():
    with pytest.raises(WorkloadError, match="must be a Gemm or Conv2d"):
        reference("gemm")  # type: ignore[arg-type]
