"""The vectorised conv scorer equals the scalar one, design by design.

``perf_model.compiler.conv_designs`` scores a conv on many designs at once (designs grouped by what a
conv program sees, every unit's tiling picked from one ranking at once, each distinct tiling scored
once, forms compared with numpy); ``conv_search.conv_tilings`` picks the tilings; the evaluator's
overlay (``conv_ops.conv_overlay``) chooses paths and keeps chains with numpy over designs. The
references are the scalar ones: ``conv_figures`` (whose schedule equals the program walk:
``test_model_conv_schedule.py``), ``conv_tiling``, and the overlay's design-by-design loop
(``vectorised=False``).
"""

from __future__ import annotations

import functools
import random

import numpy as np
import pytest

import perf_model
import workloads
from accel_spec.config import ArrayConfig
from perf_model.compiler import conv_search
from perf_model.compiler.conv_designs import INFEASIBLE, NOT_SERVED, ON_CHIP, conv_designs, design_groups
from perf_model.compiler.conv_geometry import _room
from perf_model.compiler.conv_score import conv_figures
from perf_model.compiler.conv_search import conv_tiling, conv_tilings
from perf_model.evaluator import conv_ops, design_ops
from workloads.ops import Conv2d, Requant, Workload

REQUANT = Requant(multiplier=(1 << 30,), shift=(0,))


def _designs(rng: random.Random, arrays: int, per_array: int) -> list[ArrayConfig]:
    """``arrays`` random arrays (every dataflow, both bufferings, paced and unpaced DRAM), each with
    ``per_array`` random buffer sizes (the designs an array group holds)."""
    out = []
    for _ in range(arrays):
        bits = rng.choice([8, 8, 16])
        base = dict(rows=rng.choice([2, 4, 8, 16, 32]), cols=rng.choice([2, 4, 8, 16]),
                    dataflow=rng.choice(["ws", "ws", "ws", "os", "is"]), double_buffered=rng.random() < 0.5,
                    shadow_stationary=rng.random() < 0.5, input_bits=bits,
                    acc_bits=rng.choice([32, 48]) if bits == 8 else 48,
                    dram_bytes_per_cycle=rng.choice([2.0, 8.0, 16.0, 64.0]), clock_mhz=rng.choice([500.0, 1000.0]))
        for _ in range(per_array):
            out.append(ArrayConfig(**base, ifmap_sram_kib=rng.choice([1, 2, 8, 32, 64]),  # type: ignore[arg-type]
                                   weight_sram_kib=rng.choice([1, 4, 16, 64]),
                                   ofmap_sram_kib=rng.choice([1, 2, 8, 32])))
    return out


