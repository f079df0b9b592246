"""fp8_e4m3 operands in the simulator: the chained MLP bit-exact on every dataflow with cycles == model.

What the design is checked against (``workloads.chained_references(..., number_format=...)``) is
checked here against a network computed independently: code values decoded by bit fields,
exact sums with ``fractions.Fraction``, the output rounding done by hand (scale, ReLU, clamp to
448, nearest-even on the E4M3 grid), encoded by bit fields.
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import numpy as np
import pytest

import workloads
from accel_dse.design_files import load_design
from accel_dse.simulate import simulate
from tests.simulate.test_sim_formats import assert_chain_passes

FP8 = dataclasses.replace(load_design("tiny"), acc_bits=48, weight_format="fp8_e4m3", act_format="fp8_e4m3")
MLP = "mlp:batch=6,d_in=24,hidden=20,layers=2,d_out=5"


def _value(code: int) -> Fraction:
    """An E4M3 code's value from its bit fields (no NaN code is data)."""
    code &= 0xFF
    sign, exp, mant = code >> 7, (code >> 3) & 0xF, code & 7
    assert (exp, mant) != (15, 7)
    mag = Fraction(mant, 8) * Fraction(2) ** -6 if exp == 0 else (1 + Fraction(mant, 8)) * Fraction(2) ** (exp - 7)
    return -mag if sign else mag


_GRID = sorted({_value(c) for c in range(0x7F)})  # every non-negative finite E4M3 value


def _encode(v: Fraction, negative: bool) -> int:
    """The code of ``v`` (already rounded and clamped), with the sign of the unrounded value."""
    code = next(c for c in range(0x7F) if _value(c) == abs(v))
    return code | (0x80 if negative else 0)


def _round(v: Fraction) -> int:
    """Clamp to +-448, then nearest on the E4M3 grid, ties to the even code; returns the int8 code."""
    mag = min(abs(v), Fraction(448))
    hi = next(g for g in _GRID if g >= mag)
    lo = max(g for g in _GRID if g <= mag)
    if hi - mag < mag - lo:
        pick = hi
    elif mag - lo < hi - mag:
        pick = lo
    else:
        pick = lo if _encode(lo, False) % 2 == 0 else hi
    code = _encode(pick, v < 0)
    return code - 256 if code > 127 else code


def _network_by_hand(ops, seed: int) -> list[np.ndarray]:
    a = [[int(c) for c in row] for row in workloads.reference(ops[0], seed, number_format="fp8_e4m3").a]
    outs = []
    for i, op in enumerate(ops):
        b = workloads.reference(op, seed + i, number_format="fp8_e4m3").b
        rq = op.requant
        q = np.zeros((len(a), b.shape[1]), dtype=np.int64)
        for r in range(len(a)):
            for c in range(b.shape[1]):
                acc = sum(_value(a[r][k]) * _value(int(b[k, c])) for k in range(len(a[r])))
                v = acc * Fraction(2) ** -rq.shift[0]
                if rq.bounds[0] >= 0:
                    v = max(v, Fraction(0))
                q[r, c] = _round(v)
        outs.append(q)
        a = q.tolist()
    return outs


def test_the_fp8_reference_network_is_the_one_computed_by_hand():
    ops = [workloads.float_outputs(op) for op in workloads.resolve(MLP).ops]
    refs = workloads.chained_references(ops, 0, number_format="fp8_e4m3")
    by_hand = _network_by_hand(ops, 0)
    for mine, ref in zip(by_hand, refs, strict=True):
        assert np.array_equal(mine, ref.q)
    first = refs[0]
    codes = set((first.a.astype(np.int64) & 0xFF).reshape(-1).tolist())
    assert {0xFE, 0x7E, 0x01, 0x81, 0x80} <= codes  # -448, 448, +-smallest subnormal, -0 in the data
    assert 0x7E in set((by_hand[0] & 0xFF).reshape(-1).tolist())  # an output saturates to 448
    assert len(np.unique(by_hand[-1])) > 5  # not all saturated or zero


@pytest.mark.parametrize("df", ["ws", "os", "is"])
def test_fp8_mlp_chain_is_bit_exact_with_model_cycles(df, sim_cache):
    design = dataclasses.replace(FP8, dataflow=df)
    report = simulate(design, MLP, simulator="icarus", work_dir=sim_cache)
    assert_chain_passes(report)


def test_fp8_accumulators_and_outputs_checked_through_the_host_port_in_verilator(sim_cache):
    """The MLP's three layers (24 -> 20 -> 20 -> 5) run through the core's host port: each bit-exact
    with the model's cycles, and the network's final output (batch 6 x d_out 5) matches."""
    report = simulate(FP8, MLP, simulator="verilator", work_dir=sim_cache, memory="host")
    assert [(op.gemm["k"], op.gemm["n"]) for op in report.ops] == [(24, 20), (20, 20), (20, 5)]
    assert report.passed
    assert_chain_passes(report)
    final = report.network["final_output"]
    assert report.network["ops"] == 3 and final["match"] and final["mismatches"] == 0 and final["elements"] == 30
