"""The schedules of many conv tilings in one batch equal the schedule of each, counted alone.

``perf_model.compiler.conv_batch.batch_schedules`` counts the runs of many tilings in one set of
flat arrays (a segment per tiling); the reference is ``conv_schedule.conv_schedule`` on each
tiling alone (itself equal to the program walk: ``test_model_conv_schedule.py``). The tilings
are random ones of the search's levels, not only the search's pick, so that programs of many
queue-loads, transfers crossing pages, stacked images and packed taps meet in one batch.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
from model_testlib import random_conv, random_conv_batch, random_ws_design

from accel_spec.config import ArrayConfig
from accel_spec.isa import QUEUE_DEPTH, store_read_latency
from perf_model import dma_timing
from perf_model.compiler import conv_batch, conv_search
from perf_model.compiler.conv_batch import batch_schedules
from perf_model.compiler.conv_candidates import stacked_candidates
from perf_model.compiler.conv_geometry import ConvTiling, _Geometry, _levels, _tap_levels
from perf_model.compiler.conv_schedule import ConvSchedule, RunArrays, conv_schedule, streams, unstalled
from perf_model.compiler.conv_score import tiling_figures, tilings_figures
from perf_model.compiler.conv_search import conv_tiling
from perf_model.compiler.program import PAGE
from perf_model.program_timing import DEFAULT_DRAM_LATENCY, OUTSTANDING, dram_rate
from workloads.ops import Conv2d

Item = tuple[_Geometry, ConvTiling, bool]


def _figures(s: ConvSchedule) -> tuple[object, ...]:
    return s.total, s.compute, s.read, s.written, s.folds, s.sram_read, s.sram_write, s.tile


def _random_tiling(rng: random.Random, g: _Geometry) -> ConvTiling:
    """A tiling of random levels (``conv_search``'s: output rows or whole images, filters in whole
    columns, channel words, taps), either loop order; its buffers are not checked (the schedule
    does not read them)."""
    words = max(-(-g.cpg // g.R), g.words)
    return ConvTiling("ok", "", rows_t=rng.choice(g.row_levels()), n_t=rng.choice(_levels(g.N, min(g.C, g.N))),
                      c_t=rng.choice(_levels(words)), taps_t=rng.choice(_tap_levels(g.conv.kh, g.kw)),
                      order=rng.choice(["mn", "nm"]))


def _items(rng: random.Random, count: int) -> list[Item]:
    """``count`` random (geometry, tiling, requant) on unpaced WS designs, convs of one image or several."""
    out: list[Item] = []
    while len(out) < count:
        config = random_ws_design(rng)
        if dram_rate(config) is not None:
            continue
        pick = rng.random()
        conv = random_conv(rng) if pick < 0.6 else random_conv_batch(rng) if pick < 0.85 else _narrow_conv(rng)
        g = _Geometry(config, conv)
        out.append((g, _random_tiling(rng, g), conv.requant is not None))
    return out


def _narrow_conv(rng: random.Random) -> Conv2d:
    """A conv of few input channels and filters, one tap a word (a 1x1 or a dilated kernel): its
    weight loads read a tap's first rows only (``_Geometry.kl``)."""
    k, dil = rng.choice([(1, 1), (3, 2)])
    return Conv2d(n=1, h=rng.randint(2 * k, 20), w=rng.randint(2 * k, 20), c_in=rng.randint(1, 3),
                  c_out=rng.randint(1, 4), kh=k, kw=k, dilation_h=dil, dilation_w=dil, pad_h=k // 2, pad_w=k // 2,
                  name="c")


class _Seen:
    """What a batch held: its tilings' kinds, and the transfers the closed form left to the recurrence."""

    def __init__(self, items: list[Item]) -> None:
        self.kinds = {"double": 0, "single": 0, "requant": 0, "groups": 0, "packed": 0, "stacked": 0, "nm": 0,
                      "queue_loads": 0, "narrow_weights": 0}
        for g, t, requant in items:
            self.kinds["double" if g.config.double_buffered else "single"] += 1
            self.kinds["requant"] += requant
            self.kinds["groups"] += g.conv.groups > 1
            self.kinds["packed"] += g.pack > 0
            self.kinds["stacked"] += t.rows_t > g.out_h
            self.kinds["nm"] += t.order == "nm"
            self.kinds["narrow_weights"] += g.kl < g.R
            r = RunArrays(g, t, requant)
            self.kinds["queue_loads"] += r.runs * 2 + int(r.new_band.sum() + r.new_w.sum()) > QUEUE_DEPTH


