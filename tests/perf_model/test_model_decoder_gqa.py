"""Grouped-query and multi-query attention in the one-program decoder block (perf_model.compiler.decoder):
Hugging Face Llama-style configs whose key/value heads divide their query heads are recognised as
the block, their one program does the block's analytic MACs, each query head reads its group's
key/value head, and shapes that are no such block are refused with the rule they break."""

from __future__ import annotations

import dataclasses
import json
import random

import pytest

import perf_model
import workloads
from accel_dse.design_files import load_design
from accel_spec.errors import ModelError
from accel_spec.isa import Opcode
from perf_model.compiler.blocks import compile_block, transformer_block
from perf_model.compiler.decoder import decoder_block

TINY = dataclasses.replace(load_design("tiny"), vector_unit=True)
LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "intermediate_size": 48,
         "num_hidden_layers": 2, "vocab_size": 1000, "max_position_embeddings": 512, "rms_norm_eps": 1e-05,
         "rope_theta": 10000.0}


def _spec(tmp_path, d: int, heads: int, kv_heads: int, *, seq: int = 1, kv: int = 12, batch: int = 1,
          ffn: int = 48) -> str:
    config = tmp_path / f"config_{d}_{heads}_{kv_heads}_{ffn}.json"
    config.write_text(json.dumps({**LLAMA, "hidden_size": d, "num_attention_heads": heads,
                                  "num_key_value_heads": kv_heads, "intermediate_size": ffn}))
    return f"{config}:seq={seq},kv={kv},batch={batch},layers=1"


def _analytic_macs(batch: int, seq: int, kv: int, d: int, heads: int, kv_heads: int, ffn: int) -> int:
    """A decoder block's MACs: q and o projections of d x d, k and v of d x kv_heads d_head, the
    SwiGLU FFN's three d x ffn, and each query head's scores and context over kv + seq keys."""
    dh = d // heads
    tokens = batch * seq
    return tokens * (2 * d * d + 2 * d * kv_heads * dh + 3 * d * ffn) + 2 * batch * heads * seq * (kv + seq) * dh


def _program_macs(prog) -> int:
    return sum((m1 - m0) * (k1 - k0) * (n1 - n0) for m0, m1, k0, k1, n0, n1, _ in prog.runs)


