"""bf16 operands in the simulator: the chained MLP bit-exact on every dataflow with cycles == model.

What the design is checked against (``workloads.chained_references(..., number_format="bf16",
k_folds=...)``) is checked here against a network computed independently: bf16 codes decoded by
shifting them into float32 patterns, each fold summed by a scalar float32 loop, the folds added
in order, the output scaled, ReLU'd and rounded to bf16 by the classic bit trick (nearest even
on the float32 pattern), clamped to the largest finite bf16.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import rtl_gen
import workloads
from accel_dse.design_files import load_design
from accel_dse.simulate import simulate
from accel_dse.simulate.run_plan import k_folds, plan_runs
from tests.simulate.float_testlib import network_by_hand
from tests.simulate.test_sim_formats import assert_chain_passes

BF16 = dataclasses.replace(load_design("tiny"), input_bits=16, acc_bits=32, weight_format="bf16", act_format="bf16",
                           clock_mhz=200.0)  # the bf16 PE closes at ~267 MHz at 45 nm
MLP = "mlp:batch=6,d_in=24,hidden=20,layers=2,d_out=5"
BF16_MAX = 0x7F7F


def _value(code: int) -> np.float32:
    """A bf16 code's value: its 16 bits on top of a float32 pattern."""
    return np.array([(int(code) & 0xFFFF) << 16], dtype=np.uint32).view(np.float32)[0]


def _round(x: np.float32) -> int:
    """float32 ``x`` (scaled, so a float32 here) to the bf16 code: nearest even on the pattern, clamped."""
    bits = int(np.array([x], dtype=np.float32).view(np.uint32)[0])
    sign, mag = bits & 0x80000000, bits & 0x7FFFFFFF
    mag = (mag + 0x7FFF + ((mag >> 16) & 1)) >> 16
    code = (sign >> 16) | min(mag, BF16_MAX)
    return code - 0x10000 if code & 0x8000 else code


def _folds_of(design, ops) -> list[tuple[int, ...]]:
    return [k_folds(design, plan_runs(design, op.to_gemm(), op.name)) for op in ops]



def test_the_bf16_reference_network_is_the_one_computed_by_hand():
    ops = [workloads.float_outputs(op) for op in workloads.resolve(MLP).ops]
    folds = _folds_of(BF16, ops)
    assert folds[0] == (0, 4, 8, 12, 16, 20)  # WS 4x4: folds of 4 rows
    refs = workloads.chained_references(ops, 0, number_format="bf16", k_folds=folds)
    by_hand = network_by_hand(ops, folds, 0, "bf16", _value, _round)
    for mine, ref in zip(by_hand, refs, strict=True):
        assert np.array_equal(mine, ref.q)
    codes = set((refs[0].a.astype(np.int64) & 0xFFFF).reshape(-1).tolist())
    assert {0xFF7F, 0x7F7F, 0x0001, 0x8001, 0x8000} <= codes  # +-largest, +-smallest subnormal, -0 in the data
    assert len(np.unique(by_hand[-1])) > 5
    # the order is part of the result: one ascending chain gives other accumulators on this data
    plain = workloads.chained_references(ops, 0, number_format="bf16")
    assert not np.array_equal(plain[0].c, refs[0].c)


@pytest.mark.parametrize("df", ["ws", "os", "is"])
def test_bf16_mlp_chain_is_bit_exact_with_model_cycles(df, sim_cache):
    design = dataclasses.replace(BF16, dataflow=df)
    report = simulate(design, MLP, simulator="icarus", work_dir=sim_cache)
    assert_chain_passes(report)
    assert all(op.output_bits == 16 for op in report.ops)


def test_a_fault_injected_bf16_design_fails(sim_cache):
    report = simulate(BF16, MLP, simulator="icarus", work_dir=sim_cache, fault=rtl_gen.Fault(1, 2, 20, 1),
                      chain=False)
    assert not report.passed
    assert any(op.status == "fail" and op.mismatches > 0 for op in report.ops)


def test_bf16_k_split_over_runs_accumulates_in_the_ofmap_in_order(sim_cache):
    """K = 302 runs as three K tiles (128, 128, 46) that add in the ofmap in float32, each summed in
    4-row folds by the IS array: the reference with those folds, not one ascending chain. Through
    the host port, so the raw float32 accumulators are compared too (one chain differs in them)."""
    design = dataclasses.replace(BF16, dataflow="is")
    spec = "mlp:batch=4,d_in=302,hidden=8,layers=1,d_out=4"
    op = workloads.resolve(spec).ops[0]
    runs = plan_runs(design, op.to_gemm(), op.name)
    assert sorted({(r[2], r[3]) for r in runs}) == [(0, 128), (128, 256), (256, 302)]
    folds = k_folds(design, runs)
    one_chain = workloads.reference(workloads.float_outputs(op), 0, number_format="bf16")
    ordered = workloads.reference(workloads.float_outputs(op), 0, number_format="bf16", k_folds=folds)
    assert (one_chain.c != ordered.c).sum() > 10  # the order shows in the accumulators
    report = simulate(design, spec, ops=["fc.0"], chain=False, simulator="icarus", work_dir=sim_cache,
                      memory="host")
    assert report.passed and report.ops[0].mismatches == 0
    assert report.ops[0].cycles_rtl == report.ops[0].cycles_model
