"""Tap packing's layout (``perf_model.compiler.conv_pack``): the sliding load, the packed window and
the packed weights compute the conv bit-exactly against ``lax.conv_general_dilated``."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from model_testlib import transfer_word_bytes

import perf_model
from accel_spec.config import ArrayConfig
from accel_spec.isa import Buffer, Opcode
from perf_model.compiler.conv import compile_conv, conv_tiling
from perf_model.compiler.conv_geometry import _Geometry
from perf_model.compiler.conv_pack import packed_conv, packed_window, slide
from perf_model.compiler.conv_schedule import conv_schedule
from workloads.ops import Conv2d, Requant


def _reference(x: np.ndarray, w: np.ndarray, stride: tuple[int, int], pads: tuple[tuple[int, int], ...],
               dilation_h: int) -> np.ndarray:
    out = lax.conv_general_dilated(jnp.asarray(x[None], jnp.int8), jnp.asarray(w, jnp.int8), stride, pads,
                                   rhs_dilation=(dilation_h, 1), dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                   preferred_element_type=jnp.int32)
    return np.asarray(out[0]).astype(np.int64)


def _case(rng: np.random.Generator, *, taps: int, lanes: int, rows: int, c_in: int, k: int, stride: int,
          pads: tuple[tuple[int, int], tuple[int, int]], dilation_h: int = 1, shift: int = 0) -> tuple[np.ndarray, ...]:
    h, w_in = int(rng.integers(k, 9)), int(rng.integers(k, 10))
    x = rng.integers(-128, 128, (h, w_in, c_in))
    w = rng.integers(-128, 128, (k, k, c_in, int(rng.integers(1, 5))))
    want = _reference(x, w, (stride, stride), pads, dilation_h)
    # What the register held before the band and the pixels read past it: not zero, so a lane
    # group the mask should drop but keeps changes the sums.
    prior = rng.integers(-128, 128, (taps - 1, lanes))
    tail = rng.integers(-128, 128, (taps - 1, lanes))
    got = packed_conv(x, w, stride=(stride, stride), pad=(pads[0][0], pads[1][0]), out_hw=want.shape[:2],
                      dilation_h=dilation_h, taps=taps, lanes=lanes, rows=rows, prior=prior, tail=tail,
                      origin_shift=shift)
    return got, want


def test_the_sliding_load_puts_pixel_ix_plus_t_in_lane_group_t():
    px = np.arange(1, 6)[:, None] * np.array([[1, 10]])  # pixel p: lanes (p, 10 p)
    words = slide(px, 3)
    assert words.shape == (5, 6)
    assert words[4].tolist() == [3, 30, 4, 40, 5, 50]  # word q: pixels q - 2 .. q
    assert words[0].tolist() == [0, 0, 0, 0, 1, 10]


@pytest.mark.parametrize("k,stride,pads,c_in,taps,lanes,rows,dil", [
    (3, 1, ((1, 1), (1, 1)), 2, 4, 2, 8, 1),     # SAME 3x3, 2 channels, 4 taps a word
    (3, 2, ((1, 1), (1, 1)), 3, 2, 4, 8, 1),     # stride 2, 3 channels
    (7, 2, ((3, 3), (3, 3)), 3, 4, 4, 16, 1),    # the stem's 7x7/2
    (5, 1, ((1, 3), (2, 0)), 2, 4, 2, 8, 1),     # asymmetric padding
    (1, 1, ((0, 0), (0, 0)), 3, 2, 4, 8, 1),     # 1x1: one tap, a group with an empty half
    (3, 1, ((2, 2), (1, 1)), 4, 2, 4, 8, 2),     # dilation along y
    (3, 1, ((0, 0), (0, 0)), 4, 2, 4, 8, 1),     # valid (no padding)
])
def test_a_packed_conv_is_bit_exact(k, stride, pads, c_in, taps, lanes, rows, dil):
    rng = np.random.default_rng(k * 100 + stride * 10 + c_in)
    for _ in range(3):
        got, want = _case(rng, taps=taps, lanes=lanes, rows=rows, c_in=c_in, k=k, stride=stride, pads=pads,
                          dilation_h=dil)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("shift", [-1, 1])
def test_a_packed_word_read_one_word_off_fails(shift):
    rng = np.random.default_rng(7)
    got, want = _case(rng, taps=4, lanes=2, rows=8, c_in=2, k=3, stride=1, pads=((1, 1), (1, 1)), shift=shift)
    assert not np.array_equal(got, want)


def test_the_group_mask_drops_the_lanes_past_the_row_and_before_it():
    win = packed_window(in_h=2, in_w=5, out_w=5, kw=3, stride=(1, 1), dilation_h=1, pad=(1, 1), taps=4)
    assert win.fields["origin"] == -(1 * 5 + 1) + 3  # the packed word's offset T - 1 in the origin
    # row-fold 1 (ky = 1), output pixel (0, 0): pixels -1 .. 2 of band row 0, group 0 a pad
    assert win.groups(1, 0) == 0b1110
    assert win.read(1, 0) == 0 * 5 - 1 + 3
    # output pixel (0, 4): pixels 3 .. 6, groups 2 and 3 past the row
    assert win.groups(1, 4) == 0b0011
    assert win.groups(0, 0) == 0 and win.read(0, 0) is None  # ky = 0 of output row 0: the top pad


PACKED_CONVS = [
    Conv2d(n=1, h=9, w=10, c_in=2, c_out=5, kh=3, kw=3, pad_h=1, pad_w=1),
    Conv2d(n=2, h=8, w=8, c_in=3, c_out=6, kh=7, kw=7, stride_h=2, stride_w=2, pad_h=3, pad_w=3),
    Conv2d(n=1, h=11, w=7, c_in=4, c_out=12, kh=5, kw=5, stride_h=2, stride_w=1, pad_h=2, pad_w=0, pad_w_hi=2),
    Conv2d(n=3, h=6, w=6, c_in=2, c_out=3, kh=3, kw=3, pad_h=1, pad_w=1),  # images stacked in a run
]


@pytest.mark.parametrize("double", [True, False])
@pytest.mark.parametrize("requant", [False, True])
def test_a_packed_convs_model_bytes_and_cycles_are_its_programs(double, requant):
    # 8 or 16 rows on a 2-byte bus: 2 to 8 taps a word.
    for rows, conv in zip((8, 16, 8, 16), PACKED_CONVS, strict=True):
        config = ArrayConfig(rows=rows, cols=4, dataflow="ws", dram_bytes_per_cycle=2.0, ifmap_sram_kib=2,
                             weight_sram_kib=2, ofmap_sram_kib=2, double_buffered=double)
        if requant:
            conv = dataclasses.replace(conv, requant=Requant(multiplier=(1 << 30,), shift=(0,), bias=(0,)))
        g = _Geometry(config, conv)
        assert g.pack >= 1, conv
        tiling = conv_tiling(config, conv, requant=requant)
        program = compile_conv(config, conv, requant=requant)
        assert program.pack == g.pack
        a, b, c = _transfers(config, program)
        assert tiling.dram_bytes == a + b + c
        walk = perf_model.gemm_program_cycles(config, program, rate=perf_model.dram_rate(config))
        fast = conv_schedule(g, tiling, requant)
        assert fast is not None
        assert (fast.total, fast.compute, fast.read, fast.written) == (walk.total, walk.compute, (a, b), c)
        # each output tile's runs sweep K = kh x ceil(kw / T) groups x R rows, not kh x kw taps x R
        tiles = len(g.m_tiles(tiling.rows_t)) * -(-conv.c_out // tiling.n_t)
        k = sum(cmd["k"] for cmd in program.commands if cmd.opcode == Opcode.RUN)
        assert k == tiles * conv.kh * -(-conv.kw // (1 << g.pack)) * rows


def _transfers(config: ArrayConfig, program) -> tuple[int, int, int]:
    out = [0, 0, 0]
    for cmd in program.commands:
        if cmd.opcode == Opcode.LOAD and cmd["buffer"] in (Buffer.IFMAP, Buffer.WEIGHT):
            out[int(cmd["buffer"])] += cmd["rows"] * cmd["words"] * transfer_word_bytes(config, cmd)
        elif cmd.opcode == Opcode.STORE:
            out[2] += cmd["rows"] * cmd["words"] * transfer_word_bytes(config, cmd)
    return out[0], out[1], out[2]


def test_packing_is_left_out_where_it_cannot_serve():
    config = ArrayConfig(rows=8, cols=4, dataflow="ws", dram_bytes_per_cycle=2.0)
    base = Conv2d(n=1, h=6, w=6, c_in=2, c_out=4, kh=3, kw=3, pad_h=1, pad_w=1)
    assert _Geometry(config, base).pack == 2
    for conv in (dataclasses.replace(base, dilation_w=2, pad_w=2), dataclasses.replace(base, kw=1, pad_w=0),
                 dataclasses.replace(base, c_in=6), dataclasses.replace(base, c_in=4, c_out=4, groups=2)):
        assert _Geometry(config, conv).pack == 0, conv
    wide = ArrayConfig(rows=8, cols=8, dataflow="ws", dram_bytes_per_cycle=8.0)  # a word is one beat
    assert _Geometry(wide, base).pack == 0


@pytest.mark.parametrize("rows", [16, 32, 128])
def test_no_more_taps_a_word_than_the_windows_dilation_field_encodes(rows):
    """A first conv of 3 channels on a wide array: its pixel is a narrow word of a few lanes, so
    ``R / a_lanes`` taps would fit a word, but a packed window steps ``T`` words a group in the
    ``WINDOW``'s 4-bit ``dilation_w``: ``T`` stays at most 8, and the conv compiles (it did not on a
    128-row array: ``dilation_w`` 32)."""
    config = ArrayConfig(rows=rows, cols=rows, dataflow="ws", dram_bytes_per_cycle=8.0)
    conv = Conv2d(n=1, h=12, w=12, c_in=3, c_out=8, kh=7, kw=7, stride_h=2, stride_w=2, pad_h=3, pad_w=3,
                  requant=Requant(multiplier=(1 << 30,), shift=(0,)))
    g = _Geometry(config, conv)
    assert g.a_lanes and rows // g.a_lanes > 1
    assert (g.pack == 0) == (rows // g.a_lanes > 8)
    program = compile_conv(config, conv, requant=True)
    assert all(c["dilation_w"] <= 8 for c in program.commands if c.opcode == Opcode.WINDOW)
