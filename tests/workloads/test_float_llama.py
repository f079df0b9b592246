"""A LLaMA block written in plain float jnp (RMSNorm, RoPE, causal softmax, SwiGLU) is the builtin's
work: the same MACs, the same vector op kinds and shapes, no host arithmetic; and it quantises."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from workloads import resolve
from workloads._ptq import quantise_model
from workloads._tracer import trace
from workloads.host_work import host_work

S, F32 = jax.ShapeDtypeStruct, jnp.float32
B, T, D, H, FFN = 1, 8, 64, 4, 96
DH = D // H


def _rms(x):
    return x * jax.lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + 1e-6)


def _rope(x):
    inv = 1.0 / (10000.0 ** (jnp.arange(0, DH, 2, dtype=F32) / DH))
    ang = jnp.outer(jnp.arange(T, dtype=F32), inv)
    ang = jnp.concatenate([ang, ang], -1)[None, :, None, :]
    x1, x2 = x[..., : DH // 2], x[..., DH // 2:]
    return x * jnp.cos(ang) + jnp.concatenate([-x2, x1], -1) * jnp.sin(ang)


def block(p, x):
    h = _rms(x)
    q = _rope((h @ p["wq"]).reshape(B, T, H, DH))
    k = _rope((h @ p["wk"]).reshape(B, T, H, DH))
    v = (h @ p["wv"]).reshape(B, T, H, DH)
    s = jnp.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(DH)
    s = jnp.where(jnp.tril(jnp.ones((T, T), bool)), s, -jnp.inf)
    ctx = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s, axis=-1), v).reshape(B, T, D)
    x = x + ctx @ p["wo"]
    h = _rms(x)
    return x + (jax.nn.silu(h @ p["w_gate"]) * (h @ p["w_up"])) @ p["w_down"]


def _params():
    rng = np.random.default_rng(0)
    shapes = {"wq": (D, D), "wk": (D, D), "wv": (D, D), "wo": (D, D), "w_gate": (D, FFN), "w_up": (D, FFN),
              "w_down": (FFN, D)}
    return {k: (rng.standard_normal(s) / math.sqrt(s[0])).astype(np.float32) for k, s in shapes.items()}


def test_a_float_llama_block_is_the_builtins_work_with_no_host_arithmetic():
    wl = trace(block, {k: S(v.shape, F32) for k, v in _params().items()}, S((B, T, D), F32))
    builtin = resolve(f"llama_block:seq={T},d={D},heads={H},ffn={FFN}")
    assert wl.total_macs == builtin.total_macs
    assert sorted((v.kind, v.shape) for v in wl.vector_ops) == sorted((v.kind, v.shape) for v in builtin.vector_ops)
    assert host_work(wl.other_primitives, wl.other_elements).arithmetic == ()


def test_the_float_llama_block_quantises_int8_above_int4():
    p = _params()
    int8 = quantise_model(lambda x: block(p, x), (S((B, T, D), F32),), "int8", "int8")
    int4 = quantise_model(lambda x: block(p, x), (S((B, T, D), F32),), "int4", "int4")
    assert int8.vector_ops == 8 and int8.matrix_ops == 9
    assert int8.sqnr_db > 25.0 > int4.sqnr_db
