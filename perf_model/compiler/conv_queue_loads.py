"""A conv program longer than the command queue, walked from its runs: the queue-loads' walk over the
commands' precomputed cycles (``perf_model.compiler.conv_schedule`` and ``conv_batch`` call it for a
tiling whose commands do not fit one queue-load; one that does takes their closed form).

Each queue-load runs from idle units with its own fetch (``program_timing.program_cycles``' rules,
every command's ``n`` given), and a ``WINDOW`` opens each queue-load's first run, as
``compile_conv`` emits it; a transfer is never split into bursts twice (its ``n`` is an input).
"""

from __future__ import annotations

import numpy as np

from accel_spec.isa import QUEUE_DEPTH, fetch_beats
from perf_model import dma_timing
from perf_model.program_timing import DEFAULT_DRAM_LATENCY, FETCH_DECODE_CYCLES, ISSUE_CYCLES, OUTSTANDING

__all__ = ["fetch_cycles", "walk_single", "walk_double"]

_L, _D = DEFAULT_DRAM_LATENCY, OUTSTANDING
_LOAD, _STORE, _RUN, _WINDOW = 0, 1, 2, 3


def fetch_cycles(commands: int, W: int) -> int:
    """Cycles ``n`` of the fetch of a queue-load of ``commands`` commands on a bus of ``W`` bytes."""
    lens = list(dma_timing.bursts(0, 0, 1, fetch_beats(commands, W), W))
    return dma_timing.load_cycles(lens, _L, _D)


def _chunks(cmds: list[tuple[int, int, bool, bool]], W: int) -> int:
    """Total cycles of ``(kind, n, wait_dma, wait_run)`` commands run as queue-loads
    (``program_timing.program_cycles``' rules with every ``n`` given)."""
    total = 0
    for a in range(0, len(cmds), QUEUE_DEPTH):
        part = cmds[a:a + QUEUE_DEPTH]
        decode = 1 + fetch_cycles(len(part), W) + FETCH_DECODE_CYCLES
        dma_free = run_free = 0
        for kind, n, wait_dma, wait_run in part:
            c = decode
            if kind in (_LOAD, _STORE) or wait_dma:
                c = max(c, dma_free)
            if kind == _RUN or wait_run:
                c = max(c, run_free)
            if kind in (_LOAD, _STORE):
                dma_free = c + n + 1
            elif kind == _RUN:
                run_free = c + n + 1
            decode = c + ISSUE_CYCLES
        total += max(decode - 1, dma_free, run_free)
    return total


def _windowed(cmds: list[tuple[int, int, bool, bool]], win: bool, held: list[int]) -> None:
    """Add the run's ``WINDOW`` (when it changed, or the run opens a queue-load: ``held``, the
    queue-load of the last one, as ``_ConvBuilder.run``)."""
    while win or len(cmds) // QUEUE_DEPTH != held[0]:
        win = False
        held[0] = len(cmds) // QUEUE_DEPTH
        cmds.append((_WINDOW, 0, False, False))


def walk_single(cyc: np.ndarray, band_n: np.ndarray, w_n: np.ndarray, new_band: np.ndarray, new_w: np.ndarray,
                new_win: np.ndarray, stores: np.ndarray, last_out: np.ndarray, qp: int, W: int) -> int:
    """Total cycles of a single-buffered conv program from its runs (``conv_schedule.RunArrays``' arrays:
    each run's cycles, band and weight loads' ``n`` and whether it loads them, opens a window, ends an
    output tile and its store's ``n + 1``; ``qp``: the output stage's parameters' load ``n + 1``, or 0)."""
    cmds: list[tuple[int, int, bool, bool]] = [(_LOAD, qp - 1, False, False)] if qp else []
    held = [-1]
    for c, band, w, nb, nw, win, store, out in zip(*(x.tolist() for x in (
            cyc, band_n, w_n, new_band, new_w, new_win, stores, last_out)), strict=True):
        if nb:
            cmds.append((_LOAD, band, False, True))
        if nw:
            cmds.append((_LOAD, w, False, True))
        _windowed(cmds, win, held)
        cmds.append((_RUN, c, True, False))
        if out:
            cmds.append((_STORE, store - 1, False, True))
    return _chunks(cmds, W)


def walk_double(cyc: np.ndarray, band_n: np.ndarray, w_n: np.ndarray, new_band: np.ndarray, new_w: np.ndarray,
                new_win: np.ndarray, piece_n: np.ndarray, pieces: np.ndarray, final: int, qp: int, W: int) -> int:
    """Total cycles of a double-buffered conv program from its runs (as :func:`walk_single`; each run's
    part of the previous output tile's store, its ``n + 1`` and whether it carries one, and the last
    tile's store's ``n``)."""
    cmds: list[tuple[int, int, bool, bool]] = [(_LOAD, qp - 1, False, False)] if qp else []
    runs = list(zip(*(x.tolist() for x in (cyc, band_n, w_n, new_band, new_w, new_win, piece_n, pieces)), strict=True))

    def loads(i: int) -> None:
        _, band, w, nb, nw, *_ = runs[i]
        if nb:
            cmds.append((_LOAD, band, False, False))
        if nw:
            cmds.append((_LOAD, w, False, False))

    loads(0)
    held = [-1]
    for i, (c, _, _, _, _, win, piece, part) in enumerate(runs):
        _windowed(cmds, win, held)
        cmds.append((_RUN, c, True, False))
        if part:
            cmds.append((_STORE, piece - 1, False, False))
        if i + 1 < len(runs):
            loads(i + 1)
    cmds.append((_STORE, final, False, True))
    return _chunks(cmds, W)