def _rows_read(prog, name: str) -> set[int]:
    t = prog.tensors[name]
    rows = set()
    for c in prog.commands:
        if c.opcode == Opcode.LOAD and t.base <= c["dram_addr"] < t.base + t.nbytes:
            rows |= {(c["dram_addr"] + r * c["dram_stride"] - t.base) // t.pitch for r in range(c["rows"])}
    return rows


def _shapes(seed: int) -> dict[str, int]:
    """A random small GQA/MQA/MHA block: heads of 8 or 16 channels, key/value heads dividing the query heads."""
    rng = random.Random(seed)
    dh = rng.choice([8, 16])
    heads = rng.choice([2, 4, 8])
    kv_heads = rng.choice([k for k in (1, 2, 4, 8) if heads % k == 0])
    seq = rng.choice([1, 1, 4])
    return {"d": heads * dh, "heads": heads, "kv_heads": kv_heads, "seq": seq, "kv": rng.randrange(4, 21),
            "batch": rng.choice([1, 2]), "ffn": rng.choice([32, 48])}


@pytest.mark.parametrize("seed", range(5))
def test_random_small_gqa_blocks_are_recognised_and_do_the_analytic_macs(tmp_path, seed):
    s = _shapes(seed)
    spec = _spec(tmp_path, s["d"], s["heads"], s["kv_heads"], seq=s["seq"], kv=s["kv"], batch=s["batch"], ffn=s["ffn"])
    block = transformer_block(workloads.resolve(spec))
    dh = s["d"] // s["heads"]
    assert (block.heads, block.key_heads, block.group, block.kv, block.seqs, block.tokens) == (
        s["heads"], s["kv_heads"], s["heads"] // s["kv_heads"], s["kv"], s["batch"], s["seq"])
    assert [(g.k, g.n) for g in block.gemms[:3]] == [(s["d"], s["d"])] + [(s["d"], s["kv_heads"] * dh)] * 2
    prog = compile_block(TINY, block)
    assert _program_macs(prog) == _analytic_macs(s["batch"], s["seq"], s["kv"], s["d"], s["heads"], s["kv_heads"],
                                                 s["ffn"])
    # the cache holds the key/value heads only, and every one of them is read by its group's scores
    assert prog.tensors["K"].shape == prog.tensors["V"].shape == (s["batch"] * (s["kv"] + s["seq"]),
                                                                  s["kv_heads"] * dh)
    assert _rows_read(prog, "KT") == set(range(s["kv_heads"] * dh))


def test_each_query_head_reads_its_groups_key_head_band():
    """Decode, 8 query heads of 8 channels over 2 key/value heads on a 4 x 4 array: the scores read
    K^T's rows 0-7 for heads 0-3 and rows 8-15 for heads 4-7, as many times each, and the context
    reads V's columns 0-7 and 8-15 alike (each query head's GEMM loads its group's band)."""
    wl = workloads.resolve("llama_decode:kv=12,d=64,heads=8,ffn=48")  # MHA builtin, regrouped below
    gqa = _regroup(wl, kv_heads=2)
    block = decoder_block(gqa)
    prog = compile_block(TINY, block)
    kt, v = prog.tensors["KT"], prog.tensors["V"]
    bands_kt: dict[int, int] = {}
    bands_v: dict[int, int] = {}
    for c in prog.commands:
        if c.opcode != Opcode.LOAD:
            continue
        if kt.base <= c["dram_addr"] < kt.base + kt.nbytes:
            band = (c["dram_addr"] - kt.base) // kt.pitch // 8
            bands_kt[band] = bands_kt.get(band, 0) + 1
        if v.base <= c["dram_addr"] < v.base + v.nbytes:
            band = (c["dram_addr"] - v.base) % v.pitch // 8
            bands_v[band] = bands_v.get(band, 0) + 1
    assert set(bands_kt) == set(bands_v) == {0, 1}
    assert bands_kt[0] == bands_kt[1] > 0 and bands_v[0] == bands_v[1] > 0


def _regroup(wl, *, kv_heads: int, wk_n: int | None = None, wv_n: int | None = None, rope_heads: int | None = None):
    """``wl`` (an MHA decoder block of 8-channel heads) with its key and value projections cut to
    ``kv_heads`` heads (or ``wk_n``/``wv_n`` columns) and the keys' RoPE over ``rope_heads`` heads."""
    ops = list(wl.ops)
    ops[1] = dataclasses.replace(ops[1], n=wk_n or kv_heads * 8)
    ops[2] = dataclasses.replace(ops[2], n=wv_n or kv_heads * 8)
    vec = list(wl.vector_ops)
    rope_k = vec[2]
    shape = (*rope_k.shape[:2], rope_heads or kv_heads, 8)
    vec[2] = dataclasses.replace(rope_k, shape=shape, out_shape=shape)
    return dataclasses.replace(wl, ops=tuple(ops), vector_ops=tuple(vec))


@pytest.mark.parametrize(("change", "rule"), [
    ({"kv_heads": 2, "wk_n": 24}, r"the wk GEMM 1x64x24 \(batch 1\) is not a decoder block's keys: 24 columns are not "
                                  r"the 8 channels of a number of key/value heads dividing the 8 query heads"),
    ({"kv_heads": 2, "wk_n": 20}, r"the wk GEMM 1x64x20 .* 20 columns are not the 8 channels"),
    ({"kv_heads": 2, "wv_n": 32}, r"the wv GEMM 1x64x32 \(batch 1\) is not a decoder block's 1x64x16"),
    ({"kv_heads": 2, "rope_heads": 4}, r"the RoPEs over heads \(8, 8\) and \(4, 8\) are not the block's 8 query and "
                                       r"2 key heads of 8 channels"),
])
def test_shapes_that_are_no_gqa_block_are_refused_with_their_rule(change, rule):
    wl = _regroup(workloads.resolve("llama_decode:kv=12,d=64,heads=8,ffn=48"), **change)
    with pytest.raises(ModelError, match=rule):
        transformer_block(wl)


def test_an_mqa_configs_decode_step_is_one_program_with_the_analytic_macs(tmp_path):
    """Multi-query attention: 4 query heads of 16 channels over one key/value head, decode after 20
    cached tokens: one block, one program, ``evaluate``'s network figures from it."""
    spec = _spec(tmp_path, 64, 4, 1, kv=20)
    wl = workloads.resolve(spec)
    block = transformer_block(wl)
    assert (block.key_heads, block.group, block.d_kv) == (1, 4, 16)
    prog = compile_block(TINY, block)
    assert _program_macs(prog) == _analytic_macs(1, 1, 20, 64, 4, 1, 48)
    assert _rows_read(prog, "KT") == set(range(16))
    network = perf_model.evaluate(TINY, wl).network
    assert network is not None and network["gemms"] == block.gemm_programs == 3 + 2 * 4 + 4
    assert network["total_cycles"] > network["compute_cycles"] > 0


def test_mha_is_the_case_of_as_many_key_heads_as_query_heads():
    block = decoder_block(workloads.resolve("llama_decode:kv=12,d=64,heads=4,ffn=48"))
    assert (block.kv_heads, block.key_heads, block.group, block.d_kv) == (0, 4, 1, 64)
    assert _program_macs(compile_block(TINY, block)) == _analytic_macs(1, 1, 12, 64, 4, 4, 48)
