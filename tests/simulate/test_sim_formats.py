"""Integer operand formats in the simulator: int4 weights/activations in int8 lanes, bit-exact, cycles == model.

The data's ranges and the int4 network's values are checked against the spec computed here on
Python integers (int4 range, extremes present, outputs clamped to int4), not taken from the code
under test.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

import workloads
from accel_dse.design_files import load_design
from accel_dse.simulate import simulate
from tests.simulate.test_sim_chain import INT32_MAX, INT32_MIN

TINY = load_design("tiny")
MLP = "mlp:batch=6,d_in=24,hidden=20,layers=2,d_out=5"


def _network_by_hand(ops, full, seed: int, wbits: int, abits: int) -> list[np.ndarray]:
    """The int network on Python integers, outputs clamped to the signed ``abits`` range."""
    lo, hi = -(1 << (abits - 1)), (1 << (abits - 1)) - 1
    a = workloads.reference(ops[0], seed, weight_bits=wbits, act_bits=abits).a.astype(np.int64)
    outs = []
    for i, op in enumerate(ops):
        b = workloads.reference(op, seed + i, weight_bits=wbits, act_bits=abits).b.astype(np.int64)
        assert b.min() == -(1 << (wbits - 1)) and b.max() == (1 << (wbits - 1)) - 1  # int4 -8 and 7 present
        acc = a @ b
        rq = op.requant  # narrow_outputs' scale (shift lowered by 8 - wbits) and int range, checked here
        assert all(s == t - (8 - wbits) for s, t in zip(rq.shift, full[i].requant.shift, strict=True))
        assert rq.bounds[0] >= lo and rq.bounds[1] <= hi
        q = np.zeros_like(acc)
        for (r, c), v in np.ndenumerate(acc):
            ch = c if len(rq.bias) > 1 else 0
            x = max(min(int(v) + rq.bias[ch], INT32_MAX), INT32_MIN)
            s = rq.shift[ch if len(rq.shift) > 1 else 0]
            mult = rq.multiplier[ch if len(rq.multiplier) > 1 else 0]
            y = (x * mult + (1 << (30 + s))) >> (31 + s)
            q[r, c] = min(max(y + rq.zero_point, max(rq.bounds[0], lo)), min(rq.bounds[1], hi))
        outs.append(q)
        a = q
    return outs


def assert_chain_passes(report) -> None:
    """Every op of a chained run passes bit-exact with the model's cycles, and so does the network
    (of as many ops as the report holds, at least one)."""
    for op in report.ops:
        assert op.status == "pass", (op.name, op.reason)
        assert op.mismatches == 0 and op.cycles_rtl == op.cycles_model
        assert op.cycles_total_rtl == op.cycles_total_model
    assert report.ops and report.passed
    assert report.network is not None and report.network["passed"] and report.network["ops"] == len(report.ops)


@pytest.mark.parametrize(("df", "wfmt", "afmt"), [("ws", "int4", "int8"), ("os", "int4", "int4"),
                                                  ("is", "int8", "int4")])
def test_int4_mlp_chain_is_bit_exact_with_model_cycles(df, wfmt, afmt, sim_cache):
    design = dataclasses.replace(TINY, dataflow=df, weight_format=wfmt, act_format=afmt)
    report = simulate(design, MLP, simulator="icarus", work_dir=sim_cache)
    assert_chain_passes(report)
    by_hand = check_int_reference(wfmt, afmt)
    assert len(np.unique(by_hand[0])) > 3  # not all saturated


def check_int_reference(wfmt: str, afmt: str) -> list[np.ndarray]:
    """What an integer-format design is checked against is the narrow network computed here on
    Python integers, its outputs inside the activation format's range; returns that network."""
    wbits, abits = int(wfmt[3:]), int(afmt[3:])
    full = [op for op in workloads.resolve(MLP).ops if op.requant is not None]
    ops = [workloads.narrow_outputs(op, abits, wbits) for op in full]
    by_hand = _network_by_hand(ops, full, 0, wbits, abits)
    refs = workloads.chained_references(ops, 0, weight_bits=wbits, act_bits=abits)
    for mine, ref in zip(by_hand, refs, strict=True):
        assert np.array_equal(mine, ref.q)
        assert -(1 << (abits - 1)) <= ref.q.min() and ref.q.max() <= (1 << (abits - 1)) - 1
    return by_hand


def test_int8_data_unchanged_by_the_format_arguments():
    op = workloads.resolve(MLP).ops[0]
    plain, spelt = workloads.reference(op, 3), workloads.reference(op, 3, weight_bits=8, act_bits=8)
    assert np.array_equal(plain.a, spelt.a) and np.array_equal(plain.b, spelt.b)


@pytest.mark.parametrize(("formats", "fault"), [
    ('weight_format = "int4"\nact_format = "int4"\n', "1,2,5,1"),
    # fp8: bit 15 of the product is 2**-3 in value (bit 5 would vanish in the output's rounding)
    ('acc_bits = 48\nclock_mhz = 500\nweight_format = "fp8_e4m3"\nact_format = "fp8_e4m3"\n', "1,2,15,1"),
], ids=["w4a4", "fp8_e4m3"])
def test_fault_injected_narrow_format_design_fails(run_cli, sim_cache, tmp_path, formats, fault):
    path = tmp_path / "narrow.toml"
    path.write_text(f'[design]\nrows = 4\ncols = 4\n{formats}'
                    'ifmap_sram_kib = 4\nweight_sram_kib = 4\nofmap_sram_kib = 8\n')
    code, out, err = run_cli("simulate", "--design", str(path), "--workload", MLP, "--simulator", "icarus",
                             "--inject-fault", fault, "--json", "--work-dir", str(sim_cache))
    assert code == 1, err
    report = json.loads(out)
    assert report["passed"] is False and report["network"]["passed"] is False


def test_unknown_format_in_a_design_file_is_one_line_exit_2(run_cli, tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('[design]\nrows = 4\ncols = 4\nweight_format = "fp9"\n')
    code, out, err = run_cli("simulate", "--design", str(path), "--workload", MLP)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1
    assert "weight_format must be one of int4, int8, int16, fp8_e4m3, fp8_e5m2, bf16, not 'fp9'" in err


@pytest.mark.parametrize(("text", "rule"), [
    ('weight_format = "fp8_e5m2"\nact_format = "fp8_e5m2"\nacc_bits = 64\n',
     "acc_bits must be 32 for fp8_e5m2 operands (a float32 accumulator), not 64"),
    ('weight_format = "fp8_e5m2"\nact_format = "int8"\nacc_bits = 32\n',
     "weight_format fp8_e5m2 with act_format int8: not built, float operands take one format for both"),
    ('weight_format = "bf16"\nact_format = "bf16"\nacc_bits = 48\n',
     "acc_bits must be 32 for bf16 operands (a float32 accumulator), not 48"),
])
def test_a_float_design_is_refused_with_the_rule(run_cli, tmp_path, text, rule):
    path = tmp_path / "float.toml"
    path.write_text("[design]\nrows = 4\ncols = 4\n" + text)
    code, _, err = run_cli("design", "check", str(path))
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert rule in err
