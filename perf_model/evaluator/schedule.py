"""Cycles, DRAM/SRAM traffic and stalls of a tiled GEMM, in closed form over run classes.

The runs of one GEMM instance are the tiles of its :class:`~perf_model.evaluator.tiling.Tiling`, in loop
order; ``perf_model.compiler.program.compile_gemm`` turns them into the command program the RTL runs and
:func:`perf_model.program_timing.program_cycles` walks. This module computes that walk's total
without walking: the same program, counted by classes of runs, vectorised over design-op elements.

Per run ``i``: ``cyc_i = timing.run_cycles(tile)`` (compute cycles are their sum); its loads are
the input tiles whose indices changed since run ``i - 1`` (all at the first run); an output tile
is stored after its last run. Every command costs the sequencer ``n + 1`` cycles of its unit
(``n``: ``timing.run_cycles`` of a RUN, :class:`~perf_model.evaluator.transfers.Memory` ``load`` /
``store`` of a transfer: rows, beats, DRAM latency, bursts in flight); a program of ``c``
commands adds its fetch and first decode per queue-load (``Memory.program``). Then::

    single buffered   total = fetch + sum over commands of (n + 1)
    double buffered   total = fetch + pre + sum_i max(cyc_i + 1, 2 + S_i) + store_last

``pre``: the first run's loads (and the output stage's parameters); ``S_i``: the DMA commands
the compiler puts between ``RUN(i)`` and ``RUN(i + 1)``, run ``i``'s part of the previous output
tile's store (``perf_model.compiler.program`` spreads it over the next tile's runs; single buffered it
is whole, after the tile's last run) and the loads of run ``i + 1``, each ``n + 1``, on one DMA
engine while the array computes run ``i``; 2 cycles of issue before the first of them. Both are
exact for the walk of one queue-load (every row of a transfer inside one 4 KiB page); a program
longer than the queue (``QUEUE_DEPTH`` commands) also drains the ping-pong at each queue-load
boundary, at most one period per boundary (``Schedule.boundary_bound``).

The sums run over classes of runs (first / middle / next-to-last / last index along each loop
position, as the pairing and the store parts need), each class with a count, so nothing loops
over tiles.

SRAM accesses by the array: the operand spanning ``(r, c)`` is touched once per ``s`` tile,
the one spanning ``(s, r)`` once per column fold, the one spanning ``(s, c)`` once per row
fold; the output is written each time it is touched and read back each time but the first
(read-modify-write of the accumulator words). Every DRAM byte also crosses its buffer once.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cache

import numpy as np

from perf_model import timing
from perf_model.evaluator.problem import Problem, put_columns, row_index, take_rows
from perf_model.evaluator.run_classes import ORDER_ARRAY, ORDER_INVERSE, RunClasses
from perf_model.evaluator.sequencer_periods import Totals, any_order, rho_inner
from perf_model.evaluator.tiling import Tiling, gemm_tile
from perf_model.evaluator.transfers import Memory

__all__ = ["Schedule", "schedule", "op_cycles", "fast_cycles_ok"]


@dataclass
class Schedule:
    """Per-element results for one GEMM instance (see :func:`op_cycles` for the op).

    Attributes:
        compute_cycles: sum of ``timing.run_cycles`` over the runs.
        folds: array folds over the runs.
        runs: number of runs (tiles).
        total: total cycles of the instance's program, single or double buffered as the element is
            (the walk's ``total``; zeros when no memory interface was given).
        commands: commands of the program.
        boundary_bound: how many cycles the queue-load boundaries of a double-buffered program
            may add to ``total_double`` at most (0 for a program that fits the queue).
        dram_read, dram_write: DRAM bytes ``(3, N)`` of the operand free in r, c, s (its
            buffer: ``Problem.operand``, A ifmap, B weight, C ofmap).
        sram_read, sram_write: SRAM bytes ``(3, N)`` in the buffer of the operand free in r, c, s.
    """

    compute_cycles: np.ndarray
    folds: np.ndarray
    runs: np.ndarray
    total: np.ndarray
    commands: np.ndarray
    boundary_bound: np.ndarray
    dram_read: np.ndarray
    dram_write: np.ndarray
    sram_read: np.ndarray
    sram_write: np.ndarray

    def widen(self, index: np.ndarray, n: int) -> Schedule:
        """This schedule of elements ``index`` of ``n`` as a schedule of all ``n``, zeros elsewhere."""
        out = {}
        for f in fields(self):
            values = getattr(self, f.name)
            out[f.name] = np.zeros(values.shape[:-1] + (n,))
            put_columns(out[f.name], index, values)
        return Schedule(**out)


@cache
def fast_cycles_ok() -> bool:
    """Whether :func:`timing.run_cycles` has the closed form the fast path assumes.

    ``run_cycles = ceil(dr/R) * ceil(dc/C) * fold(ds) + tail(ds) + RUN_OVERHEAD`` with
    ``(fold, tail) = timing.fold_terms(...)`` depending on the streamed dim alone (and the
    design). Checked once on a probe grid of every dataflow, both shadow settings; if the
    contract ever leaves that form the model calls ``timing.run_cycles`` itself (slower,
    still exact).
    """
    rng = np.random.default_rng(12345)
    size = 4000
    df = rng.integers(0, 3, size)
    rows, cols = rng.integers(1, 70, size), rng.integers(1, 70, size)
    m, k, n = (rng.integers(1, 300, size) for _ in range(3))
    shadow = rng.random(size) < 0.5
    expected = timing.run_cycles(df, rows, cols, m, k, n, shadow)
    ds, dr, dc = (np.asarray(x, dtype=np.float64) for x in timing.array_dims(df, m, k, n))
    got = _fast_run_cycles(df, rows.astype(np.float64), cols.astype(np.float64), shadow, dr, dc, ds)
    return bool(np.array_equal(expected, got.astype(np.int64)))


def _fast_run_cycles(df: np.ndarray, R: np.ndarray, C: np.ndarray, shadow: np.ndarray, zr: np.ndarray,
                     zc: np.ndarray, zs: np.ndarray) -> np.ndarray:
    fold, tail = timing.fold_terms(df, zs, R, C, shadow)
    return np.ceil(zr / R) * np.ceil(zc / C) * fold + tail + timing.RUN_OVERHEAD


def _shape_cycles(p: Problem, z: np.ndarray) -> np.ndarray:
    """``timing.run_cycles`` of mapped tile shapes ``z`` (3, ..., N), as float."""
    if fast_cycles_ok():
        return _fast_run_cycles(p.df, p.R, p.C, p.shadow, z[0], z[1], z[2])
    flat = z.reshape(3, -1, z.shape[-1])
    out = np.empty(flat.shape[1:])
    for i in range(flat.shape[1]):
        mt, kt, nt = gemm_tile(p, flat[:, i]).astype(np.int64)
        out[i] = timing.run_cycles(p.df, p.R.astype(np.int64), p.C.astype(np.int64), mt, kt, nt, p.shadow)
    return out.reshape(z.shape[1:])


def schedule(p: Problem, tiling: Tiling, memory: Memory | None = None,
             double_buffered: np.ndarray | bool = False, a_on_chip: np.ndarray | None = None,
             c_on_chip: np.ndarray | None = None) -> Schedule:
    """Evaluate the tiling of every element of ``p`` (see the module docstring).

    ``memory`` ``None`` computes traffic alone (totals 0); ``double_buffered``: per element (or
    for all), the program is the ping-pong one. On-chip reuse (``perf_model.compiler.chain``), per
    element: ``a_on_chip``, ``A`` is already in the ifmap (no A loads, no A bytes from DRAM; the
    ifmap is written with it once, by the op before); ``c_on_chip``, the output is MOVEd into the
    ifmap (``memory.move``: no C bytes to DRAM).
    """
    D = p.D
    t = np.minimum(tiling.t, D)  # a tile never exceeds its dim (the first tile's size, also with one tile)
    n = np.ceil(D / t)
    last = D - (n - 1) * t  # size of the last tile along each dim (== t when it divides)
    fr = (n[0] - 1) * np.ceil(t[0] / p.R) + np.ceil(last[0] / p.R)  # row folds over the r tiles
    fc = (n[1] - 1) * np.ceil(t[1] / p.C) + np.ceil(last[1] / p.C)
    folds = fr * fc * n[2]
    runs = n[0] * n[1] * n[2]

    # Compute cycles: the sum of run_cycles over the tiles.
    cyc8: np.ndarray | None = None
    fold_t = tail_t = fold_l = tail_l = np.zeros(0)
    if fast_cycles_ok():  # ceil(r/R) ceil(c/C) fold(s) + tail(s) + RO summed over tiles factorises
        fold_t, tail_t = timing.fold_terms(p.df, t[2], p.R, p.C, p.shadow)
        fold_l, tail_l = timing.fold_terms(p.df, last[2], p.R, p.C, p.shadow)
        fold_sum = (n[2] - 1) * fold_t + fold_l  # over the s tiles
        tail_sum = (n[2] - 1) * tail_t + tail_l
        compute = fr * fc * fold_sum + n[0] * n[1] * tail_sum + runs * timing.RUN_OVERHEAD
    else:  # 8 shape classes (full / last tile along r, c, s), each from timing.run_cycles
        shapes = np.empty((3, 8, len(p)))
        counts = np.ones((8, len(p)))
        for cls in range(8):
            for d in range(3):
                is_last = (cls >> d) & 1
                shapes[d, cls] = last[d] if is_last else t[d]
                counts[cls] *= 1.0 if is_last else n[d] - 1
        cyc8 = _shape_cycles(p, shapes)
        compute = (counts * cyc8).sum(axis=0)

    # DRAM traffic: each operand f times over (see the docstring of _tiling).
    by_position = row_index(ORDER_ARRAY, tiling.order)
    npos = take_rows(n, by_position)
    factor_pos = np.stack([
        1.0 + (npos[0] - 1) * ((npos[1] > 1) | (npos[2] > 1)),
        np.where(tiling.resident, 1.0, 1.0 + (npos[1] - 1) * (npos[2] > 1)),  # a resident strip: once
        np.ones(len(p)),
    ])
    factor = take_rows(factor_pos, row_index(ORDER_INVERSE, tiling.order))  # back to mapped dims
    moved = p.bytes * factor  # operand free in r, c, s; buffer bytes (packed int4: twice its DRAM bytes)
    chip_read = np.where(p.is_out, moved - p.bytes, moved)  # partial sums read back, or inputs
    chip_write = np.where(p.is_out, moved, 0.0)
    dram_read, dram_write = chip_read * p.dram_scale, chip_write * p.dram_scale

    # SRAM accesses (module docstring), per operand by free dim.
    touched = np.stack([D[2] * D[1] * fr, D[2] * D[0] * fc, D[0] * D[1] * n[2]])
    out_elems = np.stack([D[2] * D[1], D[2] * D[0], D[0] * D[1]])
    touch_bytes = touched * p.elem_bytes
    sram_read = np.where(p.is_out, (touched - out_elems) * p.elem_bytes, touch_bytes)
    sram_write = np.where(p.is_out, touch_bytes, 0.0)
    sram_write += chip_read  # what DRAM brings lands in the operand's buffer
    sram_read += chip_write  # what goes to DRAM leaves it
    if a_on_chip is not None:  # A crosses no DRAM; it was written into the ifmap once
        own = a_on_chip & (p.operand == 0)
        sram_write = np.where(own, sram_write - chip_read + p.bytes, sram_write)
        dram_read = np.where(own, 0.0, dram_read)
    if c_on_chip is not None:  # the output leaves the ofmap for the ifmap, not for DRAM
        dram_write = np.where(c_on_chip & p.is_out, 0.0, dram_write)

    zero = np.zeros(len(p))
    totals = Totals(zero, zero, zero)
    if memory is not None:
        streamed = (fold_t, tail_t, fold_l, tail_l) if cyc8 is None else None
        classes = RunClasses(p, t, last, n, by_position, cyc8, streamed, memory, tiling,
                              np.broadcast_to(np.asarray(double_buffered, dtype=bool), (len(p),)), compute,
                              a_on_chip)
        rho = np.where(p.df == 1, 2, 0)  # reduction dim: the output is free in it
        if (ORDER_ARRAY[:, 2].take(tiling.order) == rho).all():  # the reduction loop innermost: every default tiling
            totals = rho_inner(classes)
        else:
            totals = any_order(classes, take_rows(p.is_out, by_position))
    commands = runs + totals.transfers + (memory.qparam_cycles > 0 if memory is not None else 0.0)
    fetch = memory.program(commands) if memory is not None else zero
    return Schedule(
        compute_cycles=compute, folds=folds, runs=runs, total=fetch + totals.total, commands=commands,
        boundary_bound=totals.boundary(commands),
        dram_read=dram_read, dram_write=dram_write, sram_read=sram_read, sram_write=sram_write,
    )


def op_cycles(s: Schedule, instances: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(compute, total)`` cycles of an op of ``instances`` GEMM instances, each its own program
    (started by the host after the previous one's interrupt, as ``simulate`` runs them)."""
    compute = s.compute_cycles * instances
    total = s.total * instances
    return compute, np.maximum(total, compute)
