# amaranth: UnusedElaboratable=no
"""The vector unit's transpose (op code 13) in Amaranth's simulator: every word of the memory after
the run equal to the one built from numpy's ``.T`` of random int8 rows (output rows written, lanes
past the input's rows 0, words past them and every other word untouched), and its busy cycles
equal to the contract's (``perf_model.vector_timing.vector_run_cycles``)."""

from __future__ import annotations

import numpy as np
import pytest

from perf_model.vector_timing import vector_run_cycles
from tests.rtl_gen.vector_testlib import TransposeRun, run_transpose

FILL = 0x5A  # each lane of a word no one writes holds 0x5A (code 90)


def _word(values: np.ndarray, lanes: int) -> int:
    """``lanes`` int8 values (fewer: zero-padded) as one word, lane ``i`` at bits ``[8i, 8i + 8)``."""
    padded = np.zeros(lanes, np.int64)
    padded[:values.size] = values
    return sum((int(v) & 0xFF) << (8 * i) for i, v in enumerate(padded))


def expected_memory(run: TransposeRun) -> list[int]:
    """The memory after ``run`` from numpy: output row ``j`` (at ``dst + j * pitch``) is column ``j``
    of the input in ``ceil(R / lanes)`` words, the rest as it was."""
    memory = run.init()
    lanes = run.lanes
    for j, column in enumerate(run.x.T):
        for b in range(-(-column.size // lanes)):
            memory[run.dst + j * run.pitch + b] = _word(column[b * lanes:(b + 1) * lanes], lanes)
    return memory


def _fill(lanes: int) -> int:
    return _word(np.full(lanes, FILL), lanes)


def _case(lanes: int, rows: int, n: int, *, pitch_extra: int = 0, words_extra: int = 0, seed: int = 0) -> TransposeRun:
    x = np.random.default_rng(seed).integers(-128, 128, (rows, n), dtype=np.int8)
    x[0, 0], x[-1, -1] = -128, 127
    return TransposeRun(lanes, x, -(-rows // lanes) + pitch_extra, -(-n // lanes) + words_extra, _fill(lanes))


# (lanes, R, n, pitch past ceil(R / lanes), words past ceil(n / lanes)): R and n whole blocks and
# words; a part-filled last block (its lanes past R written 0); a part-filled last word (fewer
# output rows from it); one row; one element a row; a pitch of spare words (not written); one and
# two lanes; input rows with a padding word (a word of no elements: reads, no writes); three blocks
CASES = [(4, 8, 8, 0, 0), (4, 6, 8, 0, 0), (4, 8, 6, 0, 0), (4, 1, 7, 0, 0), (4, 5, 1, 0, 0), (4, 7, 5, 2, 0),
         (1, 3, 4, 1, 0), (2, 5, 3, 0, 0), (4, 5, 6, 0, 1), (2, 9, 5, 1, 0), (1, 1, 1, 0, 0)]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "L{}-R{}-n{}-p{}-w{}".format(*c))
def test_transpose_bit_exact_in_the_contracts_cycles(case):
    lanes, rows, n, pitch_extra, words_extra = case
    run = _case(lanes, rows, n, pitch_extra=pitch_extra, words_extra=words_extra, seed=sum(case))
    got, cycles = run_transpose(run)
    want = expected_memory(run)
    bad = [i for i, (g, w) in enumerate(zip(got, want, strict=True)) if g != w]
    assert not bad, f"{len(bad)} words differ, first at {bad[0]}: {got[bad[0]]:x} vs {want[bad[0]]:x}"
    assert cycles == vector_run_cycles(13, rows, run.words, n=n, lanes=lanes)


def test_transpose_cycles_by_hand():
    """6 rows of 7 elements on 4 lanes: 2 blocks (4 rows, 2 rows) of 2 words, per block and word
    its rows' reads, a wait and the word's output rows (4, then 3): 1 + (4+1+4) + (4+1+3) + (2+1+4)
    + (2+1+3) = 31 cycles."""
    run = _case(4, 6, 7)
    got, cycles = run_transpose(run)
    assert got == expected_memory(run)
    assert cycles == 31


def test_a_wrong_pitch_fails_the_comparison():
    """The unit given a pitch one word wider than the reference's writes elsewhere: the comparison sees it."""
    run = _case(2, 3, 4, pitch_extra=1)
    wide = TransposeRun(run.lanes, run.x, run.pitch + 1, run.words, run.fill)
    got, _ = run_transpose(wide)
    assert got[:len(run.init())] != expected_memory(run)
    assert got == expected_memory(wide)


def test_transpose_in_icarus():
    """The unit exported to Verilog (what Yosys prices and Verilator builds) in Icarus: a part-filled
    block and word and a pitch of spare words on 2 lanes, bit-exact in the contract's cycles."""
    from pathlib import Path

    from accel_dse.simulate import find_simulator
    from tests.rtl_gen.vector_testlib import run_transpose_icarus

    iverilog = find_simulator("icarus").executable
    vvp = str(Path(iverilog).with_name("vvp")) if Path(iverilog).with_name("vvp").exists() else "vvp"
    run = _case(2, 5, 3, pitch_extra=1, seed=4)
    got, cycles = run_transpose_icarus(run, iverilog, vvp)
    assert got == expected_memory(run)
    assert cycles == vector_run_cycles(13, 5, 2, n=3, lanes=2)
