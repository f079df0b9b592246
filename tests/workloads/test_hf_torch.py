"""Hugging Face configs built by transformers on meta and traced through PyTorch: analytic MACs, the
JAX builder's records where both build an architecture, MoE under a stated balanced load, masks."""

from __future__ import annotations

import json
import math
import sys
from collections import Counter
from pathlib import Path

import pytest

from accel_spec.errors import WorkloadError
from tests.cli_testlib import assert_one_line_error
from workloads import resolve
from workloads._float_patterns import NONCAUSAL_MASK
from workloads._hf_config import hf_shape, load_hf_config
from workloads.host_work import host_work

pytest.importorskip("transformers", reason="the [torch] extra (scripts/setup.sh installs it)")

from workloads._hf_torch import TRANSFORMERS_MISSING, load_hf_torch  # noqa: E402

D, H, KVH, DH, FFN = 64, 4, 2, 16, 96
DENSE = {"hidden_size": D, "intermediate_size": FFN, "num_hidden_layers": 2, "num_attention_heads": H,
         "num_key_value_heads": KVH, "vocab_size": 128}


def _write(tmp_path, **cfg):
    path = tmp_path / f"{cfg['model_type']}.json"
    path.write_text(json.dumps(cfg))
    return str(path)


def _attn_macs(tokens, seq, ctx, batch=1):
    return tokens * D * (H * DH + 2 * KVH * DH) + tokens * H * DH * D + 2 * batch * H * seq * ctx * DH


def _flat(wl):
    """Each matrix op's MACs and each vector op's kind/elements/causal offset, once per run."""
    ops = Counter(op.macs for op, c in zip(wl.ops, wl.counts, strict=True) for _ in range(c))
    vec = Counter((v.kind, math.prod(v.shape), v.param("causal_offset") if v.kind == "softmax" else None)
                  for v, c in zip(wl.vector_ops, wl.vector_counts, strict=True) for _ in range(c))
    return ops, vec


def test_qwen3_gives_the_analytic_macs_and_its_qk_norms(tmp_path):
    scaled = {"rope_theta": 1000000.0, "rope_scaling": {"rope_type": "linear", "factor": 2.0}}
    wl = resolve(f"{_write(tmp_path, model_type='qwen3', head_dim=DH, **DENSE, **scaled)}:seq=8")
    assert wl.source == "hf_config"
    # the config's RoPE base and scaling (transformers' rates are a buffer): the unit's table
    assert {v.params for v in wl.vector_ops if v.kind == "rope"} == {
        (("start", 0), ("theta", 1000000), ("scaling", 1), ("factor_q16", 2 << 16))}
    assert wl.total_macs == 2 * (_attn_macs(8, 8, 8) + 3 * 8 * D * FFN)
    kinds = Counter(v.kind for v in wl.vector_ops)
    # per layer: input, q, k and post-attention norms, then the final norm; two RoPEs; a causal softmax
    assert kinds == {"rmsnorm": 9, "rope": 4, "softmax": 2, "add": 4, "silu": 2}
    assert {v.param("causal_offset") for v in wl.vector_ops if v.kind == "softmax"} == {0}
    assert host_work(wl.other_primitives, wl.other_elements).arithmetic == ()


@pytest.mark.parametrize("kind", ["llama", "mistral", "qwen2", "mixtral"])
def test_transformers_and_the_jax_builder_agree(tmp_path, kind):
    extra = {"num_local_experts": 4, "num_experts_per_tok": 2} if kind == "mixtral" else {}
    path = _write(tmp_path, model_type=kind, **DENSE, **extra)
    for options in ({"seq": 8}, {"mode": "decode", "kv": 8}):
        jax_built = load_hf_config(Path(path), dict(options), name="jax", what=path)
        torch_built = load_hf_torch(json.loads(Path(path).read_text()), hf_shape(dict(options), path),
                                    name="torch", what=path)
        (jo, jv), (to, tv) = _flat(jax_built), _flat(torch_built)
        assert jax_built.total_macs == torch_built.total_macs
        assert jo == to or kind == "mixtral"  # transformers fuses each expert's gate and up projections
        assert tv - jv == Counter({("rmsnorm", D * 1 * options.get("seq", 1), None): 1})  # the base model's final norm
        assert jv - tv == Counter()


