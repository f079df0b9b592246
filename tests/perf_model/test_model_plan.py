"""plan_tiles: the tiles the RTL simulator runs, one start each."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import perf_model
from accel_spec.config import ArrayConfig
from perf_model import timing
from workloads.ops import Conv2d, Gemm


@settings(max_examples=80, deadline=None)
@given(rows=st.integers(1, 16), cols=st.integers(1, 16), dataflow=st.sampled_from(["ws", "os", "is"]),
       kib=st.tuples(st.integers(1, 8), st.integers(1, 8), st.integers(1, 8)), db=st.booleans(),
       m=st.integers(1, 400), k=st.integers(1, 400), n=st.integers(1, 400))
def test_tiles_cover_the_gemm_once_fit_the_buffers_and_accumulate_in_place(rows, cols, dataflow, kib, db, m, k, n):
    config = ArrayConfig(rows=rows, cols=cols, dataflow=dataflow, ifmap_sram_kib=kib[0], weight_sram_kib=kib[1],
                         ofmap_sram_kib=kib[2], double_buffered=db)
    plan = perf_model.plan_tiles(config, Gemm(m=m, k=k, n=n))
    if not plan.feasible:
        assert plan.reason
        return
    covered = np.zeros((m, k, n), dtype=np.int8)
    df = timing.dataflow_code(dataflow)
    elems = timing.word_elems(df, rows, cols)
    capacity = [int(timing.buffer_depth_words(kb, e, b)) // (2 if db else 1)
                for kb, e, b in zip(kib, elems, (8, 8, 32), strict=True)]
    previous = None
    for m0, m1, k0, k1, n0, n1, accumulate in plan.tiles():
        covered[m0:m1, k0:k1, n0:n1] += 1
        words = timing.run_words(df, rows, cols, m1 - m0, k1 - k0, n1 - n0)
        assert all(int(w) <= c for w, c in zip(words, capacity, strict=True))
        assert accumulate == (k0 > 0)
        if accumulate:  # partial sums of this very output tile are in the ofmap buffer
            assert previous is not None and (previous[0], previous[1], previous[4], previous[5]) == (m0, m1, n0, n1)
            assert previous[3] == k0
        previous = (m0, m1, k0, k1, n0, n1)
    assert (covered == 1).all()
    assert plan.compute_cycles() == perf_model.evaluate_op(config, Gemm(m=m, k=k, n=n)).compute_cycles


def test_plan_of_a_conv_is_its_im2col_gemm_and_ignores_batch():
    conv = Conv2d(n=2, h=10, w=10, c_in=8, c_out=16, kh=3, kw=3, groups=2)
    plan = perf_model.plan_tiles(ArrayConfig(rows=4, cols=4), conv)
    g = conv.to_gemm()
    assert (plan.m, plan.k, plan.n) == (g.m, g.k, g.n)
    assert g.batch == 2
    assert perf_model.plan_tiles(ArrayConfig(rows=4, cols=4), Gemm(m=5, k=6, n=7, batch=9)).m == 5


def test_everything_fits_means_one_tile_and_order_has_k_innermost_or_single():
    plan = perf_model.plan_tiles(ArrayConfig(rows=8, cols=8), Gemm(m=50, k=40, n=30))
    assert list(plan.tiles()) == [(0, 50, 0, 40, 0, 30, False)]
    assert sorted(plan.order) == ["k", "m", "n"]


@pytest.mark.parametrize("dataflow", ["ws", "os", "is"])
def test_k_tiles_are_innermost_when_k_is_split(dataflow):
    config = ArrayConfig(rows=4, cols=4, dataflow=dataflow, ifmap_sram_kib=1, weight_sram_kib=1, ofmap_sram_kib=1)
    plan = perf_model.plan_tiles(config, Gemm(m=200, k=3000, n=200))
    assert plan.kt < 3000
    assert plan.order[-1] == "k"
