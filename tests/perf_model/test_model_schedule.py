"""Traffic and compute: the closed forms against a per-run brute force; totals in bound cases.

Total cycles against the program walk the RTL equals: test_model_fast_walk.py.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from model_testlib import GEMM_OF, reference

import perf_model
import perf_model.evaluator.schedule
from accel_dse.design_files import load_preset
from accel_spec.config import ArrayConfig
from perf_model.evaluator.problem import build_problem
from perf_model.evaluator.schedule import op_cycles, schedule
from perf_model.evaluator.tiling import ORDERS, Tiling
from perf_model.evaluator.transfers import axi_data_bytes, memory_arrays
from workloads.ops import Conv2d, Gemm


def random_config(rng: np.random.Generator) -> ArrayConfig:
    return ArrayConfig(
        rows=int(rng.integers(1, 9)), cols=int(rng.integers(1, 9)), dataflow=["ws", "os", "is"][rng.integers(0, 3)],
        ifmap_sram_kib=int(rng.integers(1, 3)), weight_sram_kib=int(rng.integers(1, 3)),
        ofmap_sram_kib=int(rng.integers(1, 3)), dram_bytes_per_cycle=float(rng.choice([0.5, 2.0, 8.0, 64.0])),
        double_buffered=bool(rng.integers(0, 2)), acc_bits=int(rng.choice([24, 28, 32])),
        shadow_stationary=bool(rng.integers(0, 2)),
    )


def test_default_tilings_match_the_per_run_reference():
    rng = np.random.default_rng(11)
    checked = resident = 0
    for _ in range(250):
        config = random_config(rng)
        gemm = Gemm(m=int(rng.integers(1, 90)), k=int(rng.integers(1, 90)), n=int(rng.integers(1, 90)),
                    batch=int(rng.integers(1, 3)))
        result = perf_model.evaluate_op(config, gemm)
        if result.status != "ok":
            continue
        plan = perf_model.plan_tiles(config, gemm)
        df = perf_model.timing.dataflow_code(config.dataflow)
        order = tuple(GEMM_OF[df].index(d) for d in plan.order)
        expected = reference(df, config.rows, config.cols, {"m": gemm.m, "k": gemm.k, "n": gemm.n},
                             {"m": plan.mt, "k": plan.kt, "n": plan.nt}, order, config.input_bits,
                             config.acc_bits, config.dram_bytes_per_cycle, gemm.batch, config.double_buffered,
                             config.shadow_stationary, plan.resident)
        got = (result.compute_cycles, result.dram_read_bytes, result.dram_write_bytes)
        np.testing.assert_allclose(got, (expected[0], *expected[2:]), rtol=1e-9, err_msg=f"{config} {gemm} {plan}")
        checked += 1
        resident += bool(plan.resident)
    assert checked > 150 and resident > 10  # resident strips among them


@pytest.mark.parametrize("fast", [True, False])
def test_any_tiling_and_order_matches_the_per_run_reference(fast, monkeypatch):
    """Including orders that spill partial sums to DRAM (not used by default, still modelled),
    with the product-form cycles and with per-shape calls of timing.run_cycles."""
    if not fast:
        monkeypatch.setattr(perf_model.evaluator.schedule, "fast_cycles_ok", lambda: False)
    rng = np.random.default_rng(5)
    for _ in range(300):
        df, R, C = int(rng.integers(0, 3)), int(rng.integers(1, 6)), int(rng.integers(1, 6))
        m, k, n = (int(rng.integers(1, 20)) for _ in range(3))
        ab = int(rng.choice([16, 20, 32]))
        shadow = bool(rng.integers(0, 2))
        p = build_problem(np.array([df]), np.array([R]), np.array([C]), np.array([8]), np.array([ab]),
                          np.full((3, 1), 1e9), np.array([[m], [k], [n]]), np.array([shadow]))
        t = np.array([[rng.integers(1, p.D[x, 0] + 1)] for x in range(3)], dtype=float)
        order = int(rng.integers(0, 6))
        tiling = Tiling(feasible=np.array([True]), t=t, order=np.array([order]), traffic=np.zeros(1),
                        resident=np.zeros(1, dtype=bool))
        bw, inst, db = float(rng.choice([0.5, 1.0, 3.0, 16.0])), int(rng.integers(1, 3)), bool(rng.integers(0, 2))
        width = axi_data_bytes(p.R.astype(int), p.C.astype(int), np.array([8]), np.array([bw]))
        memory = memory_arrays(p.df, p.R, p.C, np.array([8]), np.array([ab]), width, np.array([bw]),
                               np.array([False]), p.gemm[2])
        s = schedule(p, tiling, memory, db)
        compute, total = op_cycles(s, np.array([float(inst)]))
        tile = {GEMM_OF[df][x]: int(t[x, 0]) for x in range(3)}
        expected = reference(df, R, C, {"m": m, "k": k, "n": n}, tile, ORDERS[order], 8, ab, bw, inst, db, shadow)
        got = (compute[0], s.dram_read.sum() * inst, s.dram_write.sum() * inst)
        np.testing.assert_allclose(got, (expected[0], *expected[2:]), rtol=1e-9, atol=1e-9)
        # Every transfer and run is a command of the chain: the ping-pong only hides cycles.
        single, double = (schedule(p, tiling, memory, x).total[0] for x in (False, True))
        # (Double buffered can be slower on tiny runs: each store part pays a DRAM round trip.)
        assert compute[0] < total[0] == (double if db else single) * inst


def test_single_run_transfers_by_hand():
    # WS 4x4, everything fits: A 8x4 + B 4x4 int8 in, C 8x4 int32 out = 32 + 16 + 128 bytes.
    for double_buffered in (False, True):
        config = ArrayConfig(rows=4, cols=4, dram_bytes_per_cycle=4.0, double_buffered=double_buffered, dram="none")
        result = perf_model.evaluate_op(config, Gemm(m=8, k=4, n=4))
        assert result.dram_read_bytes == 32 + 16
        assert result.dram_write_bytes == 128
        # One run: load, compute, store in sequence whether or not buffers are doubled. A 4-byte bus,
        # DRAM latency 20; each command costs its unit n + 1 cycles:
        #   fetch of 4 commands (32 beats): 20 + 2 + 32, then 3 + 1 to the first decode     58
        #   LOAD A: 8 rows of one word (4 lanes x 1 B = 1 beat): 20 + 2 + 8, + 1             31
        #   LOAD B: 4 rows of 1 beat: 20 + 2 + 4, + 1                                         27
        #   RUN: compute + 1                                                                    1
        #   STORE C: 8 rows of one word of 4 x 4 B = 4 beats, raw read latency 1:
        #            1 + 20 + 3 + 32, + 1                                                      57
        assert result.stall_cycles == 58 + 31 + 27 + 1 + 57


def test_stalls_overlap_with_double_buffering():
    gemm = Gemm(m=4000, k=600, n=300)
    serial = ArrayConfig(rows=16, cols=16, double_buffered=False, dram_bytes_per_cycle=4.0)
    overlapped = dataclasses.replace(serial, double_buffered=True, ifmap_sram_kib=128, weight_sram_kib=128,
                                     ofmap_sram_kib=128)
    a, b = perf_model.evaluate_op(serial, gemm), perf_model.evaluate_op(overlapped, gemm)
    # Same usable buffer words, so the same tiles and traffic; only the overlap differs.
    assert (a.tile, a.dram_read_bytes) == (b.tile, b.dram_read_bytes)
    assert a.total_cycles > a.compute_cycles + (a.dram_read_bytes + a.dram_write_bytes) / 4.0
    assert b.total_cycles < a.total_cycles
    assert b.total_cycles >= max(b.compute_cycles, (b.dram_read_bytes + b.dram_write_bytes) / 4.0)


def test_memory_bound_fc_on_a_large_array():
    # Batch-1 fully connected layer: every weight is used once, so DRAM bandwidth decides.
    design = dataclasses.replace(load_preset("tpu-v1"), dram_bytes_per_cycle=16.0)
    result = perf_model.evaluate_op(design, Gemm(m=1, k=4096, n=4096, name="fc"))
    weights = 4096 * 4096  # int8
    assert result.dram_read_bytes >= weights
    assert result.stall_cycles > 3 * result.compute_cycles
    assert result.total_cycles == pytest.approx((result.dram_read_bytes + result.dram_write_bytes) / 16.0, rel=0.02)
    assert result.utilization < 0.001


def test_compute_bound_conv_has_few_stalls_with_enough_bandwidth():
    conv = Conv2d(n=8, h=28, w=28, c_in=256, c_out=256, kh=3, kw=3, pad_h=1, pad_w=1, name="conv")
    edge = dataclasses.replace(load_preset("edge"), dram="none")  # per-cycle bandwidth alone, no part's GB/s cap
    im2col = conv.to_gemm()  # the host's im2col GEMM (a WS design runs the conv itself on chip)
    slow = perf_model.evaluate_op(dataclasses.replace(edge, dram_bytes_per_cycle=2.0), im2col)
    fast = perf_model.evaluate_op(dataclasses.replace(edge, dram_bytes_per_cycle=32.0), im2col)
    huge = perf_model.evaluate_op(dataclasses.replace(edge, dram_bytes_per_cycle=1e5), im2col)
    assert slow.stall_cycles > 0.1 * slow.compute_cycles
    on_chip = perf_model.evaluate_op(dataclasses.replace(edge, dram_bytes_per_cycle=2.0), conv)
    assert on_chip.conv_path == "chip" and on_chip.dram_read_bytes < slow.dram_read_bytes / 2
    assert on_chip.stall_cycles < slow.stall_cycles  # the image crosses DRAM about once, not 9 times
    assert fast.stall_cycles < 0.05 * fast.compute_cycles  # fetch, first loads, last store, issue
    # Bandwidth beyond the AXI bus (at most 32 bytes) buys nothing: the RTL moves one beat a cycle.
    assert huge.total_cycles == fast.total_cycles
    assert fast.compute_cycles == slow.compute_cycles
    assert fast.utilization > 0.7


def test_totals_add_up_over_ops():
    # without the vector unit: a design with it also leaks through the unit over the run, which the
    # total charges and the matrix ops' own figures do not
    config = dataclasses.replace(load_preset("edge"), vector_unit=False)
    ops = (Gemm(m=300, k=200, n=100, name="a"), Gemm(m=50, k=700, n=64, batch=4, name="b"),
           Conv2d(n=1, h=14, w=14, c_in=32, c_out=64, kh=3, kw=3, pad_h=1, pad_w=1, name="c"))
    from workloads.ops import Workload

    result = perf_model.evaluate(config, Workload(name="w", ops=ops, counts=(2, 1, 3)))
    total = result.total
    for key in ("compute_cycles", "macs", "folds", "dram_read_bytes", "dram_write_bytes", "energy_pj"):
        assert total[key] == pytest.approx(sum(getattr(op, key) for op in result.ops), rel=1e-12), key
    assert total["total_cycles"] == pytest.approx(sum(op.total_cycles for op in result.ops))
    assert total["latency_s"] == pytest.approx(total["total_cycles"] / (config.clock_mhz * 1e6))
    assert total["macs"] == 2 * 300 * 200 * 100 + 4 * 50 * 700 * 64 + 3 * 14 * 14 * 64 * 32 * 9
    assert total["utilization"] == pytest.approx(total["macs"] / (config.rows * config.cols * total["total_cycles"]))
    assert sum(total["energy_breakdown"].values()) == pytest.approx(total["energy_pj"])
    assert total["power_w"] == pytest.approx(total["energy_pj"] * 1e-12 / total["latency_s"])
    assert total["tops_per_w"] == pytest.approx(2 * total["macs"] / (total["energy_pj"] * 1e-12) / 1e12)
