"""Convolutions on chip: NHWC activations from DRAM, windows built by the RTL, bit-exact and in the walk's cycles.

Icarus or Amaranth's simulator (``system_testlib.simulator``) runs the SoC block (a 4 x 4
weight-stationary array, 1 KiB buffers, so
the convs are tiled in bands, filter tiles and channel blocks) on programs of
``perf_model.compiler.conv.compile_conv``; outputs against ``lax.conv_general_dilated`` (int8,
int32 accumulation), total cycles against the program walk. Malformed window commands stop the
program with an error code.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from conv_testlib import run_conv
from system_testlib import run_soc, small

from accel_spec.isa import ERROR_OPCODE, ERROR_WINDOW, Command, Opcode
from perf_model.compiler.conv import ConvTiling
from rtl_gen import Fault
from workloads.ops import Conv2d, Requant

CASES = {
    "3x3 same, 3 channels": (Conv2d(n=1, h=6, w=6, c_in=3, c_out=5, kh=3, kw=3, pad_h=1, pad_w=1), True),
    "3x3 stride 2, asymmetric pad, 6 channels": (
        Conv2d(n=1, h=7, w=6, c_in=6, c_out=4, kh=3, kw=3, stride_h=2, stride_w=2, pad_h=0, pad_h_hi=1, pad_w=0,
               pad_w_hi=1), True),
    "7x7 stride 2 stem": (Conv2d(n=1, h=8, w=8, c_in=3, c_out=4, kh=7, kw=7, stride_h=2, stride_w=2, pad_h=3,
                                 pad_w=3), False),
    "3x3 dilation 2": (Conv2d(n=1, h=6, w=7, c_in=4, c_out=6, kh=3, kw=3, pad_h=2, pad_w=2, dilation_h=2,
                              dilation_w=2), True),
    "groups 2": (Conv2d(n=1, h=5, w=5, c_in=8, c_out=6, kh=3, kw=3, pad_h=1, pad_w=1, groups=2), True),
    "depthwise stride (2, 1)": (Conv2d(n=1, h=5, w=6, c_in=6, c_out=6, kh=3, kw=3, pad_h=1, pad_w=1, groups=6,
                                       stride_h=2), False),
    "1x1, 9 channels": (Conv2d(n=1, h=5, w=5, c_in=9, c_out=7, kh=1, kw=1), True),
    "5x5, channel blocks": (Conv2d(n=1, h=6, w=6, c_in=5, c_out=3, kh=5, kw=5, pad_h=2, pad_w=2), True),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_conv_from_nhwc_in_dram_is_bit_exact_in_the_walks_cycles(name):
    conv, double = CASES[name]
    run, out, ref = run_conv(small("ws", double, rows=4, cols=4), conv)
    assert run.error_code == 0
    np.testing.assert_array_equal(out, ref)
    assert (run.total, run.compute, run.stall) == (run.model.total, run.model.compute, run.model.stall)
    runs = [c for c in run.program.commands if c.opcode == Opcode.RUN]
    assert runs and all(c["window"] for c in runs)  # every run through the window
    # the image crosses DRAM as itself: no load moves more ifmap bytes than the bands hold
    loads = sum(c["rows"] * c["words"] * 4 for c in run.program.commands
                if c.opcode == Opcode.LOAD and c["buffer"] == 0)
    assert loads < conv.kh * conv.kw * conv.h * conv.w * 4 * -(-conv.c_in // 4) or conv.kh == 1


@pytest.mark.parametrize("taps_t", [10, 2, 1])
def test_tap_tiles_read_the_resident_band_with_shifted_pads(taps_t):
    # 5 x 5 kernel: tiles of two kernel rows, of two taps of a row, of one tap; 2 channel blocks
    conv = Conv2d(n=1, h=6, w=5, c_in=6, c_out=4, kh=5, kw=5, pad_h=2, pad_w=2, pad_w_hi=1)
    tiling = ConvTiling("ok", "", rows_t=3, n_t=4, c_t=1, taps_t=taps_t, order="mn")
    run, out, ref = run_conv(small("ws", True, rows=4, cols=4), conv, tiling=tiling)
    assert run.error_code == 0
    np.testing.assert_array_equal(out, ref)
    assert run.total == run.model.total
    windows = [c for c in run.program.commands if c.opcode == Opcode.WINDOW]
    assert any(c["pad_top"] >= 1 << 7 for c in windows)  # a negative pad (two's complement): rows skipped
    bands = [c for c in run.program.commands if c.opcode == Opcode.LOAD and c["buffer"] == 0]
    assert len(bands) == 2 * 2  # per output-row tile and channel block, not per tap tile


STACKED = {
    # 3 images, 3 channels on 4 rows, 3x3 stride 2 "same": a run of two whole images, then one
    "3x3 stride 2, 3 images": (Conv2d(n=3, h=4, w=5, c_in=3, c_out=5, kh=3, kw=3, stride_h=2, stride_w=2, pad_h=1,
                                      pad_w=1), ConvTiling("ok", "", rows_t=4, n_t=4, c_t=1, taps_t=3, order="mn")),
    # the 7x7 stride-2 stem on 2 images, tap tiles of one kernel row, filters outer
    "7x7 stride 2 stem, 2 images": (Conv2d(n=2, h=8, w=6, c_in=3, c_out=6, kh=7, kw=7, stride_h=2, stride_w=2,
                                           pad_h=3, pad_w=3),
                                    ConvTiling("ok", "", rows_t=8, n_t=4, c_t=1, taps_t=7, order="nm")),
    # 1x1 stride 2 on 2 images of 5 channels (2 words a pixel): each image's last row is loaded, never read
    "1x1 stride 2, 2 images": (Conv2d(n=2, h=6, w=5, c_in=5, c_out=3, kh=1, kw=1, stride_h=2, stride_w=2),
                               ConvTiling("ok", "", rows_t=6, n_t=3, c_t=2, taps_t=1, order="mn")),
}


@pytest.mark.parametrize("double", [True, False])
@pytest.mark.parametrize("name", list(STACKED))
def test_whole_images_stacked_in_a_run_are_each_padded_and_bit_exact(name, double):
    conv, tiling = STACKED[name]
    run, out, ref = run_conv(small("ws", double, rows=4, cols=4), conv, tiling=tiling)
    assert run.error_code == 0
    np.testing.assert_array_equal(out, ref)
    assert (run.total, run.compute, run.stall) == (run.model.total, run.model.compute, run.model.stall)
    windows = [c for c in run.program.commands if c.opcode == Opcode.WINDOW]
    assert any(c["image_rows"] == conv.out_h for c in windows)  # a run streams several images
    # each image's words (a word per 4 channels) cross DRAM once per filter tile at most: no halo between images
    loads = sum(c["rows"] * c["words"] for c in run.program.commands if c.opcode == Opcode.LOAD and c["buffer"] == 0)
    assert loads <= conv.n * conv.h * conv.w * -(-conv.c_in // 4) * -(-conv.c_out // tiling.n_t)


@pytest.mark.parametrize("double", [True, False])
def test_a_conv_over_several_queue_loads_sets_its_window_again_in_each(double):
    conv = Conv2d(n=1, h=3, w=3, c_in=8, c_out=4, kh=3, kw=3, pad_h=1, pad_w=1)
    tiling = ConvTiling("ok", "", rows_t=3, n_t=4, c_t=1, taps_t=1, order="mn")  # 18 runs, one window each
    run, out, ref = run_conv(small("ws", double, rows=4, cols=4), conv, tiling=tiling, queue_depth=8)
    assert len(run.program.chunks) > 3
    assert run.error_code == 0
    np.testing.assert_array_equal(out, ref)
    assert run.total == run.model.total
    for first, end in run.program.chunks:  # every queue-load sets the window before its first window run
        ops = [c.opcode for c in run.program.commands[first:end]]
        if Opcode.RUN in ops:
            assert Opcode.WINDOW in ops[:ops.index(Opcode.RUN)]


@pytest.mark.parametrize("double", [True, False])
def test_each_band_runs_each_filter_tile_on_its_own_weights(double):
    """Two filter tiles (one run each) over three bands of output rows, filters inner: double
    buffered, the halves hold both tiles' weights for every band; single buffered, the buffer holds
    one, so each band's runs load theirs again. (Single buffered, the second band once ran filter
    tile 0 on tile 1's weights: a 64x16 design's ResNet-18 at full scale failed verify.)"""
    conv = Conv2d(n=1, h=6, w=5, c_in=4, c_out=8, kh=3, kw=3, pad_h=1, pad_w=1)
    tiling = ConvTiling("ok", "", rows_t=2, n_t=4, c_t=1, taps_t=9, order="mn")  # 3 bands x 2 filter tiles
    run, out, ref = run_conv(small("ws", double, rows=4, cols=4), conv, tiling=tiling)
    assert run.error_code == 0
    np.testing.assert_array_equal(out, ref)
    assert (run.total, run.compute, run.stall) == (run.model.total, run.model.compute, run.model.stall)
    weight_loads = [c for c in run.program.commands if c.opcode == Opcode.LOAD and c["buffer"] == 1]
    assert len(weight_loads) == (2 if double else 6)


@pytest.mark.parametrize("double", [True, False])
def test_a_requantised_conv_writes_the_output_stage_codes(double):
    conv = Conv2d(n=1, h=6, w=5, c_in=5, c_out=6, kh=3, kw=3, pad_h=1, pad_w=1, stride_w=2, pad_w_hi=0)
    rq = Requant(multiplier=tuple((1 << 30) + (i << 26) for i in range(6)), shift=(9,), bias=(3,), zero_point=2,
                 act_min=-100, act_max=120)
    run, out, ref = run_conv(small("ws", double, rows=4, cols=4), conv, requant=rq, seed=3)
    assert run.error_code == 0
    np.testing.assert_array_equal(out, ref)
    assert run.total == run.model.total


def test_a_faulty_pe_makes_the_conv_differ():
    conv = CASES["3x3 same, 3 channels"][0]
    run, out, ref = run_conv(small("ws", True, rows=4, cols=4), conv, fault=Fault(row=1, col=2, bit=4, stuck=1))
    assert run.error_code == 0
    assert (out != ref).any()


def _edit(name: str, value: int):
    def edit(prog):
        cmds = [dataclasses.replace(c, fields=tuple((k, value if k == name else v) for k, v in c.fields))
                if c.opcode == Opcode.WINDOW else c for c in prog.commands]
        return dataclasses.replace(prog, commands=tuple(cmds), chunks=((0, len(cmds)),))
    return edit


@pytest.mark.parametrize("field", ["stride_w", "kw", "cblocks", "out_w"])
def test_a_window_with_a_zero_field_is_an_error(field):
    conv = CASES["3x3 same, 3 channels"][0]
    run, _, _ = run_conv(small("ws", True, rows=4, cols=4), conv, edit=_edit(field, 0), limit=20_000)
    assert run.error_code == ERROR_WINDOW
    assert run.program.commands[run.error_pc].opcode == Opcode.WINDOW


@pytest.mark.parametrize("rows,bw", [(4, 4.0), (8, 2.0)])  # 1 lane group (no packing); 4 lane groups
def test_a_window_packing_more_taps_than_the_generator_checks_is_an_error(rows, bw):
    """``pack`` above ``log2(max_groups)`` would leave lane groups unchecked for pads: the WINDOW is
    refused before any run reads a word."""
    from amaranth.utils import exact_log2

    from rtl_gen import Accelerator

    config = small("ws", True, rows=rows, cols=4, bw=bw)
    core = Accelerator(config)
    core._MustUse__silence = True
    limit = exact_log2(core.max_groups)
    assert limit == {4: 0, 8: 2}[rows]
    conv = CASES["3x3 same, 3 channels"][0]
    run, _, _ = run_conv(config, conv, edit=_edit("pack", limit + 1), limit=20_000)
    assert run.error_code == ERROR_WINDOW
    assert run.program.commands[run.error_pc].opcode == Opcode.WINDOW
    assert not any(c.opcode == Opcode.RUN for c in run.program.commands[:run.error_pc])


def test_a_window_reading_beyond_the_ifmap_stops_with_an_error():
    conv = CASES["3x3 same, 3 channels"][0]
    run, _, _ = run_conv(small("ws", True, rows=4, cols=4), conv, edit=_edit("px_step", 3000), limit=50_000)
    assert run.error_code == ERROR_WINDOW
    assert run.status & 0b100  # ERROR


def test_a_window_run_on_an_output_stationary_design_is_refused():
    a = np.ones((4, 4), int)
    cfg = small("os", True)
    window = Command.make(Opcode.RUN, m=4, k=4, n=4, window=1)
    run = run_soc(cfg, a, a, commands=[window], limit=20_000)
    assert run.error_code == ERROR_OPCODE and run.error_pc == 0


PACKED = {
    # 8 rows, a 2-byte bus: a word is 4 beats; 2 channels are one beat, so 4 taps a word
    "3x3 same, 2 channels, 4 taps a word": (Conv2d(n=1, h=5, w=6, c_in=2, c_out=5, kh=3, kw=3, pad_h=1, pad_w=1), 2),
    # 3 channels are two beats: 2 taps a word; stride 2, asymmetric padding
    "3x3 stride 2, asymmetric pad, 3 channels": (
        Conv2d(n=1, h=7, w=6, c_in=3, c_out=4, kh=3, kw=3, stride_h=2, stride_w=2, pad_h=0, pad_h_hi=1, pad_w=1,
               pad_w_hi=0), 1),
    "7x7 stride 2 stem, 3 channels": (Conv2d(n=1, h=8, w=8, c_in=3, c_out=4, kh=7, kw=7, stride_h=2, stride_w=2,
                                             pad_h=3, pad_w=3), 1),
}


@pytest.mark.parametrize("double", [True, False])
@pytest.mark.parametrize("name", list(PACKED))
def test_a_tap_packed_conv_is_bit_exact_in_the_walks_cycles(name, double):
    conv, pack = PACKED[name]
    run, out, ref = run_conv(small("ws", double, rows=8, cols=4), conv)
    assert run.error_code == 0
    np.testing.assert_array_equal(out, ref)
    assert (run.total, run.compute, run.stall) == (run.model.total, run.model.compute, run.model.stall)
    windows = [c for c in run.program.commands if c.opcode == Opcode.WINDOW]
    assert windows and all(c["pack"] == pack for c in windows)
    bands = [c for c in run.program.commands if c.opcode == Opcode.LOAD and c["buffer"] == 0]
    assert bands and all(c["slide"] for c in bands)
    # each output tile sweeps K = kh x ceil(kw / T) groups x R rows (one tap a word: kh x kw x R)
    k = sum(c["k"] for c in run.program.commands if c.opcode == Opcode.RUN)
    tiles = len({(t[0], t[4]) for t in run.program.runs})
    assert k == tiles * conv.kh * -(-conv.kw // (1 << pack)) * 8


def test_a_tap_packed_conv_with_its_packed_words_one_lane_group_off_is_wrong():
    # The sliding load's words read one word early: lane group t then holds pixel ix + t - 1.
    conv = PACKED["3x3 same, 2 channels, 4 taps a word"][0]

    def shift(prog):
        cmds = [dataclasses.replace(c, fields=tuple((k, (v - 1) & 0xFFFFFFFF if k == "origin" else v)
                                                    for k, v in c.fields))
                if c.opcode == Opcode.WINDOW else c for c in prog.commands]
        return dataclasses.replace(prog, commands=tuple(cmds))

    run, out, ref = run_conv(small("ws", True, rows=8, cols=4), conv, edit=shift)
    assert not np.array_equal(out, ref)
