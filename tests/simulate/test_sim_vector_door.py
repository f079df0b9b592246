"""Designs whose activations are fp8 or int4 run a transformer encoder layer from one program, their
vector ops on the int8 vector unit behind its door (``accel_spec.vector_door``): bit-exact against a
reference written here (the GEMMs through the format's output stage, every vector op through the
door's conversions written from the formats' bit fields, ``tests.door_testlib``, around the
workload's integer op), total cycles equal to the model's program walk."""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import numpy as np
import pytest

import perf_model
import workloads
from accel_dse.design_files import load_design
from accel_dse.simulate import simulate
from tests.door_testlib import door_in, door_out
from tests.simulate.block_testlib import (
    RESIDUAL_BLOCK,
    VECTOR_KINDS,
    VECTOR_RUNS,
    encoder_layer,
    integer_steps,
    spy_references,
)

SPEC = "bert_base:seq=16,d=32,heads=2,ffn=64"  # 16 tokens, 2 heads of 16, the FFN 64 wide
# edge's 28 nm buffers and clock on an 8 x 8 array: 8 lanes at the door (the 4 x 4 designs below have 4);
# edge's own 16 x 16 costs Icarus 2.4x the CPU time on this layer (97 against 40 CPU-s, one case, load ~8)
FP8_EDGE8 = dataclasses.replace(load_design("edge"), rows=8, cols=8, acc_bits=48, weight_format="fp8_e4m3",
                                act_format="fp8_e4m3")
INT4_TINY = dataclasses.replace(load_design("tiny-vector"), weight_format="int4", act_format="int4")


def _layer(design, wl, door_in_fn, door_out_fn, seed: int = 0) -> dict[str, np.ndarray]:
    """The layer's tensors on ``design`` (activation codes), op by op (``block_testlib.encoder_layer``),
    with the door ``door_in_fn`` / ``door_out_fn`` around each vector op (a transpose moves codes)."""
    ops = wl.ops
    fmt = design.act_fmt
    _, _, run = integer_steps(wl, seed)
    if fmt.is_int:
        bits = {"bits": 8, "weight_bits": 4, "act_bits": 4}

        def gemm(a, b, i):
            rq = workloads.narrow_outputs(ops[i], 4, 4).requant
            return np.asarray(workloads.output_stage(a @ b, rq)).astype(np.int64)
    else:
        bits = {"number_format": fmt.name}

        def gemm(a, b, i):
            op = workloads.float_outputs(ops[i])
            return np.asarray(workloads.float_result(op, 0, a.astype(np.int8), b.astype(np.int8),
                                                     fmt.name)[1]).astype(np.int64)

    def vec(op, *args):
        return door_out_fn(np.asarray(run(op, *(door_in_fn(a) for a in args))).astype(np.int64))

    def w(i):
        return np.asarray(workloads.reference(ops[i], seed + i, **bits).b).astype(np.int64).reshape(ops[i].k, -1)

    x = np.asarray(workloads.reference(ops[0], seed, **bits).a).astype(np.int64).reshape(-1, 32)
    layer = encoder_layer(x, w, gemm, vec, wl.vector_ops, tokens=16, heads=2)
    layer["S"] = layer["S"].reshape(-1, 16)  # as the program writes them: a row per (head, query)
    return layer


def _run(design, sim_cache, monkeypatch):
    from accel_dse.simulate.dram import encoder as _dram_encoder

    seen = spy_references(monkeypatch, _dram_encoder)
    report = simulate(design, SPEC, simulator="icarus", work_dir=sim_cache)
    return report, seen["final"]


