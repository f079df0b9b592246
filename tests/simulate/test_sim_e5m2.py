"""fp8_e5m2 operands in the simulator: the chained MLP bit-exact on every dataflow with cycles == model.

An E5M2 design multiplies in float32 and sums in float32 like bf16 (``workloads.formats``): its
reference (``workloads.chained_references(..., number_format="fp8_e5m2", k_folds=...)``) is
checked here against a network computed independently: E5M2 codes decoded from their bit fields
by hand, each fold summed by a scalar float32 loop, the folds added in order, the output scaled,
ReLU'd and converted to E5M2 by ``ml_dtypes`` after a clamp to the largest finite value.
"""

from __future__ import annotations

import dataclasses

import ml_dtypes
import numpy as np
import pytest

import rtl_gen
import workloads
from accel_dse.design_files import load_design
from accel_dse.simulate import simulate
from accel_dse.simulate.run_plan import k_folds, plan_runs
from tests.simulate.float_testlib import network_by_hand
from tests.simulate.test_sim_formats import assert_chain_passes

E5M2 = dataclasses.replace(load_design("tiny"), input_bits=8, acc_bits=32, weight_format="fp8_e5m2",
                           act_format="fp8_e5m2", clock_mhz=200.0)
MLP = "mlp:batch=6,d_in=24,hidden=20,layers=2,d_out=5"
E5M2_MAX = 57344.0


def _value(code: int) -> np.float32:
    """An E5M2 code's value from its fields: sign, 5 exponent bits (bias 15), 2 mantissa bits."""
    code = int(code) & 0xFF
    sign, exp, man = code >> 7, (code >> 2) & 0x1F, code & 3
    assert exp != 0x1F  # Inf/NaN codes are not data
    mag = man * 2.0 ** -16 if exp == 0 else (4 + man) * 2.0 ** (exp - 17)
    return np.float32(-mag if sign else mag)


def _code(x: np.float32) -> int:
    """float32 ``x`` to the E5M2 code: clamped to the largest finite, then one rounding (ml_dtypes)."""
    clamped = np.float32(np.clip(x, -E5M2_MAX, E5M2_MAX))
    code = int(np.array([clamped]).astype(ml_dtypes.float8_e5m2).view(np.uint8)[0])
    return code - 256 if code & 0x80 else code



def test_the_e5m2_reference_network_is_the_one_computed_by_hand():
    ops = [workloads.float_outputs(op) for op in workloads.resolve(MLP).ops]
    folds = [k_folds(E5M2, plan_runs(E5M2, op.to_gemm(), op.name)) for op in ops]
    assert folds[0] == (0, 4, 8, 12, 16, 20)  # WS 4x4: folds of 4 rows
    refs = workloads.chained_references(ops, 0, number_format="fp8_e5m2", k_folds=folds)
    by_hand = network_by_hand(ops, folds, 0, "fp8_e5m2", _value, _code)
    for mine, ref in zip(by_hand, refs, strict=True):
        assert np.array_equal(mine, ref.q)
    codes = set((refs[0].a.astype(np.int64) & 0xFF).reshape(-1).tolist())
    assert {0xFB, 0x7B, 0x01, 0x81, 0x80} <= codes  # +-largest, +-smallest subnormal, -0 in the data
    assert refs[0].q[0, 0] & 0x7F == 0x7B  # max**2 in c[0, 0]: the output saturates
    assert len(np.unique(by_hand[-1])) > 5


@pytest.mark.parametrize("df", ["ws", "os", "is"])
def test_e5m2_mlp_chain_is_bit_exact_with_model_cycles(df, sim_cache):
    design = dataclasses.replace(E5M2, dataflow=df)
    report = simulate(design, MLP, simulator="icarus", work_dir=sim_cache)
    assert_chain_passes(report)
    assert all(op.output_bits == 8 for op in report.ops)


def test_a_fault_injected_e5m2_design_fails(sim_cache):
    report = simulate(E5M2, MLP, simulator="icarus", work_dir=sim_cache, fault=rtl_gen.Fault(1, 2, 24, 1),
                      chain=False)
    assert not report.passed
    assert any(op.status == "fail" and op.mismatches > 0 for op in report.ops)
