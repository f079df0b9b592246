"""Compute cycles by hand, per dataflow: the model must equal the RTL timing contract exactly.

Expected values are written out from the contract's formulas in ``perf_model.timing``'s
docstring: plain ``folds * (Ds + 2R + C - 2 + FOLD_OVERHEAD) + RUN_OVERHEAD`` (reading only its
two constants, so a change of constants is followed and a change of formula is caught), and
with shadow registers ``1 + (F - 1) * max(Ds, R, 2) + Ds + 2R + C`` (WS/IS) and
``1 + F * max(Ds, R, 2) + 2R + C + 1`` (OS), as numbers.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from model_testlib import hand_run_cycles

import perf_model
from accel_spec.config import ArrayConfig
from perf_model import timing
from perf_model.evaluator import schedule
from perf_model.evaluator.problem import buffer_words, build_problem
from perf_model.evaluator.tiling import contract_words, tile_words
from workloads.ops import Conv2d, Gemm

FO, RO = timing.FOLD_OVERHEAD, timing.RUN_OVERHEAD
BIG = dict(ifmap_sram_kib=256, weight_sram_kib=256, ofmap_sram_kib=256)


def cfg(rows: int, cols: int, dataflow: str, **kw) -> ArrayConfig:
    """A design with big buffers, plain PEs unless ``shadow_stationary=True`` is given."""
    return ArrayConfig(rows=rows, cols=cols, dataflow=dataflow, **{**BIG, "shadow_stationary": False, **kw})


@pytest.mark.parametrize(
    ("dataflow", "m", "k", "n", "expected"),
    [
        # WS: K on rows, N on columns, M streamed: 1 fold, 8 rows streamed through a 4x4 array.
        ("ws", 8, 4, 4, 1 * (8 + 2 * 4 + 4 - 2 + FO) + RO),
        # OS: M on rows, N on columns, K streamed.
        ("os", 4, 8, 4, 1 * (8 + 2 * 4 + 4 - 2 + FO) + RO),
        # IS: K on rows, M on columns, N streamed.
        ("is", 4, 4, 8, 1 * (8 + 2 * 4 + 4 - 2 + FO) + RO),
        # Edge folds: K = 6 -> 2 row folds, N = 7 -> 2 column folds, each fold full cost.
        ("ws", 5, 6, 7, 4 * (5 + 2 * 4 + 4 - 2 + FO) + RO),
        ("os", 6, 5, 7, 4 * (5 + 2 * 4 + 4 - 2 + FO) + RO),
        ("is", 7, 6, 5, 4 * (5 + 2 * 4 + 4 - 2 + FO) + RO),
        # GEMM smaller than the array.
        ("ws", 3, 2, 1, 1 * (3 + 2 * 4 + 4 - 2 + FO) + RO),
        # m = k = n = 1.
        ("ws", 1, 1, 1, 1 * (1 + 2 * 4 + 4 - 2 + FO) + RO),
        ("os", 1, 1, 1, 1 * (1 + 2 * 4 + 4 - 2 + FO) + RO),
        ("is", 1, 1, 1, 1 * (1 + 2 * 4 + 4 - 2 + FO) + RO),
    ],
)
def test_single_run_cycles_by_hand(dataflow, m, k, n, expected):
    result = perf_model.evaluate_op(cfg(4, 4, dataflow), Gemm(m=m, k=k, n=n))
    assert result.status == "ok"
    assert result.compute_cycles == expected
    plan = perf_model.plan_tiles(cfg(4, 4, dataflow), Gemm(m=m, k=k, n=n))
    assert (plan.mt, plan.kt, plan.nt) == (m, k, n)  # everything fits: one run


def test_non_square_array_by_hand():
    # OS on 2 x 3: M = 5 on rows -> 3 folds, N = 4 on columns -> 2 folds, K = 7 streamed.
    result = perf_model.evaluate_op(cfg(2, 3, "os"), Gemm(m=5, k=7, n=4))
    assert result.compute_cycles == 6 * (7 + 2 * 2 + 3 - 2 + FO) + RO
    assert result.folds == 6


def test_instances_multiply():
    one = 1 * (8 + 2 * 4 + 4 - 2 + FO) + RO
    assert perf_model.evaluate_op(cfg(4, 4, "ws"), Gemm(m=8, k=4, n=4, batch=3)).compute_cycles == 3 * one
    assert perf_model.evaluate_op(cfg(4, 4, "ws"), Gemm(m=8, k=4, n=4, batch=3), count=2).compute_cycles == 6 * one


def test_conv_runs_as_its_im2col_gemm():
    conv = Conv2d(n=1, h=6, w=6, c_in=2, c_out=5, kh=3, kw=3, pad_h=1, pad_w=1)
    # im2col: m = 36 output pixels, k = 2 * 9 = 18, n = 5; WS on 4 x 4: ceil(18/4) * ceil(5/4) = 10 folds.
    expected = 10 * (36 + 2 * 4 + 4 - 2 + FO) + RO
    assert perf_model.evaluate_op(cfg(4, 4, "ws"), conv).compute_cycles == expected


@pytest.mark.parametrize(
    ("dataflow", "rows", "cols", "m", "k", "n", "expected"),
    [
        # WS 4x4, K = 12 -> 3 row folds, N = 4, Ds = M = 9 > R: 1 + 2 * 9 + 9 + 8 + 4.
        ("ws", 4, 4, 9, 12, 4, 1 + 2 * 9 + 9 + 8 + 4),
        # Ds = 1 < R = 4: each fold after the first costs R (the next load): 1 + 5 * 4 + 1 + 8 + 4.
        ("ws", 4, 4, 1, 8, 12, 1 + 5 * 4 + 1 + 8 + 4),
        # IS: K on rows (2 folds), M on columns (3 folds), N = 6 streamed on a 3x2 array.
        ("is", 3, 2, 6, 6, 6, 1 + 5 * 6 + 6 + 6 + 2),
        # OS 4x4: M = 8 (2 folds), N = 4, K = 3 streamed: slots of R = 4, then 1 + 2R + C.
        ("os", 4, 4, 8, 3, 4, 1 + 2 * 4 + 8 + 4 + 1),
        ("os", 2, 3, 5, 7, 4, 1 + 6 * 7 + 4 + 3 + 1),  # 3 x 2 folds, Ds = 7 > R
        # one fold: WS the plain formula, OS one more (the capture stage)
        ("ws", 4, 4, 8, 4, 4, 1 + 8 + 8 + 4),
        ("os", 4, 4, 4, 8, 4, 1 + 8 + 8 + 4 + 1),
        # R = 1, Ds = 1: folds at least 2 cycles apart (the ofmap read-modify-write)
        ("ws", 1, 3, 1, 5, 3, 1 + 4 * 2 + 1 + 2 + 3),
    ],
)
def test_shadow_run_cycles_by_hand(dataflow, rows, cols, m, k, n, expected):
    config = cfg(rows, cols, dataflow, shadow_stationary=True)
    result = perf_model.evaluate_op(config, Gemm(m=m, k=k, n=n))
    assert result.status == "ok"
    assert result.compute_cycles == expected
    df = timing.DATAFLOW_CODES[dataflow]
    assert hand_run_cycles(df, rows, cols, m, k, n, True) == expected
    assert int(timing.run_cycles(df, rows, cols, m, k, n, True)) == expected


def test_shadow_registers_overlap_the_decode_gemm():
    """Batch-1 decode on 128 x 128 WS: each fold after the first costs R instead of Ds + 2R + C."""
    big = cfg(128, 128, "ws", weight_sram_kib=4096, ifmap_sram_kib=64, ofmap_sram_kib=64)
    gemm = Gemm(m=1, k=4096, n=4096)
    plain = perf_model.evaluate_op(big, gemm).compute_cycles
    shadow = perf_model.evaluate_op(dataclasses.replace(big, shadow_stationary=True), gemm).compute_cycles
    assert plain == 1024 * (1 + 256 + 128) + perf_model.plan_tiles(big, gemm).compute_cycles() - 1024 * 385
    assert shadow <= 0.4 * plain
    assert shadow >= 1024 * 128  # one fold's load per fold at least


@pytest.mark.parametrize("dataflow", ["ws", "os", "is"])
def test_tiled_op_is_the_sum_over_its_tiles(dataflow):
    # Small buffers force several tiles; the op's cycles are the per-tile formula summed.
    config = ArrayConfig(rows=4, cols=4, dataflow=dataflow, ifmap_sram_kib=1, weight_sram_kib=1,
                         ofmap_sram_kib=1)
    gemm = Gemm(m=300, k=90, n=70)
    plan = perf_model.plan_tiles(config, gemm)
    tiles = list(plan.tiles())
    assert len(tiles) > 1
    df = timing.DATAFLOW_CODES[dataflow]
    expected = sum(hand_run_cycles(df, 4, 4, m1 - m0, k1 - k0, n1 - n0, True) for m0, m1, k0, k1, n0, n1, _ in tiles)
    assert perf_model.evaluate_op(config, gemm).compute_cycles == expected
    assert plan.compute_cycles() == expected


def test_closed_form_words_equal_the_contract():
    rng = np.random.default_rng(7)
    size = 3000
    df = rng.integers(0, 3, size)
    R, C = rng.integers(1, 40, size), rng.integers(1, 40, size)
    gemm = rng.integers(1, 500, (3, size))
    p = build_problem(df, R, C, np.full(size, 8), np.full(size, 32), np.full((3, size), 1e9), gemm)
    t = np.ceil(rng.random((3, size)) * p.D)
    words = tile_words(p, t)  # by free dim r, c, s
    by_buffer = np.empty_like(words)
    np.put_along_axis(by_buffer, p.operand, words, axis=0)
    np.testing.assert_array_equal(by_buffer, np.stack(contract_words(p, t)))


def test_buffer_words_follow_the_contract():
    df, rows, cols = np.array([0, 1, 2]), np.array([4, 8, 16]), np.array([8, 4, 2])
    words = buffer_words(df, rows, cols, np.array([8, 8, 16]), np.array([32, 32, 48]),
                         (np.array([1, 2, 3]), np.array([4, 5, 6]), np.array([7, 8, 9])),
                         np.array([False, True, False]))
    # kib * 8192 bits / (elements per word * bits), halved for double buffering.
    assert words[:, 0].tolist() == [1 * 8192 // (4 * 8), 4 * 8192 // (8 * 8), 7 * 8192 // (8 * 32)]
    assert words[:, 1].tolist() == [2 * 8192 // (8 * 8) // 2, 5 * 8192 // (4 * 8) // 2, 8 * 8192 // (4 * 32) // 2]
    assert words[:, 2].tolist() == [3 * 8192 // (2 * 16), 6 * 8192 // (16 * 16), 9 * 8192 // (2 * 48)]


def test_fast_cycle_path_agrees_with_calling_the_contract(monkeypatch):
    """The product-form fast path and the per-shape calls of timing.run_cycles give equal results."""
    assert schedule.fast_cycles_ok()
    rng = np.random.default_rng(3)
    configs = [ArrayConfig(rows=int(rng.integers(1, 20)), cols=int(rng.integers(1, 20)),
                           dataflow=["ws", "os", "is"][int(rng.integers(0, 3))],
                           ifmap_sram_kib=int(rng.integers(1, 8)), weight_sram_kib=int(rng.integers(1, 8)),
                           ofmap_sram_kib=int(rng.integers(1, 8)), double_buffered=bool(rng.integers(0, 2)))
               for _ in range(40)]
    ops = [(Gemm(m=int(rng.integers(1, 400)), k=int(rng.integers(1, 400)), n=int(rng.integers(1, 400)),
                 batch=int(rng.integers(1, 3))), 1) for _ in range(6)]
    designs = perf_model.DesignArrays.from_configs(configs)
    fast = perf_model.evaluate_designs(designs, ops)
    monkeypatch.setattr(schedule, "fast_cycles_ok", lambda: False)
    slow = perf_model.evaluate_designs(designs, ops)
    assert fast.feasible.any()
    for f in dataclasses.fields(fast):
        if f.name in ("reason", "conv_notes"):
            assert getattr(fast, f.name) == getattr(slow, f.name), f.name
            continue
        if f.name == "energy_breakdown":
            continue
        np.testing.assert_allclose(getattr(fast, f.name), getattr(slow, f.name), rtol=1e-12, err_msg=f.name)


def test_folds_are_the_contract_folds_summed():
    config = ArrayConfig(rows=4, cols=8, dataflow="is", ifmap_sram_kib=1, weight_sram_kib=1, ofmap_sram_kib=2)
    gemm = Gemm(m=100, k=70, n=90)
    plan = perf_model.plan_tiles(config, gemm)
    expected = sum(math.ceil((k1 - k0) / 4) * math.ceil((m1 - m0) / 8)  # IS: K on rows, M on columns
                   for m0, m1, k0, k1, n0, n1, _ in plan.tiles())
    assert perf_model.evaluate_op(config, gemm).folds == expected
