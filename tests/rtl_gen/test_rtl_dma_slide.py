"""The DMA's sliding load (``rtl_gen.soc.dma``, tap packing): each word written holds the last
``slide_beats / beats`` narrow words received, oldest in the low lanes, in the same cycles as a
plain load. Checked on Amaranth's simulator against ``perf_model.compiler.conv_pack.slide``."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from amaranth.sim import Simulator

from perf_model.compiler.conv_pack import slide
from rtl_gen.soc.dma import DmaLoad

BEAT = 4  # AXI data bytes


def _load(*, words: int, rows: int, beats: int, slide_on: bool, max_beats: int = 4, seed: int = 0
          ) -> tuple[list[tuple[int, int, int]], list[int]]:
    """Runs one load from a random DRAM; returns ``(cycle, address, word)`` of each write and the beats sent."""
    dut = DmaLoad(data_bytes=BEAT, max_beats=max_beats, outstanding=2, buf_addr_bits=12, slide_beats=max_beats)
    rng = random.Random(seed)
    dram = [rng.randrange(1 << 32) for _ in range(4096)]
    writes: list[tuple[int, int, int]] = []
    sent: list[int] = []

    async def bench(ctx: Any) -> None:
        for name, value in (("addr", 0x40), ("stride", words * beats * BEAT), ("rows", rows), ("words", words),
                            ("beats", beats), ("buf_addr", 3), ("row_step", words), ("word_step", 1),
                            ("slide", int(slide_on)), ("start", 1)):
            ctx.set(getattr(dut, name), value)
        await ctx.tick()
        ctx.set(dut.start, 0)
        bursts: list[tuple[int, int]] = []  # (beat address, beats left)
        for cycle in range(400):
            ctx.set(dut.arready, 1)
            if bursts and rng.random() < 0.8:  # R beats with gaps
                a, left = bursts[0]
                ctx.set(dut.rvalid, 1)
                ctx.set(dut.rdata, dram[a])
                ctx.set(dut.rlast, left == 1)
                ctx.set(dut.rresp, 0)
                take = True
            else:
                ctx.set(dut.rvalid, 0)
                take = False
            if ctx.get(dut.arvalid):
                bursts.append((ctx.get(dut.araddr) // BEAT, ctx.get(dut.arlen) + 1))
            if ctx.get(dut.word_we):
                writes.append((cycle, ctx.get(dut.word_addr), ctx.get(dut.word)))
            if take:
                a, left = bursts[0]
                sent.append(dram[a])
                bursts[0] = (a + 1, left - 1)
                if left == 1:
                    bursts.pop(0)
            await ctx.tick()
            if not ctx.get(dut.busy) and cycle > 3:
                break

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return writes, sent


def _words(values: np.ndarray) -> list[int]:
    return [sum(int(v) << (32 * i) for i, v in enumerate(row)) for row in values]


@pytest.mark.parametrize("beats", [1, 2])
def test_a_sliding_load_writes_the_last_narrow_words_side_by_side(beats):
    words, rows = 7, 2
    got, sent = _load(words=words, rows=rows, beats=beats, slide_on=True, seed=beats)
    pixels = np.array(sent, dtype=np.int64).reshape(-1, beats)
    taps = 4 // beats
    want = _words(slide(pixels, taps))
    assert [w for _, _, w in got] == want
    assert [a for _, a, _ in got] == [3 + r * words + j for r in range(rows) for j in range(words)]


def test_a_sliding_load_takes_the_cycles_of_a_plain_load_and_a_plain_load_is_unchanged():
    plain, sent = _load(words=6, rows=2, beats=1, slide_on=False, seed=3)
    slid, _ = _load(words=6, rows=2, beats=1, slide_on=True, seed=3)
    assert [c for c, _, _ in plain] == [c for c, _, _ in slid]
    assert [w for _, _, w in plain] == sent  # a narrow word: its beat, the other lanes zero
    assert [w for _, _, w in slid] != sent
