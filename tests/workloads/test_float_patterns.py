"""Float activations and normalisations written with jax.nn / jnp become the vector unit's ops."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from workloads._float_flat import flatten
from workloads._float_patterns import DATA_MASK, SIGMOID, plan
from workloads._tracer import trace
from workloads.vector_params import GELU_PARAMS

S, F32 = jax.ShapeDtypeStruct, jnp.float32
ROWS, D = 6, 16
X, W, V = S((ROWS, D), F32), S((D, D), F32), S((D,), F32)


def _kinds(wl):
    return [(v.kind, v.shape, v.out_shape, v.axis) for v in wl.vector_ops]


def _others(wl):
    return dict(wl.other_primitives)


def _layernorm(x, g, b):
    mean = jnp.mean(x, -1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), -1, keepdims=True)
    return (x - mean) / jnp.sqrt(var + 1e-5) * g + b


def _rmsnorm(x, g):
    return x * jax.lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + 1e-6) * g


@pytest.mark.parametrize("approximate", [True, False], ids=["tanh", "erf"])
def test_gelu_both_forms(approximate):
    wl = trace(lambda x, w: jax.nn.gelu(x @ w, approximate=approximate) @ w, X, W)
    assert _kinds(wl) == [("gelu", (6, 16), (6, 16), None)]
    assert dict(wl.vector_ops[0].params) == GELU_PARAMS
    assert wl.vector_after == (1,)  # between the two matmuls
    assert not {"tanh", "erf", "erfc", "mul", "add", "integer_pow"} & _others(wl).keys()


def test_gelu_written_by_hand_with_a_cube():
    def f(x, w):
        h = x @ w
        return 0.5 * h * (1 + jnp.tanh(0.7978845608 * (h + 0.044715 * h ** 3)))

    assert [v.kind for v in trace(f, X, W).vector_ops] == ["gelu"]


def test_softmax_plain_and_with_a_causal_mask():
    def plain(q, k):
        return jax.nn.softmax(q @ k.T, axis=-1)

    def masked(q, k):
        s = q @ k.T * 0.25
        mask = jnp.tril(jnp.ones((ROWS, ROWS), bool))
        return jax.nn.softmax(jnp.where(mask, s, -1e9), axis=-1)

    for fn, offset in ((plain, -1), (masked, 0)):
        wl = trace(fn, X, X)
        assert _kinds(wl) == [("softmax", (6, 6), (6, 6), 1)]
        assert wl.vector_ops[0].param("causal_offset") == offset
        left = _others(wl).keys()
        assert not {"exp", "reduce_max", "reduce_sum", "div", "select_n", "iota", "ge", "mul"} & left


def test_softmax_written_by_hand_without_max_subtraction():
    def f(q, k):
        e = jnp.exp(q @ k.T)
        return e / jnp.sum(e, axis=-1, keepdims=True)

    assert _kinds(trace(f, X, X)) == [("softmax", (6, 6), (6, 6), 1)]


def test_layernorm_and_rmsnorm_with_their_scales():
    ln = trace(lambda x, w, g, b: _layernorm(x @ w, g, b), X, W, V, V)
    rms = trace(lambda x, w, g: _rmsnorm(x @ w, g), X, W, V)
    assert _kinds(ln) == [("layernorm", (6, 16), (6, 16), 1)]
    assert _kinds(rms) == [("rmsnorm", (6, 16), (6, 16), 1)]
    assert ln.vector_ops[0].param("eps") != rms.vector_ops[0].param("eps")  # 1e-5 vs 1e-6 read from the code
    for wl in (ln, rms):
        assert not {"sqrt", "rsqrt", "reduce_sum", "div", "sub", "mul", "add", "integer_pow"} & _others(wl).keys()


def test_silu_gated_mlp_and_plain_silu():
    def swiglu(x, wg, wu, wd):
        return (jax.nn.silu(x @ wg) * (x @ wu)) @ wd

    gated = trace(swiglu, X, W, W, W)
    assert _kinds(gated) == [("silu", (6, 16), (6, 16), None)]
    assert gated.vector_ops[0].param("gated") == 1
    plain = trace(lambda x, w: jax.nn.silu(x @ w) @ w, X, W)
    assert plain.vector_ops[0].param("gated") == 0
    by_hand = trace(lambda x, w: (lambda h: h * jax.nn.sigmoid(h))(x @ w) @ w, X, W)
    assert _kinds(by_hand) == [("silu", (6, 16), (6, 16), None)]
    assert not {"logistic", "mul"} & (_others(gated).keys() | _others(plain).keys())


def test_a_bare_sigmoid_or_a_sigmoid_gate_is_host_work_not_silu():
    sigmoid = f"logistic[{SIGMOID}]"
    bare = trace(lambda x, w: jax.nn.sigmoid(x @ w) @ w, X, W)
    assert bare.vector_ops == () and _others(bare) == {sigmoid: 1}
    scaled = trace(lambda x, w: (2.0 * jax.nn.sigmoid(x @ w)) @ w, X, W)  # times a constant: still no SiLU
    assert scaled.vector_ops == () and _others(scaled)[sigmoid] == 1
    glu = trace(lambda x, w, v: (jax.nn.sigmoid(x @ w) * (x @ v)) @ w, X, W, W)  # a GLU gate: not silu(x) * up
    assert glu.vector_ops == () and _others(glu) == {sigmoid: 1, "mul": 1}


def test_residual_adds_around_a_norm_stay_separate():
    def block(x, w, g):
        h = x + jax.nn.gelu(_rmsnorm(x, g) @ w) @ w
        return h + _rmsnorm(h, g) @ w

    wl = trace(block, X, W, V)
    assert [v.kind for v in wl.vector_ops] == ["rmsnorm", "gelu", "add", "rmsnorm", "add"]
    assert "add" not in _others(wl)


def test_float_transformer_block_leaves_no_arithmetic_as_host_work():
    def block(x, wq, wk, wv, wo, w1, w2, g, b):
        h = _layernorm(x, g, b)
        s = (h @ wq) @ (h @ wk).T / 4.0
        p = jax.nn.softmax(jnp.where(jnp.tril(jnp.ones((ROWS, ROWS), bool)), s, -jnp.inf), axis=-1)
        a = x + (p @ (h @ wv)) @ wo
        return a + jax.nn.gelu(_layernorm(a, g, b) @ w1 + b) @ w2

    wl = trace(block, X, W, W, W, W, W, W, V, V)
    assert [v.kind for v in wl.vector_ops] == ["layernorm", "softmax", "add", "layernorm", "gelu", "add"]
    assert len(wl.ops) == 8
    arithmetic = {"add", "sub", "mul", "div", "exp", "tanh", "erf", "erfc", "integer_pow", "max", "reduce_max",
                  "reduce_sum", "sqrt", "rsqrt", "select_n"}
    assert not arithmetic & _others(wl).keys()


def test_unrecognised_primitives_stay_host_work():
    def f(x, w):
        h = x @ w
        return jnp.sin(h) @ w + jnp.tanh(h) @ w  # no cube: a bare tanh is not GELU

    wl = trace(f, X, W)
    assert [v.kind for v in wl.vector_ops] == ["add"]  # the sum of the two matmuls only
    assert {"sin", "tanh"} <= _others(wl).keys()
    assert dict(wl.other_elements)["sin"] == ROWS * D


def test_softmax_over_a_leading_axis_is_not_the_units():
    wl = trace(lambda q, k: jax.nn.softmax(q @ k.T, axis=0), X, X)
    assert wl.vector_ops == ()
    assert "exp" in _others(wl)


def test_int_dot_arithmetic_is_not_taken_for_an_output_stage():
    def f(x, w):
        return jnp.dot(x, w, preferred_element_type=jnp.int32) * 3

    wl = trace(f, S((4, 8), jnp.int8), S((8, 8), jnp.int8))
    assert "mul" in _others(wl)


class _TorchModule:
    """Stands in for a torch.nn.Module (torch is not installed): only its type's module says torch."""

    def forward(self, x):
        return x

    __call__ = forward


