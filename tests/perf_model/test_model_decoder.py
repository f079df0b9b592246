"""A LLaMA decoder block as one program (perf_model.compiler.decoder): the workload is recognised by its
shapes, the new keys and values land after each sequence's cached rows, the keys are transposed into
every cell of K^T once, the softmax is causal from the cache's length, wide FFN GEMMs run in column
groups, and what is not one block is refused with its rule. Checked from the placed layouts."""

from __future__ import annotations

import dataclasses

import pytest

import perf_model
import workloads
from accel_dse.design_files import load_design
from accel_spec.errors import ModelError
from accel_spec.isa import Opcode
from perf_model.compiler.decoder import DECODER_ROLES, compile_decoder, decoder_block, gemm_groups

TINY = dataclasses.replace(load_design("tiny"), vector_unit=True)
SMALL = "llama_block:seq=8,d=64,heads=2,ffn=96,kv=16,batch=2"


def _inside(t, addr):
    return t.base <= addr < t.base + t.nbytes


def _rows(t, c):
    """The DRAM rows of tensor ``t`` a transfer touches."""
    return {(c["dram_addr"] + r * c["dram_stride"] - t.base) // t.pitch for r in range(c["rows"])}


def test_the_block_is_recognised_prefill_and_decode():
    block = decoder_block(workloads.resolve(SMALL))
    assert (block.tokens, block.keys, block.kv, block.seqs, block.heads, block.d_head) == (8, 24, 16, 2, 2, 32)
    assert [g.name for g in block.gemms] == list(DECODER_ROLES)
    assert block.per_sequence and block.gemms[1].m == 8  # the key GEMM once a sequence
    assert [op.kind for op in block.vector.values()] == ["rmsnorm", "rope", "rope", "softmax", "add", "rmsnorm",
                                                        "silu", "add"]
    decode = decoder_block(workloads.resolve("llama_decode:kv=40,d=64,heads=2,ffn=96"))
    assert (decode.tokens, decode.keys, decode.kv, decode.per_sequence) == (1, 41, 40, False)
    prefill = decoder_block(workloads.resolve("llama_block:seq=16,d=64,heads=2,ffn=96,batch=2"))
    assert (prefill.kv, prefill.per_sequence, prefill.gemms[1].m) == (0, False, 32)


@pytest.mark.parametrize(("spec", "rule"), [
    ("bert_base:seq=8,d=32,heads=2,ffn=64", "is 9 GEMMs"),
    ("llama_block:seq=8,d=64,heads=2,ffn=96,requant=0", "must be requantised"),
    ("mlp", "is 9 GEMMs"),
])
def test_what_is_not_one_block_is_refused_with_its_rule(spec, rule):
    with pytest.raises(ModelError, match=rule):
        decoder_block(workloads.resolve(spec))


def test_the_new_keys_and_values_land_after_each_sequences_cache():
    """Every STORE into K or V writes rows b Tk + kv .. b Tk + kv + T - 1 only (the host's cached rows
    are never written), and together they write all of them."""
    block = decoder_block(workloads.resolve(SMALL))
    prog = compile_decoder(TINY, block)
    t = prog.tensors
    T, Tk, kv = block.tokens, block.keys, block.kv
    new = {b * Tk + kv + i for b in range(block.seqs) for i in range(T)}
    for name in ("K", "V"):
        stores = [c for c in prog.commands if c.opcode == Opcode.STORE and _inside(t[name], c["dram_addr"])]
        written = set().union(*(_rows(t[name], c) for c in stores))
        assert written == new, name


def _transposed_cells(block, prog):
    """The (row, column) cells of K^T the transposes' STOREs write, checked band by band against the
    K rows their LOAD read."""
    t = prog.tensors
    cmds = list(prog.commands)
    cells = []
    for i, c in enumerate(cmds):
        if c.opcode == Opcode.VECTOR and c["vkind"] == 13:
            load, store = cmds[i - 1], cmds[i + 2]
            first = (load["dram_addr"] - t["K"].base) // t["K"].pitch
            b, key = divmod(first, block.keys)
            for r in range(store["rows"]):
                row, col = divmod(store["dram_addr"] + r * store["dram_stride"] - t["KT"].base, t["KT"].pitch)
                assert col - b * 24 == key  # sequence b's keys from column b kc (kc = 24 here)
                cells += [(row, col + j) for j in range(c["vrows"])]
    return sorted(cells)


def test_a_decode_step_transposes_only_the_new_keys_into_the_kt_cache():
    """16 cached keys a sequence (a whole number of 4-lane words): only the 8 new ones are transposed,
    into columns 16 .. 23 of each sequence's band of K^T; the cache's columns are the host's."""
    block = decoder_block(workloads.resolve(SMALL))
    cells = _transposed_cells(block, compile_decoder(TINY, block))
    assert cells == sorted((r, b * 24 + j) for r in range(block.d_model) for b in range(2) for j in range(16, 24))


def test_a_prefill_transposes_every_key_once():
    block = decoder_block(workloads.resolve("llama_block:seq=24,d=64,heads=2,ffn=96,batch=2"))
    cells = _transposed_cells(block, compile_decoder(TINY, block))
    assert cells == [(r, j) for r in range(block.d_model) for j in range(48)]


def test_the_softmax_is_causal_from_the_caches_length_over_every_score_row():
    block = decoder_block(workloads.resolve(SMALL))
    prog = compile_decoder(TINY, block)
    cmds = list(prog.commands)
    runs = [(c, cmds[i + 1]) for i, c in enumerate(cmds) if c.opcode == Opcode.VECTOR and c["vkind"] == 9]
    assert sum(c["vrows"] for c, _ in runs) == block.seqs * block.heads * block.tokens
    assert all(c["vn"] == block.keys and c["vqrows"] == block.tokens for c, _ in runs)
    assert {blk["vp5"] for _, blk in runs} == {block.kv}  # whole heads a chunk: query 0 sees keys 0 .. kv


def test_the_rope_reads_one_table_row_a_position_for_each_sequence():
    """Both RoPEs read the table from its first row for every band that starts a sequence; K's run
    on the new rows only."""
    block = decoder_block(workloads.resolve(SMALL))
    prog = compile_decoder(TINY, block)
    t = prog.tensors
    cmds = list(prog.commands)
    table_loads = [c for c in cmds if c.opcode == Opcode.LOAD and _inside(t["rope"], c["dram_addr"])]
    assert table_loads and all(c["dram_addr"] == t["rope"].base for c in table_loads)
    assert len(table_loads) == 2 * block.seqs  # Q's two sequences' bands, K's two
    ropes = [c for c in cmds if c.opcode == Opcode.VECTOR and c["vkind"] == 12]
    assert sum(c["vrows"] for c in ropes) == 2 * block.seqs * block.tokens * block.heads
    assert all(c["vqrows"] == block.heads for c in ropes)


def test_wide_ffn_gemms_run_in_column_groups_that_cover_their_outputs():
    """An FFN of 4,160 channels passes the output stage's 4,096 parameters: the gate and up GEMMs
    run as two groups each, with their own weights and parameters, storing disjoint column bands
    that cover the whole output."""
    block = decoder_block(workloads.resolve("llama_block:seq=4,d=64,heads=2,ffn=4160"))
    groups = gemm_groups(block)
    assert [[n for _, n, _ in g] for g in groups[6:8]] == [[4096, 64]] * 2
    prog = compile_decoder(TINY, block)
    t = prog.tensors
    assert {"b6.0", "b6.1", "q6.1", "b7.1"} <= set(t)
    stores = [c for c in prog.commands if c.opcode == Opcode.STORE and _inside(t["gate"], c["dram_addr"])
              and c["buffer"] != 0]
    cols = set()
    for c in stores:
        for r in range(c["rows"]):
            row, col = divmod(c["dram_addr"] + r * c["dram_stride"] - t["gate"].base, t["gate"].pitch)
            cols |= {(row, col + j) for j in range(c["words"] * TINY.cols)}
    assert cols == {(r, j) for r in range(4) for j in range(4160)}


def test_the_walk_counts_every_gemm_and_vector_op():
    block = decoder_block(workloads.resolve(SMALL))
    prog = compile_decoder(TINY, block)
    timing = perf_model.gemm_program_cycles(TINY, prog, rate=perf_model.dram_rate(TINY))
    each = [perf_model.gemm_program_cycles(TINY, perf_model.compile_gemm(TINY, g, requant=True)).compute
            for g in block.gemms]
    heads = block.seqs * block.heads
    assert timing.compute == (each[0] + block.seqs * (each[1] + each[2]) + heads * (each[3] + each[4])
                              + sum(each[5:]))
    vectors = [c for c in prog.commands if c.opcode == Opcode.VECTOR]
    assert sorted({c["vkind"] for c in vectors}) == [1, 6, 8, 9, 12, 13]
    assert timing.vector > 0 and timing.total > timing.compute


def test_designs_the_program_cannot_serve_are_refused():
    block = decoder_block(workloads.resolve(SMALL))
    with pytest.raises(ModelError, match="no vector unit"):
        compile_decoder(load_design("tiny"), block)
    from accel_spec.config import Dataflow

    with pytest.raises(ModelError, match="weight-stationary"):
        compile_decoder(dataclasses.replace(TINY, dataflow=Dataflow.IS), block)


def test_a_sequences_keys_start_on_the_bus_when_the_cache_length_is_not_aligned():
    """Two sequences of 13 keys (12 cached, 1 new) on 4-byte words: the second sequence's keys start in
    K^T at column 16, where its new key is transposed (from key 12: column 28) and its heads' scores
    read them."""
    block = decoder_block(workloads.resolve("llama_decode:kv=12,d=64,heads=2,ffn=96,batch=2"))
    prog = compile_decoder(TINY, block)
    t = prog.tensors
    kt = t["KT"]
    assert kt.shape == (64, 16 + 13)
    cmds = list(prog.commands)
    firsts = [(cmds[i + 2]["dram_addr"] - kt.base) % kt.pitch for i, c in enumerate(cmds)
              if c.opcode == Opcode.VECTOR and c["vkind"] == 13]
    assert firsts == [12, 28]
    reads = {(c["dram_addr"] - kt.base) % kt.pitch for c in cmds
             if c.opcode == Opcode.LOAD and _inside(kt, c["dram_addr"])}
    assert reads == {0, 16}


def _sequencer_rejects(cmd, block, lanes: int, depth: int) -> bool:
    """The sequencer's VECTOR range checks (accel_spec.isa), restated: operand, second operand
    (a RoPE's table: 2 rows x words with one row a position, else rows x words + 2 words), output
    (a transpose's: vn rows of vp0 words)."""
    rows, words = cmd["vrows"], cmd["vwords"]
    span = rows * words
    span2 = (2 * span if cmd["vqrows"] == 1 else span + 2 * words) if cmd["vkind"] == 12 else span
    out = cmd["vn"] * block["vp0"] if cmd["vkind"] == 13 else span
    return (cmd["vsrc"] + span > depth or cmd["vsrc2"] + span2 > depth or cmd["vdst"] + out > depth
            or (cmd["vkind"] == 13 and block["vp0"] * lanes < rows))


@pytest.mark.parametrize("spec", ["llama_block:seq=32,d=64,heads=4,ffn=96", SMALL,
                                  "llama_decode:kv=12,d=64,heads=2,ffn=96,batch=2"])
def test_every_vector_command_passes_the_sequencers_range_checks(spec):
    """Four heads of 16 on tiny-vector: a RoPE band's table must leave room for the sequencer's bound
    (rows x words + 2 words), not only for its 2 words a position (a compiler that sized the table by
    its real rows gave ERROR_VECTOR in the RTL)."""
    from perf_model.compiler.vector import ifmap_words

    cfg = load_design("tiny-vector")
    prog = compile_decoder(cfg, decoder_block(workloads.resolve(spec)))
    cmds = list(prog.commands)
    depth = ifmap_words(cfg)
    vectors = [(c, cmds[i + 1]) for i, c in enumerate(cmds) if c.opcode == Opcode.VECTOR]
    assert vectors and not [c for c, blk in vectors if _sequencer_rejects(c, blk, cfg.vector_lanes, depth)]


@pytest.mark.parametrize("spec", ["llama_block:seq=12,d=64,heads=2,ffn=96", "llama_decode:kv=9,d=64,heads=2,ffn=96"])
def test_each_vector_run_walks_the_rows_its_load_placed(spec):
    """On a 4 x 8 array (4 vector lanes, output words of 8) the scores' rows are stored 16 wide for 12
    or 10 keys: each softmax and norm VECTOR walks rows of as many words as its LOAD placed a row
    apart (a VECTOR of ceil(n / lanes) words read the next row's words as its own: the RTL run
    failed 1,510 bytes before the fix)."""
    cfg = dataclasses.replace(load_design("tiny-vector"), cols=8)
    prog = compile_decoder(cfg, decoder_block(workloads.resolve(spec)))
    cmds = list(prog.commands)
    runs = 0
    for i, c in enumerate(cmds):
        if c.opcode != Opcode.VECTOR or c["vkind"] not in (8, 9):
            continue
        # the last LOAD before it into the region it reads: rows ``row_step`` words apart, or one run of rows
        load = next(x for x in reversed(cmds[:i]) if x.opcode == Opcode.LOAD and x["buf_addr"] == c["vsrc"])
        if load["rows"] > 1:
            assert load["row_step"] == c["vwords"], (load, c)
        else:
            assert load["words"] % c["vwords"] == 0 and load["words"] >= c["vrows"] * c["vwords"], (load, c)
        runs += 1
    assert runs