@pytest.mark.parametrize("design", [FP8_EDGE8, INT4_TINY], ids=["fp8_e4m3-edge8x8", "int4-tiny"])
def test_a_layer_runs_from_one_program_through_the_vector_units_door(design, sim_cache, monkeypatch):
    wl = workloads.resolve(SPEC)
    name = design.act_fmt.name
    report, seen = _run(design, sim_cache, monkeypatch)
    (op,) = report.ops
    assert op.name == "network" and op.status == "pass" and op.mismatches == 0, (op.first_mismatches, report.notes)
    assert any(n.startswith("one program for the whole encoder layer") for n in report.notes), report.notes
    figures = perf_model.evaluate(design, wl).network  # the model's program walk is the RTL's total
    assert figures is not None and op.total_cycles_match and figures["total_cycles"] == op.cycles_total_rtl > 0
    want = _layer(design, wl, lambda a: door_in(a, name), lambda q: door_out(q, name))
    for tensor in ("Q", "K", "S", "ctx", "out"):  # what the RTL wrote is the layer written out above
        assert np.array_equal(seen[tensor], want[tensor]), tensor
    # the door decides the result: with another rounding into the unit (fp8: ties up, not to even) or
    # without the door (int4: the int8 ops on the int4 values, saturated), the layer would differ
    if name == "int4":
        other = _layer(design, wl, lambda a: a, lambda q: np.clip(q, -8, 7))
    else:
        other = _layer(design, wl, lambda a: door_in(a, name, lambda v: math.floor(v + Fraction(1, 2))),
                       lambda q: door_out(q, name))
    assert not np.array_equal(other["out"], want["out"])
    # the data is not degenerate: the probabilities and the output take many codes
    int4 = name == "int4"
    assert len(np.unique(want["S"])) > (2 if int4 else 8) and len(np.unique(want["out"])) > (5 if int4 else 30)


FP8_TINY = dataclasses.replace(load_design("tiny-vector"), acc_bits=48, weight_format="fp8_e4m3",
                               act_format="fp8_e4m3")
BF16_TINY = dataclasses.replace(load_design("tiny-vector"), weight_format="bf16", act_format="bf16",
                                clock_mhz=250.0)  # the bf16 PE's f_max at 45 nm is below tiny's 500 MHz


@pytest.mark.parametrize("design", [FP8_TINY, INT4_TINY, BF16_TINY], ids=["fp8_e4m3", "int4", "bf16"])
def test_every_vector_kind_runs_behind_the_door_bit_exact_in_the_walks_cycles(design, sim_cache):
    """Each vector op of tests.simulate.test_sim_vector's workload (GELU, LayerNorm, a causal softmax,
    gated SiLU, RoPE with its table, max and average pooling) from its own program on random codes of
    the format (bf16: 2-byte elements, the RoPE table's bytes sign-extended in them), against the
    door's reference (``workloads.vector_door``, checked against the hand
    rules in tests/rtl_gen/test_rtl_vector_door.py)."""
    report = simulate(design, VECTOR_KINDS, simulator="icarus", work_dir=sim_cache)
    by_name = {op.name: op for op in report.ops}
    assert set(by_name) == {"proj", *VECTOR_RUNS}
    for name in ("proj", *VECTOR_RUNS):
        op = by_name[name]
        assert op.status == "pass" and op.mismatches == 0, (name, op.reason)
        assert op.total_cycles_match and op.cycles_total_rtl > 0


@pytest.mark.parametrize("design", [FP8_TINY, INT4_TINY, BF16_TINY], ids=["fp8_e4m3", "int4", "bf16"])
def test_a_residual_block_with_its_links_runs_from_one_program_behind_the_door(design, sim_cache):
    """x -> up -> GELU -> down -> add(x) (accel_dse.simulate.dram.network): the link ops read and
    write the format's codes in the ifmap, through the door."""
    report = simulate(design, RESIDUAL_BLOCK, simulator="icarus", work_dir=sim_cache)
    (op,) = report.ops
    assert op.name == "network" and op.status == "pass" and op.mismatches == 0, (op.reason, report.notes)
    assert op.total_cycles_match and report.network is not None and report.network["final_output"]["match"]


def test_a_llama_decode_block_runs_from_one_program_on_fp8(sim_cache):
    """llama_decode (RMSNorm, RoPE whose table passes the door raw, the causal softmax, SiLU-gated FFN)
    from one program on the 4x4 fp8_e4m3 design: every tensor it writes bit-exact against the
    reference behind the door, RTL total == the model's walk."""
    spec = "llama_decode:kv=12,d=64,heads=2,ffn=96,batch=2"
    report = simulate(FP8_TINY, spec, simulator="icarus", work_dir=sim_cache)
    (op,) = report.ops
    assert op.name == "network" and op.status == "pass" and op.mismatches == 0, (op.reason, report.notes)
    assert any(n.startswith("one program for the whole decoder block") for n in report.notes), report.notes
    figures = perf_model.evaluate(FP8_TINY, workloads.resolve(spec)).network
    assert figures is not None and op.total_cycles_match and figures["total_cycles"] == op.cycles_total_rtl > 0
