"""Encoder layers as one program (perf_model.compiler.encoder): the workload is recognised by its
shapes, the keys are transposed on chip into K^T, every head reads its own slices of Q, K^T and V and
writes its own band of the context, the softmax runs over every score row, stacked layers read the
previous layer's output, and layers the program cannot serve are refused with their rule."""

from __future__ import annotations

import dataclasses

import pytest

import perf_model
import workloads
from accel_dse.design_files import load_design
from accel_spec.config import Dataflow
from accel_spec.errors import ModelError
from accel_spec.isa import Opcode
from perf_model.compiler.encoder import GEMM_ROLES, compile_encoder, encoder_layer

TINY = dataclasses.replace(load_design("tiny"), vector_unit=True)
SMALL = "bert_base:seq=8,d=32,heads=2,ffn=64,batch=2"


def _inside(t, addr):
    return t.base <= addr < t.base + t.nbytes


def test_the_layer_is_recognised_with_its_heads_sequences_and_links():
    layer = encoder_layer(workloads.resolve(SMALL))
    assert (layer.tokens, layer.seqs, layer.heads, layer.d_model, layer.d_head) == (8, 2, 2, 32, 16)
    assert [g.name for g in layer.gemms] == list(GEMM_ROLES)
    # the key GEMM is K = x Wk: (all tokens) x D x D, transposed on chip
    assert (layer.gemms[1].m, layer.gemms[1].k, layer.gemms[1].n) == (16, 32, 32)
    assert layer.layers == 1
    assert layer.softmax.kind == "softmax"
    assert [[op.kind for op in link] for link in layer.links] == [["add", "layernorm"], ["gelu"],
                                                                   ["add", "layernorm"]]


@pytest.mark.parametrize(("spec", "rule"), [
    ("mlp", "is 8 GEMMs"),
    ("llama_block:seq=8,d=64,heads=2,ffn=96", "is 8 GEMMs"),
    ("bert_base:seq=8,d=32,heads=2,ffn=64,requant=0", "must be requantised"),
])
def test_what_is_not_one_encoder_layer_is_refused_with_its_rule(spec, rule):
    with pytest.raises(ModelError, match=rule):
        encoder_layer(workloads.resolve(spec))


