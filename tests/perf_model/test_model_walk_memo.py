"""The program walk's transfer memo (``program_timing._transfer_cycles``) gives the recurrences' cycles.

The walk reuses a transfer's cycles (and the paced credit it leaves) for a later transfer of the same
bursts from the same credit state. These tests hold the two facts it rests on against brute force:
a transfer none of whose rows crosses a page has the same bursts at any address, and a transfer
from an equal credit state (``Pace.state_at``) takes the same cycles and leaves an equal state.
Then whole walks with the memo equal walks without it.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

import perf_model
from accel_spec.config import ArrayConfig, Dataflow
from accel_spec.isa import Command, Opcode
from perf_model import dma_timing, program_timing
from perf_model.compiler.conv import compile_conv
from workloads.ops import Conv2d

PAGE = dma_timing.PAGE_BYTES


def test_a_transfer_with_no_row_across_a_page_has_the_same_bursts_at_any_address():
    rng = np.random.default_rng(5)
    same = crossing = 0
    for _ in range(3000):
        W = int(rng.choice([4, 8, 16, 32, 64]))
        row_beats = int(rng.choice([1, 2, 3, 5, 16, 64, 200, 300, 600]))
        rows = int(rng.integers(0, 300))
        stride = int(rng.choice([0, W, 2 * W, 48, 128, 1000, PAGE, PAGE + 64, 3 * PAGE // 2, 12288])) // W * W
        addr = int(rng.integers(0, 1 << 20)) // W * W
        row_bytes = row_beats * W
        crosses = any((addr + r * stride) % PAGE + row_bytes > PAGE for r in range(rows))
        got = dma_timing.same_bursts_any_address(addr, stride, rows, row_bytes)
        assert got == (not crosses), (addr, stride, rows, row_bytes)
        if got:
            split = [min(dma_timing.MAX_BURST, row_beats - i) for i in range(0, row_beats, dma_timing.MAX_BURST)]
            assert list(dma_timing.bursts(addr, stride, rows, row_beats, W)) == split * rows
            same += rows > 0
        else:
            crossing += 1
    assert same > 500 and crossing > 500, (same, crossing)


def _transfer(rng: np.random.Generator, W: int) -> Command:
    load = bool(rng.integers(2))
    rows = int(rng.choice([1, 3, 17, 64]))
    words = int(rng.choice([1, 2, 5]))
    stride = int(rng.choice([W, 4 * W, 128, PAGE]))
    addr = int(rng.choice([0, W, PAGE - W, 3 * PAGE - 2 * W]))  # a few addresses: hits and page crossings
    if load:
        return Command.make(Opcode.LOAD, buffer=int(rng.integers(2)), rows=rows, words=words,
                            dram_addr=addr, dram_stride=stride)
    return Command.make(Opcode.STORE, buffer=2, rows=rows, words=words, dram_addr=addr, dram_stride=stride,
                        requant=int(rng.integers(2)))


@pytest.mark.parametrize("rate", [None, Fraction(5, 3), Fraction(7, 1)])
def test_a_memoised_sequence_of_transfers_is_the_recurrences_cycle_for_cycle(rate):
    """A random sequence of loads and stores at random gaps, walked with the memo and without (the
    recurrences on a credit of their own): every transfer's cycles and the credit after it agree."""
    W = 8
    beats = {"ifmap": 1, "weight": 2, "ofmap": 4, "requant": 1, "qparam": 1,
             **{f"{k}_lanes": 0 for k in ("ifmap", "weight", "ofmap", "requant", "qparam")}}
    rng = np.random.default_rng(11)
    program_timing._TRANSFERS.clear()
    memo_pace = dma_timing.Pace(rate, W) if rate else None
    ref_pace = dma_timing.Pace(rate, W) if rate else None
    at = 0
    for i in range(600):
        cmd = _transfer(rng, W)
        at += int(rng.choice([1, 2, 5, 40, 500]))
        got = program_timing._transfer_cycles(cmd, W, beats, 20, 8, memo_pace, at)
        per_word = program_timing.transfer_word_beats(cmd, beats, W)
        lens = list(dma_timing.bursts(cmd["dram_addr"], cmd["dram_stride"], cmd["rows"], cmd["words"] * per_word, W))
        if cmd.opcode == Opcode.LOAD:
            want = dma_timing.load_cycles(lens, 20, 8, ref_pace, at)
        else:
            want = dma_timing.store_cycles(lens, cmd["rows"] * cmd["words"], per_word, 20, 8,
                                           1 + 6 * cmd["requant"], ref_pace, at)
        assert got == want, (i, cmd)
        if rate:
            assert memo_pace.state_at(at + got) == ref_pace.state_at(at + got), i
        at += got
    assert len(program_timing._TRANSFERS) < 300  # the sequence did repeat itself


@pytest.mark.parametrize("dram", ["none", "ddr3-1600-x64"])
def test_a_walk_with_the_memo_is_the_walk_without_it(dram, monkeypatch):
    """A conv program (many repeated bands and stores) unpaced, and paced (DDR3 at 6.4 bytes a cycle on
    an 8-byte bus)."""
    config = ArrayConfig(rows=8, cols=8, dataflow=Dataflow.WS, ifmap_sram_kib=16, weight_sram_kib=8, ofmap_sram_kib=8,
                         dram=dram, dram_bytes_per_cycle=16, clock_mhz=2000)
    conv = Conv2d(n=1, h=20, w=20, c_in=16, c_out=16, kh=3, kw=3, stride_h=1, stride_w=1, pad_h=1, pad_w=1)
    program = compile_conv(config, conv, requant=True)
    assert (program_timing.dram_rate(config) is None) == (dram == "none")
    for rate in {None, program_timing.dram_rate(config)}:
        program_timing._TRANSFERS.clear()
        cold = perf_model.gemm_program_cycles(config, program, rate=rate)
        warm = perf_model.gemm_program_cycles(config, program, rate=rate)

        class NoMemo(dict):
            def __setitem__(self, key, value):
                pass

        with monkeypatch.context() as m:
            m.setattr(program_timing, "_TRANSFERS", NoMemo())
            plain = perf_model.gemm_program_cycles(config, program, rate=rate)
        assert cold == warm == plain, (rate, cold, plain)
