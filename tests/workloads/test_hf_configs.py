"""Hugging Face config.json files name LLaMA-family workloads (GQA, MoE) with their analytic MACs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accel_spec.errors import WorkloadError
from tests.cli_testlib import assert_one_line_error
from workloads._registry import resolve

HERE = Path(__file__).parent / "hf_configs"
LLAMA, MIXTRAL = str(HERE / "llama_tiny.json"), str(HERE / "mixtral_tiny.json")


def _write(tmp_path, **cfg):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return str(path)


def test_llama_gqa_config_gives_the_analytic_macs():
    wl = resolve(f"{LLAMA}:seq=16")
    # d 64, 8 heads of 8, 2 KV heads, FFN 176, 16 tokens, 3 layers, counted by hand:
    # q, o 16*64*64 each; k, v 16*64*16 each; scores, context 8 heads * 16*16*8 each; FFN 3 * 16*64*176
    per_block = 2 * 65_536 + 2 * 16_384 + 2 * 16_384 + 3 * 180_224
    assert wl.total_macs == 3 * per_block == 2_211_840
    shapes = {op.name: (op.m, op.k, op.n, op.batch) for op in wl.ops}
    assert shapes["attention/wk"] == (16, 64, 16, 1) and shapes["attention/scores"] == (16, 8, 16, 8)
    assert set(wl.counts) == {3}
    kinds = sorted({v.kind for v in wl.vector_ops})
    assert kinds == ["add", "rmsnorm", "rope", "silu", "softmax"]


def test_config_without_kv_heads_equals_the_llama_block_builtin(tmp_path):
    spec = _write(tmp_path, model_type="llama", hidden_size=128, intermediate_size=320, num_hidden_layers=1,
                  num_attention_heads=4, vocab_size=100)
    hf, builtin = resolve(f"{spec}:seq=32"), resolve("llama_block:seq=32,d=128,heads=4,ffn=320")
    assert [(o.m, o.k, o.n, o.batch) for o in hf.ops] == [(o.m, o.k, o.n, o.batch) for o in builtin.ops]
    assert [(v.kind, v.shape) for v in hf.vector_ops] == [(v.kind, v.shape) for v in builtin.vector_ops]


def test_decode_step_against_a_kv_cache():
    wl = resolve(f"{LLAMA}:seq=1,kv=32,layers=1")
    scores = next(op for op in wl.ops if op.name == "attention/scores")
    assert (scores.m, scores.k, scores.n, scores.batch) == (1, 8, 33, 8)


def test_mixtral_counts_top_k_experts_per_token():
    wl = resolve(f"{MIXTRAL}:seq=10")
    # 10 tokens, top 2 of 4 experts: 20 routed copies, 5 per expert (balanced); FFN 96, d 64, 1 KV head of 16
    experts = [op for op in wl.ops if op.name.startswith("ffn/w_")]
    assert len(experts) == 12 and {op.m for op in experts} == {5}
    router = next(op for op in wl.ops if op.name == "ffn/router")
    assert (router.m, router.k, router.n) == (10, 64, 4)
    per_block = 2 * 10 * 64 * 64 + 2 * 10 * 64 * 16 + 2 * 4 * 10 * 10 * 16 + 10 * 64 * 4 + 3 * 20 * 64 * 96
    assert wl.total_macs == 2 * per_block


@pytest.mark.parametrize(("cfg", "pattern"), [
    ({"model_type": "no_such_model", "n_embd": 64},
     r"model_type 'no_such_model' is not one transformers .* builds"),
    ({"model_type": "gpt2", "n_embd": 64}, r"has no 'n_head' \(a gpt2 config needs it\)"),
    ({"model_type": "bert", "hidden_size": 64, "num_attention_heads": 5}, r"hidden_size 64 must be a multiple of"),
    ({"model_type": "llama", "hidden_size": 64}, r"has no 'num_attention_heads' \(a llama config needs it\)"),
    ({"model_type": "llama", "hidden_size": 64, "intermediate_size": 8, "num_hidden_layers": 1,
      "num_attention_heads": 8, "num_key_value_heads": 3}, r"num_key_value_heads 3 must divide num_attention_heads 8"),
    ({"model_type": "mistral", "hidden_size": "64"}, r"hidden_size must be an integer in \[1, 1,048,576\], not '64'"),
    ([1, 2], r"must hold a JSON object"),
])
def test_bad_configs_are_one_line(run_cli, tmp_path, cfg, pattern):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    assert_one_line_error(*run_cli("workloads", "show", str(path)), pattern)


def test_bad_option_and_too_big_a_block_are_refused_before_tracing(run_cli, tmp_path):
    assert_one_line_error(*run_cli("workloads", "show", f"{LLAMA}:heads=4"), r"has no option 'heads'")
    big = _write(tmp_path, model_type="llama", hidden_size=1 << 20, intermediate_size=1 << 20, num_hidden_layers=1,
                 num_attention_heads=1 << 10)
    with pytest.raises(WorkloadError, match=r"MACs, more than the 1e\+15 traced at once"):
        resolve(f"{big}:seq=100000")


def test_pytorch_file_points_to_the_onnx_recipe(run_cli, tmp_path):
    path = tmp_path / "model.pt"
    path.write_bytes(b"PK\x03\x04 not read")
    assert_one_line_error(*run_cli("workloads", "show", str(path)),
                          r"model\.pt' is a pickled PyTorch file.*file\.py:fn.*torch\.export\.save.*"
                          r"torch\.onnx\.export \(docs/workloads\.md, \"PyTorch\"\)")


GPT2_SMALL = {"model_type": "gpt2", "n_layer": 12, "n_head": 12, "n_embd": 768, "n_positions": 1024,
              "vocab_size": 50257}
BERT_BASE = {"model_type": "bert", "num_hidden_layers": 12, "hidden_size": 768, "num_attention_heads": 12,
             "intermediate_size": 3072}


def test_gpt2_config_gives_the_hand_macs(tmp_path):
    spec = _write(tmp_path, model_type="gpt2", n_layer=3, n_head=4, n_embd=64, n_positions=40, vocab_size=100)
    wl = resolve(f"{spec}:kv=20,batch=2")
    # per layer and token: fused QKV 64*192, projection 64*64, FFN 2 * 64*256 (n_inner 4 * 64), scores and
    # context 21 keys * 64 each; 2 tokens, 3 layers; LM head 2 * 64 * 100
    per_token = 64 * 192 + 64 * 64 + 2 * 64 * 256 + 2 * 21 * 64
    assert wl.total_macs == 3 * 2 * per_token + 2 * 64 * 100 == 323_840
    scores = next(op for op in wl.ops if op.name.endswith("scores"))
    assert (scores.m, scores.k, scores.n, scores.batch) == (1, 16, 21, 8)
    assert wl.total_macs == resolve(f"{spec}:kv=20,batch=2,layers=3").total_macs


def test_gpt2_small_config_equals_the_builtin(tmp_path):
    hf = resolve(_write(tmp_path, **GPT2_SMALL) + ":kv=64,layers=2")
    builtin = resolve("gpt2_decode:kv=64,layers=2")
    assert [(o.name, o.m, o.k, o.n, o.batch) for o in hf.ops] == [(o.name, o.m, o.k, o.n, o.batch) for o in builtin.ops]
    assert hf.counts == builtin.counts and hf.total_macs == builtin.total_macs
    assert [(v.kind, v.shape) for v in hf.vector_ops] == [(v.kind, v.shape) for v in builtin.vector_ops]


def test_bert_config_gives_the_hand_macs_and_equals_the_builtin(tmp_path):
    small = _write(tmp_path, model_type="bert", num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                   intermediate_size=128)
    # per layer: Q, K, V, output 10 tokens * 64*64 each, FFN 2 * 10*64*128, scores and context 4 heads * 10*10*16
    assert resolve(f"{small}:seq=10").total_macs == 2 * (4 * 40_960 + 2 * 81_920 + 2 * 6_400) == 680_960
    (tmp_path / "base").mkdir()
    base = str(tmp_path / "base" / "config.json")
    Path(base).write_text(json.dumps(BERT_BASE))
    hf, builtin = resolve(f"{base}:seq=16,layers=1"), resolve("bert_base:seq=16")
    assert [(o.name, o.m, o.k, o.n, o.batch) for o in hf.ops] == [(o.name, o.m, o.k, o.n, o.batch) for o in builtin.ops]
    assert [(v.kind, v.shape) for v in hf.vector_ops] == [(v.kind, v.shape) for v in builtin.vector_ops]


@pytest.mark.parametrize(("cfg", "option", "pattern"), [
    (GPT2_SMALL, "kv=1024", r"kv must be below n_positions 1024"),
    (BERT_BASE, "kv=4", r"is a bert encoder, which has no KV cache"),
])
def test_gpt2_and_bert_options_are_checked(run_cli, tmp_path, cfg, option, pattern):
    assert_one_line_error(*run_cli("workloads", "show", f"{_write(tmp_path, **cfg)}:{option}"), pattern)
