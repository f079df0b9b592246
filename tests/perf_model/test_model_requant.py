"""Requantised outputs in the model (bytes and energy) and accumulator overflow as a status."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from model_testlib import SLOW_MHZ, at_nominal_supply

import perf_model
from accel_spec.config import ArrayConfig
from workloads.ops import Gemm, Requant, Workload

RQ = Requant(multiplier=1 << 30, shift=8)
EDGE = ArrayConfig(rows=16, cols=16, ifmap_sram_kib=128, weight_sram_kib=128, ofmap_sram_kib=128)


def test_requantised_outputs_leave_at_input_bits_and_accumulate_at_acc_bits():
    raw = Gemm(m=64, k=256, n=96, name="fc")
    q = dataclasses.replace(raw, requant=RQ)
    a, b = perf_model.evaluate_op(EDGE, raw), perf_model.evaluate_op(EDGE, q)
    assert a.status == b.status == "ok"
    # one tile holds the whole GEMM: the output is written once, m * n elements
    assert a.dram_write_bytes == 64 * 96 * 4 and b.dram_write_bytes == 64 * 96 * 1
    assert a.dram_read_bytes == b.dram_read_bytes == 64 * 256 + 256 * 96
    # the ofmap buffer still holds 32-bit partial sums: on-chip traffic does not change
    assert b.sram_read_bytes == a.sram_read_bytes and b.sram_write_bytes == a.sram_write_bytes
    assert a.compute_cycles == b.compute_cycles
    assert a.energy_breakdown["output_stage"] == 0
    # 3 bytes less an output element, at lpddr5-x32's 5 pJ/bit (the default part)
    assert b.energy_breakdown["dram"] == pytest.approx(a.energy_breakdown["dram"] - 64 * 96 * 3 * 8 * 5.0)


def test_output_stage_energy_per_element_by_hand():
    # 45 nm: 32-bit multiply 3.1, adds 32 (0.1) + 64 + 3 x 8 bits (power law 0.03 at 8, 0.1 at 32),
    # 447 register bits at 0.1/32 pJ (six stages, 29 = 5 + 3 x 8 bits of shift, zero point and bounds carried
    # through the first four: 35 + 32 + 29, 4 x 32 + 29, 2 + 1 + 2 x 32 + 29, 2 + 32 + 29, then z 11 and the
    # bounds 16, then q 8), and 93 bits read from a 4096 x 93-bit (46.5 KiB) SRAM.
    def add(bits):
        return 0.03 * (bits / 8) ** (math.log(0.1 / 0.03) / math.log(4))

    def sram_per_byte(kib):  # log-log between 32 KiB (20 pJ / 8 B) and 1 MiB (100 pJ / 8 B)
        slope = math.log(100 / 20) / math.log(1024 / 32)
        return 20 / 8 * (kib / 32) ** slope

    registers = (96 + 157 + 96 + 63 + 27 + 8) * 0.1 / 32
    per_element = 3.1 + 0.1 + add(64) + 3 * add(8) + registers + sram_per_byte(4096 * 93 / 8192) * 93 / 8
    op = Gemm(m=10, k=20, n=30, requant=RQ)
    got = perf_model.evaluate_op(at_nominal_supply(dataclasses.replace(EDGE, tech_nm=45)), op).energy_breakdown[
        "output_stage"]
    assert got == pytest.approx(10 * 30 * per_element, rel=1e-9)


@pytest.mark.parametrize(("ib", "ab", "k_max"), [(8, 32, 131071), (8, 16, 1), (8, 24, 511), (16, 48, 131071)])
def test_overflow_bound_is_exact(ib, ab, k_max):
    # the largest sum is k * (2^(b-1))^2 (all operands -2^(b-1)); it must fit 2^(a-1) - 1
    assert k_max * 4 ** (ib - 1) <= 2 ** (ab - 1) - 1 < (k_max + 1) * 4 ** (ib - 1)
    config = ArrayConfig(rows=4, cols=4, input_bits=ib, acc_bits=ab, ifmap_sram_kib=512, weight_sram_kib=512,
                         clock_mhz=SLOW_MHZ)
    fits = perf_model.evaluate_op(config, Gemm(m=1, k=k_max, n=1))
    over = perf_model.evaluate_op(config, Gemm(m=1, k=k_max + 1, n=1, name="big"))
    assert fits.status == "ok"
    assert over.status == "overflow"
    need = ((k_max + 1) * 4 ** (ib - 1)).bit_length() + 1
    assert f"K = {k_max + 1}" in over.reason and f"acc_bits = {ab}" in over.reason
    assert f"needs acc_bits >= {need}" in over.reason and over.reason.startswith("op 'big': accumulator overflow")
    assert over.energy_pj == 0 and over.total_cycles == 0  # never a better score


def test_overflow_in_a_workload_and_in_a_table():
    wl = Workload(name="w", ops=(Gemm(m=8, k=1, n=8, name="tiny"), Gemm(m=8, k=4608, n=8, name="conv")))
    narrow = ArrayConfig(rows=8, cols=8, acc_bits=16)
    result = perf_model.evaluate(narrow, wl)
    assert result.status == "overflow" and result.reason.startswith("op 'conv': accumulator overflow")
    assert [op.status for op in result.ops] == ["ok", "overflow"]
    designs = perf_model.DesignArrays.from_configs([narrow, dataclasses.replace(narrow, acc_bits=32),
                                                    ArrayConfig(rows=256, cols=256, ofmap_sram_kib=1)])
    table = perf_model.evaluate_designs(designs, wl)
    assert table.feasible.tolist() == [False, True, False]
    assert table.overflow.tolist() == [True, False, False]  # the third does not fit its buffers
    assert "acc_bits = 16" in table.reason[0] and "ofmap buffer" in table.reason[2]
    assert np.all(table.energy_pj[[0, 2]] == 0)
