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
    x_i   = (load_i [not the first run] + store_i [not the last run]) / bw

where, with the reduction loop innermost (every default tiling), ``store_i`` is the run's even
part of the previous output tile's store (the compiler spreads it over the next output tile's
runs), and otherwise the store of the output tile run ``i`` completes. Every instance of an op
is a program of its own, so an op of ``I`` instances takes ``I`` times one instance.

``bw = dram_bytes_per_cycle``; stall cycles are ``total - compute`` (fractional: bandwidth is
an average). The sums run over 27 classes of runs (first / middle / last index along each
loop position), each class with a count, so nothing loops over tiles.

SRAM accesses by the array: the operand spanning ``(r, c)`` is touched once per ``s`` tile,
the one spanning ``(s, r)`` once per column fold, the one spanning ``(s, c)`` once per row
fold; the output is written each time it is touched and read back each time but the first
(read-modify-write of the accumulator words). Every DRAM byte also crosses its buffer once.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from itertools import product

import numpy as np

from perf_model import timing
from perf_model._problem import Problem, row_index, take_rows
from perf_model._tiling import ORDERS, Tiling, gemm_tile

__all__ = ["Schedule", "schedule", "op_cycles", "fast_cycles_ok"]

Bool = bool | np.ndarray
_ORDER_ARRAY = np.array(ORDERS, dtype=np.int64)  # (6, 3): mapped dim at each loop position
_ORDER_INVERSE = np.argsort(_ORDER_ARRAY, axis=1)  # (6, 3): loop position of each mapped dim
_FIRST, _MID, _LAST = 0, 1, 2  # run classes along one loop: first index, middle ones, last one
_CLASSES = (_FIRST, _MID, _LAST)
# Every run class of a 3-deep loop nest (class along positions 0, 1, 2), in product order.
_CLASS_TRIPLES: tuple[tuple[int, int, int], ...] = tuple((a, b, c) for a, b, c in product(_CLASSES, repeat=3))


@dataclass
class Schedule:
    """Per-element results for one GEMM instance (see :func:`op_cycles` for the op).

    Attributes:
        compute_cycles: sum of ``timing.run_cycles`` over the runs.
        folds: array folds over the runs.
        runs: number of runs (tiles).
        overlapped: ``sum_i max(cyc_i, x_i)`` with every transfer included (cycles).
        first_correction, last_correction: change of that sum when the op's first run's loads
            / last run's store are taken out of the overlap (they are exposed instead).
        single_correction: the same for an op of a single run (both at once).
        exposed: cycles of the first run's loads plus the last run's store.
        single_run: the instance has one run.
        dram_read, dram_write: DRAM bytes ``(3, N)`` of the operand free in r, c, s (its
            buffer: ``Problem.operand``, A ifmap, B weight, C ofmap).
        sram_read, sram_write: SRAM bytes ``(3, N)`` in the buffer of the operand free in r, c, s.
    """

    compute_cycles: np.ndarray
    folds: np.ndarray
    runs: np.ndarray
    overlapped: np.ndarray
    first_correction: np.ndarray
    last_correction: np.ndarray
    single_correction: np.ndarray
    exposed: np.ndarray
    single_run: np.ndarray
    dram_read: np.ndarray
    dram_write: np.ndarray
    sram_read: np.ndarray
    sram_write: np.ndarray


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
    dr, dc, ds = (np.asarray(x, dtype=np.float64) for x in timing.mapped_dims(df, m, k, n))
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


# Boolean helpers that fold Python constants away, so static parts of the class logic cost nothing.
def _or(*xs: Bool) -> Bool:
    arrays: list[Bool] = [x for x in xs if x is not False]
    if any(x is True for x in arrays):
        return True
    if not arrays:
        return False
    out = arrays[0]
    for x in arrays[1:]:
        out = out | x
    return out


def _and(*xs: Bool) -> Bool:
    arrays: list[Bool] = [x for x in xs if x is not True]
    if any(x is False for x in arrays):
        return False
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


