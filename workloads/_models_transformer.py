"""Transformer builtins: a BERT-base encoder, GPT-2 small decoding, a LLaMA-7B-shaped block.

Shapes: BERT-base from Devlin et al., "BERT" (NAACL 2019): d = 768, 12 heads, FFN 3072.
GPT-2 small from Radford et al., "Language Models are Unsupervised Multitask Learners" (2019):
12 layers, d = 768, 12 heads, FFN 3072, vocabulary 50,257, fused QKV projection, LM head tied to
the token embedding. LLaMA-7B from Touvron et al., "LLaMA" (2023): d = 4096, 32 heads,
SwiGLU FFN 11,008, RMSNorm, rotary position embeddings.

Attention is written as two batched ``einsum`` calls (``dot_general`` with batch dimensions
batch and head): scores ``Q K^T`` and context ``P V``. Layers repeat with ``lax.scan`` over
stacked parameters, so the tracer counts the layer body ``layers`` times. Decoding processes one
new token per sequence against a KV cache of ``kv`` earlier tokens.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from workloads._layers import Form, ParamMaker
from workloads._model import Model

__all__ = ["bert_base", "gpt2_decode"]


def _heads(x: jax.Array, heads: int) -> jax.Array:
    """``(b, s, d)`` -> ``(b, s, heads, d / heads)``."""
    b, s, d = x.shape
    return x.reshape(b, s, heads, d // heads)


def _attention(form: Form, q: jax.Array, k: jax.Array, v: jax.Array, causal_offset: int | None) -> jax.Array:
    """Multi-head attention on ``(b, s, h, dh)`` tensors -> ``(b, s_q, h * dh)`` (causal when
    ``causal_offset`` is given: query ``i`` sees keys ``j <= causal_offset + i``)."""
    b, s_q, h, dh = q.shape
    s_k = k.shape[1]
    # Explicit dot_generals keep the operand order: scores = Q @ K^T, context = P @ V.
    with jax.named_scope("scores"):
        scores = form.dot(q, k, (((3,), (3,)), ((0, 2), (0, 2))), dh)  # (b, h, s_q, s_k)
    probs = form.softmax(scores, scale=1.0 / math.sqrt(dh), causal_offset=causal_offset)
    with jax.named_scope("context"):
        ctx = form.dot(probs, v, (((3,), (1,)), ((0, 1), (0, 2))), s_k)  # (b, h, s_q, dh)
    return ctx.transpose(0, 2, 1, 3).reshape(b, s_q, h * dh)


def bert_base(form: Form, *, batch: int, seq: int, layers: int, d: int = 768, heads: int = 12,
              ffn: int = 3072) -> Model:
    """``layers`` BERT encoder layers (post-LN) on ``batch`` sequences of ``seq`` tokens."""

    def make_args(seed: int) -> tuple[Any, ...]:
        pm = ParamMaker(jax.random.key(seed), form)
        n = layers
        params = {
            "query": pm.weight((n, d, d), d), "key": pm.weight((n, d, d), d),
            "value": pm.weight((n, d, d), d), "output": pm.weight((n, d, d), d),
            "ffn_in": pm.weight((n, d, ffn), d), "ffn_out": pm.weight((n, ffn, d), ffn),
        }
        return params, pm.activation((batch, seq, d))

    def layer(x: jax.Array, p: dict[str, jax.Array]) -> tuple[jax.Array, None]:
        with jax.named_scope("attention"):
            with jax.named_scope("query"):
                q = _heads(form.dense(x, p["query"]), heads)
            with jax.named_scope("key"):
                k = _heads(form.dense(x, p["key"]), heads)
            with jax.named_scope("value"):
                v = _heads(form.dense(x, p["value"]), heads)
            ctx = _attention(form, q, k, v, None)
            with jax.named_scope("output"):
                o = form.dense(ctx, p["output"])
        x = form.layernorm(form.add(x, o))
        with jax.named_scope("ffn_in"):
            f = form.gelu(form.dense(x, p["ffn_in"]))
        with jax.named_scope("ffn_out"):
            f = form.dense(f, p["ffn_out"])
        return form.layernorm(form.add(x, f)), None

    def fn(params: dict[str, jax.Array], x: jax.Array) -> jax.Array:
        return lax.scan(layer, x, params)[0]

    return Model(fn, make_args)


def gpt2_decode(form: Form, *, batch: int, kv: int, layers: int, d: int = 768, heads: int = 12,
                ffn: int = 3072, vocab: int = 50257) -> Model:
    """One decoding step of GPT-2 small: ``batch`` new tokens, each after ``kv`` cached tokens.

    ``fn(params, tokens, k_cache, v_cache)`` returns the logits ``(batch, 1, vocab)`` and the new
    key/value rows ``(layers, batch, 1, heads, d / heads)`` to append to the cache.
    """
    dh = d // heads

    def make_args(seed: int) -> tuple[Any, ...]:
        pm = ParamMaker(jax.random.key(seed), form)
        n = layers
        params = {
            "wte": pm.weight((vocab, d), d),
            "wpe": pm.weight((kv + 1, d), d),
            "blocks": {
                "c_attn": pm.weight((n, d, 3 * d), d), "c_proj": pm.weight((n, d, d), d),
                "c_fc": pm.weight((n, d, ffn), d), "mlp_proj": pm.weight((n, ffn, d), ffn),
            },
        }
        cache_shape = (layers, batch, kv, heads, dh)
        return params, pm.tokens((batch,), vocab), pm.activation(cache_shape), pm.activation(cache_shape)

    def block(x: jax.Array, inputs: tuple[Any, jax.Array, jax.Array]) -> tuple[jax.Array, Any]:
        p, k_cache, v_cache = inputs
        with jax.named_scope("attn"):
            with jax.named_scope("c_attn"):
                qkv = form.dense(form.layernorm(x), p["c_attn"])
            q, k, v = (_heads(t, heads) for t in jnp.split(qkv, 3, axis=-1))
            keys = jnp.concatenate([k_cache, k], axis=1)
            values = jnp.concatenate([v_cache, v], axis=1)
            ctx = _attention(form, q, keys, values, None)  # the new token sees every cached one
            with jax.named_scope("c_proj"):
                x = form.add(x, form.dense(ctx, p["c_proj"]))
        with jax.named_scope("mlp"):
            with jax.named_scope("c_fc"):
                h = form.gelu(form.dense(form.layernorm(x), p["c_fc"]))
            with jax.named_scope("c_proj"):
                x = form.add(x, form.dense(h, p["mlp_proj"]))
        return x, (k, v)

    def fn(params: dict[str, Any], tokens: jax.Array, k_cache: jax.Array,
           v_cache: jax.Array) -> tuple[jax.Array, Any]:
        x = form.add(params["wte"][tokens], params["wpe"][kv])[:, None, :]
        x, new_kv = lax.scan(block, x, (params["blocks"], k_cache, v_cache))
        with jax.named_scope("lm_head"):
            logits = form.einsum("bsd,vd->bsv", form.layernorm(x), params["wte"], d)
        return logits, new_kv

    return Model(fn, make_args)
