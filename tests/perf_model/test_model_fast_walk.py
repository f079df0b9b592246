"""The sweep's vectorised cycle model against the program walk the RTL's counters equal.

``perf_model.gemm_program_cycles`` walks the compiled program command by command (tested cycle
for cycle against the RTL in tests/rtl_gen and tests/simulate); the vectorised model must give
the same total, except for the two terms ``docs/memory_system.md`` bounds: rows that cross a
4 KiB page (each split adds 0 .. L + 2 cycles) and queue-load boundaries of a double-buffered
program (``Block.boundary_cycles``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator

import numpy as np
import pytest

import perf_model
from accel_spec import isa
from accel_spec.config import ArrayConfig
from accel_spec.errors import ModelError
from accel_spec.isa import Command, Opcode
from perf_model import dma_timing, program_timing
from perf_model.arrays.designs import DesignArrays
from perf_model.arrays.ops import op_arrays
from perf_model.compiler.scorers import COMPILER_SCORERS
from perf_model.evaluator.design_ops import evaluate_block
from perf_model.evaluator.transfers import LATENCY, STORE_READ_LATENCY, Memory, axi_data_bytes
from perf_model.physical.energy import DEFAULT_ENERGY
from perf_model.physical.pe_area import area_coefficients
from workloads.ops import Gemm, Requant

REQUANT = Requant(multiplier=(1 << 30,), shift=(0,))
D = program_timing.OUTSTANDING


def memory(read_latency: int) -> Memory:
    one = np.ones(1)
    return Memory(data_bytes=one, beat=one, word_beats=(one, one, one), read_latency=one * read_latency,
                  qparam_cycles=0 * one)


def row_bursts(rows: int, row_beats: int) -> list[int]:
    """Bursts of rows that cross no page: each row split at 256 beats."""
    out = []
    for _ in range(rows):
        left = row_beats
        while left:
            out.append(min(left, dma_timing.MAX_BURST))
            left -= out[-1]
    return out


@pytest.mark.parametrize("read_latency", STORE_READ_LATENCY)
def test_transfer_closed_forms_equal_the_dma_recurrences(read_latency):
    mem = memory(read_latency)
    for rows in [*range(1, 34), 64, 100, 257]:
        for beats in [*range(1, 13), 255, 256, 257, 300, 513]:
            lens = row_bursts(rows, beats)
            load = dma_timing.load_cycles(lens, LATENCY, D)
            assert mem.load(np.array([rows]), np.array([beats]))[0] == load + 1, (rows, beats)
            for per_word in (1, 2, 4):
                if beats % per_word:
                    continue
                store = dma_timing.store_cycles(lens, rows * beats // per_word, per_word, LATENCY, D, read_latency)
                assert mem.store(np.array([rows]), np.array([beats]))[0] == store + 1, (rows, beats, per_word)


def test_a_page_split_costs_a_transfer_at_most_one_round_trip():
    rng = np.random.default_rng(3)
    mem = {lat: memory(lat) for lat in STORE_READ_LATENCY}
    split_cases = 0
    for _ in range(3000):
        W = int(rng.choice([1, 2, 4, 8, 16, 32]))
        beats = int(rng.choice([1, 2, 3, 4, 5, 7, 8, 16, 300]))
        rows = int(rng.integers(1, 50))
        pitch = W * int(rng.choice([beats, beats + 1, 4096 // W, rng.integers(beats, 3 * beats + 600)]))
        lens = list(dma_timing.bursts(W * int(rng.integers(0, 4096)), pitch, rows, beats, W))
        splits = len(lens) - len(row_bursts(rows, beats))
        split_cases += splits > 0
        lat = int(rng.choice(STORE_READ_LATENCY))
        per_word = int(rng.choice([p for p in (1, 2, 4) if beats % p == 0]))
        r, b = np.array([rows]), np.array([beats])
        extra_load = dma_timing.load_cycles(lens, LATENCY, D) + 1 - mem[lat].load(r, b)[0]
        extra_store = (dma_timing.store_cycles(lens, rows * beats // per_word, per_word, LATENCY, D, lat) + 1
                       - mem[lat].store(r, b)[0])
        for extra in (extra_load, extra_store):
            assert 0 <= extra <= (LATENCY + 2) * splits, (W, beats, rows, pitch, splits, extra)
    assert split_cases > 500


def test_the_vectorised_bus_width_is_the_command_encodings():
    rows, cols, bits, bw = (a.ravel() for a in np.meshgrid([1, 2, 3, 4, 6, 8, 12, 16, 32, 64, 256],
                                                              [1, 2, 5, 8, 16, 64, 128, 192],
                                                              [8, 16],
                                                              [0.5, 1, 2, 3, 4, 8, 16, 32, 48.6, 64, 100, 1e5]))
    for stationary in (False, True):
        got = axi_data_bytes(rows, cols, bits, bw, stationary)
        want = [isa.axi_data_bytes(int(r), int(c), int(b), float(w), stationary)
                for r, c, b, w in zip(rows, cols, bits, bw, strict=True)]
        assert got.tolist() == want
    assert axi_data_bytes(np.array([64]), np.array([64]), np.array([8]), np.array([64.0]), True)[0] == 16
    assert sorted(set(axi_data_bytes(rows, cols, bits, bw).tolist()))[-2:] == [64, isa.MAX_AXI_DATA_BYTES]


@pytest.mark.parametrize("requant", [False, True])
def test_the_store_read_latency_is_the_walks(requant):
    config = ArrayConfig(rows=4, cols=4, dram_bytes_per_cycle=4.0, dram="none")
    beats = program_timing.word_beats(config)["requant" if requant else "ofmap"]
    store = Command.make(Opcode.STORE, buffer=2, dram_addr=0, dram_stride=64, rows=5, words=1, buf_addr=0,
                         row_step=1, word_step=5, requant=int(requant))
    walk = program_timing._transfer_cycles(store, 4, program_timing.word_beats(config), LATENCY, D)
    mem = memory(STORE_READ_LATENCY[int(requant)])
    assert mem.store(np.array([5]), np.array([beats]))[0] == walk + 1


def random_case(rng: np.random.Generator, wide: bool = False) -> tuple[ArrayConfig, Gemm, bool]:
    """A small design and GEMM; ``wide``: arrays of 64 or 128 int8 lanes (WS/OS) on 64- and 128-byte buses."""
    kib = [8, 16, 32, 64] if wide else [1, 2, 4, 16]
    config = ArrayConfig(
        rows=int(rng.choice([64, 128] if wide else [2, 3, 4, 8, 12, 16])),
        cols=int(rng.choice([64, 128] if wide else [2, 4, 6, 8, 16])),
        dataflow=str(rng.choice(["ws", "os"] if wide else ["ws", "os", "is"])),
        ifmap_sram_kib=int(rng.choice(kib)), weight_sram_kib=int(rng.choice(kib)), ofmap_sram_kib=int(rng.choice(kib)),
        dram_bytes_per_cycle=float(rng.choice([64, 128] if wide else [1, 2, 4, 8, 32])),
        double_buffered=bool(rng.integers(0, 2)), shadow_stationary=bool(rng.integers(0, 2)), dram="none",
    )
    top = 800 if wide else 200  # wide arrays: GEMMs of enough tiles that some programs take several queue-loads
    return config, Gemm(m=int(rng.integers(1, top)), k=int(rng.integers(1, top)), n=int(rng.integers(1, top))), \
        bool(rng.integers(0, 2))


def transfers(config: ArrayConfig, program: perf_model.GemmProgram) -> Iterator[tuple[Command, int]]:
    """The program's LOAD and STORE commands, each with the beats of one of its buffer words."""
    beats = program_timing.word_beats(config)
    for cmd in program.commands:
        if cmd.opcode == Opcode.LOAD:
            yield cmd, beats[("ifmap", "weight", "ofmap", "qparam")[cmd["buffer"]]]
        elif cmd.opcode == Opcode.STORE:
            yield cmd, beats["requant" if cmd["requant"] else "ofmap"]


