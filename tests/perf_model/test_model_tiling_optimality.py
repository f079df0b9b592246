"""The chosen tiling against an exhaustive search over every legal tiling (tiling_testlib).

Claims held (``perf_model.evaluator.tiling``): a design is infeasible for a GEMM exactly when no legal
tile fits; the chosen tiling is legal, so it never beats the exhaustive optimum; when an
optimal tiling has a single K tile the candidates reach it exactly (those families have no
grid); otherwise the reduction-innermost family grids one outer dim, and the traffic is at
most :func:`tiling_testlib.grid_bound` (7 levels, derived there) times the optimum.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from model_testlib import SLOW_MHZ
from tiling_testlib import exhaustive_optimum, grid_bound, gridded_folds, random_pair, reference_bytes

import perf_model
from accel_spec.config import ArrayConfig
from workloads.ops import Gemm

REL = 1e-9


def check_against_exhaustive(config: ArrayConfig, gemm: Gemm) -> str:
    """Assert the claims for one pair; return which case held ("infeasible", "overflow" (tiles fit,
    the accumulator does not), "exact", "bounded")."""
    best = exhaustive_optimum(config, gemm)
    result = perf_model.evaluate_op(config, gemm)
    label = f"{config} {gemm}"
    if best.legal == 0:
        assert result.status == "infeasible", f"{label}: no legal tile, but the model runs it"
        return "infeasible"
    if gemm.k * 4 ** (config.input_bits - 1) > 2 ** (config.acc_bits - 1) - 1:  # the worst sum overflows
        assert result.status == "overflow", f"{label}: the accumulator can overflow, model says {result.status}"
        return "overflow"
    assert result.status == "ok", f"{label}: {best.legal} legal tilings, model says {result.reason}"
    assert reference_bytes(config, gemm, best.tile, best.order, best.resident) == pytest.approx(best.bytes, rel=REL), \
        label
    got = result.dram_read_bytes + result.dram_write_bytes
    assert got >= best.bytes * (1 - REL), f"{label}: {got} bytes beats every legal tiling ({best.bytes})"
    if best.single_k_bytes <= best.bytes * (1 + REL):
        assert got == pytest.approx(best.bytes, rel=REL), f"{label}: optimum {best.tile} {best.order}"
        return "exact"
    bound = grid_bound(gridded_folds(config, gemm))
    assert got <= bound * best.bytes * (1 + REL), (
        f"{label}: {got / best.bytes:.3f}x the optimum {best.tile} {best.order}, bound {bound:.3f}")
    return "bounded"


@pytest.mark.parametrize("seed", [0, 1])
def test_chosen_tiling_against_every_legal_tiling_on_a_random_sample(seed):
    rng = np.random.default_rng(seed)
    cases = [check_against_exhaustive(*random_pair(rng)) for _ in range(200)]
    # The sample must exercise every branch, the grid-bounded one most of all (about a quarter of
    # the draws have accumulators too narrow for their K: status overflow, no tiling claim).
    assert cases.count("bounded") >= 30 and cases.count("exact") >= 30 and cases.count("infeasible") >= 3


@settings(max_examples=120, deadline=None)
@given(rows=st.sampled_from([1, 2, 3, 4, 8, 16]), cols=st.sampled_from([1, 2, 3, 4, 8, 16]),
       dataflow=st.sampled_from(["ws", "os", "is"]), ib=st.sampled_from([8, 16]), ab_extra=st.integers(0, 32),
       kib=st.tuples(st.integers(1, 2), st.integers(1, 2), st.integers(1, 2)), db=st.booleans(),
       m=st.integers(1, 200), k=st.integers(1, 200), n=st.integers(1, 200))
def test_chosen_tiling_against_every_legal_tiling(rows, cols, dataflow, ib, ab_extra, kib, db, m, k, n):
    config = ArrayConfig(rows=rows, cols=cols, dataflow=dataflow, input_bits=ib, acc_bits=2 * ib + ab_extra,
                         ifmap_sram_kib=kib[0], weight_sram_kib=kib[1], ofmap_sram_kib=kib[2], double_buffered=db,
                         clock_mhz=SLOW_MHZ)
    check_against_exhaustive(config, Gemm(m=m, k=k, n=n))


def test_grid_bound_by_hand():
    # 7 folds: grid 1, 2, 2, 3, 4, 6, 7; b = 5 is served by 4 folds: 2 tiles against 2 -> exact;
    # every count 7, 4, 3, 2, 1 is on the grid, so the bound is 1.
    assert grid_bound(7) == 1.0
    # 201 folds: grid 1, 3, 6, 15, 35, 84, 201; the worst b is 34, served by 15 folds: 14 tiles
    # against 6 (b = 14, served by 6: 34 against 15, is the runner-up).
    assert grid_bound(201) == pytest.approx(14 / 6)
    assert grid_bound(1) == 1.0 and math.isfinite(grid_bound(4096))
