"""The conv schedule counted by runs equals its program walk, and the ranked search equals the loop.

``perf_model.compiler.conv_schedule`` gives a conv tiling's walk cycles, transfer bytes, folds and
SRAM bytes without compiling the program; the reference is ``compile_conv`` walked by
``gemm_program_cycles`` (the RTL's counters, ``simulate``) and counted command by command here.
``conv_tiling`` ranks candidates once per design fields the score sees and takes the first that
fits the buffers; the reference is the search loop over every candidate that fits.
"""

from __future__ import annotations

import dataclasses
import math
import random
from itertools import product

import pytest
from model_testlib import random_conv, random_conv_batch, random_ws_design, transfer_word_bytes

import perf_model
from accel_spec.config import ArrayConfig
from accel_spec.isa import Buffer, Opcode
from perf_model.compiler.conv import ConvTiling, compile_conv, conv_tiling
from perf_model.compiler.conv_geometry import _Geometry, _levels, _room, _tap_levels
from perf_model.compiler.conv_schedule import conv_schedule
from perf_model.compiler.conv_score import walked_figures
from perf_model.compiler.conv_search import _compute, _dram_bytes, _estimate
from workloads.ops import Conv2d


def _transfers(config: ArrayConfig, program) -> tuple[int, int, int]:
    """Bytes of the program's band loads, weight loads and stores, counted from its commands."""
    out = [0, 0, 0]
    for c in program.commands:
        if c.opcode == Opcode.LOAD and c["buffer"] in (Buffer.IFMAP, Buffer.WEIGHT):
            out[int(c["buffer"])] += c["rows"] * c["words"] * transfer_word_bytes(config, c)
        elif c.opcode == Opcode.STORE:
            out[2] += c["rows"] * c["words"] * transfer_word_bytes(config, c)
    return out[0], out[1], out[2]


def test_the_schedule_by_runs_equals_the_program_walk_on_random_convs_and_designs():
    rng = random.Random(2027)
    seen = {"double": 0, "single": 0, "queue_loads": 0, "requant": 0, "groups": 0, "dilated": 0, "strided": 0}
    checked = 0
    while checked < 150:
        config, conv = random_ws_design(rng), random_conv(rng)
        requant = conv.requant is not None
        tiling = conv_tiling(config, conv, requant=requant)
        if not tiling.feasible:
            continue
        fast = conv_schedule(_Geometry(config, conv), tiling, requant)
        program = compile_conv(config, conv, requant=requant, tiling=tiling)
        walk = perf_model.gemm_program_cycles(config, program, rate=perf_model.dram_rate(config))
        a, b, c = _transfers(config, program)
        where = f"{config} {conv} {tiling}"
        assert fast is not None, where
        assert (fast.total, fast.compute) == (walk.total, walk.compute), where
        assert (fast.read, fast.written) == ((a, b), c), where
        ref = walked_figures(config, conv, requant, tiling)
        assert (fast.folds, fast.sram_read, fast.sram_write, fast.tile) == (
            ref.folds, ref.sram_read, ref.sram_write, ref.tile), where
        checked += 1
        seen["double" if config.double_buffered else "single"] += 1
        seen["queue_loads"] += len(program.chunks) > 1
        seen["requant"] += requant
        seen["groups"] += conv.groups > 1
        seen["dilated"] += conv.dilation_h > 1
        seen["strided"] += conv.stride_h > 1 or conv.stride_w > 1
    assert min(seen.values()) >= 10, seen


