"""simulate runs a whole transformer encoder layer from one program (accel_dse.simulate.dram.encoder):
the projections, every head's scores and context, the softmax, the residual adds, the norms, GELU and
the FFN with no host step between them, the layer's output bit-exact against the integer reference
built here from the JAX references (not from the compiler), total cycles equal to the walk."""

from __future__ import annotations

import dataclasses

import numpy as np

import perf_model
import rtl_gen
import workloads
from accel_dse.design_files import load_design
from accel_dse.simulate import simulate
from accel_spec.config import Dataflow
from tests.simulate.block_testlib import LONG_RUN_SIMULATOR, encoder_layer, integer_steps, spy_references

TINY = dataclasses.replace(load_design("tiny"), vector_unit=True)
SPEC = "bert_base:seq=8,d=32,heads=2,ffn=64,batch=2"  # two sequences of 8 tokens, 2 heads of 16


def _layer_reference(wl, seed: int = 0, layers: int = 1) -> np.ndarray:
    """The layer (``layers`` times, on one set of weights) in integers, written out op by op with the
    JAX softmax/add/norm/GELU definitions (``block_testlib.encoder_layer``)."""
    w, out, run = integer_steps(wl, seed)

    def vec(op, *args):
        return run(op, *args).astype(np.int64)

    x = np.asarray(workloads.reference(wl.ops[0], seed).a).astype(np.int64).reshape(-1, 32)
    for _ in range(layers):
        x = encoder_layer(x, w, lambda a, b, i: out(a @ b, i), vec, wl.vector_ops, tokens=8, heads=2)["out"]
    return x


def test_an_encoder_layer_runs_from_one_program_bit_exact_in_the_walks_cycles(sim_cache, monkeypatch):
    wl = workloads.resolve(SPEC)
    want = _layer_reference(wl)
    from accel_dse.simulate.dram import encoder as _dram_encoder

    def edit(final):
        final["Q"] = final["Q"].copy()
        final["Q"][3, 5] ^= 1  # one wrong expectation inside Q: the intermediates are read back too

    seen = spy_references(monkeypatch, _dram_encoder, edit)
    report = simulate(TINY, SPEC, simulator=LONG_RUN_SIMULATOR, work_dir=sim_cache)
    (op,) = report.ops
    assert op.name == "network" and op.total_cycles_match and op.cycles_total_rtl > 0
    # every other byte of Q, K^T, V, the probabilities, the context and the output is bit-exact
    assert op.mismatches == 1 and op.status == "fail"
    from perf_model.compiler.encoder import compile_encoder, encoder_layer

    t = compile_encoder(TINY, encoder_layer(wl)).tensors
    (bad,) = op.first_mismatches
    assert bad.index[1] * 4096 + bad.index[2] == 3 * t["Q"].pitch + 5  # past Q's base, where the span starts
    assert np.array_equal(seen["final"]["out"], want)  # the checked output is the layer written out above
    assert any(n.startswith("one program for the whole encoder layer") for n in report.notes), report.notes
    figures = perf_model.evaluate(TINY, wl).network  # evaluate's one-program figure is the RTL's total
    assert figures is not None and figures["total_cycles"] == op.cycles_total_rtl and figures["gemms"] == 14
    bad = simulate(TINY, SPEC, simulator="icarus", work_dir=sim_cache, fault=rtl_gen.Fault(1, 2, 14, 1))
    assert bad.ops[0].status == "fail" and bad.ops[0].mismatches > 0


def test_two_stacked_layers_run_from_one_program_bit_exact(sim_cache, monkeypatch):
    """The second layer reads the first's output on chip's terms (through DRAM, no host step): its
    keys are the first layer's output projected and transposed by the vector unit."""
    spec = SPEC.replace("batch=2", "layers=2")
    wl = workloads.resolve(spec)
    from accel_dse.simulate.dram import encoder as _dram_encoder

    spied = spy_references(monkeypatch, _dram_encoder)
    report = simulate(TINY, spec, simulator=LONG_RUN_SIMULATOR, work_dir=sim_cache)
    (op,) = report.ops
    assert op.status == "pass" and op.mismatches == 0 and op.total_cycles_match, report.notes
    assert np.array_equal(spied["final"]["y0"], _layer_reference(wl, layers=1))
    assert np.array_equal(spied["final"]["out"], _layer_reference(wl, layers=2))
    assert any(n.startswith("one program for 2 encoder layers") for n in report.notes), report.notes


def test_a_layer_the_design_cannot_hold_runs_op_by_op_and_says_why():
    """A design without the unit, or IS, never tries; a scaled run says why."""
    from accel_dse.simulate.dram.encoder import encoder_for

    notes: list[str] = []
    assert encoder_for(dataclasses.replace(TINY, dataflow=Dataflow.IS), workloads.resolve(SPEC), 1.0, notes) is None
    assert notes == []
    assert encoder_for(load_design("tiny"), workloads.resolve(SPEC), 1.0, notes) is None
    assert encoder_for(TINY, workloads.resolve(SPEC), 0.5, notes) is None
    assert notes and "scale 0.5" in notes[0]
