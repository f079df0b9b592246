"""Buffer tiling: which tile of a GEMM sits in the buffers per run, and in which loop order.

A *tile* ``(t_r, t_c, t_s)`` (mapped coordinates, see :mod:`perf_model.evaluator.problem`) is one run of
the array (one ``start`` of the RTL): it must fit the buffers (:func:`timing.run_words` against
:func:`timing.buffer_depth_words`, half of it when double buffered). Tiles are visited by three
nested loops in some *order* ``(o1, o2, o3)`` (outer to inner). Between consecutive runs a
buffer keeps its operand tile when that tile's indices did not change, so an operand whose free
dimension is ``x`` is read from DRAM ``f_x`` times over (each tile once per visit)::

    x = o3 (innermost):  f = 1
    x = o2:              f = N_o2  if N_o3 > 1 else 1
    x = o1:              f = N_o1  if N_o2 > 1 or N_o3 > 1 else 1

with ``N_x = ceil(D_x / t_x)`` tiles along ``x``. The output ``C`` is free in the reduction
dimension ``rho`` (``k``: r for WS/IS, s for OS); with ``f > 1`` it leaves the accumulator
buffer between visits: it is written ``f`` times and its partial sums read back ``f - 1`` times
(a spill). With the reduction loop innermost the partial sums stay in the ofmap buffer (the
RTL's ``accumulate`` flag) and ``C`` is written once.

The generated RTL keeps partial sums only in the ofmap buffer, so by default only spill-free
tilings are used: the reduction loop innermost, or a single K tile (then the K loop is trivial
and is put innermost too, so every default tiling has ``rho`` innermost). ``allow_spill``
widens the search to every order (the formulas above count the spills).

The tiling minimises DRAM bytes (reads + writes) over a set of candidates, breaking ties by
fewest compute cycles. Tiles along ``r``/``c`` are whole folds (multiples of R/C, or the whole
dimension); along ``s`` at least ``s_floor = min(Ds, max(R, C))`` rows are streamed per run
(below that the fold's fill and drain dominate; no sensible schedule goes there). A design
whose buffers cannot hold the smallest such tile ``(min(Dr, R), min(Dc, C), s_floor)`` is
infeasible for the op.

Candidates come in families ``(g, x, o3)``: loops ``g`` and ``x`` outside ``o3``::

    t_g  from a grid fixed by the op and the array alone: GRID_LEVELS sizes spaced evenly in
         log scale from the smallest tile to the whole dimension (whole folds along r, c)
    F1:  t_x = largest that fits beside (t_g, smallest t_o3); then t_o3 = largest that fits
    F2:  t_o3 = D_o3 (whole); t_x = largest that fits beside it

each under the better of the orders ``(g, x, o3)`` and ``(x, g, o3)``. Spill-free families:
``rho`` innermost with a grid on one outer dim (F1), and ``rho`` whole (the grid is the whole
dim alone) with either other dim innermost (F1 and F2). Monotonicity: the grid does not depend
on the buffer sizes and every "largest that fits" only grows with them, and traffic never
grows when a tile count shrinks; F2 covers an F1 whose ``t_o3`` reached the whole dim (then
only ``N_o3 > 1`` changed), and a rho-innermost F1 whose ``t_rho`` reached the whole dim is
matched by a rho-whole F1. So a design with bigger buffers always has a candidate at least as
good as each of the smaller design's: DRAM bytes never grow with buffer size (tests check it).
Tiling ignores bandwidth, so more bandwidth never costs cycles either.

Resident operand. With ``rho`` innermost in order ``(o1, o2, rho)``, the input spanning ``o1``
and ``rho`` normally reloads at every step of ``o2`` (``f = N_o2``). When its whole strip
``t_o1 x D_rho`` fits its buffer (half of it when double buffered), it can stay there instead:
the runs of the first ``o2`` step load their sub-tiles into consecutive slots of the strip and
the later steps read them back (the RUN command's base addresses), so it is read from DRAM once
(``f = 1``). The rho-innermost family tries this for both of its orders (the strip of the
operand free in ``x`` under ``(g, x, rho)``, of the one free in ``g`` under ``(x, g, rho)``);
``Tiling.resident`` marks the tilings that use it. A strip fits more often in a bigger buffer,
so the monotonicity above still holds.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, fields
from itertools import permutations
from typing import Any

import numpy as np

from perf_model import timing
from perf_model.evaluator.problem import GEMM_MAPPED, Problem, put_columns, row_index, take_rows

__all__ = [
    "Tiling", "choose_tiles", "unfit_tiling", "smallest_fits", "ORDERS", "GRID_LEVELS", "tile_words", "gemm_tile",
    "fits_contract",
]

#: Loop orders (outer -> inner) over mapped dims r 0, c 1, s 2; a tiling stores the index.
ORDERS: tuple[tuple[int, int, int], ...] = tuple((a, b, c) for a, b, c in permutations(range(3)))
_ORDER_INDEX = {order: i for i, order in enumerate(ORDERS)}
#: Grid sizes per candidate family, log-spaced from the smallest tile to the whole dim.
GRID_LEVELS = 7

# A candidate family: (grid dim g, maximised dim x, innermost dim o3, grid levels, both orders
# (g, x, o3) and (x, g, o3) or only the first, with F2 candidates).
_Family = tuple[int, int, int, tuple[int, ...], bool, bool]
_LEVELS = tuple(range(GRID_LEVELS))
_WHOLE = (GRID_LEVELS - 1,)
# Every innermost loop, full grids, both orders (used when spills are allowed).
_ALL_FAMILIES: tuple[_Family, ...] = (
    (0, 1, 2, _LEVELS, True, True),
    (1, 2, 0, _LEVELS, True, True),
    (0, 2, 1, _LEVELS, True, True),
)
# Spill-free families by reduction dim rho (r for WS/IS, s for OS): rho innermost with a grid on
# one outer dim (F1 only: when its t_rho reaches the whole dim, a rho-whole F1 candidate is at
# least as good, at these buffer sizes and at any larger ones), and rho whole with either other
# dim innermost (the order of a single K tile is irrelevant).
_SPILL_FREE: dict[int, tuple[_Family, ...]] = {
    0: ((1, 2, 0, _LEVELS, True, False), (0, 1, 2, _WHOLE, False, True), (0, 2, 1, _WHOLE, False, True)),
    2: ((0, 1, 2, _LEVELS, True, False), (2, 0, 1, _WHOLE, False, True), (2, 1, 0, _WHOLE, False, True)),
}


def _rho_last(order: tuple[int, int, int], rho: int) -> tuple[int, int, int]:
    """``order`` with dim ``rho`` moved innermost (the others keep their relative order)."""
    a, b = (x for x in order if x != rho)
    return (a, b, rho)


# Order with dim rho moved innermost, by order index.
_RHO_INNER = {rho: np.array([_ORDER_INDEX[_rho_last(o, rho)] for o in ORDERS]) for rho in (0, 2)}


@dataclass
class Tiling:
    """The chosen tiling of every element of a :class:`Problem`.

    Attributes:
        feasible: bool, the smallest tile fits.
        t: ``(3, N)`` tile dims along r, c, s (float, whole numbers).
        order: index into :data:`ORDERS` (int64).
        traffic: DRAM bytes of one instance (reads + writes).
        resident: bool, the input free at loop position 1 stays in its buffer as a whole strip
            across that loop (module docstring); only with the reduction loop innermost.
    """

    feasible: np.ndarray
    t: np.ndarray
    order: np.ndarray
    traffic: np.ndarray
    resident: np.ndarray

    def put(self, index: np.ndarray | slice, sub: Tiling) -> None:
        """Set the elements at ``index`` to those of ``sub`` (in place)."""
        for f in fields(self):
            put_columns(getattr(self, f.name), index, getattr(sub, f.name))


def unfit_tiling(p: Problem, *, allow_spill: bool = False) -> Tiling:
    """What :func:`choose_tiles` gives an element whose smallest tile (``Problem.mins``) does not fit,
    for every element of ``p``: infeasible, the smallest tile, order 0 (with ``rho`` moved innermost
    unless ``allow_spill``), nothing resident, no traffic.

    Every candidate of the search is at least the smallest tile along each dim and a tile's words only
    grow with its dims, so no candidate fits where the smallest tile does not (:func:`smallest_fits`):
    the caller may skip those elements.
    """
    order = np.zeros(len(p), dtype=np.int64)
    if not allow_spill:
        order = np.where(p.df == 1, _RHO_INNER[2][0], _RHO_INNER[0][0])
    return Tiling(feasible=np.zeros(len(p), dtype=bool), t=p.mins.copy(), order=order, traffic=np.zeros(len(p)),
                  resident=np.zeros(len(p), dtype=bool))


def operand_words(p: Problem, free: int, t: Any) -> np.ndarray:
    """Words a tile needs from the operand free in mapped dim ``free``; ``t`` gives the tile along
    the other two dims (a ``(3, N)`` array, or a mapping of those two dims)."""
    if free == 0:
        return t[2] * np.ceil(t[1] / p.C)
    if free == 1:
        return t[2] * np.ceil(t[0] / p.R)
    return t[0] * np.ceil(t[1] / p.C)


def smallest_fits(p: Problem) -> np.ndarray:
    """Whether the smallest tile (``Problem.mins``) fits every buffer, by :func:`tile_words` (the closed
    form the search's candidates are checked with)."""
    return np.asarray((tile_words(p, p.mins) <= p.cap).all(axis=0))


def tile_words(p: Problem, t: np.ndarray) -> np.ndarray:
    """``(3, N)`` words the tile ``t`` needs from the operand free in r, c, s (closed form).

    Must equal :func:`timing.run_words` (mapped back to buffers); a test checks it.
    """
    return np.stack([operand_words(p, free, t) for free in range(3)])


class _Search:
    """Closed-form "largest tile along one dim that fits" for one problem batch."""

    def __init__(self, p: Problem) -> None:
        self.p = p
        self.D = p.D
        self.mins = p.mins
        self.cap = p.cap
        self.gran = (p.R, p.C)
        self.folds = (np.ceil(p.D[0] / p.R), np.ceil(p.D[1] / p.C))  # folds of the whole op
        # Tie-break proxy of the per-fold and per-run overheads: plain folds pay 2R + C each,
        # shadow folds overlap (a run pays its fill and drain, about 2R + C, once).
        k0 = 2 * p.R + p.C - 2 + timing.FOLD_OVERHEAD
        self.fold_work = np.where(p.shadow, 0.0, self.folds[0] * self.folds[1] * k0)
        self.run_overhead = timing.RUN_OVERHEAD + np.where(p.shadow, 2 * p.R + p.C, 0.0)
        self.weight = p.bytes * (1.0 + p.is_out)  # the output costs 2f - 1: f writes, f - 1 reads
        self.base = self.weight - p.out_bytes  # the innermost operand's cost (f = 1), minus the 1
        self._grid: dict[tuple[int, int], tuple[np.ndarray, np.ndarray, np.ndarray | None]] = {}
        self._strip_limit: dict[tuple[int, int, int], np.ndarray] = {}

    def grid(self, dim: int, level: int) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """``(tile, tile count, folds per tile)`` along ``dim`` at grid ``level`` (0 smallest,
        last whole); folds are ``None`` along s."""
        key = (dim, level)
        if key not in self._grid:
            p, frac = self.p, level / (GRID_LEVELS - 1)
            folds: np.ndarray | None = None
            if dim == 2:
                lo = self.mins[2]
                tile = np.minimum(p.D[2], np.ceil(lo * (p.D[2] / lo) ** frac))
            else:
                folds = np.minimum(self.folds[dim], np.ceil(self.folds[dim] ** frac))
                tile = np.minimum(p.D[dim], folds * self.gran[dim])
            self._grid[key] = (tile, np.ceil(p.D[dim] / tile), folds)
        return self._grid[key]

    def fold(self, dim: int, tile: np.ndarray) -> np.ndarray | None:
        """Folds per tile along r or c (``None`` along s)."""
        return None if dim == 2 else np.ceil(tile / self.gran[dim])

    def largest(self, dim: int, t: dict[int, np.ndarray], f: dict[int, np.ndarray | float | None]) -> np.ndarray:
        """Largest tile along ``dim`` fitting with the other two tile dims ``t`` (each >= 1) whose
        folds per tile (along r, c) are ``f``; 0 if none fits.

        Along r and c the result is whole folds or the whole dim; along s it is clipped to
        ``D_s`` and may fall below ``s_floor`` (the caller checks).
        """
        p, cap = self.p, self.cap
        if dim == 0:
            lim = np.minimum(np.floor(cap[2] / f[1]), p.R * np.floor(cap[1] / t[2]))
            return np.where(lim >= p.D[0], p.D[0], p.R * np.floor(lim / p.R))
        if dim == 1:
            folds = np.minimum(np.floor(cap[2] / t[0]), np.floor(cap[0] / t[2]))
            return np.minimum(p.D[1], folds * p.C)
        return np.minimum(p.D[2], np.minimum(np.floor(cap[1] / f[0]), np.floor(cap[0] / f[1])))

    def candidates(self, families: tuple[_Family, ...]) -> Iterator[
            tuple[_Family, dict[int, np.ndarray], dict[int, np.ndarray | float], np.ndarray]]:
        """Yield ``(family, tiles by dim, tile counts by dim, valid)`` for every candidate."""
        mins, D = self.mins, self.D
        for family in families:
            g, x, o3, levels, _both, with_f2 = family
            for level in levels:
                tg, ng, fg = self.grid(g, level)
                # F1: x as large as possible beside the smallest o3, then o3 as large as possible.
                tx = self.largest(x, {g: tg, o3: mins[o3]}, {g: fg, o3: 1.0})  # one fold at min
                tx1 = np.maximum(tx, 1.0)
                t3 = self.largest(o3, {g: tg, x: tx1}, {g: fg, x: self.fold(x, tx1)})
                valid = (tx >= mins[x]) & (t3 >= mins[o3])
                counts = {g: ng, x: np.ceil(D[x] / tx1), o3: np.ceil(D[o3] / np.maximum(t3, 1.0))}
                yield family, {g: tg, x: tx, o3: t3}, counts, valid
                if with_f2:  # F2: o3 whole, x as large as possible beside it.
                    whole = self.folds[o3] if o3 != 2 else None
                    tx2 = self.largest(x, {g: tg, o3: D[o3]}, {g: fg, o3: whole})
                    tx21 = np.maximum(tx2, 1.0)
                    fits = self.largest(o3, {g: tg, x: tx21}, {g: fg, x: self.fold(x, tx21)}) >= D[o3]
                    valid2 = (tx2 >= mins[x]) & fits
                    counts2 = {g: ng, x: np.ceil(D[x] / tx21), o3: 1.0}
                    yield family, {g: tg, x: tx2, o3: D[o3]}, counts2, valid2

    def extra_cost(self, family: _Family, n: dict[int, np.ndarray | float]) -> tuple[np.ndarray, np.ndarray | bool]:
        """DRAM bytes above the minimum ``total()`` (every operand once) and whether the
        second order ``(x, g, o3)`` is the cheaper one.

        With ``A = w_g (N_g - 1)`` and ``B = w_x (N_x - 1)`` (``w``: bytes, the output counted
        twice), order ``(g, x, o3)`` costs ``A [N_x > 1]`` extra when ``N_o3 = 1`` and ``A + B``
        otherwise; ``(x, g, o3)`` the same with the roles swapped. The better of the two is
        ``A + B`` or ``min(A, B)``.
        """
        g, x, o3, _levels, both, _f2 = family
        w = self.weight
        a = w[g] * (n[g] - 1.0)
        b = w[x] * (n[x] - 1.0)
        n3 = n[o3]
        if not both:  # order (g, x, o3) only
            if isinstance(n3, float):
                return a * (n[x] > 1), False
            return a * ((n3 > 1) | (n[x] > 1)) + b * (n3 > 1), False
        if isinstance(n3, float):
            return np.minimum(a, b), b < a
        return np.where(n3 > 1, a + b, np.minimum(a, b)), (b < a) & (n3 <= 1)

    def strip_words(self, held: int, other: int, o3: int, t_other: np.ndarray) -> np.ndarray:
        """Words of the strip of the operand free in ``held``: ``t_other`` along ``other``, the
        whole ``D_o3`` along ``o3``."""
        return operand_words(self.p, held, {other: t_other, o3: self.D[o3]})

    def resident_x(self, family: _Family, tiles: dict[int, np.ndarray], n: dict[int, np.ndarray | float],
                   ) -> tuple[np.ndarray, np.ndarray]:
        """``(extra bytes, fits)`` of order ``(g, x, rho)`` with the operand free in ``x`` (its
        strip ``t_g x D_rho``) resident: only the one free in ``g`` reloads, ``w_g (N_g - 1)``.
        A strip is only worth holding when its loop and ``rho`` both have several tiles."""
        g, x, o3 = family[:3]
        fits = (self.strip_words(x, g, o3, tiles[g]) <= self.cap[x]) & (n[o3] > 1) & (n[x] > 1)
        return self.weight[g] * (n[g] - 1.0), fits

    def strip_limit(self, family: _Family) -> np.ndarray:
        """Largest ``t_x`` whose strip of the operand free in ``g`` (``t_x x D_rho``) fits.

        The strip's words grow linearly in ``t_x`` (rows along s, folds along r and c), so the
        limit is one division; it only grows with the buffer.
        """
        g, x, o3 = family[:3]
        key = (g, x, o3)
        if key not in self._strip_limit:
            p = self.p
            gran = p.R if x == 0 else p.C if x == 1 else np.ones(len(p))
            units = np.floor(self.cap[g] / self.strip_words(g, x, o3, gran)) * gran
            self._strip_limit[key] = np.where(units >= self.D[x], self.D[x], units)
        return self._strip_limit[key]

    def resident_g(self, family: _Family, tiles: dict[int, np.ndarray]) -> tuple[
            dict[int, np.ndarray], dict[int, np.ndarray | float], np.ndarray, np.ndarray] | None:
        """The candidate of order ``(x, g, rho)`` holding the operand free in ``g`` (strip
        ``t_x x D_rho``): ``t_x`` the F1 one cut to :meth:`strip_limit`, ``t_rho`` as large as
        fits beside it. Returns ``(tiles, counts, valid, extra bytes)``, valid only where the
        strip is worth holding (both ``g`` and ``rho`` have several tiles), or ``None`` if it is
        nowhere.
        """
        g, x, o3 = family[:3]
        D = self.D
        tx = np.minimum(tiles[x], self.strip_limit(family))
        n_g = np.ceil(D[g] / tiles[g])
        valid = (tx >= self.mins[x]) & (n_g > 1)
        if not valid.any():
            return None
        tx1 = np.maximum(tx, 1.0)
        t3 = self.largest(o3, {g: tiles[g], x: tx1}, {g: self.fold(g, tiles[g]), x: self.fold(x, tx1)})
        n_x, n_3 = np.ceil(D[x] / tx1), np.ceil(D[o3] / np.maximum(t3, 1.0))
        valid &= (t3 >= self.mins[o3]) & (n_3 > 1)  # else the F1 candidate is at least as good
        counts: dict[int, np.ndarray | float] = {g: n_g, x: n_x, o3: n_3}
        return {g: tiles[g], x: tx, o3: t3}, counts, valid, self.weight[x] * (n_x - 1.0)

    def total(self) -> np.ndarray:
        """DRAM bytes of one instance with every operand moved once."""
        return self.weight.sum(axis=0) - self.p.out_bytes

    def compute_proxy(self, n: dict[int, np.ndarray | float]) -> np.ndarray:
        """Compute cycles up to a per-op constant (tie-break only): fold and run overheads."""
        return n[2] * (self.fold_work + n[0] * n[1] * self.run_overhead)


def choose_tiles(p: Problem, *, allow_spill: bool = False) -> Tiling:
    """Pick the DRAM-minimal candidate tiling for every element of ``p`` (vectorised).

    Args:
        p: the design-op batch.
        allow_spill: also consider orders whose output tiles leave the accumulator buffer
            between K tiles (partial sums written to DRAM and read back). Off by default: the
            generated RTL keeps partial sums only in its ofmap buffer (the ``accumulate``
            flag), and there is always a spill-free tiling whenever the smallest tile fits
            (reduction loop innermost).
    """
    if allow_spill:
        return _choose(p, _ALL_FAMILIES)
    out = Tiling(feasible=np.zeros(len(p), dtype=bool), t=p.mins.copy(),
                 order=np.zeros(len(p), dtype=np.int64), traffic=np.zeros(len(p)),
                 resident=np.zeros(len(p), dtype=bool))
    is_os = p.df == 1
    for rho, members in ((0, np.flatnonzero(~is_os)), (2, np.flatnonzero(is_os))):
        if members.size == 0:
            continue
        whole = members.size == len(p)
        index: np.ndarray | slice = members
        if members[-1] - members[0] + 1 == members.size:  # contiguous: views, no copies
            index = slice(int(members[0]), int(members[-1]) + 1)
        sub_p = p if whole else p.take(index)
        sub = _choose(sub_p, _SPILL_FREE[rho], rho)
        # A single tile along rho: its loop is trivial; put it innermost (same runs).
        # (Infeasible elements get a rho-innermost order too: every default order has rho last.)
        single = (sub_p.D[rho] <= sub.t[rho]) | ~sub.feasible
        sub.order = np.where(single, _RHO_INNER[rho][sub.order], sub.order)
        if whole:
            return sub
        out.put(index, sub)
    return out


def _choose(p: Problem, families: tuple[_Family, ...], rho: int | None = None) -> Tiling:
    """The best candidate of ``families``; with ``rho`` given, resident strips are tried too."""
    search = _Search(p)
    n_elem = len(p)
    best_cost = np.full(n_elem, np.inf)
    best_proxy = np.full(n_elem, np.inf)
    best_t = p.mins.copy()
    best_order = np.zeros(n_elem, dtype=np.int64)
    best_resident = np.zeros(n_elem, dtype=bool)

    def consider(tiles: dict[int, np.ndarray], counts: dict[int, np.ndarray | float], cost: np.ndarray,
                 valid: np.ndarray, order: np.ndarray | int, resident: np.ndarray | bool) -> None:
        cost = np.where(valid, cost, np.inf)
        proxy = search.compute_proxy(counts)
        better = cost < best_cost  # invalid candidates cost inf: they only ever tie an inf best
        better |= (cost == best_cost) & (proxy < best_proxy)
        np.copyto(best_cost, cost, where=better)
        np.copyto(best_proxy, proxy, where=better)
        for dim in range(3):
            np.copyto(best_t[dim], tiles[dim], where=better)
        np.copyto(best_order, order, where=better)
        np.copyto(best_resident, resident, where=better)

    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for family, tiles, counts, valid in search.candidates(families):
            g, x, o3 = family[:3]
            cost, use_b = search.extra_cost(family, counts)
            order = _ORDER_INDEX[(g, x, o3)] if use_b is False else np.where(
                use_b, _ORDER_INDEX[(x, g, o3)], _ORDER_INDEX[(g, x, o3)])
            resident: np.ndarray | bool = False
            split = counts[o3]  # a strip only pays where the reduction loop has several tiles
            if rho is not None and o3 == rho and family[4] and not isinstance(split, float) and (split > 1).any():
                cost_x, fits_x = search.resident_x(family, tiles, counts)
                resident = fits_x & (cost_x < cost)
                order = np.where(resident, _ORDER_INDEX[(g, x, o3)], order)
                cost = np.where(resident, cost_x, cost)
                held_g = search.resident_g(family, tiles)
                if held_g is not None:
                    tiles_g, counts_g, valid_g, cost_g = held_g
                    cut = tiles_g[x] < tiles[x]  # the strip limit moved the tile: a candidate of its own
                    use_g = valid_g & ~cut & (cost_g < cost)  # else the same tiles: one more order of this one
                    order = np.where(use_g, _ORDER_INDEX[(x, g, o3)], order)
                    cost = np.where(use_g, cost_g, cost)
                    resident = resident | use_g
                    valid_cut = valid & valid_g & cut
                    if valid_cut.any():
                        consider(tiles_g, counts_g, cost_g, valid_cut, _ORDER_INDEX[(x, g, o3)], True)
            consider(tiles, counts, cost, valid, order, resident)
    feasible = np.isfinite(best_cost)
    never = ~feasible  # no valid candidate: back to the smallest tile (an inf tie may have moved it)
    if never.any():
        best_t[:, never] = p.mins[:, never]
        best_order[never] = 0
        best_resident[never] = False
    best_cost += search.total()
    # The contract decides: the chosen tile must fit timing.run_words (see module docstring).
    feasible &= fits_contract(p, best_t)
    best_cost[~feasible] = 0.0
    return Tiling(feasible=feasible, t=best_t, order=best_order, traffic=best_cost,
                  resident=best_resident & feasible)


def gemm_tile(p: Problem, t: np.ndarray) -> np.ndarray:
    """``(3, N)`` tile dims ``mt, kt, nt`` of mapped tile dims ``t``."""
    return take_rows(t, row_index(GEMM_MAPPED, p.df))


def contract_words(p: Problem, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Words ``(ifmap, weight, ofmap)`` a tile needs, from :func:`timing.run_words`."""
    mt, kt, nt = gemm_tile(p, t).astype(np.int64)
    return timing.run_words(p.df, p.R.astype(np.int64), p.C.astype(np.int64), mt, kt, nt)


def fits_contract(p: Problem, t: np.ndarray) -> np.ndarray:
    """Whether tile ``t`` (every dim at least 1) fits every buffer according to the contract."""
    words = contract_words(p, t)
    return ((words[0] <= p.buf_cap[0]) & (words[1] <= p.buf_cap[1]) & (words[2] <= p.buf_cap[2])
            & (t >= 1).all(axis=0))
