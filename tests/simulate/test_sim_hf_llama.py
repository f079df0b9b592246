"""A Hugging Face Llama config.json runs on the RTL from one program: its decode step is the decoder
block the compiler builds, bit-exact, RTL total cycles equal to evaluate's figure; a GQA config,
which that block does not take, names why and runs op by op."""

from __future__ import annotations

import dataclasses
import json

import pytest

import perf_model
import workloads
from accel_dse.design_files import load_design
from accel_dse.simulate import simulate
from accel_spec.errors import ModelError
from perf_model.compiler.blocks import transformer_block

TINY = dataclasses.replace(load_design("tiny"), vector_unit=True)
LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 96,
         "num_hidden_layers": 3, "num_attention_heads": 2, "num_key_value_heads": 2, "vocab_size": 1000,
         "max_position_embeddings": 512, "rms_norm_eps": 1e-05, "rope_theta": 10000.0}


def test_an_hf_llama_configs_decode_step_runs_from_one_program_bit_exact(tmp_path, sim_cache):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(LLAMA))
    spec = f"{config}:seq=1,kv=12,layers=1"
    report = simulate(TINY, spec, simulator="icarus", work_dir=sim_cache)
    (op,) = report.ops
    assert op.name == "network" and op.status == "pass" and op.mismatches == 0 and op.total_cycles_match
    assert any(n.startswith("one program for the whole decoder block (decode of one token after a KV cache of 12)")
               for n in report.notes), report.notes
    figures = perf_model.evaluate(TINY, workloads.resolve(spec)).network
    assert figures is not None and figures["total_cycles"] == op.cycles_total_rtl > 0


def test_a_gqa_config_names_why_it_is_no_decoder_block(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({**LLAMA, "num_attention_heads": 8}))  # 8 query heads, 2 key heads
    with pytest.raises(ModelError, match=r"the wk GEMM 1x64x16 \(batch 1\) is not a decoder block's 1x64x64"):
        transformer_block(workloads.resolve(f"{config}:seq=1,kv=12,layers=1"))
    assert perf_model.evaluate(TINY, workloads.resolve(f"{config}:seq=1,kv=12,layers=1")).network is None
