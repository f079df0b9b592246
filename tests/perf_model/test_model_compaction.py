"""The model searches and schedules only the elements whose smallest tile fits: that must change nothing.

``evaluate_block`` gives the others ``unfit_tiling`` and a zero schedule instead of running the
search on them (``perf_model.evaluator.design_ops._tile_and_schedule``). These tests run the search on every
element and check that it gives exactly that where the smallest tile does not fit, and that the
search of one element does not depend on the others beside it.
"""

from __future__ import annotations

import numpy as np
import pytest
from model_testlib import SLOW_MHZ

import perf_model
from perf_model.arrays.designs import DesignArrays
from perf_model.arrays.ops import op_arrays
from perf_model.compiler.scorers import COMPILER_SCORERS
from perf_model.evaluator.design_ops import evaluate_block
from perf_model.evaluator.problem import buffer_words, build_problem
from perf_model.evaluator.tiling import Tiling, choose_tiles, fits_contract, smallest_fits, unfit_tiling
from perf_model.physical.energy import DEFAULT_ENERGY
from perf_model.physical.pe_area import area_coefficients
from workloads.ops import Gemm, Requant


def _problem(rng: np.random.Generator, n: int):
    """Random design-op elements, a good share of them with buffers too small for any tile."""
    df = rng.integers(0, 3, n)
    R, C = rng.integers(1, 129, n), rng.integers(1, 129, n)
    ib = rng.choice([8, 16], n)
    ab = 2 * ib + rng.integers(0, 17, n)
    kib = tuple(rng.integers(1, 65, n) for _ in range(3))
    double = rng.random(n) < 0.5
    buf = buffer_words(df, R, C, ib, ab, kib, double)
    gemm = rng.integers(1, 2500, (3, n))
    return build_problem(df, R, C, ib, ab, buf, gemm, rng.random(n) < 0.5, np.where(rng.random(n) < 0.5, ib, ab))


def _assert_same(got: Tiling, want: Tiling) -> None:
    for name in ("feasible", "t", "order", "traffic", "resident"):
        assert np.array_equal(getattr(got, name), getattr(want, name)), name


@pytest.mark.parametrize("allow_spill", [False, True])
def test_the_search_gives_unfit_tiling_where_the_smallest_tile_does_not_fit(allow_spill):
    p = _problem(np.random.default_rng(5), 6000)
    fits = smallest_fits(p)
    assert 0.2 < fits.mean() < 0.9  # both kinds, many of each
    assert np.array_equal(fits, fits_contract(p, p.mins))  # the closed form is the contract there
    searched = choose_tiles(p, allow_spill=allow_spill)
    unfit = np.flatnonzero(~fits)
    want = unfit_tiling(p.take(unfit), allow_spill=allow_spill)
    got = Tiling(**{name: getattr(searched, name)[..., unfit] for name in ("feasible", "t", "order", "traffic",
                                                                           "resident")})
    _assert_same(got, want)
    # the elements that fit, searched alone, come out as searched among all
    fit = np.flatnonzero(fits)
    alone = choose_tiles(p.take(fit), allow_spill=allow_spill)
    among = Tiling(**{name: getattr(searched, name)[..., fit] for name in ("feasible", "t", "order", "traffic",
                                                                           "resident")})
    _assert_same(alone, among)


def test_a_block_mixing_fitting_and_unfit_ops_equals_each_op_alone():
    """Every per-op figure of a block whose ops partly fit is that of the op evaluated on its own
    (where nothing is skipped for a fitting op, and everything for an unfit one)."""
    rng = np.random.default_rng(8)
    n = 40
    designs = DesignArrays.from_columns(
        rows=rng.choice([8, 32, 128], n), cols=rng.choice([8, 32, 128], n), dataflow=rng.integers(0, 3, n),
        ifmap_sram_kib=rng.choice([1, 4, 64], n), weight_sram_kib=rng.choice([1, 4, 64], n),
        ofmap_sram_kib=rng.choice([1, 4, 64], n), double_buffered=rng.random(n) < 0.5,
        clock_mhz=np.full(n, SLOW_MHZ))
    requant = Requant(multiplier=(1 << 30,), shift=(0,))  # every other op leaves through the output stage
    gemms = [Gemm(m=int(m), k=int(k), n=int(x), requant=requant if i % 2 else None)
             for i, (m, k, x) in enumerate(rng.integers(1, 3000, (6, 3)))]
    ops = [(g, 1) for g in gemms]
    area = area_coefficients()
    block = evaluate_block(designs, op_arrays(ops), DEFAULT_ENERGY, area, scorers=COMPILER_SCORERS)
    assert 0 < block.feasible.mean() < 1
    fields = ("feasible", "compute_cycles", "total_cycles", "boundary_cycles", "folds", "dram_read", "dram_write",
              "sram_read", "sram_write", "latency_s", "tile", "order", "resident")
    for o, op in enumerate(ops):
        alone = evaluate_block(designs, op_arrays([op]), DEFAULT_ENERGY, area, scorers=COMPILER_SCORERS)
        for name in fields:
            assert np.array_equal(getattr(block, name)[..., o], getattr(alone, name)[..., 0]), (name, o)
        for part, values in block.energy.items():
            assert np.array_equal(values[:, o], alone.energy[part][:, 0]), (part, o)
    # and a design none of whose ops fit is a table row with a reason, nothing else
    t = perf_model.evaluate_designs(designs.take(np.flatnonzero(~block.feasible.any(axis=1))), ops)
    assert not t.feasible.any() and all("buffer" in r or "no tile" in r for r in t.reason)
