"""The convolution address generator (``rtl_gen.core.conv_addr``) walks the window bit-exactly.

Amaranth's simulator drives its strobes in the controller's order (a latch and an advance per
fold, ``wrap`` on each column-fold's last row-fold, steps with random gaps) for many random
geometries, and every address and pad flag is checked against ``ConvWindow.read``, the Python
reference the compiler's layout follows.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import pytest
from amaranth.sim import Simulator

from perf_model.compiler.conv_window import ConvWindow
from rtl_gen.core.conv_addr import ConvAddressGenerator


def _random_window(rng: random.Random) -> tuple[ConvWindow, int, int, int]:
    kw, kh = rng.choice([1, 2, 3, 5, 7]), rng.randint(1, 4)
    in_w, in_h = rng.randint(1, 9), rng.randint(1, 7)
    out_w = rng.randint(1, 6)
    cw = rng.randint(1, 3)
    cblocks = rng.randint(1, cw)
    win = ConvWindow(in_w=in_w, in_h=in_h, out_w=out_w, stride_h=rng.randint(1, 3), stride_w=rng.randint(1, 3),
                     dilation_h=rng.randint(1, 3), dilation_w=rng.randint(1, 3), kw=kw,
                     pad_top=rng.randint(0, 3), pad_left=rng.randint(0, 3), cw=cw, cblocks=cblocks)
    m = rng.randint(1, 3 * out_w)
    return win, kh * kw * cblocks, rng.randint(1, 2), m


def _check(cases: list[tuple[ConvWindow, int, int, int]], seed: int, max_groups: int = 1) -> int:
    dut = ConvAddressGenerator(max_groups=max_groups)
    rng = random.Random(seed)
    checked = [0]

    async def bench(ctx: Any) -> None:
        for win, row_folds, col_folds, m in cases:
            fields = win.fields
            for name, value in fields.items():
                ctx.set(getattr(dut, name), value)
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            for name in fields:  # the generator keeps what it sampled with start
                ctx.set(getattr(dut, name), 0 if name != "origin" else 5)
            for _ in range(col_folds):
                for f in range(row_folds):
                    ctx.set(dut.latch, 1)
                    ctx.set(dut.advance, 1)
                    ctx.set(dut.wrap, f == row_folds - 1)
                    await ctx.tick()
                    ctx.set(dut.latch, 0)
                    ctx.set(dut.advance, 0)
                    ctx.set(dut.wrap, 0)
                    for s in range(m):
                        want = win.read(f, s)
                        pad = ctx.get(dut.pad)
                        assert pad == (want is None), (win, f, s)
                        if want is not None:
                            assert ctx.get(dut.addr) == want, (win, f, s)
                        assert ctx.get(dut.groups) == win.groups(f, s), (win, f, s)
                        checked[0] += 1
                        while rng.random() < 0.2:  # a cycle without a read keeps the place
                            await ctx.tick()
                        ctx.set(dut.step, 1)
                        await ctx.tick()
                        ctx.set(dut.step, 0)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return checked[0]


@pytest.mark.parametrize("seed", [1, 2])
def test_the_address_generator_walks_random_windows_like_the_reference(seed):
    rng = random.Random(seed)
    cases = [_random_window(rng) for _ in range(40)]
    assert _check(cases, seed) > 1000


def test_a_3x3_same_window_pads_the_border_and_reads_each_interior_pixel():
    win = ConvWindow(in_w=4, in_h=3, out_w=4, stride_h=1, stride_w=1, dilation_h=1, dilation_w=1, kw=3, pad_top=1,
                     pad_left=1, cw=1, cblocks=1)
    reads = win.reads(9, 1, 12)
    assert reads[0] is None  # tap (0, 0) of output pixel (0, 0) is the top-left pad
    assert reads[4 * 12 + 5] == 5  # centre tap reads the pixel itself
    # valid (tap, pixel) pairs: rows 2 + 3 + 2 over the three tap rows, columns 3 + 4 + 3
    assert sum(r is not None for r in reads) == 7 * 10
    _check([(win, 9, 1, 12)], 0)


def test_several_images_in_one_run_pad_each_image_and_read_the_next_band():
    # Two 2x2 images, one word a pixel, stacked in the ifmap (image 1 at words 4..7); 3x3 SAME.
    win = ConvWindow(in_w=2, in_h=2, out_w=2, stride_h=1, stride_w=1, dilation_h=1, dilation_w=1, kw=3, pad_top=1,
                     pad_left=1, cw=1, cblocks=1, image_rows=2)
    assert win.read(4, 4) == 4  # centre tap of image 1's pixel (0, 0): its own first word
    assert win.read(1, 4) is None  # the tap above it is image 1's top pad, not image 0's last row
    assert win.read(7, 2) is None  # the tap below image 0's pixel (1, 0) is its bottom pad
    assert win.read(8, 4) == 7  # bottom-right tap of image 1's pixel (0, 0): its pixel (1, 1)
    assert sum(r is not None for r in win.reads(9, 1, 8)) == 2 * 16  # each image's 16 valid (tap, pixel) pairs
    _check([(win, 9, 2, 8)], 3)


@pytest.mark.parametrize("seed", [4])
def test_the_address_generator_walks_random_multi_image_windows_like_the_reference(seed):
    rng = random.Random(seed)
    cases = []
    for _ in range(30):
        win, row_folds, col_folds, _ = _random_window(rng)
        images = rng.randint(1, 3)
        rows = rng.randint(1, 4)
        win = dataclasses.replace(win, image_rows=rows, in_h=min(win.in_h, rows * win.stride_h))
        cases.append((win, row_folds, col_folds, rng.randint(1, images * rows * win.out_w)))
    assert _check(cases, seed) > 500


@pytest.mark.parametrize("seed", [5])
def test_the_address_generator_walks_random_packed_windows_like_the_reference(seed):
    # Tap packing: T = 2 ** pack taps a word, the lane groups kept per read (conv_pack).
    rng = random.Random(seed)
    cases = []
    for _ in range(30):
        win, _, col_folds, m = _random_window(rng)
        pack = rng.randint(0, 3)
        kw = rng.choice([1, 3, 5, 7])
        win = dataclasses.replace(win, pack=pack, dilation_w=1 << pack, kw=-(-kw // (1 << pack)), cw=1, cblocks=1,
                                  pad_left=rng.randint(-1, 4))
        cases.append((win, rng.randint(1, 3) * win.kw, col_folds, m))
    assert _check(cases, seed, max_groups=8) > 500


def test_a_generator_with_fewer_group_checks_than_the_window_packs_differs_from_the_reference():
    # 4 taps a word on a generator built for 2 groups: groups 2 and 3 are never kept.
    win = ConvWindow(in_w=6, in_h=2, out_w=6, stride_h=1, stride_w=1, dilation_h=1, dilation_w=4, kw=1, pad_top=0,
                     pad_left=1, cw=1, cblocks=1, pack=2)
    with pytest.raises(AssertionError):
        _check([(win, 2, 1, 6)], 0, max_groups=2)
    _check([(win, 2, 1, 6)], 0, max_groups=4)


@pytest.mark.filterwarnings("ignore:.*created but never used")
def test_the_generator_refuses_a_group_count_that_is_not_a_power_of_two():
    from accel_spec.errors import ConfigError

    with pytest.raises(ConfigError, match="max_groups must be a power of two"):
        ConvAddressGenerator(max_groups=3)
