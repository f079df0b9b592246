"""A float model's matrix ops are recorded as the int8 builtins record theirs: requantised (the
builtins' rule for the reduction length, the output stage's ReLU/ReLU6 fused), chained where one
op's A is the previous op's output, and a downsample computed first recorded where the builtin has
it, so a float CNN runs as the builtin's one-program conv network (workloads._float_requant)."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from jax import lax

from perf_model.compiler.conv_workload import conv_network_spec
from workloads import derived_requant, resolve, trace
from workloads._registry import _build, _settings

S, F32 = jax.ShapeDtypeStruct, jnp.float32


def _records(wl):
    return [(type(op).__name__, {k: v for k, v in dataclasses.asdict(op).items() if k not in ("name", "origin")})
            for op in wl.ops]


def test_float_jax_resnet18_gives_the_builtins_records_and_one_network():
    model = _build("resnet18", "float", _settings("resnet18", ()))  # float32 JAX: lax.conv, jnp.maximum, reduce_window
    wl, builtin = trace(model.fn, *model.example_args(), name="float_resnet18"), resolve("resnet18")
    assert _records(wl) == _records(builtin)
    assert [op.a_from_previous for op in wl.ops] == [op.a_from_previous for op in builtin.ops]
    assert [(v.kind, v.shape, v.out_shape, v.params) for v in wl.vector_ops] == [
        (v.kind, v.shape, v.out_shape, v.params) for v in builtin.vector_ops]
    assert wl.vector_after == builtin.vector_after and wl.other_primitives == ()
    spec = conv_network_spec(wl)
    assert not isinstance(spec, str), spec
    assert len(spec.convs) == 21


def _conv(x, w, stride=1):
    return lax.conv_general_dilated(x, w, (stride, stride), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))


def test_output_stage_activation_is_fused_and_chaining_needs_the_very_output():
    def f(x, w1, w2, w3, w4, b):
        y = jnp.maximum(_conv(x, w1) + b, 0.0)  # bias, ReLU: the output stage's
        y = jnp.minimum(jnp.maximum(_conv(y, w2), 0.0), 6.0)  # ReLU6, chained
        y = jnp.minimum(_conv(y, w3), 3.0)  # a clamp at 3: not an activation the stage fuses
        return _conv(y.reshape(y.shape), w4) * 2.0  # a reshape to the same shape is no new value

    w = S((3, 3, 8, 8), F32)
    ops = trace(f, S((1, 6, 6, 8), F32), w, w, w, w, S((8,), F32)).ops
    assert [op.requant for op in ops] == [derived_requant(72, "relu"), derived_requant(72, "relu6"),
                                          derived_requant(72), derived_requant(72)]
    assert [op.requant.bounds for op in ops[:2]] == [(0, 127), (0, 96)]
    assert [op.a_from_previous for op in ops] == [False, True, True, True]


def test_chaining_is_broken_by_a_vector_op_or_a_transpose():
    def f(x, w1, w2, w3):
        y = jax.nn.gelu(x @ w1)  # a vector op between: not chained
        y = y @ w2
        return y.T @ w3  # a transpose: a new value

    ops = trace(f, S((4, 16), F32), S((16, 16), F32), S((16, 16), F32), S((4, 16), F32)).ops
    assert [op.a_from_previous for op in ops] == [False, False, False]
    assert all(op.requant == derived_requant(op.k) for op in ops)


def test_a_downsample_computed_first_is_recorded_before_its_add():
    def block(x, wd, w1, w2):
        identity = _conv(x, wd, 2)  # PyTorch's BasicBlock order: the downsample first
        y = jnp.maximum(_conv(x, w1, 2), 0.0)
        return jnp.maximum(_conv(y, w2) + identity, 0.0)

    wl = trace(block, S((1, 8, 8, 4), F32), S((1, 1, 4, 8), F32), S((3, 3, 4, 8), F32), S((3, 3, 8, 8), F32))
    assert [(op.kh, op.a_from_previous) for op in wl.ops] == [(3, False), (3, True), (1, False)]
    assert [v.kind for v in wl.vector_ops] == ["add", "relu"] and wl.vector_after == (3, 3)


def test_a_generic_reduce_window_max_is_a_maxpool_not_a_clamp():
    def f(x, w):
        y = jnp.maximum(_conv(x, w), 0.0)
        init = jnp.asarray(-jnp.inf, jnp.float32)  # lax.reduce_window with lax.max: a generic reduce_window
        return lax.reduce_window(y, init, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), ((0, 0), (1, 1), (1, 1), (0, 0)))

    wl = trace(f, S((1, 8, 8, 4), F32), S((3, 3, 4, 4), F32))
    assert [(v.kind, v.shape, v.out_shape) for v in wl.vector_ops] == [("maxpool", (1, 8, 8, 4), (1, 4, 4, 4))]
    assert wl.ops[0].requant == derived_requant(36, "relu") and wl.other_primitives == ()