def _conv(rng: random.Random) -> Conv2d:
    """A random conv: strided, padded, dilated, grouped or depthwise, one or several images."""
    kh, kw = rng.choice([1, 3, 5, 7]), rng.choice([1, 3, 5])
    depthwise = rng.random() < 0.2
    groups = 1 if depthwise else rng.choice([1, 1, 2, 4])
    dil = rng.choice([1, 1, 2])
    channels = rng.randint(1, 40)
    c_in = channels if depthwise else groups * rng.randint(1, 40)
    c_out = c_in if depthwise else groups * rng.randint(1, 40)
    return Conv2d(n=rng.choice([1, 1, 2, 3]), h=rng.randint(dil * (kh - 1) + 1, 24),
                  w=rng.randint(dil * (kw - 1) + 1, 24), c_in=c_in, c_out=c_out,
                  kh=kh, kw=kw, stride_h=rng.randint(1, 2), stride_w=rng.randint(1, 2), pad_h=rng.randint(0, kh // 2),
                  pad_w=rng.randint(0, kw // 2), pad_h_hi=rng.randint(0, kh // 2), pad_w_hi=rng.randint(0, kw // 2),
                  dilation_h=dil, dilation_w=dil, groups=c_in if depthwise else groups,
                  requant=REQUANT if rng.random() < 0.5 else None, name="c")


@pytest.mark.parametrize("seed", range(4))
def test_vectorised_conv_figures_equal_the_scalar_scorer_on_every_design(seed):
    rng = random.Random(seed)
    configs = _designs(rng, arrays=6, per_array=5)
    designs = perf_model.DesignArrays.from_configs(configs)
    groups = design_groups(designs)
    seen = set()
    for _ in range(6):
        conv = _conv(rng)
        requant = conv.requant is not None
        res = conv_designs(groups, conv, requant)
        again = conv_designs(groups, conv, requant)  # the groups' results kept from the first call
        for i, config in enumerate(configs):
            want = conv_figures(config, conv, requant)
            assert res.at(i) == want, (config, conv)
            assert again.at(i) == want, (config, conv)
            seen.add(int(res.status[i]))
        on = res.status == ON_CHIP
        totals = res.column(lambda f: f.total)
        assert np.array_equal(totals[on], [conv_figures(configs[i], conv, requant).total for i in np.flatnonzero(on)])
        assert (totals[~on] == 0).all()
    assert seen == {NOT_SERVED, INFEASIBLE, ON_CHIP}  # every case met


@pytest.mark.parametrize(("few", "direct"), [(0, 0), (0, 1 << 40), (1 << 40, 0)], ids=["grid", "direct", "few"])
@pytest.mark.parametrize("seed", range(3))
def test_tilings_of_many_rooms_at_once_equal_the_search_one_design_at_a_time(seed, few, direct, monkeypatch):
    # every way of finding each design's first fitting candidate: the grid of rooms, every ranked
    # candidate on each, the least fitting one unranked
    monkeypatch.setattr(conv_search, "_FEW", few)
    monkeypatch.setattr(conv_search, "_DIRECT", direct)
    rng = random.Random(100 + seed)
    configs = [c for c in _designs(rng, arrays=4, per_array=12) if c.dataflow.value == "ws"]
    for _ in range(4):
        conv = _conv(rng)
        requant = conv.requant is not None
        by_array: dict[tuple, list[ArrayConfig]] = {}
        for c in configs:
            by_array.setdefault((c.rows, c.cols, c.input_bits, c.acc_bits, c.double_buffered, c.shadow_stationary,
                                 c.dram_bytes_per_cycle), []).append(c)
        for group in by_array.values():
            rooms = np.array([_room(c) for c in group], dtype=np.int64)
            index, tilings = conv_tilings(group[0], conv, rooms, requant=requant)
            for c, i in zip(group, index.tolist(), strict=True):
                want = conv_tiling(c, conv, requant=requant)
                assert (tilings[i] if i >= 0 else None) == (want if want.feasible else None), (c, conv)


@pytest.mark.parametrize("seed", range(6, 13))  # seeds 206, 207, 210-212 meet ties on estimate and bytes
def test_the_least_fitting_candidate_unranked_is_the_first_of_the_ranking(seed, monkeypatch):
    # a group of few designs finds its tilings before any ranking is made (``_first_ranked``): by
    # the ranking's keys in turn (estimate, DRAM bytes, run cycles, index), ties included
    monkeypatch.setattr(conv_search, "_FEW", 1 << 40)
    rng = random.Random(200 + seed)
    configs = [c for c in _designs(rng, arrays=4, per_array=6) if c.dataflow.value == "ws"]
    for _ in range(4):
        conv = _conv(rng)
        requant = conv.requant is not None
        for c in configs:
            conv_search._RANKINGS.clear()
            index, tilings = conv_tilings(c, conv, np.array([_room(c)], dtype=np.int64), requant=requant)
            assert not conv_search._RANKINGS  # found without ranking
            want = conv_tiling(c, conv, requant=requant)
            assert (tilings[index[0]] if index[0] >= 0 else None) == (want if want.feasible else None), (c, conv)


def _resnet_block() -> Workload:
    """Two linked 3x3 convs (a chain) beside a 1x1 conv, requantised."""
    a = Conv2d(n=1, h=8, w=8, c_in=16, c_out=16, kh=3, kw=3, pad_h=1, pad_w=1, requant=REQUANT, name="a")
    b = Conv2d(n=1, h=8, w=8, c_in=16, c_out=16, kh=3, kw=3, pad_h=1, pad_w=1, requant=REQUANT, name="b")
    c = Conv2d(n=1, h=8, w=8, c_in=16, c_out=32, kh=1, kw=1, requant=REQUANT, name="c")
    return Workload(name="block", ops=(a, b, c), counts=(1, 1, 1))


@pytest.mark.parametrize("workload", ["resnet18", "mobilenet_v2", "block"])
def test_the_vectorised_overlay_equals_the_design_by_design_loop(workload, monkeypatch):
    """Paths, figures, notes, infeasible reasons and kept chains: the whole table and every note."""
    rng = random.Random(7)
    configs = _designs(rng, arrays=8, per_array=3)
    configs += [ArrayConfig(rows=r, cols=r, dataflow="ws", ifmap_sram_kib=k, weight_sram_kib=64, ofmap_sram_kib=32,
                            double_buffered=db) for r in (8, 16) for k in (4, 64) for db in (False, True)]
    designs = perf_model.DesignArrays.from_configs(configs)
    wl = _resnet_block() if workload == "block" else workloads.resolve(workload)
    tables = []
    for vectorised in (True, False):
        monkeypatch.setattr(design_ops, "conv_overlay", functools.partial(conv_ops.conv_overlay, vectorised=vectorised))
        tables.append(perf_model.evaluate_designs(designs, wl))
    fast, slow = tables
    for name in ("feasible", "total_cycles", "compute_cycles", "energy_pj", "dram_read_bytes", "dram_write_bytes",
                 "sram_read_bytes", "sram_write_bytes", "utilization"):
        assert np.array_equal(getattr(fast, name), getattr(slow, name), equal_nan=True), name
    assert list(fast.reason) == list(slow.reason)
    assert fast.conv_notes == slow.conv_notes