_TorchModule.__module__ = "torch.nn.modules.module"


class _TorchTensor:
    shape = (ROWS, D)


_TorchTensor.__module__ = "torch"


def test_a_torch_callable_or_tensor_is_refused_with_the_rule():
    from accel_spec.errors import WorkloadError

    with pytest.raises(WorkloadError, match=r"is a PyTorch object \(torch\.nn\.modules\.module\._TorchModule\): "
                                            r"the tracer takes a JAX function .*torch\.onnx\.export"):
        trace(_TorchModule(), X, name="net")
    with pytest.raises(WorkloadError, match=r"^f has a PyTorch example argument \(torch\._TorchTensor\)"):
        trace(lambda x, w: x @ w, X, [_TorchTensor()], name="f")


def test_a_division_by_a_channel_constant_after_a_matmul_is_the_output_stages():
    cols = jnp.arange(1.0, D + 1.0)

    def f(x, w):
        return jax.nn.gelu((x @ w) / cols) @ w

    wl = trace(f, X, W)
    assert _kinds(wl) == [("gelu", (6, 16), (6, 16), None)]
    assert "div" not in _others(wl)
    flat = flatten(jax.make_jaxpr(f)(X, W).jaxpr, lambda e: False)
    found = plan(flat, lambda e: True, lambda e: "")
    assert [flat[i].prim for i in found.stage] == ["div"]

    def divides_by_data(x, w):
        return jax.nn.gelu(cols / (x @ w)) @ w  # the matmul's result as the divisor: not a scale

    flat = flatten(jax.make_jaxpr(divides_by_data)(X, W).jaxpr, lambda e: False)
    assert not plan(flat, lambda e: True, lambda e: "").stage


def test_softmax_masks_from_the_data():
    q, k = S((ROWS, D), F32), S((ROWS, D), F32)

    def selected(q, k, m):  # a mask input selected in: host work, with the reason
        return jax.nn.softmax(jnp.where(m, q @ k.T, -1e9), axis=-1) @ k

    wl = trace(selected, q, k, S((ROWS, ROWS), jnp.bool_))
    assert [v.kind for v in wl.vector_ops] == ["softmax"]
    assert dict(wl.other_primitives)[f"select_n[{DATA_MASK}]"] == 1
    assert "vector unit masks causally only" in DATA_MASK

    def padding(q, k, m):  # an additive per-key mask onto the scores: the scores' output stage bias
        return jax.nn.softmax(q @ k.T + (1.0 - m.astype(F32)) * -1e9, axis=-1) @ k

    wl = trace(padding, q, k, S((1, ROWS), jnp.bool_))
    assert [v.kind for v in wl.vector_ops] == ["softmax"]
    assert "add" not in dict(wl.other_primitives)  # (the mask's own sub and mul, one row, stay the host's)

    def biased(q, k, b):  # a full additive bias (ALiBi-like, from the data): the unit's add
        return jax.nn.softmax(q @ k.T + b, axis=-1) @ k

    wl = trace(biased, q, k, S((ROWS, ROWS), F32))
    assert [v.kind for v in wl.vector_ops] == ["add", "softmax"]
    assert {p for p, _ in wl.other_primitives} <= {"transpose"}