@pytest.mark.parametrize("seed", range(4))
def test_a_batch_of_random_tilings_equals_each_schedule_alone(seed, monkeypatch):
    rng = random.Random(900 + seed)
    items = _items(rng, 200)
    recurrences = []
    real = conv_batch._Transfers.cycles

    def spy(self, kind, addr, stride, rows, words, per_word=0):
        recurrences.append(kind)
        return real(self, kind, addr, stride, rows, words, per_word)

    monkeypatch.setattr(conv_batch._Transfers, "cycles", spy)
    got = batch_schedules(items)
    monkeypatch.undo()
    assert len(got) == len(items)
    for (g, t, requant), fast in zip(items, got, strict=True):
        ref = conv_schedule(g, t, requant)
        assert ref is not None
        assert _figures(fast) == _figures(ref), f"{g.config} {g.conv} {t} requant={requant}"
    seen = _Seen(items).kinds
    assert min(seen.values()) >= 3, seen
    # transfers crossing a page (or longer than a burst), loads and stores, went to the recurrence
    assert {"ifmap", "weight"} & set(recurrences) and {"store", "store_q"} & set(recurrences), set(recurrences)


def test_a_tilings_schedule_does_not_depend_on_its_neighbours_in_the_batch():
    """Each tiling alone, then each twice in a row in one batch, in order and reversed: the same
    figures (a tiling's first run compared with its twin's last, whose keys are all alike, or a sum
    read across two tilings, would differ)."""
    items = _items(random.Random(77), 40)
    alone = [_figures(batch_schedules([item])[0]) for item in items]
    twice = [item for item in items for _ in range(2)]
    forward = [_figures(s) for s in batch_schedules(twice)]
    backward = [_figures(s) for s in batch_schedules(twice[::-1])][::-1]
    assert forward == backward == [f for f in alone for _ in range(2)]
    assert batch_schedules([]) == []


def test_batched_figures_equal_the_scalar_figures_paced_designs_included():
    """``tilings_figures`` (the batch, a paced design walked) equals ``tiling_figures`` one by one,
    repeated items included."""
    rng = random.Random(5)
    conv = Conv2d(n=1, h=14, w=14, c_in=24, c_out=40, kh=3, kw=3, pad_h=1, pad_w=1, name="c")
    paced = ArrayConfig(rows=8, cols=8, dataflow="ws", dram_bytes_per_cycle=6.0, ifmap_sram_kib=8,
                        weight_sram_kib=8, ofmap_sram_kib=8)
    assert dram_rate(paced) is not None
    items = [(g.config, g.conv, requant, t) for g, t, requant in _items(rng, 30)]
    items += [(paced, conv, requant, conv_tiling(paced, conv, requant=requant)) for requant in (False, True)]
    items += items[:5]
    got = tilings_figures(items)
    assert got == [tiling_figures(*item) for item in items]


@pytest.mark.parametrize("seed", range(3))
def test_distinct_rows_packed_in_int64_codes_are_numpys_unique_rows(seed):
    """``conv_batch._distinct`` (columns packed into as few int64 codes as hold them) finds the rows
    ``np.unique(axis=0)`` finds: small columns, and wide ones that need several codes, whose values
    would wrap around one int64 (``2 ** 24 * 2 ** 40``) onto another row's."""
    rng = np.random.default_rng(seed)
    n = 400
    columns = [rng.integers(0, 3, size=n), rng.choice([0, 1 << 24], size=n), rng.choice([0, (1 << 40) - 1], size=n),
               rng.integers(0, 5, size=n), rng.choice([0, 1 << 50], size=n)]
    first, inverse = conv_batch._distinct(columns)
    rows = np.stack(columns, axis=1)
    assert len(first) == len(np.unique(rows, axis=0))
    assert (rows[first][inverse] == rows).all()  # each row's distinct row is itself