def test_moe_experts_count_per_routed_token_under_a_balanced_load(tmp_path):
    moe = {"moe_intermediate_size": 32, "num_experts": 4, "num_experts_per_tok": 2, "head_dim": DH,
           "decoder_sparse_step": 1, "mlp_only_layers": []}
    wl = resolve(f"{_write(tmp_path, model_type='qwen3_moe', **DENSE, **moe)}:seq=8,layers=1")
    tokens = 8
    expert_macs = 3 * tokens * 2 * D * 32  # every token through top_k = 2 experts
    assert wl.total_macs == _attn_macs(8, 8, 8) + tokens * D * 4 + expert_macs
    experts = [op for op in wl.ops if op.name.endswith("mlp.experts")]
    assert len(experts) == 4 * 2 and {op.m for op in experts} == {tokens * 2 // 4}  # gate_up, down per expert
    assert "load balanced (an assumption" in wl.description
    host = dict((n, e) for n, _, e in host_work(wl.other_primitives, wl.other_elements).arithmetic)
    assert set(host) == {"top_k", "mul"}  # the router's selection and the weighting are the host's


def test_qwen2_moe_runs_its_shared_expert_on_every_token(tmp_path):
    cfg = DENSE | {"moe_intermediate_size": 32, "shared_expert_intermediate_size": 48, "num_experts": 4,
                   "num_experts_per_tok": 2}
    wl = resolve(f"{_write(tmp_path, model_type='qwen2_moe', **cfg)}:seq=8,layers=1")
    assert wl.total_macs == _attn_macs(8, 8, 8) + 8 * D * 4 + 3 * 8 * 2 * D * 32 + 3 * 8 * D * 48 + 8 * D
    assert [v.kind for v in wl.vector_ops].count("rope") == 2  # after the q/k projections' biases


def test_a_sliding_window_in_effect_is_host_work_with_the_reason(tmp_path):
    path = _write(tmp_path, model_type="mistral", sliding_window=4, **DENSE)
    wl = resolve(f"{path}:seq=8,layers=1")  # 8 tokens > the window: transformers' sliding mask
    assert {v.param("causal_offset") for v in wl.vector_ops if v.kind == "softmax"} == {-1}
    assert dict(wl.other_primitives)[f"select_n[{NONCAUSAL_MASK}]"] == 1
    inside = resolve(f"{path}:seq=4,layers=1")  # within the window: causal, the JAX builder's
    assert {v.param("causal_offset") for v in inside.vector_ops if v.kind == "softmax"} == {0}


def test_gpt2_prefill_goes_through_transformers(tmp_path):
    path = _write(tmp_path, model_type="gpt2", n_layer=2, n_head=4, n_embd=64, n_positions=64, vocab_size=100)
    wl = resolve(f"{path}:seq=8")
    assert wl.total_macs == 2 * (8 * (4 * 64 * 64 + 2 * 64 * 256) + 2 * 8 * 8 * 64)
    assert Counter(v.kind for v in wl.vector_ops) == {"layernorm": 5, "softmax": 2, "gelu": 2, "add": 5}


def test_mode_options(tmp_path, run_cli):
    path = _write(tmp_path, model_type="llama", **DENSE)
    assert hf_shape({"mode": "decode"}, path) | {} == {"seq": 1, "batch": 1, "kv": 128, "layers": 0}
    assert resolve(f"{path}:mode=decode,kv=16").ops[3].n == 17  # the scores against 16 cached + 1 new keys
    assert_one_line_error(*run_cli("workloads", "show", f"{path}:mode=prefill,kv=4"), r"mode=prefill has no KV cache")
    assert_one_line_error(*run_cli("workloads", "show", f"{path}:mode=train"), r"mode must be prefill or decode")
    bert = _write(tmp_path, model_type="bert", hidden_size=64, num_attention_heads=4, intermediate_size=96,
                  num_hidden_layers=1)
    assert_one_line_error(*run_cli("workloads", "show", f"{bert}:mode=decode"), r"bert encoder, which has no KV")


def test_without_transformers_the_way_in_is_named(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)
    with pytest.raises(WorkloadError) as info:
        load_hf_torch({"model_type": "qwen3"}, hf_shape({}, "x"), name="x", what="x")
    assert str(info.value) == TRANSFORMERS_MISSING