def page_splits(config: ArrayConfig, program: perf_model.GemmProgram) -> int:
    """Bursts the program's transfers have beyond one per row and 256 beats (rows split at a page)."""
    out = 0
    for cmd, per_word in transfers(config, program):
        row = cmd["words"] * per_word
        lens = dma_timing.bursts(cmd["dram_addr"], cmd["dram_stride"], cmd["rows"], row, program.data_bytes)
        out += sum(1 for _ in lens) - cmd["rows"] * math.ceil(row / dma_timing.MAX_BURST)
    return out


@pytest.mark.parametrize("pages", [False, True])
@pytest.mark.parametrize("wide", [False, True])
def test_the_fast_model_is_the_walk_on_random_designs(pages, wide, monkeypatch):
    """Without page boundaries (``pages=False``) every single-buffered program and every program of
    one queue-load is exact; with them the walk is slower by at most the stated bound. ``wide``:
    buses of 64 and 128 bytes, which fetch two or four commands a beat."""
    if not pages:
        monkeypatch.setattr(dma_timing, "PAGE_BYTES", 1 << 40)
    rng = np.random.default_rng(2024 + wide)
    exact = chunked = split = cases = resident = odd = 0
    widths = set()
    while cases < 40:
        config, gemm, requant = random_case(rng, wide)
        try:
            program = perf_model.compile_gemm(config, gemm, requant=requant)
        except ModelError:
            continue
        cases += 1
        walk = perf_model.gemm_program_cycles(config, program)
        op = Gemm(m=gemm.m, k=gemm.k, n=gemm.n, requant=REQUANT if requant else None)
        block = evaluate_block(DesignArrays.from_configs([config]), op_arrays([(op, 1)]), DEFAULT_ENERGY,
                               area_coefficients(), scorers=COMPILER_SCORERS)
        total, compute = block.total_cycles[0, 0], block.compute_cycles[0, 0]
        splits = page_splits(config, program)
        slack = block.boundary_cycles[0, 0] + (LATENCY + 2) * splits
        where = f"{config} {gemm} requant={requant}: walk {walk.total}, fast {total}"
        assert compute == walk.compute, where
        assert 0 <= walk.total - total <= slack, where
        if splits == 0 and (len(program.chunks) == 1 or not config.double_buffered):
            assert total == walk.total and total - compute == walk.stall, where
        exact += total == walk.total
        chunked += len(program.chunks) > 1 and config.double_buffered
        split += splits > 0
        resident += bool(block.resident[0, 0])
        widths.add(program.data_bytes)
        odd += len(program.commands) * isa.COMMAND_BYTES % program.data_bytes != 0
    assert widths == {64, 128} if wide else max(widths) <= isa.COMMAND_BYTES, widths
    assert odd >= 10 if wide else odd == 0, odd  # programs whose fetch ends in a part-filled beat
    assert split == 0 if not pages else split >= (10 if wide else 20), split
    assert exact >= (36 if not pages else 20) and chunked >= 3 and resident >= 3, (exact, chunked, resident)