def test_transfers_that_stream_across_pages_take_the_closed_form_and_only_they():
    """``conv_schedule.streams``: a transfer whose bursts keep the DMA streaming (rows crossing pages,
    rows longer than a burst) takes the closed form of its beats, one that does not stalls; and
    ``unstalled`` (from the rows and their beats alone) says so of no transfer that stalls. The
    reference is the burst recurrence (``dma_timing``) on its bursts."""
    rng = random.Random(3)
    crossing = stalled = 0
    for _ in range(4000):
        W = rng.choice([8, 16, 32, 64])
        store, requant = rng.random() < 0.5, rng.random() < 0.5
        per_word, words = rng.choice([1, 2, 4]), rng.choice([rng.randint(1, 12), rng.randint(60, 300)])
        b = per_word * words
        rows = rng.randint(1, 60)
        # dense rows, pitches that do not divide a page, and a page plus or minus a beat: rows in a
        # row crossing pages, each split in two bursts (the fewest beats ``D - 1`` bursts carry)
        stride = rng.choice([b * W, b * W + W * rng.randint(1, 9), 96, 640, 1280, 2304, 3840,
                             PAGE + W, 2 * PAGE - W, PAGE + 2 * W])
        stride = max(stride, b * W)
        addr = rng.randrange(0, 3 * PAGE, W) if rng.random() < 0.5 else PAGE - W * rng.randint(1, b + 2)
        lens = list(dma_timing.bursts(addr, stride, rows, b, W))
        lat = store_read_latency(requant)
        if store:
            walk = dma_timing.store_cycles(lens, rows * words, per_word, DEFAULT_DRAM_LATENCY, OUTSTANDING, lat)
            closed = lat + DEFAULT_DRAM_LATENCY + 3 + rows * b
        else:
            walk = dma_timing.load_cycles(lens, DEFAULT_DRAM_LATENCY, OUTSTANDING)
            closed = DEFAULT_DRAM_LATENCY + 2 + rows * b
        where = (store, addr, stride, rows, words, per_word, W)
        assert streams(lens, store) == (walk == closed), where
        if b * W <= PAGE and unstalled(rows, b, store):
            assert walk == closed, where
        crossing += walk == closed and len(lens) > rows
        stalled += walk != closed
    assert crossing >= 300 and stalled >= 150, (crossing, stalled)


@pytest.mark.parametrize("seed", range(3))
def test_stacked_candidates_equal_each_arrays_own(seed):
    """``conv_candidates.stacked_candidates``: the candidates of one conv on many arrays (rows,
    columns, bits, buses, bufferings, shadow registers, tap packing differ, so every axis is padded
    somewhere) equal ``conv_search._candidates`` built for each alone (the same code on one array: no
    padding, nothing to slice), every field. (The figures themselves are held to the programs' by
    ``test_model_conv``: a chosen tiling's bytes are its program's transfers, and the search against
    every tiling by the run-by-run count.)"""
    rng = random.Random(40 + seed)
    for _ in range(6):
        conv = random_conv(rng) if rng.random() < 0.6 else random_conv_batch(rng)
        configs = [random_ws_design(rng) for _ in range(rng.randint(1, 12))]
        out_bs = [rng.choice([1, 2, 4, 8]) for _ in configs]
        gs = [_Geometry(c, conv) for c in configs]
        for g, out_b, got in zip(gs, out_bs, stacked_candidates(gs, out_bs), strict=True):
            ref = conv_search._candidates(_Geometry(g.config, conv), out_b)
            assert got.shape == ref.shape and got.levels == ref.levels and got.smallest_band == ref.smallest_band
            for name in ("compute", "dram", "band", "weight", "ofmap"):
                a, b = getattr(got, name), getattr(ref, name)
                assert a.shape == b.shape and (a == b).all(), (name, g.config, conv)
