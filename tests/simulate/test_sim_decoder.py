"""simulate runs a whole LLaMA decoder block from one program (accel_dse.simulate.dram.decoder): the
RMSNorms, the projections, RoPE, the keys transposed on chip, the causal attention over a KV cache
in DRAM, the residual adds and the SwiGLU FFN with no host step between them. The output is
checked against the integer block written out here with numpy head reshapes and the JAX integer
op definitions (not from the compiler's slices), every tensor the program writes bit-exact, total
cycles equal to the walk, and a PE fault fails it."""

from __future__ import annotations

import dataclasses

import numpy as np

import perf_model
import rtl_gen
import workloads
from accel_dse.design_files import load_design
from accel_dse.simulate import simulate
from tests.simulate.block_testlib import LONG_RUN_SIMULATOR, integer_steps, spy_references

TINY = dataclasses.replace(load_design("tiny"), vector_unit=True)
DECODE = "llama_decode:kv=12,d=64,heads=2,ffn=96,batch=2"  # two sequences, one new token each after 12 cached


def _block_reference(wl, cache_k, cache_v, seed: int = 0) -> np.ndarray:
    """The block in integers: ``cache_k``/``cache_v`` ``(batch, kv, heads, dh)``."""
    ops, vec = wl.ops, list(wl.vector_ops)
    b_, kv, heads, dh = cache_k.shape
    d = heads * dh
    w, out, run = integer_steps(wl, seed)

    x = np.asarray(workloads.reference(ops[0], seed).a).astype(np.int64).reshape(b_, -1, d)
    t = x.shape[1]
    h = run(vec[0], x).astype(np.int64)
    q = run(vec[1], out(h @ w(0), 0).reshape(b_, t, heads, dh)).astype(np.int64)
    k = run(vec[2], out(h @ w(1), 1).reshape(b_, t, heads, dh)).astype(np.int64)
    v = out(h @ w(2), 2).reshape(b_, t, heads, dh)
    keys = np.concatenate([cache_k, k], axis=1).transpose(0, 2, 3, 1)  # (batch, head, channel, key)
    values = np.concatenate([cache_v, v], axis=1).transpose(0, 2, 1, 3)  # (batch, head, key, channel)
    scores = out(q.transpose(0, 2, 1, 3) @ keys, 3)
    probs = run(vec[3], scores).astype(np.int64)
    ctx = out(probs @ values, 4).transpose(0, 2, 1, 3).reshape(b_, t, d)
    x1 = run(vec[4], x, out(ctx @ w(5), 5)).astype(np.int64)
    h2 = run(vec[5], x1).astype(np.int64)
    g = run(vec[6], out(h2 @ w(6), 6), out(h2 @ w(7), 7)).astype(np.int64)
    return run(vec[7], x1, out(g @ w(8), 8)).astype(np.int64).reshape(b_ * t, d)


def test_a_decode_step_over_a_kv_cache_runs_from_one_program_bit_exact(sim_cache, monkeypatch):
    wl = workloads.resolve(DECODE)
    from accel_dse.simulate.dram import decoder as _dram_decoder

    def edit(final):
        final["V"] = final["V"].copy()
        final["V"][12, 3] ^= 1  # one wrong expectation in the first sequence's new value row

    seen = spy_references(monkeypatch, _dram_decoder, edit)
    report = simulate(TINY, DECODE, simulator=LONG_RUN_SIMULATOR, work_dir=sim_cache)
    (op,) = report.ops
    assert op.name == "network" and op.total_cycles_match and op.cycles_total_rtl > 0
    assert op.mismatches == 1 and op.status == "fail"  # every other byte the program wrote is bit-exact
    from perf_model.compiler.decoder import compile_decoder, decoder_block

    t = compile_decoder(TINY, decoder_block(wl)).tensors
    (bad,) = op.first_mismatches
    assert t["h"].base + bad.index[1] * 4096 + bad.index[2] == t["V"].base + 12 * t["V"].pitch + 3
    given = seen["given"]
    cache_k = given["K"].reshape(2, 13, 2, 32)[:, :12]
    cache_v = given["V"].reshape(2, 13, 2, 32)[:, :12]
    assert np.array_equal(seen["final"]["out"], _block_reference(wl, cache_k, cache_v))
    assert any(n.startswith("one program for the whole decoder block (decode of one token after a KV cache of 12)")
               for n in report.notes), report.notes
    figures = perf_model.evaluate(TINY, wl).network
    assert figures is not None and figures["total_cycles"] == op.cycles_total_rtl


def test_a_causal_prefill_runs_from_one_program_and_a_fault_fails_it(sim_cache):
    spec = "llama_block:seq=12,d=64,heads=2,ffn=96"
    report = simulate(TINY, spec, simulator=LONG_RUN_SIMULATOR, work_dir=sim_cache)
    (op,) = report.ops
    assert op.status == "pass" and op.mismatches == 0 and op.total_cycles_match, report.notes
    # the fault on a shorter causal prefill (4 tokens, 32 channels: a quarter of the cycles), still one program
    small = "llama_block:seq=4,d=32,heads=2,ffn=64"
    bad = simulate(TINY, small, simulator="icarus", work_dir=sim_cache, fault=rtl_gen.Fault(1, 2, 14, 1))
    assert bad.ops[0].name == "network" and bad.ops[0].status == "fail" and bad.ops[0].mismatches > 0
    assert any(n.startswith("one program for the whole decoder block") for n in bad.notes), bad.notes


def test_a_block_the_design_cannot_hold_runs_op_by_op_and_says_why():
    from accel_dse.simulate.dram.decoder import decoder_for

    notes: list[str] = []
    wl = workloads.resolve(DECODE)
    assert decoder_for(load_design("tiny"), wl, 1.0, notes) is None and notes == []
    assert decoder_for(TINY, wl, 0.5, notes) is None
    assert notes and "scale 0.5" in notes[0]
    assert decoder_for(TINY, workloads.resolve("bert_base:seq=8,d=32,heads=2,ffn=64"), 1.0, notes) is None


def test_a_block_on_an_array_wider_than_its_vector_lanes_is_bit_exact(sim_cache):
    """4 x 8: the unit's words are 4 lanes, the output stage's 8; the scores' rows of 10 keys are
    stored 16 wide, which the softmax walks whole."""
    design = dataclasses.replace(TINY, cols=8)
    report = simulate(design, "llama_decode:kv=9,d=64,heads=2,ffn=96", simulator="icarus", work_dir=sim_cache)
    (op,) = report.ops
    assert op.name == "network" and op.status == "pass" and op.mismatches == 0 and op.total_cycles_match