def pacing_slack(config: ArrayConfig, program: perf_model.GemmProgram, beat: float) -> float:
    """What the fast model may overstate a paced walk by (``docs/memory_system.md``): per transfer
    ``(beat - 1) * b * (rows - q * (D - 1)) + beat`` (``b`` beats a row, ``q = (rows - 1) // D``),
    and one beat for each queue-load's fetch."""
    out = beat * len(program.chunks)
    for cmd, per_word in transfers(config, program):
        rows, q = cmd["rows"], (cmd["rows"] - 1) // D
        out += (beat - 1) * cmd["words"] * per_word * (rows - q * (D - 1)) + beat
    return out


@pytest.mark.parametrize("pages", [False, True])
def test_the_fast_model_bounds_the_paced_walk_on_random_designs(pages, monkeypatch):
    """A memory slower than the bus (``program_timing.dram_rate``): the fast model stretches every
    beat by ``beat = W / rate``, the walk (and the RTL's DRAM model) moves beats on a credit that
    an idle memory saves (up to two beats' worth), so the fast model is above the walk, by at most
    :func:`pacing_slack`; below it only by the unpaced bound's page splits and queue-load boundaries."""
    if not pages:
        monkeypatch.setattr(dma_timing, "PAGE_BYTES", 1 << 40)
    rng = np.random.default_rng(99)
    cases = wide = 0
    over = []
    while cases < 40:
        config, gemm, requant = random_case(rng, bool(cases % 3 == 0))
        W = program_timing.axi_data_bytes(config)
        config = dataclasses.replace(config, dram_bytes_per_cycle=W * float(rng.choice([0.55, 0.7, 0.76, 0.9])))
        try:
            program = perf_model.compile_gemm(config, gemm, requant=requant)
        except ModelError:
            continue
        rate = program_timing.dram_rate(config)
        if W < 2 or rate is None or program.data_bytes != W:
            continue
        cases += 1
        wide += W >= 64
        walk = perf_model.gemm_program_cycles(config, program, rate=rate)
        op = Gemm(m=gemm.m, k=gemm.k, n=gemm.n, requant=REQUANT if requant else None)
        block = evaluate_block(DesignArrays.from_configs([config]), op_arrays([(op, 1)]), DEFAULT_ENERGY,
                               area_coefficients(), scorers=COMPILER_SCORERS)
        total = float(block.total_cycles[0, 0])
        below = block.boundary_cycles[0, 0] + (LATENCY + 2) * page_splits(config, program)
        above = pacing_slack(config, program, W / float(rate))
        where = f"{config} {gemm} requant={requant}: walk {walk.total}, fast {total}, slack {above}"
        assert block.compute_cycles[0, 0] == walk.compute, where
        assert -below <= total - walk.total <= above, where
        over.append((total - walk.total) / walk.total)
    assert wide >= 10, wide
    assert max(over) > 0.001, max(over)  # the credit really saves cycles (the bound is not vacuous)