def schedule(p: Problem, tiling: Tiling, bw: np.ndarray, *, roofline: bool = True) -> Schedule:
    """Evaluate the tiling of every element of ``p`` (see the module docstring).

    ``roofline=False`` skips the double-buffered overlap terms (all elements single-buffered).
    """
    t, D = tiling.t, p.D
    n = np.ceil(D / t)
    last = D - (n - 1) * t  # size of the last tile along each dim (== t when it divides)
    fr = (n[0] - 1) * np.ceil(t[0] / p.R) + np.ceil(last[0] / p.R)  # row folds over the r tiles
    fc = (n[1] - 1) * np.ceil(t[1] / p.C) + np.ceil(last[1] / p.C)
    folds = fr * fc * n[2]
    runs = n[0] * n[1] * n[2]

    # Compute cycles: the sum of run_cycles over the tiles.
    cyc8: np.ndarray | None = None
    if fast_cycles_ok():  # ceil(r/R) ceil(c/C) fold(s) + tail(s) + RO summed over tiles factorises
        fold_t, tail_t = timing.fold_terms(p.df, t[2], p.R, p.C, p.shadow)
        fold_l, tail_l = timing.fold_terms(p.df, last[2], p.R, p.C, p.shadow)
        fold_sum = (n[2] - 1) * fold_t + fold_l  # over the s tiles
        tail_sum = (n[2] - 1) * tail_t + tail_l
        compute = fr * fc * fold_sum + n[0] * n[1] * tail_sum + runs * timing.RUN_OVERHEAD
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

    # DRAM traffic: each operand f times over (see the docstring of _tiling).
    order = _ORDER_ARRAY[tiling.order].T  # (3 positions, N): mapped dim at each loop position
    by_position = row_index(_ORDER_ARRAY, tiling.order)
    npos = take_rows(n, by_position)
    factor_pos = np.stack([
        1.0 + (npos[0] - 1) * ((npos[1] > 1) | (npos[2] > 1)),
        np.where(tiling.resident, 1.0, 1.0 + (npos[1] - 1) * (npos[2] > 1)),  # a resident strip: once
        np.ones(len(p)),
    ])
    factor = take_rows(factor_pos, row_index(_ORDER_INVERSE, tiling.order))  # back to mapped dims
    moved = p.bytes * factor  # operand free in r, c, s
    dram_read = np.where(p.is_out, moved - p.bytes, moved)  # partial sums read back, or inputs
    dram_write = np.where(p.is_out, moved, 0.0)

    # SRAM accesses (module docstring), per operand by free dim.
    touched = np.stack([D[2] * D[1] * fr, D[2] * D[0] * fc, D[0] * D[1] * n[2]])
    out_elems = np.stack([D[2] * D[1], D[2] * D[0], D[0] * D[1]])
    touch_bytes = touched * p.elem_bytes
    sram_read = np.where(p.is_out, (touched - out_elems) * p.elem_bytes, touch_bytes)
    sram_write = np.where(p.is_out, touch_bytes, 0.0)
    sram_write += dram_read  # what DRAM brings lands in the operand's buffer
    sram_read += dram_write  # what goes to DRAM leaves it

    if not roofline:
        zero = np.zeros(len(p))
        exposure = _Exposure(zero, zero, zero, zero, zero, zero, zero, zero)
    else:
        classes = _RunClasses(p, t, last, order, by_position, npos, cyc8, bw)
        rho = np.where(p.df == 1, 2, 0)  # reduction dim: the output is free in it
        if (order[2] == rho).all():  # the reduction loop innermost: every default tiling
            exposure = _roofline_rho_inner(classes, last_cyc, tiling.resident)
        else:
            exposure = _roofline_any_order(classes, take_rows(p.is_out, by_position))
    return Schedule(
        compute_cycles=compute, folds=folds, runs=runs, overlapped=exposure.overlapped,
        first_correction=(np.maximum(exposure.first_cyc, exposure.first_x - exposure.first_load)
                          - np.maximum(exposure.first_cyc, exposure.first_x)),
        last_correction=(np.maximum(exposure.last_cyc, exposure.last_x - exposure.last_in_x)
                         - np.maximum(exposure.last_cyc, exposure.last_x)),
        single_correction=exposure.first_cyc - np.maximum(exposure.first_cyc, exposure.first_x),
        exposed=exposure.first_load + exposure.last_store, single_run=runs == 1,
        dram_read=dram_read, dram_write=dram_write, sram_read=sram_read, sram_write=sram_write,
    )


def op_cycles(s: Schedule, instances: np.ndarray, bw: np.ndarray, double_buffered: np.ndarray,
              ) -> tuple[np.ndarray, np.ndarray]:
    """``(compute, total)`` cycles of an op of ``instances`` GEMM instances, one after another.

    Every instance is a program of its own (the compiler's), so its first loads and last store
    are exposed each time: the op takes ``instances`` times one instance.
    """
    compute = s.compute_cycles * instances
    serial = compute + (s.dram_read.sum(axis=0) + s.dram_write.sum(axis=0)) * instances / bw
    correction = np.where(s.single_run, s.single_correction, s.first_correction + s.last_correction)
    overlapped = (s.overlapped + correction + s.exposed) * instances
    total = np.where(double_buffered, overlapped, serial)
    return compute, np.maximum(total, compute)


@dataclass
class _Exposure:
    """``sum count * max(cyc, x)`` over the run classes, and the op's first and last runs
    (all in cycles: ``x``, loads and stores are bytes / bandwidth)."""

    overlapped: np.ndarray
    first_cyc: np.ndarray
    first_x: np.ndarray
    first_load: np.ndarray
    last_cyc: np.ndarray
    last_x: np.ndarray
    last_store: np.ndarray
    last_in_x: np.ndarray | float  # the part of ``last_store`` that ``last_x`` includes