def test_each_head_reads_its_slices_and_writes_its_band():
    """Every A load of head (b, h)'s scores lies in Q's rows b T .. and columns h dh .. (bytes of each
    DRAM row), its B loads in K^T's rows h dh .. and columns b T ..; the context's stores in ctx's
    band. Checked from the placed layouts, not from the compiler's slices."""
    layer = encoder_layer(workloads.resolve(SMALL))
    prog = compile_encoder(TINY, layer)
    t = prog.tensors
    T, dh = layer.tokens, layer.d_head

    def cells(tensor, c):
        """(row, first column byte, end column byte) of each DRAM row of a transfer of ``tensor``."""
        out = []
        width = c["words"] * TINY.rows  # int8 lanes of a 4-lane word, every lane crossing DRAM
        for r in range(c["rows"]):
            row, col = divmod(c["dram_addr"] + r * c["dram_stride"] - tensor.base, tensor.pitch)
            out.append((row, col, col + width))
        return out

    q_loads = [c for c in prog.commands if c.opcode == Opcode.LOAD and _inside(t["Q"], c["dram_addr"])]
    kt_loads = [c for c in prog.commands if c.opcode == Opcode.LOAD and _inside(t["KT"], c["dram_addr"])]
    ctx_stores = [c for c in prog.commands if c.opcode == Opcode.STORE and _inside(t["ctx"], c["dram_addr"])]
    assert q_loads and kt_loads and ctx_stores
    strided = [c for c in q_loads if c["rows"] > 1]
    assert strided and all(c["dram_stride"] == t["Q"].pitch for c in strided)
    seen_q = {(r, col) for c in q_loads for r, col, _ in cells(t["Q"], c)}
    # every (row, head band) of Q is read: 16 token rows x 2 bands
    assert {(r, col // dh) for r, col in seen_q} == {(r, h) for r in range(2 * T) for h in range(2)}
    for c in q_loads:
        for _, col, end in cells(t["Q"], c):
            assert col // dh == (end - 1) // dh  # a load never straddles two heads' bands
    for c in kt_loads:
        for _, col, end in cells(t["KT"], c):
            assert col // T == (end - 1) // T  # one sequence's tokens
    written = {(r, col) for c in ctx_stores for r, col, _ in cells(t["ctx"], c)}
    assert {(r, col // dh) for r, col in written} == {(r, h) for r in range(2 * T) for h in range(2)}


def test_the_softmax_covers_every_score_row_once():
    layer = encoder_layer(workloads.resolve(SMALL))
    prog = compile_encoder(TINY, layer)
    vectors = [c for c in prog.commands if c.opcode == Opcode.VECTOR]
    softmax = [c for c in vectors if c["vkind"] == 9]
    assert sum(c["vrows"] for c in softmax) == layer.seqs * layer.heads * layer.tokens  # 32 rows of 8 scores
    assert all(c["vn"] == layer.tokens for c in softmax)
    # the keys' transposes (one a sequence) come first, and the tail's five link ops follow (add,
    # layernorm, gelu, add, layernorm)
    assert [c["vkind"] for c in vectors if c["vkind"] != 9] == [13, 13, 1, 7, 5, 1, 7]


def test_the_walk_counts_every_gemm_and_the_vector_work():
    """The program's compute cycles are the sum of its GEMMs' plans: three projections, 2 x 2 heads of
    scores and of context, the tail's three; its vector cycles those of its vector commands,
    counted here by hand from the unit's contract (``accel_spec.vector_isa``'s docstring)."""
    layer = encoder_layer(workloads.resolve(SMALL))
    prog = compile_encoder(TINY, layer)
    timing = perf_model.gemm_program_cycles(TINY, prog, rate=perf_model.dram_rate(TINY))
    g = layer.gemms
    heads = layer.seqs * layer.heads
    each = [perf_model.gemm_program_cycles(TINY, perf_model.compile_gemm(TINY, gemm, requant=True)).compute
            for gemm in g]
    assert timing.compute == sum(each[:3]) + heads * (each[3] + each[4]) + sum(each[5:])
    # tiny: 4 lanes; a pass over a row of W words takes W + 2 cycles, MEAN and RECIP 34 (a 32-step
    # divide + 2), RSQRT 52 (2 + 16 root steps + 32 divide steps + 2); a run adds 1 cycle.
    # K^T, per sequence: 8 tokens x 32 channels (W 8), 2 row blocks: 1 + 2*8 + 8*8 + 2*32 = 145, x 2
    # softmax: 2 seqs x 2 heads x 8 queries = 32 rows of 8 scores (W 2), in place, whole (it walks fewer
    # cycles than 8 pipelined chunks of 4 rows, 1,480 of the unit's): 1 + 32 * (3 * (2 + 2) + 34) = 1473
    # add: 16 tokens x 32 = 512 codes, one row (W 128): 1 + 130 = 131, x 2
    # layernorm: 16 rows of 32 (W 8): 1 + 16 * (3 * (8 + 2) + 34 + 52) = 1857, x 2
    # gelu: 16 x 64 = 1024 codes, one row (W 256): 1 + 258 = 259
    assert timing.vector == 2 * 145 + 1473 + 2 * 131 + 2 * 1857 + 259  # 5998
    assert timing.total > timing.compute


def test_designs_the_program_cannot_serve_are_refused():
    layer = encoder_layer(workloads.resolve(SMALL))
    with pytest.raises(ModelError, match="no vector unit"):
        compile_encoder(load_design("tiny"), layer)
    with pytest.raises(ModelError, match="weight-stationary"):
        compile_encoder(dataclasses.replace(TINY, dataflow=Dataflow.IS), layer)


def test_a_per_channel_key_requant_is_served():
    """The key GEMM is no longer run transposed, so its output stage may quantise per channel."""
    layer = encoder_layer(workloads.resolve(SMALL))
    per_channel = dataclasses.replace(layer.gemms[1].requant, multiplier=(1 << 30,) * 32, shift=(0,) * 32,
                                      bias=(0,) * 32)
    gemms = list(layer.gemms)
    gemms[1] = dataclasses.replace(gemms[1], requant=per_channel)
    prog = compile_encoder(TINY, dataclasses.replace(layer, gemms=tuple(gemms)))
    assert prog.tensors["q1"].rows * prog.tensors["q1"].row_elems >= 32


@pytest.mark.parametrize("spec", [SMALL, "bert_base:seq=8,d=768,heads=12,ffn=64"])
def test_the_keys_are_transposed_into_every_cell_of_kt_once(spec):
    """Each transpose reads a band of K's rows (one sequence's) and its STORE writes those tokens'
    columns of K^T, one row per channel the band read: together every (channel, token) cell of K^T
    once, from the placed layouts (a band written to another sequence's columns fails). With 768
    channels, 4 rows do not fit tiny's 1,024-word ifmap beside their transpose: pieces of the words."""
    layer = encoder_layer(workloads.resolve(spec))
    prog = compile_encoder(TINY, layer)
    t = prog.tensors
    cmds = list(prog.commands)
    lanes = TINY.vector_lanes
    cells = []
    for i, c in enumerate(cmds):
        if c.opcode != Opcode.VECTOR or c["vkind"] != 13:
            continue
        load, store = cmds[i - 1], cmds[i + 2]
        assert load.opcode == Opcode.LOAD and _inside(t["K"], load["dram_addr"])
        assert store.opcode == Opcode.STORE and _inside(t["KT"], store["dram_addr"])
        first, byte = divmod(load["dram_addr"] - t["K"].base, t["K"].pitch)  # the band's first token, channel
        assert (c["vrows"], c["vn"]) == (load["rows"], store["rows"]) and store["rows"] <= load["words"] * lanes
        assert (store["dram_addr"] - t["KT"].base) // t["KT"].pitch == byte  # its channels' rows
        for r in range(store["rows"]):
            row, col = divmod(store["dram_addr"] + r * store["dram_stride"] - t["KT"].base, t["KT"].pitch)
            assert col == first
            cells += [(row, col + j) for j in range(c["vrows"])]
        assert store["words"] * lanes >= c["vrows"]
    assert sorted(cells) == [(r, j) for r in range(layer.d_model) for j in range(layer.seqs * layer.tokens)]


def test_stacked_layers_run_one_after_another_in_one_program():
    """Two layers: the second layer's projections read the first layer's output y0, the last
    layer's tail writes out; the weights are placed once and the compute is twice one layer's."""
    one = encoder_layer(workloads.resolve("bert_base:seq=8,d=32,heads=2,ffn=64"))
    two = encoder_layer(workloads.resolve("bert_base:seq=8,d=32,heads=2,ffn=64,layers=2"))
    assert two.layers == 2 and two.gemms == one.gemms
    p1, p2 = compile_encoder(TINY, one), compile_encoder(TINY, two)
    t = p2.tensors
    assert "y0" in t and "y1" not in t and "b0" in t and "q3" in t
    loads = [c for c in p2.commands if c.opcode == Opcode.LOAD]
    y0_reads = [c for c in loads if _inside(t["y0"], c["dram_addr"])]
    y0_writes = [c for c in p2.commands if c.opcode == Opcode.STORE and _inside(t["y0"], c["dram_addr"])]
    assert y0_reads and y0_writes
    first_read = p2.commands.index(y0_reads[0])
    assert all(p2.commands.index(c) < first_read for c in y0_writes)
    w1 = perf_model.gemm_program_cycles(TINY, p1, rate=perf_model.dram_rate(TINY))
    w2 = perf_model.gemm_program_cycles(TINY, p2, rate=perf_model.dram_rate(TINY))
    assert w2.compute == 2 * w1.compute and w2.vector == 2 * w1.vector


def _softmax_runs(prog) -> list[tuple[int, int, int]]:
    """Each softmax ``VECTOR`` as ``(first row of S it runs on, rows, causal offset)``: its first row from
    the LOAD before it that placed its input (the last one into the region it reads)."""
    cmds = list(prog.commands)
    s = prog.tensors["S"]
    out = []
    for i, c in enumerate(cmds):
        if c.opcode != Opcode.VECTOR or c["vkind"] != 9:
            continue
        load = next(x for x in reversed(cmds[:i]) if x.opcode == Opcode.LOAD and x["buf_addr"] == c["vsrc"])
        offset = cmds[i + 1]["vp5"] - (1 << 32 if cmds[i + 1]["vp5"] >> 31 else 0)
        out.append(((load["dram_addr"] - s.base) // s.pitch, c["vrows"], offset))
    return out


def test_a_head_too_long_for_the_ifmap_runs_its_softmax_in_bands_of_queries():
    """On tiny (1,024 ifmap words) a head of 80 queries of 20 words does not fit: its rows run in
    bands (pipelined in the ifmap's halves, as the softmax's own program runs them), every row of the
    2 heads once; with a causal mask no band crosses a head and each band's offset moves by its
    first query."""
    layer = encoder_layer(workloads.resolve("bert_base:seq=80,d=32,heads=2,ffn=64"))
    causal = dataclasses.replace(layer.softmax, params=tuple((k, 3 if k == "causal_offset" else v)
                                                             for k, v in layer.softmax.params))
    for softmax in (layer.softmax, causal):
        runs = _softmax_runs(compile_encoder(TINY, dataclasses.replace(layer, softmax=softmax)))
        assert len(runs) > 2 and max(rows for _, rows, _ in runs) < 80  # bands, not whole heads
        covered = sorted(r for first, rows, _ in runs for r in range(first, first + rows))
        assert covered == list(range(160))
        for first, rows, offset in runs:
            if softmax is causal:
                assert first // 80 == (first + rows - 1) // 80 and offset == 3 + first % 80, (first, rows, offset)
            else:
                assert offset == -1


def test_scores_shorter_than_a_word_are_padded_to_whole_words():
    """On edge (16 lanes) 8 keys a row are half a word: S stores each row in a whole word, which
    the softmax LOADs, while the scores' and the context's transfers keep their 8 bytes a row."""
    edge = load_design("edge")
    layer = encoder_layer(workloads.resolve("bert_base:seq=8,d=64,heads=2,ffn=64,batch=2"))
    prog = compile_encoder(edge, layer)
    s = prog.tensors["S"]
    assert (s.row_elems, s.shape) == (16, (2 * 2 * 8, 8))
    cmds = list(prog.commands)
    softmax = [(i, c) for i, c in enumerate(cmds) if c.opcode == Opcode.VECTOR and c["vkind"] == 9]
    assert softmax and all(c["vwords"] == 1 for _, c in softmax)  # a row one whole word
    for i, c in softmax:  # its LOAD: whole rows of S, a word each
        load = next(x for x in reversed(cmds[:i]) if x.opcode == Opcode.LOAD and x["buf_addr"] == c["vsrc"])
        assert (load["dram_addr"] - s.base) % 16 == 0 and load["rows"] * load["words"] == c["vrows"]
        assert load["rows"] == 1 or load["dram_stride"] == 16
    assert sum(c["vrows"] for _, c in softmax) == 2 * 2 * 8
