"""The jaxpr tracer on wrapped, scanned, vmapped, differentiated and branching functions."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from jax import lax

from accel_spec.errors import WorkloadError
from workloads import Conv2d, Gemm, derived_requant, trace

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def gemms(workload):
    """(m, k, n, batch, count) per op, names ignored."""
    return [(g.m, g.k, g.n, g.batch, c) for g, c in workload.gemms()]


def test_plain_matmul():
    w = trace(lambda x, y: x @ y, S((3, 5), F32), S((5, 7), F32))
    assert gemms(w) == [(3, 5, 7, 1, 1)]
    assert w.total_macs == 3 * 5 * 7


def test_jit_wrapped_and_nested_jit():
    inner = jax.jit(lambda x, y: jnp.tanh(x @ y))
    outer = jax.jit(lambda x, y: inner(x, y) @ y.T)
    w = trace(outer, S((4, 6), F32), S((6, 6), F32))
    assert gemms(w) == [(4, 6, 6, 1, 1), (4, 6, 6, 1, 1)]
    assert dict(w.other_primitives)["tanh"] == 1


def test_scan_body_counts_length_times():
    def f(x, ws):
        def body(h, w):
            return jnp.sin(h @ w), None  # (a ReLU here would be the output stage's clamp: not counted)
        return lax.scan(body, x, ws)[0]

    w = trace(f, S((8, 16), F32), S((5, 16, 16), F32))
    assert gemms(w) == [(8, 16, 16, 1, 5)]
    assert w.total_macs == 5 * 8 * 16 * 16
    assert dict(w.other_primitives)["sin"] == 5


def test_nested_scans_multiply():
    def f(x):
        def inner(c, _):
            return c @ c, None

        def outer(c, _):
            return lax.scan(inner, c, None, length=3)[0], None

        return lax.scan(outer, x, None, length=4)[0]

    assert gemms(trace(f, S((2, 2), F32))) == [(2, 2, 2, 1, 12)]


def test_vmapped_matmul_becomes_batch():
    f = jax.vmap(lambda a, b: a @ b)
    assert gemms(trace(f, S((6, 3, 4), F32), S((6, 4, 5), F32))) == [(3, 4, 5, 6, 1)]


def test_vmap_with_shared_weights_folds_into_m():
    f = jax.vmap(lambda a, b: a @ b, in_axes=(0, None))
    (g,) = trace(f, S((6, 3, 4), F32), S((4, 5), F32)).gemms()
    assert (g[0].m * g[0].batch, g[0].k, g[0].n) == (18, 4, 5)


def test_grad_gives_forward_and_both_backward_gemms():
    def loss(x, w):
        return jnp.sum(jax.nn.gelu(x @ w))

    w = trace(jax.grad(loss, argnums=(0, 1)), S((8, 4), F32), S((4, 3), F32))
    # forward x@w (8x4x3); dx = g @ w^T (8x3x4); dw = x^T @ g (4x8x3). JAX may emit a product
    # transposed (C^T = B^T A^T), so compare the contraction length and the unordered {m, n}.
    def shape(m, k, n, batch, count):
        return k, tuple(sorted((m, n))), batch, count

    expected = [(8, 4, 3, 1, 1), (8, 3, 4, 1, 1), (4, 8, 3, 1, 1)]
    assert sorted(shape(*g) for g in gemms(w)) == sorted(shape(*g) for g in expected)


def test_custom_vjp_forward_is_traced():
    @jax.custom_vjp
    def f(x, w):
        return x @ w

    f.defvjp(lambda x, w: (x @ w, (x, w)), lambda r, g: (g @ r[1].T, r[0].T @ g))
    assert gemms(trace(f, S((2, 3), F32), S((3, 4), F32))) == [(2, 3, 4, 1, 1)]


def test_cond_counts_the_heavier_branch():
    def f(p, x):
        return lax.cond(p, lambda: x @ x @ x, lambda: x @ x)

    w = trace(f, S((), jnp.bool_), S((4, 4), F32))
    assert gemms(w) == [(4, 4, 4, 1, 1), (4, 4, 4, 1, 1)]


def test_while_uses_the_stated_trip_count():
    def f(x):
        return lax.while_loop(lambda c: c[0] < 10, lambda c: (c[0] + 1, c[1] @ c[1]), (0, x))[1]

    assert gemms(trace(f, S((3, 3), F32))) == [(3, 3, 3, 1, 1)]
    assert gemms(trace(f, S((3, 3), F32), while_trips=10)) == [(3, 3, 3, 1, 10)]
    with pytest.raises(WorkloadError, match="while_trips must be a positive integer, not 0"):
        trace(f, S((3, 3), F32), while_trips=0)


def test_attention_batched_dot_general():
    b, h, q, k, d = 2, 4, 16, 24, 8

    def attention(qs, ks, vs):
        s = jnp.einsum("bqhd,bkhd->bhqk", qs, ks)
        p = jax.nn.softmax(s, axis=-1)
        return lax.dot_general(p, vs, (((3,), (1,)), ((0, 1), (0, 2))))

    w = trace(attention, S((b, q, h, d), F32), S((b, k, h, d), F32), S((b, k, h, d), F32))
    (scores, _), (context, _) = w.gemms()
    assert scores.batch == b * h and scores.k == d and {scores.m, scores.n} == {q, k}
    assert (context.m, context.k, context.n, context.batch) == (q, k, d, b * h)
    # jax.nn.softmax's primitives are recognised as the vector unit's softmax over the keys axis
    assert [(v.kind, v.shape, v.axis) for v in w.vector_ops] == [("softmax", (b, h, q, k), 3)]
    assert not {"exp", "reduce_max", "reduce_sum", "div"} & dict(w.other_primitives).keys()


def test_dot_general_with_several_contracting_and_free_dims():
    dims = (((1, 3), (0, 2)), ((), ()))
    w = trace(lambda a, b: lax.dot_general(a, b, dims), S((2, 3, 5, 7), F32), S((3, 11, 7), F32))
    assert gemms(w) == [(2 * 5, 3 * 7, 11, 1, 1)]


def test_conv_in_nchw_and_nhwc_gives_the_same_gemm():
    x_nchw, w_oihw = S((2, 8, 15, 17), F32), S((16, 8, 3, 5), F32)
    x_nhwc, w_hwio = S((2, 15, 17, 8), F32), S((3, 5, 8, 16), F32)
    pad = ((1, 1), (2, 2))

    def nchw(x, w):
        return lax.conv_general_dilated(x, w, (2, 1), pad, dimension_numbers=("NCHW", "OIHW", "NCHW"))

    def nhwc(x, w):
        return lax.conv_general_dilated(x, w, (2, 1), pad, dimension_numbers=("NHWC", "HWIO", "NHWC"))

    a, b = trace(nchw, x_nchw, w_oihw), trace(nhwc, x_nhwc, w_hwio)
    assert a.ops == b.ops
    (op,) = a.ops
    out_h, out_w = (15 + 2 - 3) // 2 + 1, (17 + 4 - 5) + 1
    assert isinstance(op, Conv2d) and (op.out_h, op.out_w) == (out_h, out_w)
    # a float conv is requantised as the int8 builtins' convs are (their rule for its reduction length)
    assert op.to_gemm() == Gemm(m=2 * out_h * out_w, k=8 * 3 * 5, n=16, name=op.name,
                                requant=derived_requant(8 * 3 * 5))
    # and the shape JAX computes agrees with the record's output size
    assert jax.eval_shape(nhwc, x_nhwc, w_hwio).shape == (2, out_h, out_w, 16)


def test_grouped_and_same_padded_conv():
    def f(x, w):
        return lax.conv_general_dilated(x, w, (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                        feature_group_count=4)

    (op,) = trace(f, S((1, 10, 10, 8), F32), S((3, 3, 2, 12), F32)).ops
    assert op.groups == 4 and (op.pad_h, op.pad_h_hi) == (0, 1)  # SAME, stride 2, even input
    assert op.to_gemm() == Gemm(m=25, k=2 * 9, n=3, batch=4, name=op.name, requant=derived_requant(2 * 9))
    assert op.macs == 25 * 12 * 2 * 9


def test_conv_1d_and_3d():
    def c1(x, w):
        return lax.conv_general_dilated(x, w, (2,), ((1, 1),), dimension_numbers=("NCH", "OIH", "NCH"))

    def c3(x, w):
        return lax.conv_general_dilated(x, w, (1, 1, 1), "VALID",
                                        dimension_numbers=("NDHWC", "DHWIO", "NDHWC"))

    assert gemms(trace(c1, S((1, 3, 32), F32), S((8, 3, 3), F32))) == [(16, 9, 8, 1, 1)]
    assert gemms(trace(c3, S((1, 4, 5, 6, 2), F32), S((2, 2, 2, 2, 7), F32))) == [(3 * 4 * 5, 16, 7, 1, 1)]


def test_conv_gradient_traces():
    def loss(x, w):
        y = lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return jnp.sum(y * y)

    x, w = S((1, 6, 6, 2), F32), S((3, 3, 2, 4), F32)
    fwd = trace(loss, x, w).total_macs
    both = trace(jax.grad(loss, argnums=(0, 1)), x, w)
    assert len(both.ops) == 3 and both.total_macs == 3 * fwd  # forward, d/dx, d/dw: same MACs each


def test_names_come_from_named_scopes():
    def f(x):
        with jax.named_scope("encoder"):
            return x @ x

    assert trace(f, S((2, 2), F32)).ops[0].name == "encoder"
    assert trace(lambda x: x @ x, S((2, 2), F32)).ops[0].name == "dot1"


def test_concrete_arrays_work_too():
    assert trace(lambda x: x @ x.T, jnp.ones((3, 2))).total_macs == 3 * 2 * 3


def test_no_matmul_is_an_error_listing_the_primitives():
    with pytest.raises(WorkloadError, match=r"contains no matmul or convolution .*add x1, sin x1"):
        trace(lambda x: jnp.sin(x) + 1.0, S((3,), F32), name="f")


def test_a_raising_function_shows_its_message_on_one_line():
    def bad(x):
        raise ValueError("the shapes are wrong\nmore detail")

    with pytest.raises(WorkloadError) as info:
        trace(bad, S((3,), F32))
    assert str(info.value) == "tracing bad failed: ValueError: the shapes are wrong"
