"""A LLaMA-family decoder block with grouped-query attention and optional mixture of experts.

The one LLaMA block: the builtins ``llama_block``/``llama_decode``
(:func:`llama_block`, here) are its ``kv_heads == heads, experts == 0``
case, and Hugging Face's Llama, Mistral, Qwen2 and Mixtral configs add two shapes: ``kv_heads``
key/value heads shared by groups of query heads (GQA/MQA: the K and V projections are ``d x kv_heads * d / heads``; the
attention itself runs on every query head, each group's keys repeated, so its MACs are those of
full multi-head attention), and ``experts`` SwiGLU experts of which each token uses ``top_k``
(the router is a ``d x experts`` matmul and a softmax). Routing depends on the data, so the
expert work is laid out under the assumption of a perfectly balanced load: the ``batch * seq *
top_k`` routed token copies are dealt out in turn, expert ``e`` getting copies ``e, e + experts,
...``; every expert's weights are read and the expert MACs are those of each routed token
through one expert. The weighted sum of a token's ``top_k`` expert outputs is its adds (its
weighting by the router's probabilities is left out).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from workloads._layers import Form, ParamMaker
from workloads._model import Model
from workloads._models_transformer import _attention, _heads

__all__ = ["gqa_moe_block", "llama_block"]


def gqa_moe_block(form: Form, *, batch: int, seq: int, kv: int, d: int, heads: int, kv_heads: int, ffn: int,
                  experts: int = 0, top_k: int = 1, theta: int = 10000,
                  rope_scaling: tuple[tuple[str, int], ...] = ()) -> Model:
    """One decoder block on ``seq`` new tokens after ``kv`` cached ones (``experts`` 0: a dense FFN).

    Args:
        form: The builtins' int8 or float form.
        batch, seq, kv: Sequences, new tokens per sequence, cached tokens per sequence.
        d, heads, kv_heads, ffn: Model width, query heads, key/value heads (dividing ``heads``),
            FFN (or each expert's) hidden width.
        experts, top_k: Experts (0: no MoE) and experts per token.
        theta, rope_scaling: RoPE's frequency base and scaling parameters
            (:func:`workloads._rope_scaling.config_scaling`).
    """
    dh = d // heads
    group = heads // kv_heads
    kvd = kv_heads * dh

    def make_args(seed: int) -> tuple[Any, ...]:
        pm = ParamMaker(jax.random.key(seed), form)
        params: dict[str, Any] = {"wq": pm.weight((d, d), d), "wk": pm.weight((d, kvd), d),
                                  "wv": pm.weight((d, kvd), d), "wo": pm.weight((d, d), d)}
        for e in range(max(experts, 1)):
            tag = f"{e}" if experts else ""
            params |= {f"w_gate{tag}": pm.weight((d, ffn), d), f"w_up{tag}": pm.weight((d, ffn), d),
                       f"w_down{tag}": pm.weight((ffn, d), ffn)}
        if experts:
            params["router"] = pm.weight((d, experts), d)
        args: tuple[Any, ...] = (params, pm.activation((batch, seq, d)))
        if kv:
            args += (pm.activation((batch, kv, kv_heads, dh)), pm.activation((batch, kv, kv_heads, dh)))
        return args

    def ffn_of(h: jax.Array, params: dict[str, jax.Array], tag: str) -> jax.Array:
        with jax.named_scope(f"w_gate{tag}"):
            gate = form.dense(h, params[f"w_gate{tag}"])
        with jax.named_scope(f"w_up{tag}"):  # the gated SiLU follows w_gate and w_up: named for the later one
            act = form.silu(gate, form.dense(h, params[f"w_up{tag}"]))
        with jax.named_scope(f"w_down{tag}"):
            return form.dense(act, params[f"w_down{tag}"])

    def moe(h: jax.Array, params: dict[str, jax.Array]) -> jax.Array:
        b, s, _ = h.shape
        flat = h.reshape(b * s, d)
        with jax.named_scope("router"):
            form.softmax(form.dense(flat, params["router"]))
        copies = jnp.repeat(flat, top_k, axis=0)  # (tokens * top_k, d): each token once per chosen expert
        outs = [ffn_of(copies[e::experts], params, str(e)) for e in range(experts) if copies[e::experts].shape[0]]
        routed = jnp.concatenate(outs, axis=0).reshape(b * s, top_k, d)
        total = routed[:, 0]
        for j in range(1, top_k):
            total = form.add(total, routed[:, j])
        return total.reshape(b, s, d)

    def fn(params: dict[str, jax.Array], x: jax.Array, *cache: jax.Array) -> tuple[jax.Array, Any]:
        with jax.named_scope("attention"):
            h = form.rmsnorm(x)
            with jax.named_scope("wq"):
                q = form.rope(_heads(form.dense(h, params["wq"]), heads), kv, theta, rope_scaling)
            with jax.named_scope("wk"):
                k = form.rope(_heads(form.dense(h, params["wk"]), kv_heads), kv, theta, rope_scaling)
            with jax.named_scope("wv"):
                v = _heads(form.dense(h, params["wv"]), kv_heads)
            keys = jnp.concatenate([cache[0], k], axis=1) if cache else k
            values = jnp.concatenate([cache[1], v], axis=1) if cache else v
            if group > 1:  # each key/value head serves its group of query heads
                keys, values = jnp.repeat(keys, group, axis=2), jnp.repeat(values, group, axis=2)
            ctx = _attention(form, q, keys, values, kv)  # query i (position kv + i) sees keys j <= kv + i
            with jax.named_scope("wo"):
                x = form.add(x, form.dense(ctx, params["wo"]))
        with jax.named_scope("ffn"):
            h = form.rmsnorm(x)
            if experts:
                x = form.add(x, moe(h, params))
            else:
                gate_up = ffn_of(h, params, "")
                with jax.named_scope("w_down"):  # the dense block's residual add: named as LLaMA's
                    x = form.add(x, gate_up)
        return x, (k, v)

    return Model(fn, make_args)


def llama_block(form: Form, *, batch: int, seq: int, kv: int, d: int, heads: int, ffn: int) -> Model:
    """One LLaMA decoder block on ``seq`` new tokens per sequence after ``kv`` cached ones.

    Prefill is ``kv = 0`` (causal attention among the ``seq`` tokens); single-token decode is
    ``seq = 1`` with a cache of ``kv`` tokens. ``fn(params, x[, k_cache, v_cache])`` returns the
    block's output ``(batch, seq, d)`` and the new key/value rows. It is the dense multi-head case
    of :func:`gqa_moe_block` (``kv_heads == heads``, no experts): one piece of code.
    """
    return gqa_moe_block(form, batch=batch, seq=seq, kv=kv, d=d, heads=heads, kv_heads=heads, ffn=ffn)
