"""A Hugging Face Llama config.json runs on the RTL from one program: its decode step is the decoder
block the compiler builds, bit-exact, RTL total cycles equal to evaluate's figure; so is a GQA
config's (key/value heads shared by groups of query heads)."""

from __future__ import annotations

import dataclasses
import json

import perf_model
import workloads
from accel_dse.design_files import load_design
from accel_dse.simulate import simulate
from perf_model.compiler.blocks import transformer_block
from tests.simulate.block_testlib import LONG_RUN_SIMULATOR

TINY = dataclasses.replace(load_design("tiny"), vector_unit=True)
LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 96,
         "num_hidden_layers": 3, "num_attention_heads": 2, "num_key_value_heads": 2, "vocab_size": 1000,
         "max_position_embeddings": 512, "rms_norm_eps": 1e-05, "rope_theta": 10000.0}


def test_an_hf_llama_configs_decode_step_runs_from_one_program_bit_exact(tmp_path, sim_cache):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(LLAMA))
    spec = f"{config}:seq=1,kv=12,layers=1"
    report = simulate(TINY, spec, simulator=LONG_RUN_SIMULATOR, work_dir=sim_cache)
    (op,) = report.ops
    assert op.name == "network" and op.status == "pass" and op.mismatches == 0 and op.total_cycles_match
    assert any(n.startswith("one program for the whole decoder block (decode of one token after a KV cache of 12)")
               for n in report.notes), report.notes
    figures = perf_model.evaluate(TINY, workloads.resolve(spec)).network
    assert figures is not None and figures["total_cycles"] == op.cycles_total_rtl > 0


def test_a_gqa_configs_decode_step_runs_from_one_program_bit_exact(tmp_path, sim_cache):
    """8 query heads over 2 key/value heads: each key/value head's cached keys and values serve a
    group of 4 query heads (one scores and one context GEMM over the group's 4 query rows), the keys'
    RoPE over the 2 key heads, its table Llama 3.1's scaled one (theta 500000, llama3 scaling: the host
    writes the scaled rates the reference uses); RTL bit-exact and cycles as the model."""
    kv_heads = 2
    config = tmp_path / "config.json"
    scaling = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 8}
    config.write_text(json.dumps({**LLAMA, "num_attention_heads": 8, "num_key_value_heads": kv_heads,
                                  "rope_theta": 500000.0, "rope_scaling": scaling}))
    spec = f"{config}:seq=1,kv=12,layers=1"
    wl = workloads.resolve(spec)
    rope = next(op for op in wl.vector_ops if op.kind == "rope")
    assert rope.param("theta") == 500000 and rope.param("scaling") == 2  # llama3's code
    block = transformer_block(wl)
    assert (block.heads, block.key_heads, block.group, block.d_kv) == (8, kv_heads, 8 // kv_heads, 8 * kv_heads)
    assert block.grouped  # one scores and one context GEMM a key/value head
    report = simulate(TINY, spec, simulator=LONG_RUN_SIMULATOR, work_dir=sim_cache)
    (op,) = report.ops
    assert op.name == "network" and op.status == "pass" and op.mismatches == 0 and op.total_cycles_match
    assert any(n.startswith("one program for the whole decoder block (decode of one token after a KV cache of 12)")
               and f"each of {kv_heads} key/value head(s) serving {8 // kv_heads} query heads" in n
               for n in report.notes), report.notes
    figures = perf_model.evaluate(TINY, wl).network
    assert figures is not None and figures["total_cycles"] == op.cycles_total_rtl > 0



def test_an_mqa_configs_prefill_after_a_cache_runs_from_one_program_bit_exact(tmp_path, sim_cache):
    """8 query heads over one key/value head, 2 new tokens after 6 cached: a GEMM a query head (several
    queries a sequence), every head's scores and context on the one key/value head's bands; RTL
    bit-exact and cycles as the model."""
    config = tmp_path / "config.json"
    config.write_text(json.dumps({**LLAMA, "num_attention_heads": 8, "num_key_value_heads": 1}))
    spec = f"{config}:seq=2,kv=6,layers=1"
    wl = workloads.resolve(spec)
    block = transformer_block(wl)
    assert (block.key_heads, block.group, block.tokens, block.kv, block.grouped) == (1, 8, 2, 6, False)
    report = simulate(TINY, spec, simulator=LONG_RUN_SIMULATOR, work_dir=sim_cache)
    (op,) = report.ops
    assert op.name == "network" and op.status == "pass" and op.mismatches == 0 and op.total_cycles_match
    assert any(n.startswith("one program for the whole decoder block (prefill of 2 tokens after a KV cache of 6)")
               for n in report.notes), report.notes
    figures = perf_model.evaluate(TINY, wl).network
    assert figures is not None and figures["total_cycles"] == op.cycles_total_rtl > 0