class _RunClasses:
    """Sizes, counts and cycles of the runs of each class, per loop position.

    A run's class along a loop is FIRST (index 0), MID (0 < index < N - 1) or LAST
    (index N - 1 > 0); along a loop with one tile only FIRST exists (and it is also the last).
    """

    def __init__(self, p: Problem, t: np.ndarray, last: np.ndarray, order: np.ndarray, by_position: np.ndarray,
                 npos: np.ndarray, cyc8: np.ndarray | None, bw: np.ndarray) -> None:
        tpos = take_rows(t, by_position)
        lpos = take_rows(last, by_position)
        self.n_elem = len(p)
        self.npos = npos  # tiles along each position
        self.many = [npos[j] > 1 for j in range(3)]  # several tiles along position j
        self.size = {
            _FIRST: [np.where(self.many[j], tpos[j], lpos[j]) for j in range(3)],
            _MID: [tpos[j] for j in range(3)],
            _LAST: [lpos[j] for j in range(3)],
        }
        self.count: dict[int, list[np.ndarray | None]] = {
            _FIRST: [None, None, None],  # one run class instance: a factor of 1
            _MID: [np.maximum(npos[j] - 2, 0.0) for j in range(3)],
            _LAST: [self.many[j].astype(np.float64) for j in range(3)],
        }
        self.is_last: dict[int, list[Bool]] = {
            _FIRST: [_not(self.many[j]) for j in range(3)],
            _MID: [False, False, False],
            _LAST: [True, True, True],
        }
        # Transfers in cycles: bytes per element of the operand free at each position / bw.
        eb = take_rows(p.elem_bytes, by_position)
        inv_bw = 1.0 / bw
        self.eb_cycles = [eb[j] * inv_bw for j in range(3)]
        self.run_overhead = float(timing.RUN_OVERHEAD)
        self.cyc8 = cyc8
        self.bit = (1 << order).astype(np.int64)
        self.factor: dict[int, list[np.ndarray]] | None = None
        self.offset: dict[int, list[np.ndarray]] | None = None
        if cyc8 is None:  # fast path: run_cycles is a product of one factor per loop position plus
            # the streamed dim's tail: ceil(r/R) ceil(c/C) fold(s) + tail(s) + RO
            gpos = take_rows(np.stack([p.R, p.C, np.ones(len(p))]), by_position)
            streamed = [order[j] == 2 for j in range(3)]
            self.factor, self.offset = {}, {}
            for c in _CLASSES:
                self.factor[c], self.offset[c] = [], []
                for j in range(3):
                    fold, tail = timing.fold_terms(p.df, self.size[c][j], p.R, p.C, p.shadow)
                    self.factor[c].append(np.where(streamed[j], fold, np.ceil(self.size[c][j] / gpos[j])))
                    self.offset[c].append(np.where(streamed[j], tail, 0.0))
        self._outer_cycles: dict[tuple[int, int], np.ndarray] = {}
        self._tile: dict[tuple[int, int, int], np.ndarray] = {}

    def runs(self, cats: tuple[int, int, int]) -> np.ndarray | float:
        """How many runs of each instance are of class ``cats``."""
        out: np.ndarray | float = 1.0
        for j in range(3):
            factor = self.count[cats[j]][j]
            if factor is not None:
                out = out * factor
        return out

    def cycles(self, cats: tuple[int, int, int]) -> np.ndarray:
        """``run_cycles`` of a run of class ``cats``."""
        if self.factor is not None and self.offset is not None:
            key = (cats[0], cats[1])
            if key not in self._outer_cycles:
                self._outer_cycles[key] = self.factor[cats[0]][0] * self.factor[cats[1]][1]
            tail = self.offset[cats[0]][0] + self.offset[cats[1]][1] + self.offset[cats[2]][2]
            return self._outer_cycles[key] * self.factor[cats[2]][2] + tail + self.run_overhead
        idx = sum((_times(self.bit[j], self.is_last[cats[j]][j]) for j in range(3)),
                  start=np.zeros(self.n_elem, dtype=np.int64))
        return np.take_along_axis(self.cyc8, np.asarray(idx, dtype=np.int64)[None], axis=0)[0]

    def tile(self, j: int, cats: tuple[int, int, int]) -> np.ndarray:
        """Cycles to move the tile of the operand free at position ``j`` in a run of class ``cats``."""
        a, b = (q for q in range(3) if q != j)
        key = (j, cats[a], cats[b])
        if key not in self._tile:
            self._tile[key] = self.eb_cycles[j] * self.size[cats[a]][a] * self.size[cats[b]][b]
        return self._tile[key]


