"""The LLM layer ops are the transformer builtin's ops (traced from JAX), and the named shapes' sizes."""

from __future__ import annotations

import pytest

from workloads.llm_ops import LLM_SHAPES, LlmShape, layer_ops, parse_llm_spec


def test_layer_ops_match_the_traced_llama_block_builtin():
    import workloads

    traced = workloads.resolve("llama_block:seq=32,d=128,heads=4,ffn=256,batch=2")
    got = {op.name.split("/")[-1]: op for op, _ in traced.gemms()}
    shape = LlmShape(name="t", layers=1, d=128, heads=4, ffn=256)
    ops = {op.name: op for op in layer_ops(shape, seqs=2, q_len=32, kv_len=32)}
    for name in ("scores", "context", "gate", "up", "down", "out"):
        theirs = got[{"gate": "w_gate", "up": "w_up", "down": "w_down", "out": "wo"}.get(name, name)]
        assert (ops[name].m, ops[name].k, ops[name].n, ops[name].batch) == (theirs.m, theirs.k, theirs.n, theirs.batch)
    # the fused QKV projection is wq, wk and wv side by side
    qkv = ops["qkv"]
    assert (qkv.m, qkv.k) == (got["wq"].m, got["wq"].k)
    assert qkv.n == got["wq"].n + got["wk"].n + got["wv"].n


@pytest.mark.parametrize("name,params,active", [
    ("llama70b", 69.0e9, 68.7e9), ("qwen3_moe_235b", 235.1e9, 21.6e9), ("palm540b", 545e9, 540e9),
    ("gpt3_175b", 175.2e9, 174.6e9),
])
def test_named_shapes_have_their_published_sizes(name, params, active):
    shape = LLM_SHAPES[name]
    assert shape.params == pytest.approx(params, rel=0.01)
    assert shape.active_matmul_params == pytest.approx(active, rel=0.01)


def test_spec_options_override_fields_and_keep_head_dim_consistent():
    shape = parse_llm_spec("gpt3_175b:layers=24,d=2304,heads=24,ffn=9216")
    assert (shape.layers, shape.d, shape.heads, shape.head_dim, shape.kv_heads) == (24, 2304, 24, 96, 24)
    assert parse_llm_spec("qwen3_moe_235b:layers=2").head_dim == 128
