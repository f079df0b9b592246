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


def _words_loaded(prog, name: str) -> dict[int, int]:
    """Array words LOADed from tensor ``name``, by the band of 8 channels they start in (``K^T``: its rows;
    ``V``: its columns)."""
    t = prog.tensors[name]
    out: dict[int, int] = {}
    for c in prog.commands:
        if c.opcode == Opcode.LOAD and t.base <= c["dram_addr"] < t.base + t.nbytes:
            off = c["dram_addr"] - t.base
            band = off // t.pitch // 8 if name == "KT" else off % t.pitch // 8
            out[band] = out.get(band, 0) + c["rows"] * c["words"]
    return out


@pytest.mark.parametrize("batch", [1, 2])
def test_a_decode_step_loads_each_key_heads_cache_once_for_its_whole_group(batch):
    """Decode, 8 query heads of 8 channels over 2 key/value heads on a 4 x 4 array: one scores and one
    context GEMM a key/value head and sequence, over its group's 4 query heads as rows, so K^T's and
    V's bands of each key/value head are read once (every element once), not once a query head."""
    gqa = _regroup(workloads.resolve(f"llama_decode:kv=12,d=64,heads=8,ffn=48,batch={batch}"), kv_heads=2)
    block = decoder_block(gqa)
    assert block.grouped and block.gemm_programs == 1 + 2 * batch + 2 * 2 * batch + 4  # wk, wv once a sequence
    prog = compile_block(TINY, block)
    kt, v = prog.tensors["KT"], prog.tensors["V"]
    lanes = TINY.cols
    assert _words_loaded(prog, "KT") == {0: kt.pitch * 8 // lanes, 1: kt.pitch * 8 // lanes}
    assert _words_loaded(prog, "V") == {0: v.rows * 8 // lanes, 1: v.rows * 8 // lanes}
    def runs(gemm, m=None):
        return len(perf_model.compile_gemm(TINY, dataclasses.replace(gemm, m=m or gemm.m), requant=True).runs)

    g = block.gemms
    attention = 2 * batch * (runs(g[3], 4) + runs(g[4], 4))  # a GEMM of 4 rows a key/value head and sequence
    assert len(prog.runs) == runs(g[0]) + batch * (runs(g[1]) + runs(g[2])) + attention + sum(runs(x) for x in g[5:])


def test_a_prefill_runs_each_query_head_on_its_groups_key_head_band():
    """Prefill of 4 tokens after 12 (several queries a sequence): one scores and one context GEMM a
    query head, heads 0-3 reading key/value head 0's bands and heads 4-7 head 1's, as many times each."""
    block = decoder_block(_regroup(workloads.resolve("llama_block:seq=4,kv=12,d=64,heads=8,ffn=48"), kv_heads=2))
    assert not block.grouped and block.gemm_programs == 3 + 2 * 8 + 4
    prog = compile_block(TINY, block)
    for name in ("KT", "V"):
        words = _words_loaded(prog, name)
        assert set(words) == {0, 1} and words[0] == words[1] > 0
    # in program order, heads 0-3's scores read key head 0's band of K^T, then heads 4-7's key head 1's
    kt = prog.tensors["KT"]
    order = [(c["dram_addr"] - kt.base) // kt.pitch // 8 for c in prog.commands
             if c.opcode == Opcode.LOAD and kt.base <= c["dram_addr"] < kt.base + kt.nbytes]
    assert [b for i, b in enumerate(order) if i == 0 or order[i - 1] != b] == [0, 1]
    assert order.count(0) == order.count(1) == len(order) // 2 >= 4
    assert _program_macs(prog) == _analytic_macs(1, 4, 12, 64, 8, 2, 48)


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
    cached tokens: one block, one program (one scores and one context GEMM for all 4 heads),
    ``evaluate``'s network figures from it."""
    spec = _spec(tmp_path, 64, 4, 1, kv=20)
    wl = workloads.resolve(spec)
    block = transformer_block(wl)
    assert (block.key_heads, block.group, block.d_kv) == (1, 4, 16)
    prog = compile_block(TINY, block)
    assert _program_macs(prog) == _analytic_macs(1, 1, 20, 64, 4, 1, 48)
    assert _rows_read(prog, "KT") == set(range(16))
    network = perf_model.evaluate(TINY, wl).network
    assert network is not None and network["gemms"] == block.gemm_programs == 3 + 2 + 4
    assert network["total_cycles"] > network["compute_cycles"] > 0


def test_mha_is_the_case_of_as_many_key_heads_as_query_heads():
    block = decoder_block(workloads.resolve("llama_decode:kv=12,d=64,heads=4,ffn=48"))
    assert (block.kv_heads, block.key_heads, block.group, block.d_kv) == (0, 4, 1, 64)
    assert _program_macs(compile_block(TINY, block)) == _analytic_macs(1, 1, 12, 64, 4, 4, 48)


def test_the_sweeps_figure_for_a_gqa_decode_step_is_its_programs_walk(tmp_path):
    """What the sweep records (``evaluate_designs``) and ``evaluate``'s headline for a GQA decode step
    are the one program's walk on every design that runs it so, on designs around ``tiny``; an 8-lane
    unit cannot rotate heads of 8 channels (the reason named, as for multi-head attention), a design
    without the unit has no one program."""
    from perf_model.compiler.network_figures import network_figures

    wl = workloads.resolve(_spec(tmp_path, 64, 8, 2, kv=16))
    base = dataclasses.replace(TINY, vector_unit=True)
    designs = [base, dataclasses.replace(base, rows=8, cols=8), dataclasses.replace(base, cols=8),
               dataclasses.replace(base, double_buffered=False, dram_bytes_per_cycle=16.0),
               dataclasses.replace(base, vector_unit=False)]
    table = perf_model.evaluate_designs(perf_model.DesignArrays.from_configs(designs), wl)
    walks = 0
    for i, config in enumerate(designs):
        walk = network_figures(config, wl)
        if i == 1:
            assert walk == {"reason": "rope: half the head size (8 / 2) is not whole words of 8 lanes"}
        elif i == 4:
            assert walk is None
        else:
            walks += 1
            headline = perf_model.evaluate(config, wl).total["total_cycles"]
            assert table.total_cycles[i] == walk["total_cycles"] == headline
    assert walks == 3
