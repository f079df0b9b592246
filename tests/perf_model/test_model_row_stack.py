"""Row stacking (``perf_model.compiler.row_stack``) and the forms a conv is scored in
(``perf_model.compiler.conv_forms``): each gives the conv's outputs exactly."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np
from jax import lax

from perf_model.compiler.conv_forms import candidates, form_conv, host_writes, reshape_input, reshape_weights
from perf_model.compiler.row_stack import stack_conv, stack_input, stack_weights
from workloads._reference import im2col
from workloads.ops import Conv2d


def _conv(op: Conv2d, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The conv as the references' im2col GEMM, in int64."""
    a = im2col(x.astype(np.int64), dataclasses.replace(op, n=x.shape[0]))
    return (a @ w.astype(np.int64).reshape(-1, w.shape[3])).reshape(x.shape[0], op.out_h, op.out_w, w.shape[3])


def _random(rng: np.random.Generator) -> Conv2d:
    kh, kw, sh, sw, dh, dw = (int(v) for v in rng.integers(1, [8, 8, 4, 4, 3, 3]))
    h, w = int(rng.integers(dh * (kh - 1) + 1, 20)), int(rng.integers(dw * (kw - 1) + 1, 20))
    return Conv2d(n=2, h=h, w=w, c_in=int(rng.integers(1, 4)), c_out=3, kh=kh, kw=kw, stride_h=sh, stride_w=sw,
                  dilation_h=dh, dilation_w=dw, pad_h=int(rng.integers(kh)), pad_w=int(rng.integers(kw)),
                  pad_h_hi=int(rng.integers(kh)), pad_w_hi=int(rng.integers(kw)))


def test_the_stacked_conv_gives_the_convs_outputs_exactly_on_random_shapes():
    """Kernels 1-7, strides 1-3, dilations 1-2, asymmetric pads: one row of kernel, vertical stride
    1, no vertical pad, ``kh`` times the channels; every output equal. One shape through lax too."""
    rng = np.random.default_rng(3)
    checked = 0
    while checked < 150:
        op = _random(rng)
        new = stack_conv(op)
        if op.kh == 1:
            assert new is None
            continue
        assert new is not None
        assert (new.kh, new.stride_h, new.pad_h, new.pad_h_hi, new.c_in) == (1, 1, 0, 0, op.c_in * op.kh)
        assert (new.out_h, new.out_w) == (op.out_h, op.out_w)
        x = rng.integers(-128, 128, (2, op.h, op.w, op.c_in))
        wt = rng.integers(-128, 128, (op.kh, op.kw, op.c_in, 3))
        xs = stack_input(x, op)
        assert xs.shape == (2, op.out_h, op.w, op.c_in * op.kh)
        assert np.array_equal(_conv(new, xs, stack_weights(wt, op)), _conv(op, x, wt)), (op, new)
        checked += 1
    op = Conv2d(n=1, h=11, w=9, c_in=3, c_out=4, kh=7, kw=5, stride_h=2, stride_w=1, pad_h=3, pad_w=2, pad_h_hi=1)
    x, wt = rng.integers(-128, 128, (1, 11, 9, 3)), rng.integers(-128, 128, (7, 5, 3, 4))

    def lax_conv(c: Conv2d, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.asarray(lax.conv_general_dilated(
            jnp.asarray(a, jnp.int32), jnp.asarray(b, jnp.int32), (c.stride_h, c.stride_w),
            ((c.pad_h, c.pad_h_hi), (c.pad_w, c.pad_w_hi)), rhs_dilation=(c.dilation_h, c.dilation_w),
            dimension_numbers=("NHWC", "HWIO", "NHWC")))

    assert np.array_equal(lax_conv(stack_conv(op), stack_input(x, op), stack_weights(wt, op)), lax_conv(op, x, wt))


def test_grouped_convs_are_not_stacked():
    base = Conv2d(n=1, h=8, w=8, c_in=4, c_out=4, kh=3, kw=3, pad_h=1, pad_w=1)
    assert stack_conv(base) is not None and stack_conv(dataclasses.replace(base, groups=2)) is None


def test_every_candidate_form_gives_the_convs_outputs_and_fits_the_rows():
    """Each form :func:`candidates` lists (space-to-depth, then stacking, both) runs its reshaped
    input and weights to the conv's own outputs, and its pixel fits ``rows`` lanes; the host's
    writes are the reshaped inputs' elements."""
    rng = np.random.default_rng(5)
    both = 0
    for _ in range(60):
        op = dataclasses.replace(_random(rng), dilation_h=1, dilation_w=1)
        rows = int(rng.choice([4, 16, 64]))
        forms = candidates(op, rows)
        assert forms[0] == ((), op)
        x = rng.integers(-128, 128, (2, op.h, op.w, op.c_in))
        wt = rng.integers(-128, 128, (op.kh, op.kw, op.c_in, 3))
        want = _conv(op, x, wt)
        for steps, new in forms[1:]:
            assert new == form_conv(op, steps) and new.c_in <= rows
            got = _conv(new, reshape_input(x, op, steps), reshape_weights(wt, op, steps))
            assert np.array_equal(got, want), (op, steps)
            assert [e for _, e in host_writes(op, steps)][-1] == 2 * new.h * new.w * new.c_in
            both += steps == ("s2d", "stack")
    assert both >= 5
