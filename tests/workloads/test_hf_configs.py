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
    ({"model_type": "gpt2", "n_embd": 64}, r"model_type must be one of llama, mistral, qwen2, mixtral, not 'gpt2'"),
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
                          r"model\.pt' is a PyTorch file.*torch\.onnx\.export \(docs/workloads\.md, \"PyTorch\"\)")
