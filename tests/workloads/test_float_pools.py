"""Float pooling written with lax.reduce_window or jnp.mean/max becomes the vector unit's pool records."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from workloads._ptq import quantise_model
from workloads._tracer import trace

S, F32 = jax.ShapeDtypeStruct, jnp.float32
X, W = S((1, 8, 8, 4), F32), S((3, 3, 4, 4), F32)


def _conv(x, w):
    return lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))


def _pools(wl):
    return [(v.kind, v.shape, v.out_shape, dict(v.params)) for v in wl.vector_ops]


def _p(wh, ww, sh, sw, ph, pw):
    return {"window_h": wh, "window_w": ww, "stride_h": sh, "stride_w": sw, "pad_h": ph, "pad_w": pw}


@pytest.mark.parametrize(("pool", "want"), [
    (lambda y: lax.reduce_window(y, -jnp.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), ((0, 0), (1, 1), (1, 1), (0, 0))),
     ("maxpool", (1, 8, 8, 4), (1, 4, 4, 4), _p(3, 3, 2, 2, 1, 1))),
    (lambda y: lax.reduce_window(y, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") / 4.0,
     ("avgpool", (1, 8, 8, 4), (1, 4, 4, 4), _p(2, 2, 2, 2, 0, 0))),
    (lambda y: lax.reduce_window(y, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") * 0.25,
     ("avgpool", (1, 8, 8, 4), (1, 4, 4, 4), _p(2, 2, 2, 2, 0, 0))),
    (lambda y: jnp.mean(y, axis=(1, 2)), ("avgpool", (1, 8, 8, 4), (1, 1, 1, 4), _p(8, 8, 1, 1, 0, 0))),
    (lambda y: jnp.max(y, axis=(1, 2)), ("maxpool", (1, 8, 8, 4), (1, 1, 1, 4), _p(8, 8, 1, 1, 0, 0))),
    # NCHW: the record carries the NHWC shape
    (lambda y: lax.reduce_window(y.transpose(0, 3, 1, 2), -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID"),
     ("maxpool", (1, 8, 8, 4), (1, 4, 4, 4), _p(2, 2, 2, 2, 0, 0))),
], ids=["max", "avg-div", "avg-mul", "global-mean", "global-max", "nchw"])
def test_pools_become_records_and_leave_no_host_arithmetic(pool, want):
    wl = trace(lambda x, w: pool(_conv(x, w)), X, W)
    assert _pools(wl) == [want]
    assert {p for p, _ in wl.other_primitives} <= {"transpose"}


@pytest.mark.parametrize("pool", [
    lambda y: lax.reduce_window(y, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") / 3.0,  # not the window
    lambda y: lax.reduce_window(y, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 1, 1, 1), ((0, 0), (0, 1), (0, 1), (0, 0))),
    lambda y: lax.reduce_window(y, -jnp.inf, lax.max, (2, 2, 2, 1), (1, 1, 1, 1), "VALID"),  # three axes
], ids=["divisor", "asymmetric-pad", "three-axes"])
def test_what_the_unit_does_not_pool_stays_host_work(pool):
    wl = trace(lambda x, w: pool(_conv(x, w)), X, W)
    assert not wl.vector_ops
    assert wl.other_primitives


def test_a_float_cnn_with_pools_quantises():
    w = (np.random.default_rng(0).standard_normal((3, 3, 4, 4)) / 6).astype(np.float32)

    def cnn(x):
        y = jax.nn.relu(_conv(x, w))
        y = lax.reduce_window(y, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        return jnp.mean(y, axis=(1, 2))

    int8 = quantise_model(cnn, (X,), "int8", "int8")
    int4 = quantise_model(cnn, (X,), "int4", "int4")
    assert int8.vector_ops == 2  # the two pools (the ReLU is the conv output stage's clamp)
    assert int8.sqnr_db > 30.0 > int4.sqnr_db


def test_a_relu_is_the_output_stages_clamp_after_a_matmul_and_a_record_after_an_add():
    after_conv = trace(lambda x, w: jax.nn.relu(_conv(x, w)), X, W)
    assert not after_conv.vector_ops and not after_conv.other_primitives
    after_add = trace(lambda x, w: jax.nn.relu(_conv(x, w) + x), X, W)
    assert [v.kind for v in after_add.vector_ops] == ["add", "relu"] and not after_add.other_primitives
    clipped = trace(lambda x, w: jnp.clip(_conv(x, w), 0.0, 6.0), X, W)
    assert not clipped.vector_ops and {p for p, _ in clipped.other_primitives} <= {"convert_element_type"}
    sine = trace(lambda x, w: jnp.maximum(jnp.sin(_conv(x, w)), 0.5), X, W)  # no clamp at 0 of a stage value
    assert "max" in dict(sine.other_primitives)
