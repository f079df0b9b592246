"""The conv compiler's model side: DRAM bytes equal the program's transfers, the closed form equals
the run-by-run count, the path choice and its reasons, bad geometry refused with one reason."""

from __future__ import annotations

import dataclasses
import random

import pytest
from model_testlib import transfer_word_bytes

import perf_model
from accel_spec.config import ArrayConfig
from accel_spec.errors import ModelError
from accel_spec.isa import Buffer, Opcode
from perf_model.compiler import conv_score
from perf_model.compiler.conv import ConvTiling, compile_conv, conv_tiling
from perf_model.compiler.conv_forms import candidates, describe
from perf_model.compiler.conv_geometry import _Geometry, _levels, _tap_levels
from perf_model.compiler.conv_search import _dram_bytes, _walk_bytes
from perf_model.compiler.row_stack import stack_conv
from perf_model.compiler.scorers import conv_path
from workloads.ops import Conv2d, Workload


def _random(rng: random.Random) -> tuple[ArrayConfig, Conv2d]:
    kh, kw = rng.choice([1, 3, 5]), rng.choice([1, 3, 7])
    groups = rng.choice([1, 1, 2, 3])
    dil = rng.choice([1, 2])
    conv = Conv2d(n=1, h=rng.randint(dil * (kh - 1) + 1, 12), w=rng.randint(kw, 12), c_in=groups * rng.randint(1, 7),
                  c_out=groups * rng.randint(1, 6), kh=kh, kw=kw, stride_h=rng.randint(1, 2),
                  stride_w=rng.randint(1, 3),
                  pad_h=rng.randint(0, kh // 2), pad_w=rng.randint(0, kw // 2), pad_w_hi=rng.randint(0, kw // 2),
                  dilation_h=dil, groups=groups)
    config = ArrayConfig(rows=rng.choice([2, 4, 8]), cols=rng.choice([2, 4]), dataflow="ws", ifmap_sram_kib=1,
                         weight_sram_kib=1, ofmap_sram_kib=2, double_buffered=rng.random() < 0.5)
    return config, conv


def _transfer_bytes(config: ArrayConfig, program) -> int:
    total = 0
    for c in program.commands:
        if c.opcode == Opcode.LOAD and c["buffer"] != Buffer.QPARAM:
            total += c["rows"] * c["words"] * transfer_word_bytes(config, c)
        elif c.opcode == Opcode.STORE:
            total += c["rows"] * c["words"] * transfer_word_bytes(config, c)
    return total


def test_the_tilings_dram_bytes_are_the_programs_transfers():
    rng = random.Random(7)
    checked = 0
    while checked < 120:
        config, conv = _random(rng)
        requant = rng.random() < 0.5
        tiling = conv_tiling(config, conv, requant=requant)
        if not tiling.feasible:
            continue
        program = compile_conv(config, conv, requant=requant)
        assert tiling.dram_bytes == _transfer_bytes(config, program), (config, conv)
        # the image crosses DRAM as itself: its bytes at most once per filter tile and channel block
        checked += 1


def test_the_closed_form_bytes_equal_the_run_by_run_count():
    rng = random.Random(3)
    for _ in range(200):
        config, conv = _random(rng)
        g = _Geometry(config, conv)
        t = ConvTiling("ok", "", rng.choice(_levels(g.out_h)), rng.choice(_levels(g.N, min(g.C, g.N))),
                       rng.choice(_levels(g.words)), rng.choice(_tap_levels(conv.kh, conv.kw)),
                       rng.choice(["mn", "nm"]))
        for requant in (False, True):
            assert _dram_bytes(g, t, requant) == _walk_bytes(g, t, requant), (conv, t)


def test_a_3x3_conv_reads_its_image_about_once_not_nine_times():
    conv = Conv2d(n=1, h=16, w=16, c_in=16, c_out=16, kh=3, kw=3, pad_h=1, pad_w=1)
    config = ArrayConfig(rows=8, cols=8, dataflow="ws", ifmap_sram_kib=8, weight_sram_kib=8, ofmap_sram_kib=8)
    program = compile_conv(config, conv)
    band_bytes = sum(c["rows"] * c["words"] * 8 for c in program.commands
                     if c.opcode == Opcode.LOAD and c["buffer"] == Buffer.IFMAP)
    image = 16 * 16 * 16
    assert image <= band_bytes < 1.5 * image  # halo rows only, against 9x for the im2col A


def test_a_band_that_does_not_fit_is_infeasible_naming_the_op_and_its_words():
    conv = Conv2d(n=1, h=8, w=600, c_in=4, c_out=4, kh=3, kw=3, pad_h=1, pad_w=1, name="wide")
    config = ArrayConfig(rows=4, cols=4, dataflow="ws", ifmap_sram_kib=1, weight_sram_kib=1, ofmap_sram_kib=1)
    tiling = conv_tiling(config, conv)
    assert not tiling.feasible
    assert "wide" in tiling.reason and "1800 ifmap words" in tiling.reason  # 3 rows x 600 pixels x 1 word
    assert conv_path(config, conv)[0] == "infeasible"
    with pytest.raises(ModelError, match="wide"):
        compile_conv(config, conv)


def test_a_window_field_beyond_its_encoding_is_refused_naming_the_field():
    conv = Conv2d(n=1, h=40, w=40, c_in=4, c_out=4, kh=2, kw=2, stride_h=20, stride_w=20, name="big_stride")
    config = ArrayConfig(rows=4, cols=4, dataflow="ws", ifmap_sram_kib=16, weight_sram_kib=4, ofmap_sram_kib=4)
    with pytest.raises(ModelError, match=r"big_stride.*stride_h must be in 0 \.\. 15.*not 20"):
        compile_conv(config, conv)


@pytest.mark.parametrize("dataflow", ["os", "is"])
def test_other_dataflows_keep_the_hosts_im2col_and_say_so(dataflow):
    conv = Conv2d(n=1, h=8, w=8, c_in=4, c_out=4, kh=3, kw=3, pad_h=1, pad_w=1)
    config = ArrayConfig(rows=4, cols=4, dataflow=dataflow)
    path, reason = conv_path(config, conv)
    assert path == "host" and "weight-stationary" in reason and dataflow.upper() in reason
    with pytest.raises(ModelError, match="weight-stationary"):
        compile_conv(config, conv)


def test_few_channels_on_many_rows_go_to_the_host_with_the_reason():
    """A 3-channel 7x7 conv on 16 rows: no reshaped pixel fits a word of 16 lanes (7 stacked rows
    are 21 channels), so the array would use 3 of its rows a tap and the host's im2col is faster."""
    stem = Conv2d(n=1, h=64, w=64, c_in=3, c_out=16, kh=7, kw=7, pad_h=3, pad_w=3, name="stem")
    config = ArrayConfig(rows=16, cols=16, dataflow="ws")
    path, reason = conv_path(config, stem)
    assert path == "host" and "stem: the host's im2col GEMM takes" in reason and "windows on chip" in reason
    deep = Conv2d(n=1, h=16, w=16, c_in=64, c_out=64, kh=3, kw=3, pad_h=1, pad_w=1)
    assert conv_path(config, deep) == ("chip", "")


def test_few_channels_on_32_rows_run_with_their_kernel_rows_stacked():
    """On 32 rows the same conv's 7 kernel rows stacked as channels (21 lanes, ``row_stack``) make a
    one-row kernel: it runs on chip in fewer cycles than its own form and the host's im2col. Strided,
    the scorer keeps the fastest of its forms (as it is, space-to-depth, stacked, both)."""
    stem = Conv2d(n=1, h=64, w=64, c_in=3, c_out=16, kh=7, kw=7, pad_h=3, pad_w=3, name="stem")
    config = ArrayConfig(rows=32, cols=32, dataflow="ws")
    assert conv_path(config, stem) == ("chip", "7 rows stacked: 21 channels on 64x64, a 1x7 kernel")
    own = conv_score._figures(config, stem, False).total
    stacked = conv_score._figures(config, stack_conv(stem), False).total
    gemm = perf_model.evaluate(config, Workload(name="g", ops=(stem.to_gemm(),), counts=(1,))).ops[0]
    assert stacked < own and stacked < gemm.total_cycles
    assert conv_score.conv_figures(config, stem, False).total == stacked

    strided = dataclasses.replace(stem, stride_h=2, stride_w=2)
    forms = candidates(strided, config.rows)
    assert [steps for steps, _ in forms] == [(), ("s2d",), ("stack",), ("s2d", "stack")][:len(forms)]
    totals = {steps: conv_score._figures(config, c, False).total for steps, c in forms}
    got = conv_score.conv_figures(config, strided, False)
    assert got.total == min(totals.values()) < totals[()] and totals[got.steps] == got.total
    assert conv_path(config, strided) == ("chip", describe(strided, got.steps))


def _every_tiling(g: _Geometry) -> tuple[list[ConvTiling], int]:
    """Every tiling of the compiler's families, not only the search's powers of two, and the most
    channel words a filter tile reads."""
    cv = g.conv
    taps = sorted({*range(1, cv.kw + 1), *(r * cv.kw for r in range(1, cv.kh + 1))})
    most = max(g.filter_words(n0, min(n0 + g.cpo, g.N))[1] - g.filter_words(n0, min(n0 + g.cpo, g.N))[0]
               for n0 in range(0, g.N, g.cpo))
    most = max(most, g.filter_words(0, g.N)[1] - g.filter_words(0, g.N)[0])
    filters = sorted({*range(min(g.C, g.N), g.N, g.C), g.N})
    rows_all = [*range(1, g.out_h + 1), *(k * g.out_h for k in range(2, g.images + 1) if g.stack)]
    return [ConvTiling("ok", "", rows, n_t, c_t, taps_t, order) for rows in rows_all for n_t in filters
            for c_t in range(1, most + 1) for taps_t in taps for order in ("mn", "nm")], most


def _random_batch(rng: random.Random) -> tuple[ArrayConfig, Conv2d]:
    """A conv of 2 or 3 images, most of them "same" convs whose images stack in a run."""
    config, _ = _random(rng)
    kh, kw, s = rng.choice([1, 3]), rng.choice([1, 3]), rng.randint(1, 2)
    conv = Conv2d(n=rng.randint(2, 3), h=s * rng.randint(1, 3), w=rng.randint(kw, 5), c_in=rng.randint(1, 6),
                  c_out=rng.randint(1, 5), kh=kh, kw=kw, stride_h=s, stride_w=rng.randint(1, 2), pad_h=kh // 2,
                  pad_w=kw // 2)
    return config, conv


@pytest.mark.parametrize("batch", [False, True])
def test_the_conv_tiling_search_against_every_tiling(batch):
    """Exhaustive over each conv's tilings, legality judged by the compiler's placement (a tile
    that does not fit its buffer is refused there): the search is infeasible exactly when no
    tiling compiles; its choice compiles and is the cheapest of every tiling (estimated cycles,
    then DRAM bytes) whenever that one is on the search's grid of powers of two; off the grid, the
    choice's cycles stay within 2x of the best (a grid level is within 2x of any tile size)."""
    from perf_model.compiler.conv_search import _estimate

    rng = random.Random(11)
    cases = infeasible = on_grid = stacked = 0
    while cases < 10:
        config, conv = _random_batch(rng) if batch else _random(rng)
        if conv.n * conv.h * conv.w > 40:  # small images: every tiling compiles in a few seconds
            continue
        g = _Geometry(config, conv)
        stacked += g.stack
        legal = []
        every, most = _every_tiling(g)
        for t in every:
            try:
                compile_conv(config, conv, tiling=t)
            except ModelError:
                continue
            t = dataclasses.replace(t, dram_bytes=_dram_bytes(g, t, False))
            legal.append(((_estimate(g, t), t.dram_bytes), t))
        chosen = conv_tiling(config, conv)
        cases += 1
        if not legal:
            infeasible += 1
            assert not chosen.feasible, (config, conv)
            continue
        assert chosen.feasible, (config, conv)
        compile_conv(config, conv, tiling=chosen)
        best, where = min(legal, key=lambda x: x[0])
        score = (_estimate(g, chosen), chosen.dram_bytes)
        grid = (where.rows_t in g.row_levels() and where.n_t in _levels(g.N, min(g.C, g.N))
                and where.taps_t in _tap_levels(conv.kh, conv.kw) and where.c_t in _levels(most))
        assert score >= best, (config, conv)
        if grid:
            on_grid += 1
            assert score == best, (config, conv, chosen, where)
        else:
            assert score[0] <= 2 * best[0], (config, conv, chosen, where)
    assert on_grid >= 4, on_grid
    assert stacked >= 4 or not batch, stacked


def test_stacked_images_keep_their_band_load_within_its_16_bit_rows_field():
    # 8 images of 112 x 112 pixels, 4 channel words a pixel, buffers that would hold them all: a
    # band of channel blocks is one DRAM row a pixel, so at most 65,535 pixels (5 images) a load
    config = ArrayConfig(rows=16, cols=16, dataflow="ws", ifmap_sram_kib=1 << 15, weight_sram_kib=64,
                         ofmap_sram_kib=1 << 15)
    conv = Conv2d(n=8, h=112, w=112, c_in=64, c_out=16, kh=1, kw=1, name="big")
    tiling = conv_tiling(config, conv)
    program = compile_conv(config, conv, tiling=tiling)  # the search's choice compiles
    loads = [c for c in program.commands if c.opcode == Opcode.LOAD]
    assert loads and all(c["rows"] < 1 << 16 for c in loads)  # 8 x 112 x 112 = 100,352 pixels, over 2**16
