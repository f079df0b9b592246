"""Cycles, DRAM/SRAM traffic and stalls of a tiled GEMM, in closed form over tile classes.

The runs of one GEMM instance are the tiles of its :class:`~perf_model._tiling.Tiling`, in loop
order. Per run ``i`` (all per instance; an op's ``count * batch`` instances run back to back):

* ``cyc_i = timing.run_cycles(tile)`` (the RTL contract; compute cycles are their sum);
* ``load_i``: the bytes of every input tile whose indices changed since run ``i - 1`` (all of
  them at the first run), plus the partial sums of the output tile when it changed and its
  reduction index is not 0 (a spill being read back);
* ``store_i``: the output tile's bytes when the next run has another output tile (or this is
  the last run).

Without double buffering transfers and compute serialise:
``total = sum(cyc_i) + sum(load_i + store_i) / bw``. With double (ping-pong) buffering each
run's transfers overlap compute, roofline per tile, except the very first loads and the very
last store, which nothing can hide::

    total = load_first / bw + sum_i max(cyc_i, x_i) + store_last / bw
    x_i   = (load_i [not the op's first run] + store_i [not the op's last run]) / bw

``bw = dram_bytes_per_cycle``; stall cycles are ``total - compute`` (fractional: bandwidth is
an average). The sums run over 27 classes of runs (first / middle / last index along each
loop), each class with a count, so nothing loops over tiles.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from itertools import product

import numpy as np

from perf_model import timing
from perf_model._problem import Problem, row_index, take_rows
from perf_model._tiling import ORDERS, Tiling, gemm_tile

__all__ = ["Schedule", "schedule", "fast_cycles_ok"]

Bool = bool | np.ndarray
_ORDER_ARRAY = np.array(ORDERS, dtype=np.int64)  # (6, 3): mapped dim at each loop position
_ORDER_INVERSE = np.argsort(_ORDER_ARRAY, axis=1)  # (6, 3): loop position of each mapped dim


@dataclass
class Schedule:
    """Per-element results for one GEMM instance (multiply by instances for the op).

    Attributes:
        compute_cycles: sum of ``timing.run_cycles`` over the runs.
        folds: array folds over the runs.
        runs: number of runs (tiles).
        total_db, total_serial: cycles with double buffering / without (see module docstring).
        dram_read, dram_write: DRAM bytes ``(3, N)`` of the operand free in r, c, s (its
            buffer is ``Problem.operand``: A ifmap, B weight, C ofmap).
        sram_read, sram_write: SRAM bytes ``(3, N)`` of the buffer of the operand free in r, c, s.
        first_last: the cycles of ``load_first + store_last`` exposure and the per-instance
            overlap term, combined by :func:`op_totals`.
    """

    compute_cycles: np.ndarray
    folds: np.ndarray
    runs: np.ndarray
    overlapped: np.ndarray
    first_correction: np.ndarray
    last_correction: np.ndarray
    single_correction: np.ndarray
    exposed: np.ndarray
    dram_read: np.ndarray
    dram_write: np.ndarray
    sram_read: np.ndarray
    sram_write: np.ndarray
    single_run: np.ndarray


@cache
def fast_cycles_ok() -> bool:
    """Whether :func:`timing.run_cycles` has the closed form the fast path assumes.

    ``run_cycles = ceil(dr/R) * ceil(dc/C) * (ds + 2R + C - 2 + FOLD_OVERHEAD) + RUN_OVERHEAD``
    (constants read from ``timing`` at call time). Checked once on a probe grid of every
    dataflow; if the contract's formula ever changes the model calls ``timing.run_cycles``
    itself (slower, still exact).
    """
    rng = np.random.default_rng(12345)
    size = 4000
    df = rng.integers(0, 3, size)
    rows, cols = rng.integers(1, 70, size), rng.integers(1, 70, size)
    m, k, n = (rng.integers(1, 300, size) for _ in range(3))
    expected = timing.run_cycles(df, rows, cols, m, k, n)
    dr, dc, ds = timing.mapped_dims(df, m, k, n)
    got = _fast_run_cycles(rows.astype(float), cols.astype(float), dr.astype(float), dc.astype(float),
                           ds.astype(float))
    return bool(np.array_equal(expected, got.astype(np.int64)))


def _fast_run_cycles(R: np.ndarray, C: np.ndarray, zr: np.ndarray, zc: np.ndarray, zs: np.ndarray) -> np.ndarray:
    k0 = 2 * R + C - 2 + timing.FOLD_OVERHEAD
    return np.ceil(zr / R) * np.ceil(zc / C) * (zs + k0) + timing.RUN_OVERHEAD


def _shape_cycles(p: Problem, z: np.ndarray) -> np.ndarray:
    """``timing.run_cycles`` of mapped tile shapes ``z`` (3, ..., N), as float."""
    if fast_cycles_ok():
        return _fast_run_cycles(p.R, p.C, z[0], z[1], z[2])
    flat = z.reshape(3, -1, z.shape[-1])
    out = np.empty(flat.shape[1:])
    for i in range(flat.shape[1]):
        mt, kt, nt = gemm_tile(p, flat[:, i]).astype(np.int64)
        out[i] = timing.run_cycles(p.df, p.R.astype(np.int64), p.C.astype(np.int64), mt, kt, nt)
    return out.reshape(z.shape[1:])


def _or(*xs: Bool) -> Bool:
    arrays = []
    for x in xs:
        if x is True:
            return True
        if x is not False:
            arrays.append(x)
    if not arrays:
        return False
    out = arrays[0]
    for x in arrays[1:]:
        out = out | x
    return out


def _and(*xs: Bool) -> Bool:
    arrays = []
    for x in xs:
        if x is False:
            return False
        if x is not True:
            arrays.append(x)
    if not arrays:
        return True
    out = arrays[0]
    for x in arrays[1:]:
        out = out & x
    return out


def _not(x: Bool) -> Bool:
    return (not x) if isinstance(x, bool) else ~x


def _times(a: np.ndarray, flag: Bool) -> np.ndarray | float:
    if flag is True:
        return a
    if flag is False:
        return 0.0
    return a * flag


_FIRST, _MID, _LAST = 0, 1, 2


def schedule(p: Problem, tiling: Tiling, bw: np.ndarray, *, roofline: bool = True) -> Schedule:
    """Evaluate the tiling of every element of ``p`` (see the module docstring).

    ``roofline=False`` skips the double-buffered overlap terms (all elements single-buffered).
    """
    t, D = tiling.t, p.D
    n = np.ceil(D / t)
    last = D - (n - 1) * t  # size of the last tile along each dim (== t when it divides)
    fr = (n[0] - 1) * np.ceil(t[0] / p.R) + np.ceil(last[0] / p.R)  # folds along r, all r tiles
    fc = (n[1] - 1) * np.ceil(t[1] / p.C) + np.ceil(last[1] / p.C)
    folds = fr * fc * n[2]
    runs = n[0] * n[1] * n[2]
    # --- compute cycles: sum of run_cycles over the tiles ----------------------------------
    if fast_cycles_ok():
        # sum over tiles of ceil(r/R) ceil(c/C) (s + k0) + RO factorises over the three dims.
        k0 = 2 * p.R + p.C - 2 + timing.FOLD_OVERHEAD
        compute = fr * fc * (D[2] + n[2] * k0) + runs * timing.RUN_OVERHEAD
        cyc8 = None
        last_cyc = _shape_cycles(p, last[:, None, :])[0]
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
        last_cyc = cyc8[7]  # every dim at its last tile

    # --- DRAM traffic: each operand f times (module docstring of _tiling) -------------------
    order = _ORDER_ARRAY[tiling.order].T  # (3 positions, N): mapped dim at each loop position
    by_position = row_index(order)
    npos = take_rows(n, by_position)
    factor_pos = np.stack([
        1.0 + (npos[0] - 1) * ((npos[1] > 1) | (npos[2] > 1)),
        1.0 + (npos[1] - 1) * (npos[2] > 1),
        np.ones(len(p)),
    ])
    factor = take_rows(factor_pos, row_index(_ORDER_INVERSE[tiling.order].T))  # back to mapped dims
    moved = p.bytes * factor  # operand free in r, c, s
    dram_read = np.where(p.is_out, moved - p.bytes, moved)  # partial sums read back, or inputs
    dram_write = np.where(p.is_out, moved, 0.0)

    # --- SRAM accesses by the array (per buffer), plus the DRAM side of each buffer ----------
    # Elements touched over all runs: the (r, c) operand once per s tile, the (s, r) operand
    # once per column fold, the (s, c) operand once per row fold.
    touched = np.stack([D[2] * D[1] * fr, D[2] * D[0] * fc, D[0] * D[1] * n[2]])  # free r, c, s
    out_elems = np.stack([D[2] * D[1], D[2] * D[0], D[0] * D[1]])
    touch_bytes = touched * p.elem_bytes
    sram_read = np.where(p.is_out, (touched - out_elems) * p.elem_bytes, touch_bytes)
    sram_write = np.where(p.is_out, touch_bytes, 0.0)
    sram_write += dram_read  # what DRAM brings lands in the operand's buffer
    sram_read += dram_write  # what goes to DRAM leaves it
    if not roofline:
        zero = np.zeros(len(p))
        exposure = _Exposure(zero, zero, zero, zero, zero, zero, zero)
        return _finish(compute, folds, runs, exposure, dram_read, dram_write, sram_read, sram_write)

    # --- double-buffered roofline over the 27 run classes ------------------------------------
    tpos = take_rows(t, by_position)
    lpos = take_rows(last, by_position)
    eb = take_rows(p.elem_bytes, by_position)  # operand free at each position
    rho = np.where(p.df == 1, 2, 0)  # reduction dim: the output is free in it
    outp: list[Bool]
    rho_inner = bool((order[2] == rho).all())  # every tiling has the reduction loop innermost
    if rho_inner:
        outp = [False, False, True]
    else:
        is_out = take_rows(p.is_out, by_position)
        outp = [is_out[0], is_out[1], is_out[2]]
    pair_bytes: dict[tuple[int, int, int], np.ndarray] = {}

    def tile_bytes(j: int, cats: tuple[int, ...]) -> np.ndarray:
        """Bytes of the operand free at loop position ``j`` in a run of class ``cats``."""
        a, b = (q for q in range(3) if q != j)
        key = (j, cats[a], cats[b])
        if key not in pair_bytes:
            pair_bytes[key] = eb[j] * size[cats[a]][a] * size[cats[b]][b]
        return pair_bytes[key]
    bit = (1 << order).astype(np.int64)
    many = [npos[j] > 1 for j in range(3)]
    inv_bw = 1.0 / bw
    size = {
        _FIRST: [np.where(many[j], tpos[j], lpos[j]) for j in range(3)],
        _MID: [tpos[j] for j in range(3)],
        _LAST: [lpos[j] for j in range(3)],
    }
    count_of = {
        _FIRST: [None, None, None],
        _MID: [np.maximum(npos[j] - 2, 0.0) for j in range(3)],
        _LAST: [many[j].astype(np.float64) for j in range(3)],
    }
    is_last_of: dict[int, list[Bool]] = {
        _FIRST: [_not(many[j]) for j in range(3)],
        _MID: [False, False, False],
        _LAST: [True, True, True],
    }
    # Fast path: run_cycles = ceil(zr/R) * ceil(zc/C) * (zs + k0) + RUN_OVERHEAD, one factor per
    # loop position (which dim sits there is per element).
    factor_of: dict[int, list[np.ndarray]] | None = None
    run_overhead = float(timing.RUN_OVERHEAD)
    if fast_cycles_ok():
        gran = np.stack([p.R, p.C, np.ones(len(p))])
        gpos = take_rows(gran, by_position)
        k0 = 2 * p.R + p.C - 2 + timing.FOLD_OVERHEAD
        k0pos = [k0 * (order[j] == 2) for j in range(3)]  # the streamed dim's factor is size + k0
        factor_of = {cat: [np.ceil(size[cat][j] / gpos[j]) + k0pos[j] for j in range(3)]
                     for cat in (_FIRST, _MID, _LAST)}
    if rho_inner:
        exposure = _roofline_rho_inner(npos, many, size, count_of, factor_of, cyc8, last_cyc, bit,
                                       is_last_of, eb, lpos, inv_bw, run_overhead, len(p))
        return _finish(compute, folds, runs, exposure, dram_read, dram_write, sram_read, sram_write)
    overlapped = np.zeros(len(p))
    first = {}
    final = {"cyc": 0.0, "x": 0.0, "store": 0.0}
    for cats in product((_FIRST, _MID, _LAST), repeat=3):
        count: np.ndarray | float = 1.0
        for j in range(3):
            if count_of[cats[j]][j] is not None:
                count = count * count_of[cats[j]][j]
        is_last = [is_last_of[cats[j]][j] for j in range(3)]
        if factor_of is not None:  # fast path: run_cycles is a product over the three dims
            cyc = factor_of[cats[0]][0] * factor_of[cats[1]][1] * factor_of[cats[2]][2] + run_overhead
        else:
            idx = sum((_times(bit[j], is_last[j]) for j in range(3)), start=np.zeros(len(p), dtype=np.int64))
            cyc = np.take_along_axis(cyc8, np.asarray(idx, dtype=np.int64)[None], axis=0)[0]
        # Which loop indices changed since the previous run (all, at the first run).
        is_first = all(c == _FIRST for c in cats)
        level = max((j for j in range(3) if cats[j] != _FIRST), default=-1)
        changed: list[Bool] = [
            True if is_first else (j == level or (j > level and many[j])) if j >= level else False
            for j in range(3)
        ]
        # Which change at the next run (none after the last run).
        nxt = [_not(is_last[j]) for j in range(3)]
        next_changed: list[Bool] = [
            _and(_not(nxt[1]), _not(nxt[2]), nxt[0]),
            _or(_and(_not(nxt[2]), nxt[1]), _and(_not(nxt[2]), _not(nxt[1]), nxt[0], many[1])),
            _or(nxt[2], _and(_or(nxt[1], nxt[0]), many[2])),
        ]
        is_final = _and(*is_last)
        load: np.ndarray | float = 0.0
        store: np.ndarray | float = 0.0
        for j in range(3):
            others = [q for q in range(3) if q != j]
            loaded = _or(*(changed[q] for q in others))
            if cats[j] == _FIRST:  # reduction index 0 if the output is free here: nothing to read back
                loaded = _and(loaded, _not(outp[j]))
            if loaded is not False:
                load = load + _times(tile_bytes(j, cats), loaded)
            stored = _and(outp[j], _or(is_final, *(next_changed[q] for q in others)))
            if stored is not False:
                store = store + _times(tile_bytes(j, cats), stored)
        x = (load + store) * inv_bw
        overlapped += count * np.maximum(cyc, x)
        if is_first:
            first = {"cyc": cyc, "x": x, "load": load * inv_bw, "store": store * inv_bw}
        if is_final is not False:
            w = _times(np.asarray(count, dtype=np.float64), is_final)
            final["cyc"] = final["cyc"] + w * cyc
            final["x"] = final["x"] + w * x
            final["store"] = final["store"] + w * store * inv_bw
    exposure = _Exposure(overlapped, first["cyc"], first["x"], first["load"], final["cyc"], final["x"],
                         final["store"])
    return _finish(compute, folds, runs, exposure, dram_read, dram_write, sram_read, sram_write)


@dataclass
class _Exposure:
    """Sum of ``count * max(cyc, x)`` over run classes, and the first and last runs (cycles)."""

    overlapped: np.ndarray
    first_cyc: np.ndarray
    first_x: np.ndarray
    first_load: np.ndarray
    last_cyc: np.ndarray
    last_x: np.ndarray
    last_store: np.ndarray


def _finish(compute: np.ndarray, folds: np.ndarray, runs: np.ndarray, e: _Exposure, dram_read: np.ndarray,
            dram_write: np.ndarray, sram_read: np.ndarray, sram_write: np.ndarray) -> Schedule:
    first_corr = np.maximum(e.first_cyc, e.first_x - e.first_load) - np.maximum(e.first_cyc, e.first_x)
    last_corr = np.maximum(e.last_cyc, e.last_x - e.last_store) - np.maximum(e.last_cyc, e.last_x)
    single_corr = e.first_cyc - np.maximum(e.first_cyc, e.first_x)
    return Schedule(
        compute_cycles=compute, folds=folds, runs=runs, overlapped=e.overlapped,
        first_correction=first_corr, last_correction=last_corr, single_correction=single_corr,
        exposed=e.first_load + e.last_store,
        dram_read=dram_read, dram_write=dram_write, sram_read=sram_read, sram_write=sram_write,
        single_run=runs == 1,
    )


def _roofline_rho_inner(npos, many, size, count_of, factor_of, cyc8, last_cyc, bit, is_last_of, eb,
                        lpos, inv_bw, run_overhead, n_elem) -> _Exposure:
    """The 27-class roofline when the reduction loop is innermost (every default tiling).

    Positions 0 and 1 hold the inputs' free dims, position 2 the output's (the reduction dim).
    Per run: the output tile is written when the run is the last along position 2; the inputs
    (both span position 2) reload whenever position 2 moves; at position 2's first index the
    loop that moved decides (the output never needs reading back: it is never revisited).
    Transfers are kept in cycles (bytes / bandwidth) throughout.
    """
    cats3 = (_FIRST, _MID, _LAST)
    outer_cycles: dict[tuple[int, int], np.ndarray] = {}
    outer_count: dict[tuple[int, int], np.ndarray | float] = {}
    for c0, c1 in product(cats3, repeat=2):
        if factor_of is not None:
            outer_cycles[(c0, c1)] = factor_of[c0][0] * factor_of[c1][1]
        counts = [c for c in (count_of[c0][0], count_of[c1][1]) if c is not None]
        outer_count[(c0, c1)] = counts[0] * counts[1] if len(counts) == 2 else (counts[0] if counts else 1.0)

    def cycles(cats: tuple[int, int, int]) -> np.ndarray:
        if factor_of is not None:
            return outer_cycles[cats[:2]] * factor_of[cats[2]][2] + run_overhead
        idx = sum((_times(bit[j], is_last_of[cats[j]][j]) for j in range(3)),
                  start=np.zeros(n_elem, dtype=np.int64))
        return np.take_along_axis(cyc8, np.asarray(idx, dtype=np.int64)[None], axis=0)[0]

    eb_cycles = [eb[j] * inv_bw for j in range(3)]
    cache: dict[tuple[int, int, int], np.ndarray] = {}

    def tile(j: int, ca: int, cb: int) -> np.ndarray:
        """Cycles to move the operand free at position ``j`` given the other two's classes."""
        key = (j, ca, cb)
        if key not in cache:
            a, b = (q for q in range(3) if q != j)
            cache[key] = eb_cycles[j] * size[ca][a] * size[cb][b]
        return cache[key]

    both_inputs_after_wrap = _or(many[1], many[2])
    overlapped = np.zeros(n_elem)
    for cats in product(cats3, repeat=3):
        c0, c1, c2 = cats
        count = outer_count[(c0, c1)]
        if count_of[c2][2] is not None:
            count = count * count_of[c2][2]
        tb0, tb1 = tile(0, c1, c2), tile(1, c0, c2)
        if c2 != _FIRST:  # position 2 moved: both inputs reload
            x = tb0 + tb1
        elif c1 != _FIRST:  # position 1 moved (2 wrapped if it has several tiles)
            x = tb0 + _times(tb1, many[2])
        elif c0 != _FIRST:  # position 0 moved
            x = _times(tb0, both_inputs_after_wrap) + tb1
        else:  # the first run
            x = tb0 + tb1
        if c2 == _LAST:
            x = x + tile(2, c0, c1)
        elif c2 == _FIRST:
            x = x + _times(tile(2, c0, c1), _not(many[2]))
        overlapped += count * np.maximum(cycles(cats), x)
    # The first run (all indices 0) and the last run (all last: sizes are the last tiles).
    f = _FIRST
    first_cyc = cycles((f, f, f))
    first_load = tile(0, f, f) + tile(1, f, f)
    first_x = first_load + _times(tile(2, f, f), _not(many[2]))
    last = _LAST  # size[_LAST] is the last tile along every dim
    load0 = many[2] | many[1] | ~many[0]
    load1 = many[2] | ~many[1]
    last_store = tile(2, last, last)
    last_x = tile(0, last, last) * load0 + tile(1, last, last) * load1 + last_store
    return _Exposure(overlapped, first_cyc, first_x, first_load, last_cyc, last_x, last_store)


def op_cycles(s: Schedule, instances: np.ndarray, bw: np.ndarray, double_buffered: np.ndarray,
              ) -> tuple[np.ndarray, np.ndarray]:
    """``(compute, total)`` cycles of an op of ``instances`` back-to-back GEMM instances."""
    compute = s.compute_cycles * instances
    serial = compute + (s.dram_read.sum(axis=0) + s.dram_write.sum(axis=0)) * instances / bw
    one = s.single_run & (instances == 1)
    correction = np.where(one, s.single_correction, s.first_correction + s.last_correction)
    overlapped = s.overlapped * instances + correction + s.exposed
    total = np.where(double_buffered, overlapped, serial)
    return compute, np.maximum(total, compute)