def test_the_schedule_by_runs_equals_the_program_walk_on_batched_convs():
    """Several images in one program, whole images stacked in a run (``image_rows``) or tiled one
    image at a time: the closed form equals the walk and the transfers."""
    rng = random.Random(31)
    checked = stacked = 0
    while checked < 60:
        config, conv = random_ws_design(rng, ofmap_sram_kib=rng.choice([2, 8, 32])), random_conv_batch(rng)
        requant = conv.requant is not None
        tiling = conv_tiling(config, conv, requant=requant)
        if not tiling.feasible:
            continue
        fast = conv_schedule(_Geometry(config, conv), tiling, requant)
        program = compile_conv(config, conv, requant=requant, tiling=tiling)
        walk = perf_model.gemm_program_cycles(config, program, rate=perf_model.dram_rate(config))
        where = f"{config} {conv} {tiling}"
        assert fast is not None, where
        assert (fast.total, fast.compute) == (walk.total, walk.compute), where
        a, b, c = _transfers(config, program)
        assert (fast.read, fast.written) == ((a, b), c), where
        ref = walked_figures(config, conv, requant, tiling)  # the SRAM figures count every image's output
        assert (fast.folds, fast.sram_read, fast.sram_write, fast.tile) == (
            ref.folds, ref.sram_read, ref.sram_write, ref.tile), where
        checked += 1
        stacked += tiling.rows_t > conv.out_h
    assert stacked >= 10, stacked


def test_a_paced_dram_is_left_to_the_walk_and_evaluate_still_equals_it():
    conv = Conv2d(n=1, h=12, w=12, c_in=16, c_out=16, kh=3, kw=3, pad_h=1, pad_w=1, name="c")
    config = ArrayConfig(rows=8, cols=8, dataflow="ws", dram_bytes_per_cycle=6.0, ifmap_sram_kib=8,
                         weight_sram_kib=8, ofmap_sram_kib=8)
    assert perf_model.dram_rate(config) is not None
    tiling = conv_tiling(config, conv)
    assert conv_schedule(_Geometry(config, conv), tiling, False) is None
    walk = perf_model.gemm_program_cycles(config, compile_conv(config, conv), rate=perf_model.dram_rate(config))
    assert perf_model.evaluate_op(config, conv).total_cycles == walk.total


def _loop_search(config: ArrayConfig, conv: Conv2d, requant: bool) -> ConvTiling | None:
    """The search as a loop over every candidate that fits: the fewest estimated cycles, then DRAM
    bytes, then run cycles, the first in loop order."""
    g = _Geometry(config, conv)
    room = _room(config)
    spans = [g.filter_words(n0, min(n0 + g.cpo, g.N)) for n0 in range(0, g.N, g.cpo)] + [g.filter_words(0, g.N)]
    best = None
    for c_t in _levels(max(b - a for a, b in spans)):
        for rows_t in g.row_levels():
            if g.band_rows(rows_t) * conv.w * c_t + g.extra > room[0]:  # a packed band: T - 1 more words
                continue
            for n_t, taps_t in product(_levels(g.N, min(g.C, g.N)), _tap_levels(conv.kh, g.kw)):  # kw: groups
                cols = math.ceil(n_t / g.C)
                if taps_t * g.R * c_t * cols > room[1] or rows_t * g.out_w * cols > room[2]:
                    continue
                for order in ("mn", "nm"):
                    t = ConvTiling("ok", "", rows_t, n_t, c_t, taps_t, order)
                    t = dataclasses.replace(t, dram_bytes=_dram_bytes(g, t, requant))
                    score = (_estimate(g, t), t.dram_bytes, _compute(g, t))
                    if best is None or score < best[0]:
                        best = (score, t)
    return None if best is None else best[1]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_ranked_search_picks_the_loops_tiling_across_buffer_sizes(seed):
    rng = random.Random(seed)
    feasible = 0
    for _ in range(12):
        base, conv = random_ws_design(rng), (random_conv(rng, 24) if seed < 3 else random_conv_batch(rng))
        requant = rng.random() < 0.5
        for _ in range(6):  # designs that differ in their buffers share one ranking
            config = dataclasses.replace(base, ifmap_sram_kib=rng.choice([1, 2, 8, 32]),
                                         weight_sram_kib=rng.choice([1, 4, 16]), ofmap_sram_kib=rng.choice([1, 2, 8]))
            want = _loop_search(config, conv, requant)
            got = conv_tiling(config, conv, requant=requant)
            if want is None:
                assert not got.feasible and "ifmap words" in got.reason, (config, conv)
            else:
                feasible += 1
                assert got == want, (config, conv)
    assert feasible >= 30