def _roofline_rho_inner(rc: _RunClasses, last_cyc: np.ndarray, resident: np.ndarray) -> _Exposure:
    """The 27-class roofline when the reduction loop is innermost (every default tiling).

    Positions 0 and 1 hold the inputs' free dims, position 2 the output's (the reduction dim).
    Both inputs span position 2, so they reload whenever it moves; at position 2's first index,
    the loop that moved decides which input reloads. A resident strip (``resident``: the input
    free at position 1) is only loaded while position 1 is at its first index. An output tile is
    never revisited; its store is spread evenly over the runs of the next output tile (the
    compiler's store parts, ``perf_model._program``), and the last one is stored after the last
    run, exposed.
    """
    many = rc.many
    overlapped = np.zeros(rc.n_elem)
    reloads = ~resident  # the input free at position 1 reloads when position 1 moves
    full0, full1, last0, last1 = rc.size[_MID][0], rc.size[_MID][1], rc.size[_LAST][0], rc.size[_LAST][1]
    part = rc.eb_cycles[2] / rc.npos[2]  # per run and element of the previous output tile

    def previous_part(c0: int, c1: int) -> np.ndarray | float:
        """The part of the previous output tile's store a run of classes ``c0``, ``c1`` carries."""
        if c1 != _FIRST:  # the tile before along position 1: full along it
            return part * rc.size[c0][0] * full1
        if c0 != _FIRST:  # the last tile along position 1 of the previous index along 0
            return part * full0 * last1
        return 0.0  # the first output tile has no predecessor

    for cats in _CLASS_TRIPLES:
        c0, c1, c2 = cats
        tb0 = rc.tile(0, cats)
        tb1 = rc.tile(1, cats) if c1 == _FIRST else rc.tile(1, cats) * reloads
        if c2 != _FIRST:  # position 2 moved: both inputs reload
            x = tb0 + tb1
        elif c1 != _FIRST:  # position 1 moved (2 wrapped if it has several tiles)
            x = tb0 + _times(tb1, many[2])
        elif c0 != _FIRST:  # position 0 moved
            x = _times(tb0, _or(many[1], many[2])) + tb1
        else:  # the first run
            x = tb0 + tb1
        x = x + previous_part(c0, c1)
        overlapped += rc.runs(cats) * np.maximum(rc.cycles(cats), x)
    first = (_FIRST, _FIRST, _FIRST)
    first_load = rc.tile(0, first) + rc.tile(1, first)
    final = (_LAST, _LAST, _LAST)  # sizes of the last run (last tile along every dim)
    last_store = rc.tile(2, final)
    # The last run's level is the innermost position with several tiles (all: the first run).
    load0 = many[2] | many[1] | ~many[0]
    load1 = (many[2] | ~many[1]) & reloads
    final_part = np.where(many[1], part * last0 * full1, np.where(many[0], part * full0 * last1, 0.0))
    return _Exposure(
        overlapped=overlapped, first_cyc=rc.cycles(first), first_x=first_load, first_load=first_load,
        last_cyc=last_cyc, last_x=rc.tile(0, final) * load0 + rc.tile(1, final) * load1 + final_part,
        last_store=last_store, last_in_x=0.0,
    )


def _roofline_any_order(rc: _RunClasses, is_out: np.ndarray) -> _Exposure:
    """The 27-class roofline for any loop order (spilling tilings included)."""
    many = rc.many
    outp = [is_out[0], is_out[1], is_out[2]]
    overlapped = np.zeros(rc.n_elem)
    first: dict[str, np.ndarray | float] = {}
    final: dict[str, np.ndarray | float] = {"cyc": 0.0, "x": 0.0, "store": 0.0}
    for cats in _CLASS_TRIPLES:
        count = rc.runs(cats)
        cyc = rc.cycles(cats)
        is_last = [rc.is_last[cats[j]][j] for j in range(3)]
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
                load = load + _times(rc.tile(j, cats), loaded)
            stored = _and(outp[j], _or(is_final, *(next_changed[q] for q in others)))
            if stored is not False:
                store = store + _times(rc.tile(j, cats), stored)
        x = load + store
        overlapped += count * np.maximum(cyc, x)
        if is_first:
            first = {"cyc": cyc, "x": x, "load": load}
        if is_final is not False:
            w = _times(np.asarray(count, dtype=np.float64), is_final)
            final["cyc"] = final["cyc"] + w * cyc
            final["x"] = final["x"] + w * x
            final["store"] = final["store"] + w * store
    return _Exposure(overlapped, np.asarray(first["cyc"]), np.asarray(first["x"]), np.asarray(first["load"]),
                     np.asarray(final["cyc"]), np.asarray(final["x"]), np.asarray(final["store"]),
                     np.asarray(final["store"]))
